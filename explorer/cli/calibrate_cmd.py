"""python -m explorer calibrate --out FILE: this machine's cluster file (CPU GEMM, memory, gloo)."""
from __future__ import annotations

import sys

from explorer.cli.output import dumps, write_or_print
from explorer.io.clusters import cluster_from_dict
from explorer.runtime import INSTALL_HINT, torch_available


def register(sub) -> None:
    cmd = sub.add_parser("calibrate", help="measure this machine (CPU GEMM FLOP/s, memory bandwidth, gloo "
                                           "alpha/beta) and write a cluster file (needs PyTorch)")
    cmd.add_argument("--out", help="cluster JSON file to write (default: print it)")
    cmd.add_argument("--name", default="this-machine", help="the cluster's name")
    cmd.add_argument("--procs", type=int, default=1,
                     help="processes computing at once during the GEMM and memory benchmarks (a run's rank "
                          "count: what each rank gets when all compute together)")
    cmd.set_defaults(run=run)


def run(args) -> int:
    if not torch_available():
        print(f"error: {INSTALL_HINT}", file=sys.stderr)
        return 2
    from explorer.runtime.calibrate import calibrate
    data = calibrate(args.name, args.procs)
    cluster_from_dict(data)                      # the file must load with the cluster loader
    text = dumps(data) + "\n"
    write_or_print(text, args.out)
    return 0
