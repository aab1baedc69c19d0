"""Fit the FP8 GEMM efficiency of each system on the Megatron-Bridge rows it is fitted on.

One constant per hardware and dtype (Efficiency.gemm_max_fp8), never one per case: for each
system (a cluster preset), the value in [LOW, HIGH] that minimises the mean |relative error| of
predicted vs published model TFLOP/s per GPU over that system's *fitted* rows (containers in
explorer.validation.megatron_bridge.FIT_CONTAINERS); the other containers' rows are held out
and only reported. Every other constant of the preset stays as its source says.

Reproducible: `python benchmarks/fit_megatron_bridge.py` prints the fitted constants and the
errors per system on fitted and held-out rows (re-run it after any change to the cost model,
e.g. hierarchical collectives or FlashAttention, and copy the constants into assets/clusters).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from explorer.io.clusters import load_cluster
from explorer.validation.megatron_bridge import SYSTEMS, group_of, load_megatron_bridge
from explorer.validation.run import predict

DENSE_GROUPS = {group_of(system) for system in SYSTEMS}
"""The groups the constants are fitted on (the dense Llama rows); megatron_bridge_moe_* only checks them."""
LOW, HIGH = 0.2, 1.0
"""The search interval of gemm_max_fp8 (a fraction of the FP8 peak: Efficiency's own bounds)."""


@dataclass(frozen=True)
class SystemFit:
    cluster: str
    gemm_max_fp8: float          # fitted
    at_bound: bool               # the optimum is at LOW or HIGH: the model cannot reach the rows
    fitted: tuple                # (case id, predicted, published) on the fitted rows
    held_out: tuple              # the same on the held-out rows

    @staticmethod
    def _stats(rows) -> dict:
        errors = [abs(p - e) / e for _, p, e in rows]
        return {"cases": len(errors), "mean_abs_error": float(np.mean(errors)) if errors else float("nan"),
                "max_abs_error": float(np.max(errors)) if errors else float("nan")}

    def stats(self) -> dict:
        return {"fitted": self._stats(self.fitted), "held out": self._stats(self.held_out)}


def _with_eta(cluster, eta: float):
    return replace(cluster, efficiency=replace(cluster.efficiency, gemm_max_fp8=float(eta)))


def _rows(cases, cluster) -> tuple:
    plain = [replace(c, cluster="") for c in cases]           # predict on the given cluster
    return tuple((c.id, predict(p, cluster), c.expected) for c, p in zip(cases, plain))


def _mean_error(cases, cluster, eta: float) -> float:
    rows = _rows(cases, _with_eta(cluster, eta))
    return float(np.mean([abs(p - e) / e for _, p, e in rows]))


def fit_system(name: str, cases) -> SystemFit:
    """Golden-section search of the mean |error| over [LOW, HIGH] (unimodal in eta: predicted
    TFLOP/s rise monotonically with it), after a coarse grid to bracket the minimum."""
    cluster = load_cluster(name)
    cases = [c for c in cases if c.group in DENSE_GROUPS]     # the MoE rows are never fitted nor reported here
    fit_cases = [c for c in cases if c.cluster == name and c.subset == "fitted"]
    held = [c for c in cases if c.cluster == name and c.subset != "fitted"]
    grid = np.linspace(LOW, HIGH, 17)
    errs = [_mean_error(fit_cases, cluster, x) for x in grid]
    i = int(np.argmin(errs))
    a, b = grid[max(i - 1, 0)], grid[min(i + 1, len(grid) - 1)]
    ratio = (np.sqrt(5) - 1) / 2
    for _ in range(40):
        c, d = b - ratio * (b - a), a + ratio * (b - a)
        if _mean_error(fit_cases, cluster, c) <= _mean_error(fit_cases, cluster, d):
            b = d
        else:
            a = c
    eta = round(float((a + b) / 2), 3)
    best = _with_eta(cluster, eta)
    return SystemFit(name, eta, eta <= LOW + 1e-3 or eta >= HIGH - 1e-3, _rows(fit_cases, best), _rows(held, best))


def fit_all(path=None) -> list:
    cases, _ = load_megatron_bridge(path)
    return [fit_system(name, cases) for name in sorted({c.cluster for c in cases})]


def report(fits) -> str:
    lines = []
    for f in fits:
        s = f.stats()
        flag = "  (at the interval's bound: the model cannot reach these rows)" if f.at_bound else ""
        lines.append(f"{f.cluster}: gemm_max_fp8 = {f.gemm_max_fp8}{flag}")
        for subset, rows in (("fitted", f.fitted), ("held out", f.held_out)):
            st = s[subset]
            lines.append(f"  {subset}: {st['cases']} rows, mean |error| {100 * st['mean_abs_error']:.1f}%, "
                         f"max {100 * st['max_abs_error']:.1f}%")
            for ident, p, e in rows:
                lines.append(f"    {ident:<48}{p:>8.0f}{e:>8.0f}{100 * (p - e) / e:>7.1f}%")
    return "\n".join(lines)
