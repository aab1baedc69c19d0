"""Predict each case and compare with its published value."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from explorer.hardware.cluster import Cluster
from explorer.cost.evaluate import evaluate
from explorer.cost.numbers import Numbers
from explorer.cost.tree import Q, cost_tree


TARGETS = {"megatron_table1": (0.05, 0.10), "korthikanti_table4": (0.10, 0.10)}
"""Accuracy targets per group: (mean, max) absolute relative error (the issues' targets)."""


@dataclass(frozen=True)
class ValidationRow:
    id: str
    group: str
    source: str
    metric: str
    predicted: float
    expected: float
    assumptions: str

    @property
    def relative_error(self) -> float:
        return (self.predicted - self.expected) / self.expected


def layer_times(case, cluster: Cluster) -> tuple:
    """(forward, backward) seconds of one transformer layer on one micro-batch: the F and B
    quantities of that block in the cost tree."""
    tree = cost_tree(case.model, case.strategy, cluster)
    nums = Numbers.of(case.model, case.strategy.micro_batch, cluster, case.strategy.dtype)
    placed = next(b for b in tree.plan.blocks if b.block.kind == "layer" and b.block.layer == 1)
    kind = next(k for k in tree.kinds if k.cost is placed.cost and k.degree == placed.split.degree)
    vals = np.asarray(kind.fn(*nums.block_args(kind.degree, kind.route)), dtype=float)
    return float(vals[Q["F"]]), float(vals[Q["B"]])


def predict(case, cluster: Cluster) -> float:
    if case.metric == "iteration_time_s":
        return evaluate(case.model, case.strategy, cluster, case.gpus).iteration_time_s
    fwd, bwd = layer_times(case, cluster)
    return fwd if case.metric == "layer_fwd_s" else bwd


def validate(cases, cluster: Cluster) -> list:
    return [ValidationRow(c.id, c.group, c.source, c.metric, predict(c, cluster), c.expected, c.assumptions)
            for c in cases]


def summarize(rows) -> dict:
    """Mean and max absolute relative error per group."""
    out = {}
    for group in sorted({r.group for r in rows}):
        errors = [abs(r.relative_error) for r in rows if r.group == group]
        out[group] = {"cases": len(errors), "mean_abs_error": float(np.mean(errors)),
                      "max_abs_error": float(np.max(errors))}
    return out
