"""python -m explorer run --model M --procs N --dp D --tp T --pp P [--strategy FILE] [--iterations K] --json
    [--micro-batch b --global-batch B --schedule gpipe|1f1b|interleaved --chunks v --recompute none|selective|full
     --dtype fp32|bf16 --zero 0|1 --sequence-parallel --cluster C --out F]

Trains the model for K iterations on N processes with torch.distributed under
the strategy (explorer/runtime) and sets measured bytes, losses and times next to
the model's. Needs PyTorch; without it, one line says how to install it (exit 2).
The run trains in the strategy's dtype, fp32 or bf16 (a strategy built from the flags alone is fp32 unless
--dtype says otherwise); fp16 and fp8 are refused in one line.
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from explorer.cli.output import dumps
from explorer.errors import ExplorerError
from explorer.io.clusters import cluster_from_dict, load_cluster
from explorer.io.models import load_file, load_model
from explorer.io.strategies import load_strategy
from explorer.runtime import INSTALL_HINT, torch_available
from explorer.strategy.strategy import Strategy

LARGE_KEYS = ("events", "operator_spans")     # in the --out file, left out of stdout


def register(sub) -> None:
    cmd = sub.add_parser("run", help="train the model on N processes with torch.distributed and compare "
                                     "measured bytes and times with the model (needs PyTorch)")
    cmd.add_argument("--model", required=True, help="preset name or model file (a GPT)")
    cmd.add_argument("--procs", type=int, help="processes (default dp x tp x pp; must equal it)")
    cmd.add_argument("--dp", type=int)
    cmd.add_argument("--tp", type=int)
    cmd.add_argument("--pp", type=int)
    cmd.add_argument("--strategy", help="strategy JSON/YAML file; flags given on the line override it")
    cmd.add_argument("--iterations", type=int, default=3)
    cmd.add_argument("--micro-batch", type=int)
    cmd.add_argument("--global-batch", type=int,
                     help="sequences per iteration (default micro-batch x dp, x 2pp when pp > 1)")
    cmd.add_argument("--schedule", choices=("gpipe", "1f1b", "interleaved"))
    cmd.add_argument("--chunks", type=int, help="model chunks per stage (the interleaved schedule's v)")
    cmd.add_argument("--recompute", choices=("none", "selective", "full"))
    cmd.add_argument("--dtype", choices=("fp32", "bf16"), help="training dtype (default: the strategy file's, "
                                                               "else fp32)")
    cmd.add_argument("--zero", type=int, choices=(0, 1), help="1: ZeRO-1 (sharded optimizer step)")
    cmd.add_argument("--sequence-parallel", action="store_true", default=None)
    cmd.add_argument("--cluster", help="cluster for the prediction: a file from `calibrate` or a preset (default: "
                                       "calibrate now with min(procs, cores) processes computing at once)")
    cmd.add_argument("--seed", type=int, default=1234)
    cmd.add_argument("--out", help="also write the whole run (with the measured events) to this JSON file")
    cmd.add_argument("--json", action="store_true", help="print one JSON object")
    cmd.set_defaults(run=run)


def strategy_of(args) -> Strategy:
    fields = {"dtype": "fp32"}      # the flags alone: fp32 (Strategy's own default is bf16)
    if args.strategy:
        loaded = load_strategy(args.strategy)
        named = load_file(Path(args.strategy), lambda d: d.get("dtype") if isinstance(d, dict) else None)
        fields = {name: getattr(loaded, name) for name in Strategy.__dataclass_fields__}
        fields["dtype"] = loaded.dtype if named is not None else "fp32"    # a file without a dtype: fp32
    for flag in ("dp", "tp", "pp", "micro_batch", "global_batch", "schedule", "zero", "sequence_parallel",
                 "chunks", "recompute", "dtype"):
        value = getattr(args, flag, None)
        if value is not None:
            if flag in ("dp", "tp", "pp", "micro_batch", "global_batch", "chunks") and value < 1:
                raise ExplorerError(f"--{flag.replace('_', '-')} must be a positive integer, got {value}")
            fields[flag] = value
    if fields.get("schedule") == "interleaved" and "chunks" not in fields:
        fields["chunks"] = 2
    if "global_batch" not in fields:
        pp = fields.get("pp", 1)
        fields["global_batch"] = fields.get("micro_batch", 1) * fields.get("dp", 1) * (2 * pp if pp > 1 else 1)
    return Strategy(**fields)


def cluster_of(args, procs: int):
    if args.cluster:
        return load_cluster(args.cluster)
    from explorer.runtime.calibrate import calibrate
    return cluster_from_dict(calibrate(procs=min(procs, os.cpu_count() or 1)))


def run(args) -> int:
    if not torch_available():
        print(f"error: {INSTALL_HINT}", file=sys.stderr)
        return 2
    from explorer.runtime.measure import run_strategy
    model, strategy = load_model(args.model), strategy_of(args)
    procs = args.procs if args.procs is not None else strategy.devices
    out = run_strategy(model, strategy, procs, cluster_of(args, procs), args.iterations, args.seed)
    if args.out:
        try:
            Path(args.out).write_text(json.dumps(out, allow_nan=False), encoding="utf-8")
        except OSError as err:
            raise ExplorerError(f"cannot write {args.out}: {err.strerror or err}") from None
    if args.json:
        print(dumps({k: v for k, v in out.items() if k not in LARGE_KEYS}))
    else:
        print(summary(out))
    return 0


def summary(out: dict) -> str:
    s = out["strategy"]
    lines = [f"{out['model']} on {out['procs']} processes ({out['backend']}): d={s['dp']} t={s['tp']} p={s['pp']} "
             f"b={s['micro_batch']} B={s['global_batch']} {s['schedule']} {s['dtype']}, "
             f"{out['iterations']} iterations",
             f"{'category':<16}{'measured B':>14}{'not modelled':>14}{'model B':>14}"]
    for cat, value in out["measured_bytes_per_device"].items():
        lines.append(f"{cat:<16}{value:>14,.0f}{out['unmodelled_bytes_per_device'][cat]:>14,.0f}"
                     f"{out['model_bytes_per_device'][cat]:>14,.0f}")
    lines.append(f"bytes: measured - not modelled {'==' if out['bytes_match'] else '!='} model")
    for call in out["unmodelled_calls"]:
        lines.append(f"  not modelled: {call['op']} ({call['kind']}, {call['category']}): {call['note']}")
    lines.append("loss parallel: " + ", ".join(f"{x:.6f}" for x in out["loss_parallel"]))
    lines.append("loss single:   " + ", ".join(f"{x:.6f}" for x in out["loss_single"]))
    t = out["iteration_time_s"]
    lines.append(f"iteration time: measured {t['measured'] * 1e3:.1f} ms, predicted {t['predicted'] * 1e3:.1f} ms "
                 f"on {out['cluster']['name']}")
    return "\n".join(lines)
