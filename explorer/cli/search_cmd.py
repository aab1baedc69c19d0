"""python -m explorer search --model M --cluster C --gpus N --global-batch B [--max-memory-gib X] [--top K] [--json]"""
from __future__ import annotations

import math
import sys
import time

from explorer.errors import ExplorerError
from explorer.limits import CLUSTER_BOUNDS, check_count
from explorer.cli.args import add_long_context_flags, add_option_flags, model_and_cluster
from explorer.strategy.strategy import DTYPES
from explorer.strategy.options import searched
from explorer.codegen import FRAMEWORKS
from explorer.cli.output import dumps
from explorer.validation.robust import robustness, robustness_text


def register(sub) -> None:
    cmd = sub.add_parser("search", help="search strategies: the fastest, and the time/memory Pareto front")
    cmd.add_argument("--model", required=True, help="preset name or model file (JSON/YAML/config.json)")
    cmd.add_argument("--cluster", required=True, help="preset name or cluster file")
    cmd.add_argument("--gpus", type=int, required=True, help="number of devices N = d*t*p")
    cmd.add_argument("--global-batch", type=int, required=True, help="global batch size B (sequences)")
    cmd.add_argument("--max-memory-gib", type=float, help="memory cap per device in GiB (default: the device's, "
                     "less the headroom)")
    cmd.add_argument("--robust", action="store_true",
                     help="say how often each ranking holds as the fitted constants vary across the validated "
                          "error (explorer.validation.robust; a sensitivity per listed strategy)")
    cmd.add_argument("--memory-headroom", type=float,
                     help="fraction of the device's memory left free when no cap is given (CUDA context, NCCL "
                          f"buffers, fragmentation; default {HEADROOM_DEFAULT}, explorer.search.search.MEMORY_HEADROOM)")
    cmd.add_argument("--top", type=int, default=10, help="how many of the fastest to list (default 10)")
    cmd.add_argument("--seq-len", type=int, help="override the model's sequence length")
    add_long_context_flags(cmd)      # --cp N: search only that degree; --cp-algo; --attention
    cmd.add_argument("--ep", type=int, help="search only this expert-parallel degree (MoE models; default: all)")
    cmd.add_argument("--framework", choices=FRAMEWORKS,
                     help="keep only strategies this framework can express (its config exporter's rules), each "
                          "costed under its defaults (its gradient reduction dtype: explorer/strategy/frameworks.py)")
    cmd.add_argument("--dtype", choices=DTYPES, default="bf16",
                     help="training dtype (default bf16); fp8 = Transformer Engine FP8 GEMMs")
    add_option_flags(cmd, searched=True)    # the options every candidate carries (explorer/strategy/options.py)
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


HEADROOM_DEFAULT = "0.05"
"""The search's MEMORY_HEADROOM as --help says it (tests/test_search_cli.py checks they agree; the search module
is imported only when a search runs)."""


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
    headroom = {} if args.memory_headroom is None else {"memory_headroom": args.memory_headroom}
    if headroom and not (math.isfinite(args.memory_headroom) and 0 <= args.memory_headroom < 1):
        raise ExplorerError(f"--memory-headroom must be a fraction from 0 to below 1, got {args.memory_headroom}")
    check_count("--gpus", args.gpus, "MAX_DEVICES")
    check_count("--global-batch", args.global_batch, "MAX_GLOBAL_BATCH")
    if args.cp is not None and args.cp < 1:
        raise ExplorerError(f"--cp must be a positive integer, got {args.cp}")
    model, cluster = model_and_cluster(args)
    result = search(model, cluster, args.gpus, args.global_batch, cap, args.top, progress=StderrProgress(),
                    framework=args.framework, dtype=args.dtype, cp=args.cp, cp_algo=args.cp_algo or "ring",
                    ep=args.ep, **{o.name: getattr(args, o.name) for o in searched()}, **headroom)
    rob = robustness(model, cluster, result.top) if args.robust else None
    if args.json:
        data = search_dict(result, model, cluster, args.gpus, args.global_batch)
        print(dumps(data if rob is None else {**data, "robustness": rob}))
    else:
        print(search_text(result, f"{model.name} on {args.gpus} x {cluster.device.name} ({cluster.name}), "
                                  f"global batch {args.global_batch}"))
        if rob is not None:
            print(robustness_text(rob))
    return 0
