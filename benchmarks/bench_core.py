"""Core cost-model speed (issue: core). Prints figures; asserts nothing.

Targets on a 2-core machine: cold build+compile for gpt3-175b <= 2 s; warm
uniform evaluation <= 1 ms; warm evaluation with 96 distinct per-layer splits
<= 10 ms; whole-process `python -m explorer evaluate` <= 1.5 s.
"""
from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def timed(fn, repeat=1):
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main():
    t0 = time.perf_counter()
    from explorer import LayerSplit, Strategy, evaluate, load_cluster, load_model
    import_s = time.perf_counter() - t0
    model, cluster = load_model("gpt3-175b"), load_cluster("dgx-a100-80gb")
    uniform = Strategy(dp=16, tp=8, pp=8, micro_batch=1, global_batch=1536, schedule="1f1b")
    cold = timed(lambda: evaluate(model, uniform, cluster, 1024))
    warm = timed(lambda: evaluate(model, uniform, cluster, 1024), repeat=200)
    presets = ("megatron", "column", "row")
    degrees = (8, 4, 2)
    splits = tuple(LayerSplit(1, "replicated") if i % 4 == 3 else
                   LayerSplit(degree=degrees[i % 3], preset=presets[(i // 3) % 3]) for i in range(96))
    mixed = uniform.with_(layer_splits=splits)
    cold_mixed = timed(lambda: evaluate(model, mixed, cluster, 1024))
    warm_mixed = timed(lambda: evaluate(model, mixed, cluster, 1024), repeat=50)
    cmd = [sys.executable, "-m", "explorer", "evaluate", "--model", "gpt3-175b", "--cluster", "dgx-a100-80gb",
           "--gpus", "1024", "--tp", "8", "--pp", "8", "--micro-batch", "1", "--global-batch", "1536",
           "--schedule", "1f1b", "--json"]
    process = timed(lambda: subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True), repeat=3)
    rows = [("import explorer", import_s, None),
            ("cold build+compile, gpt3-175b uniform", cold, 2.0),
            ("warm evaluation, uniform", warm, 1e-3),
            ("cold build+compile, 96 per-layer splits", cold_mixed, None),
            ("warm evaluation, 96 per-layer splits", warm_mixed, 10e-3),
            ("whole process: python -m explorer evaluate --json", process, 1.5)]
    for name, secs, target in rows:
        verdict = "" if target is None else ("  ok" if secs <= target else "  OVER TARGET")
        goal = "" if target is None else f"  (target <= {target * 1e3:.0f} ms)"
        print(f"{name:<52}{secs * 1e3:10.2f} ms{goal}{verdict}")


if __name__ == "__main__":
    main()
