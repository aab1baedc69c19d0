"""python -m explorer evaluate ..."""
from __future__ import annotations

from explorer.cli.output import dumps
from explorer.cost.cold import explained_latex
from explorer.limits import evaluate_checked as evaluate
from explorer.io.report import result_dict, result_table
from explorer.cli.args import add_strategy_flags, resolve


def register(sub) -> None:
    cmd = sub.add_parser("evaluate", help="cost of one training iteration under a strategy")
    add_strategy_flags(cmd)
    cmd.set_defaults(run=run)


def run(args) -> int:
    model, cluster, strategy, gpus = resolve(args)
    result = evaluate(model, strategy, cluster, gpus)
    if args.json:
        total, terms, definitions = explained_latex(model, strategy, cluster, gpus, result)   # cached on disk
        print(dumps(result_dict(result, total, terms, definitions, strategy)))
    else:
        title = (f"{model.name} on {gpus} x {cluster.device.name} ({cluster.name}): "
                 f"d={strategy.dp} t={strategy.tp} p={strategy.pp}{f' e={strategy.ep}' if strategy.ep > 1 else ''}"
                 f"{f' expert-t={strategy.etp}' if strategy.etp != strategy.tp else ''} "
                 f"b={strategy.micro_batch} "
                 f"B={strategy.global_batch} {strategy.schedule}")
        print(result_table(result, title))
    return 0
