"""python -m explorer evaluate ..."""
from __future__ import annotations

from explorer.cli.output import dumps
from explorer.cost.explained import explained_latex
from explorer.cost.checked import evaluate_checked as evaluate
from explorer.cost.contention import contention_warning, link_busy_s
from explorer.io.report import result_dict, result_table
from explorer.cli.args import add_strategy_flags, resolve
from explorer.validation.evidence import band_text, evidence
from explorer.validation.sensitivity import sensitivity_or_reason, sensitivity_text


def register(sub) -> None:
    cmd = sub.add_parser("evaluate", help="cost of one training iteration under a strategy")
    add_strategy_flags(cmd)
    cmd.set_defaults(run=run)


def run(args) -> int:
    model, cluster, strategy, gpus = resolve(args)
    result = evaluate(model, strategy, cluster, gpus)
    if args.json:
        total, terms, definitions = explained_latex(model, strategy, cluster, gpus, result)   # cached on disk
        out = result_dict(result, total, terms, definitions, strategy)
        out["evidence"] = evidence(model, strategy, cluster)     # how far it can be trusted (issue 28)
        out["link_busy_s"] = link_busy_s(result)                 # each level's collectives, exposed + hidden
        out["contention"] = contention_warning(result)
        out["sensitivity"] = sensitivity_or_reason(model, strategy, cluster, result)   # what it depends on (issue 28)
        print(dumps(out))
    else:
        title = (f"{model.name} on {gpus} x {cluster.device.name} ({cluster.name}): "
                 f"d={strategy.dp} t={strategy.tp} p={strategy.pp}{f' e={strategy.ep}' if strategy.ep > 1 else ''}"
                 f"{f' expert-t={strategy.etp}' if strategy.etp != strategy.tp else ''} "
                 f"b={strategy.micro_batch} "
                 f"B={strategy.global_batch} {strategy.schedule}")
        print(result_table(result, title))
        ev = evidence(model, strategy, cluster)
        print(f"\nevidence: {band_text(ev)}")
        for gap in ev["known_gaps"]:     # a cost the model does not price (explorer.validation.evidence.KNOWN_GAPS)
            print(gap)
        crowded = contention_warning(result)   # its own collectives on one level outlast its iteration
        if crowded:
            print(crowded)
        print("\n" + sensitivity_text(sensitivity_or_reason(model, strategy, cluster, result)))
        hint = fitting_hint(model, strategy, cluster, gpus, result)
        if hint:
            print(hint)
    return 0


def fitting_hint(model, strategy, cluster, gpus, result) -> str:
    """When the strategy does not fit the device, the flags of the app's default for this model and
    GPU count (explorer.io.presets.fallback_strategy) if that one fits; '' otherwise."""
    from explorer.io.presets import fallback_strategy
    if result.memory_bytes_per_device["total"] <= cluster.device.memory_bytes:
        return ""
    s = fallback_strategy(model, cluster, gpus)
    if s == strategy or s.devices != gpus or \
            evaluate(model, s, cluster, gpus).memory_bytes_per_device["total"] > cluster.device.memory_bytes:
        return ""
    flags = (f"--tp {s.tp} --pp {s.pp}" + (f" --ep {s.ep}" if s.ep > 1 else "") + f" --zero {s.zero}"
             + (" --sequence-parallel" if s.sequence_parallel else "") + f" --recompute {s.recompute}"
             + f" --micro-batch {s.micro_batch} --global-batch {s.global_batch}"
             + (f" --schedule {s.schedule} --chunks {s.chunks}" if s.schedule != "1f1b" else ""))
    return (f"Does not fit in {cluster.device.memory_bytes / 2**30:.0f} GiB per device. A strategy that fits "
            f"(the app's default for this model on {gpus} GPUs): {flags}")
