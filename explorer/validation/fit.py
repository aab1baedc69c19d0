"""Fit the GEMM efficiencies of each system on the published rows they are fitted on.

One constant per hardware and dtype, never one per case:
* Efficiency.gemm_max (BF16/FP16 GEMMs, issue 26 item 1) on the dense BF16 rows of
  explorer.validation.bf16 (group bf16_h100: Megatron-LM's H100 weak-scaling table is fitted on its
  p = 1 rows; its p > 1 rows and NeMo AutoModel's Llama 3 70B row are held out);
* Efficiency.gemm_max_fp8 (FP8 GEMMs, issue 11) on the dense Megatron-Bridge rows of the containers in
  explorer.validation.megatron_bridge.FIT_CONTAINERS; the other containers' rows are held out.
For each system (a cluster preset) and constant: the value in [LOW, HIGH] that minimises the mean
|relative error| of predicted vs published values over that system's *fitted* rows; the held-out rows
are only reported. Every other constant of the preset stays as its source says. The BF16 constant is
fitted first: FP8 rows depend on it (Transformer Engine runs the attention core in bf16,
explorer.cost.numbers.hardware_numbers), BF16 rows do not depend on the FP8 one, so fit_all() fits
gemm_max_fp8 with the freshly fitted gemm_max in place.

Reproducible: `python benchmarks/fit_megatron_bridge.py` prints the fitted constants and the
errors per system on fitted and held-out rows (re-run it after any change to the cost model,
e.g. hierarchical collectives or FlashAttention, and copy the constants into assets/clusters).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from explorer.io.clusters import load_cluster
from explorer.validation.bf16 import load_bf16_cases
from explorer.validation.megatron_bridge import SYSTEMS, group_of, load_megatron_bridge
from explorer.validation.run import predict

DENSE_GROUPS = {group_of(system) for system in SYSTEMS}
"""The groups the FP8 constants are fitted on (the dense Llama rows); megatron_bridge_moe_* only checks them."""
BF16_GROUPS = {"bf16_h100"}
"""The groups the BF16 constants are fitted on (explorer.validation.bf16)."""
LOW, HIGH = 0.2, 1.0
"""The search interval of a GEMM efficiency (a fraction of the dtype's peak: Efficiency's own bounds)."""


@dataclass(frozen=True)
class SystemFit:
    cluster: str
    value: float                 # fitted
    at_bound: bool               # the optimum is at LOW or HIGH: the model cannot reach the rows
    fitted: tuple                # (case id, predicted, published) on the fitted rows
    held_out: tuple              # the same on the held-out rows
    field: str = "gemm_max_fp8"  # the Efficiency field fitted

    @property
    def gemm_max_fp8(self) -> float:
        if self.field != "gemm_max_fp8":
            raise AttributeError(f"this fit is of {self.field}, not gemm_max_fp8")
        return self.value

    @staticmethod
    def _stats(rows) -> dict:
        errors = [abs(p - e) / e for _, p, e in rows]
        return {"cases": len(errors), "mean_abs_error": float(np.mean(errors)) if errors else float("nan"),
                "max_abs_error": float(np.max(errors)) if errors else float("nan")}

    def stats(self) -> dict:
        return {"fitted": self._stats(self.fitted), "held out": self._stats(self.held_out)}


def _with_eta(cluster, eta: float, field: str = "gemm_max_fp8"):
    return replace(cluster, efficiency=replace(cluster.efficiency, **{field: float(eta)}))


def _rows(cases, cluster) -> tuple:
    plain = [replace(c, cluster="") for c in cases]           # predict on the given cluster
    return tuple((c.id, predict(p, cluster), c.expected) for c, p in zip(cases, plain))


def _mean_error(cases, cluster, eta: float, field: str = "gemm_max_fp8") -> float:
    rows = _rows(cases, _with_eta(cluster, eta, field))
    return float(np.mean([abs(p - e) / e for _, p, e in rows]))


def fit_system(name: str, cases, field: str = "gemm_max_fp8", cluster=None) -> SystemFit:
    """Golden-section search of the mean |error| over [LOW, HIGH] (unimodal in eta: predicted
    throughput rises monotonically with it), after a coarse grid to bracket the minimum. `cluster`:
    the preset to start from (default: load_cluster(name))."""
    cluster = cluster or load_cluster(name)
    groups = BF16_GROUPS if field == "gemm_max" else DENSE_GROUPS
    cases = [c for c in cases if c.group in groups]           # the MoE rows are never fitted nor reported here
    fit_cases = [c for c in cases if c.cluster == name and c.subset == "fitted"]
    held = [c for c in cases if c.cluster == name and c.subset != "fitted"]
    err = lambda x: _mean_error(fit_cases, cluster, x, field)
    grid = np.linspace(LOW, HIGH, 17)
    errs = [err(x) for x in grid]
    i = int(np.argmin(errs))
    a, b = grid[max(i - 1, 0)], grid[min(i + 1, len(grid) - 1)]
    ratio = (np.sqrt(5) - 1) / 2
    for _ in range(40):
        c, d = b - ratio * (b - a), a + ratio * (b - a)
        if err(c) <= err(d):
            b = d
        else:
            a = c
    eta = round(float((a + b) / 2), 3)
    best = _with_eta(cluster, eta, field)
    return SystemFit(name, eta, eta <= LOW + 1e-3 or eta >= HIGH - 1e-3, _rows(fit_cases, best), _rows(held, best),
                     field)


def fit_bf16(path=None) -> list:
    """gemm_max of every system with BF16 rows (today dgx-h100)."""
    cases = load_bf16_cases(path)
    return [fit_system(name, cases, "gemm_max") for name in sorted({c.cluster for c in cases})]


def fit_all(path=None, bf16_path=None) -> list:
    """The BF16 fits, then the FP8 fits, each FP8 fit on its preset with the BF16 value just fitted."""
    bf16 = fit_bf16(bf16_path)
    fitted_bf16 = {f.cluster: f.value for f in bf16}
    cases, _ = load_megatron_bridge(path)
    fp8 = []
    for name in sorted({c.cluster for c in cases}):
        cluster = load_cluster(name)
        if name in fitted_bf16:
            cluster = _with_eta(cluster, fitted_bf16[name], "gemm_max")
        fp8.append(fit_system(name, cases, "gemm_max_fp8", cluster))
    return bf16 + fp8


def report(fits) -> str:
    lines = []
    for f in fits:
        s = f.stats()
        flag = "  (at the interval's bound: the model cannot reach these rows)" if f.at_bound else ""
        lines.append(f"{f.cluster}: {f.field} = {f.value}{flag}")
        for subset, rows in (("fitted", f.fitted), ("held out", f.held_out)):
            st = s[subset]
            lines.append(f"  {subset}: {st['cases']} rows, mean |error| {100 * st['mean_abs_error']:.1f}%, "
                         f"max {100 * st['max_abs_error']:.1f}%")
            for ident, p, e in rows:
                lines.append(f"    {ident:<48}{p:>8.0f}{e:>8.0f}{100 * (p - e) / e:>7.1f}%")
    return "\n".join(lines)
