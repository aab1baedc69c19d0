"""The sensitivities' cost against evaluate()'s (issue 28 item 2). Prints; asserts nothing.

evaluate() does not compute the sensitivities (explorer/validation/sensitivity.py): the CLI's `evaluate` and
the Cost page ask for them after it. This script times, in CPU seconds (time.process_time) in this process,
for gpt3-175b on dgx-a100-80gb (d = 16, t = 8, p = 8, b = 1, B = 1536, SP, selective recomputation) under
1F1B and under the interleaved schedule (v = 3, ZeRO-1, overlapped gradient sync and pipeline sends):
the first sensitivity() (sympy: the derivatives built and lambdified once per structure), then the warm
mean of evaluate() alone and of sensitivity() after it (compiled functions from memory, one critical-path
walk). The disk cache is used as configured ($BRIDGING_DL_CACHE; `off` makes the first call cold).

Measured 2026-12 (2 cores shared with other jobs, BRIDGING_DL_CACHE=off), per call:
  1F1B:                               warm evaluate 2.7 ms, warm sensitivity after it 5.8 ms, first 1.0 s CPU
  interleaved v=3, zero-1, overlaps:  warm evaluate 3.3 ms, warm sensitivity after it 19 ms,  first 2.0 s CPU
(the interleaved walk of the critical path, 3 x 8 x 192 passes, is most of its 19 ms). evaluate() itself is
unchanged: it never computes them.

    python benchmarks/bench_sensitivity.py [--repeat 20]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from explorer import Strategy, evaluate, load_cluster, load_model  # noqa: E402
from explorer.validation.sensitivity import sensitivity  # noqa: E402

BASE = Strategy(dp=16, tp=8, pp=8, micro_batch=1, global_batch=1536, sequence_parallel=True, recompute="selective")
CASES = {"1f1b": BASE,
         "interleaved v=3, zero-1, overlaps": BASE.with_(schedule="interleaved", chunks=3, zero=1, overlap_dp=True,
                                                         overlap_p2p=True)}


def cpu(fn, repeat: int = 1) -> float:
    start = time.process_time()
    for _ in range(repeat):
        fn()
    return (time.process_time() - start) / repeat


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    model, cluster = load_model("gpt3-175b"), load_cluster("dgx-a100-80gb")
    for name, strategy in CASES.items():
        result = evaluate(model, strategy, cluster)
        first = cpu(lambda: sensitivity(model, strategy, cluster, result))
        warm_eval = cpu(lambda: evaluate(model, strategy, cluster), args.repeat)
        warm_sens = cpu(lambda: sensitivity(model, strategy, cluster, evaluate(model, strategy, cluster)),
                        args.repeat) - warm_eval
        top = sensitivity(model, strategy, cluster, result)["top"][:3]
        print(f"{name}: first sensitivity {first:.2f} s CPU; warm evaluate {1e3 * warm_eval:.2f} ms, "
              f"warm sensitivity after it {1e3 * warm_sens:.2f} ms; top: "
              + ", ".join(f"{k} {x:+.3f}" for k, x in top))


if __name__ == "__main__":
    main()
