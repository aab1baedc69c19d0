"""The symbolic explanation's cost in the number of pipeline stages p (issue 31, item 3). Prints; asserts nothing.

The Cost page's first view of a strategy evaluates it (app_pages/compute.py: current) and then calls
explorer.facade.explain (app_pages/compute.py: symbolic) and prints its LaTeX, the definitions and the
legend (app_pages/cost.py). This script times, in a fresh process per case and in CPU seconds
(time.process_time), that explain() call alone and with the printing, after the evaluation (not
timed): gpt3-175b on dgx-a100-80gb, d = 16, t = 8, micro-batch 1, B = 1536, the data-parallel
gradient sync overlapped, interleaved with v = 3 chunks (96 layers = p v chunks at p = 32) at p = 8,
16, 32, and GPipe at p = 32.

Target (issue 31): the interleaved case at p = 32 <= 2 s CPU. Measured 2026-12 (2 cores shared with
other jobs), explain() alone / with the printing, before -> after the linear explanation
(explorer/cost/explain.py: _expand builds each stage maximum as a QuickMax, no sympy Max ordering proofs):
  interleaved v = 3, p = 8:   11.6 / 11.9 s  ->  0.33 / 0.67 s
  interleaved v = 3, p = 16:  44.2 / 44.4 s  ->  0.31 / 0.60 s
  interleaved v = 3, p = 32:   204 /  204 s  ->  0.46 / 0.77 s
  GPipe,             p = 32:  70.7 / 71.2 s  ->  0.69 / 1.06 s
The LaTeX printed is unchanged, character for character.

    python benchmarks/bench_explain.py [--chunks 3] [--case interleaved:32 ...]
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CASES = ("interleaved:8", "interleaved:16", "interleaved:32", "gpipe:32")


def one(schedule: str, stages: int, chunks: int) -> dict:
    """In this process: evaluate, then time explain() and its printing (CPU seconds)."""
    sys.path.insert(0, str(ROOT))
    from explorer import Strategy, evaluate, load_cluster, load_model
    from explorer.facade import explain, symbol_legend
    model, cluster = load_model("gpt3-175b"), load_cluster("dgx-a100-80gb")
    strategy = Strategy(dp=16, tp=8, pp=stages, micro_batch=1, global_batch=1536, schedule=schedule,
                        chunks=chunks if schedule == "interleaved" else 1, overlap_dp=True)
    evaluate(model, strategy, cluster)
    start = time.process_time()
    sym = explain(model, strategy, cluster)
    explained = time.process_time()
    sym.latex(), sym.total_latex(), sym.definitions_latex(), symbol_legend(sym)
    printed = time.process_time()
    return {"explain_s": explained - start, "with_printing_s": printed - start}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=3, help="v of the interleaved cases (default 3)")
    parser.add_argument("--case", action="append", help="schedule:p, repeatable (default: %s)" % " ".join(CASES))
    parser.add_argument("--one", help=argparse.SUPPRESS)      # schedule:p, run in this process
    args = parser.parse_args()
    if args.one:
        schedule, stages = args.one.split(":")
        print(json.dumps(one(schedule, int(stages), args.chunks)))
        return
    print(f"{'case':<18} {'explain() CPU s':>16} {'+ printing CPU s':>17}")
    for case in args.case or CASES:
        out = subprocess.run([sys.executable, __file__, "--one", case, "--chunks", str(args.chunks)],
                             capture_output=True, text=True, cwd=ROOT)
        if out.returncode:
            print(f"{case:<18} failed: {out.stderr.strip().splitlines()[-1:]}")
            continue
        row = json.loads(out.stdout.strip().splitlines()[-1])
        label = case + (f" v={args.chunks}" if case.startswith("interleaved") else "")
        print(f"{label:<18} {row['explain_s']:>16.2f} {row['with_printing_s']:>17.2f}", flush=True)


if __name__ == "__main__":
    main()
