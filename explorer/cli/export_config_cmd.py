"""python -m explorer export-config --model M --strategy S.json --framework F [--out FILE]"""
from __future__ import annotations


from explorer.cli.output import write_or_print
from explorer.cli.args import model_and_cluster
from explorer.codegen import FRAMEWORKS, export
from explorer.io.strategies import load_strategy
from explorer.io.presets import DEFAULT_CLUSTER


def register(sub) -> None:
    cmd = sub.add_parser("export-config", help="a framework's configuration (Megatron-LM, Megatron-Bridge, DeepSpeed, "
                                               "torchtitan, MindSpore) for a strategy")
    cmd.add_argument("--model", required=True, help="preset name or model file (JSON/YAML/config.json)")
    cmd.add_argument("--strategy", required=True, help="strategy JSON/YAML file")
    cmd.add_argument("--framework", required=True, choices=FRAMEWORKS)
    cmd.add_argument("--cluster", default=DEFAULT_CLUSTER,
                     help=f"preset name or cluster file (default {DEFAULT_CLUSTER}; configs do not depend on it)")
    cmd.add_argument("--seq-len", type=int, help="override the model's sequence length")
    cmd.add_argument("--out", help="write the configuration to this file instead of stdout")
    cmd.set_defaults(run=run)


def run(args) -> int:
    model, cluster = model_and_cluster(args)
    text = export(args.framework, model, load_strategy(args.strategy), cluster)
    write_or_print(text, args.out)
    return 0
