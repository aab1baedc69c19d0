"""python -m explorer search --model M --cluster C --gpus N --global-batch B [--max-memory-gib X] [--top K] [--json]"""
from __future__ import annotations

import math
import sys
import time

from explorer.errors import ExplorerError
from explorer.limits import CLUSTER_BOUNDS, check_count
from explorer.cli.args import add_long_context_flags, model_and_cluster
from explorer.strategy.strategy import DTYPES
from explorer.cli.output import dumps


def register(sub) -> None:
    cmd = sub.add_parser("search", help="search strategies: the fastest, and the time/memory Pareto front")
    cmd.add_argument("--model", required=True, help="preset name or model file (JSON/YAML/config.json)")
    cmd.add_argument("--cluster", required=True, help="preset name or cluster file")
    cmd.add_argument("--gpus", type=int, required=True, help="number of devices N = d*t*p")
    cmd.add_argument("--global-batch", type=int, required=True, help="global batch size B (sequences)")
    cmd.add_argument("--max-memory-gib", type=float, help="memory cap per device in GiB (default: the device's)")
    cmd.add_argument("--top", type=int, default=10, help="how many of the fastest to list (default 10)")
    cmd.add_argument("--seq-len", type=int, help="override the model's sequence length")
    add_long_context_flags(cmd)      # --cp N: search only that degree; --cp-algo; --attention
    cmd.add_argument("--ep", type=int, help="search only this expert-parallel degree (MoE models; default: all)")
    cmd.add_argument("--framework", choices=("megatron", "deepspeed", "torchtitan", "mindspore"),
                     help="keep only strategies this framework can express (its config exporter's rules)")
    cmd.add_argument("--dtype", choices=DTYPES, default="bf16",
                     help="training dtype (default bf16); fp8 = Transformer Engine FP8 GEMMs")
    cmd.add_argument("--json", action="store_true", help="print one JSON object")
    cmd.set_defaults(run=run)


class StderrProgress:
    """Progress lines on stderr, at most one every `every_s` seconds (and the last, and the early
    answer: 'best so far ...')."""

    def __init__(self, every_s: float = 0.5, stream=None):
        self.every_s, self.stream = every_s, stream or sys.stderr
        self.last = time.perf_counter()

    def __call__(self, fraction: float, message: str) -> None:
        now = time.perf_counter()
        if now - self.last >= self.every_s or fraction >= 1.0 or message.startswith("best so far"):
            print(f"search: {100 * fraction:3.0f}%  {message}", file=self.stream, flush=True)
            self.last = now


def memory_cap(gib) -> float | None:
    """--max-memory-gib in bytes (None: the device's), refused up front unless a finite positive number
    within a device's memory bounds (limits.CLUSTER_BOUNDS['memory_gib']): inf or nan would run the
    whole search before its result could be refused."""
    if gib is None:
        return None
    top = CLUSTER_BOUNDS["memory_gib"][1]
    if not (math.isfinite(gib) and 0 < gib <= top):
        raise ExplorerError(f"--max-memory-gib must be a positive number of at most {top:g} GiB, got {gib}")
    return gib * 2 ** 30


def run(args) -> int:
    from explorer.search import search                               # (sympy: only when run)
    from explorer.search.report import search_dict, search_text
    cap = memory_cap(args.max_memory_gib)            # every flag checked before any work
    check_count("--gpus", args.gpus, "MAX_DEVICES")
    check_count("--global-batch", args.global_batch, "MAX_GLOBAL_BATCH")
    if args.cp is not None and args.cp < 1:
        raise ExplorerError(f"--cp must be a positive integer, got {args.cp}")
    model, cluster = model_and_cluster(args)
    result = search(model, cluster, args.gpus, args.global_batch, cap, args.top, progress=StderrProgress(),
                    framework=args.framework, dtype=args.dtype, cp=args.cp, cp_algo=args.cp_algo or "ring",
                    ep=args.ep)
    if args.json:
        print(dumps(search_dict(result, model, cluster, args.gpus, args.global_batch)))
    else:
        print(search_text(result, f"{model.name} on {args.gpus} x {cluster.device.name} ({cluster.name}), "
                                  f"global batch {args.global_batch}"))
    return 0
