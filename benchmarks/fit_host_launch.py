"""Fit the host's issue time per kernel (efficiency.host_launch_s, issue 27) on one container's MoE rows.

    python benchmarks/fit_host_launch.py                      # NeMo 26.02, DGX-B200 (what the presets use)
    python benchmarks/fit_host_launch.py "NeMo 26.04" DGX-H100

Prints the mean |error| of the chosen rows (Megatron-Bridge MoE cases, explorer/validation/megatron_bridge.py)
for each candidate tau_h, the minimiser, and the held-out rows' errors per system at it. The kernels each
operator launches are explorer/model/kernels.py's; host_sync_s stays the cluster's.
"""
from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from explorer.cost.evaluate import evaluate  # noqa: E402
from explorer.io.clusters import load_cluster  # noqa: E402
from explorer.validation.megatron_bridge import load_megatron_bridge  # noqa: E402

GRID_US = (20, 30, 35, 40, 42, 44, 45, 46, 48, 50, 55, 60, 70)


def error(case, tau: float) -> float:
    cluster = load_cluster(case.cluster)
    cluster = replace(cluster, efficiency=replace(cluster.efficiency, host_launch_s=tau))
    time = evaluate(case.model, case.strategy, cluster, case.gpus).iteration_time_s
    return case.strategy.global_batch * case.model.seq_len / (time * case.gpus) / case.expected - 1


def main(container: str = "NeMo 26.02", system: str = "DGX-B200") -> None:
    cases = [c for c in load_megatron_bridge()[0] if c.group.startswith("megatron_bridge_moe")]
    fit = [c for c in cases if c.assumptions.startswith(f"{container}, {system} ")]
    held = [c for c in cases if c not in fit]
    scores = {}
    for us in GRID_US:
        errors = [abs(error(c, us * 1e-6)) for c in fit]
        scores[us] = sum(errors) / len(errors)
        print(f"{us:5.1f} us: {len(fit)} rows of {container} {system}, mean |error| {100 * scores[us]:.2f} %")
    best = min(scores, key=scores.get)
    print(f"fitted: host_launch_s = {best} us")
    for group in sorted({c.group for c in held}):
        errors = [abs(error(c, best * 1e-6)) for c in held if c.group == group]
        print(f"  held out {group}: {len(errors)} rows, mean {100 * sum(errors) / len(errors):.1f} %, "
              f"max {100 * max(errors):.1f} %")


if __name__ == "__main__":
    main(*sys.argv[1:3])
