"""Predict each case and compare with its published value."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from explorer.hardware.cluster import Cluster
from explorer.cost.evaluate import evaluate
from explorer.cost.evaluation import build_evaluation
from explorer.cost.tree import cost_tree
from explorer.io.clusters import load_cluster


TARGETS = {"megatron_table1": (0.05, 0.10), "korthikanti_table4": (0.10, 0.10),
           "megatron_bridge_h100": (0.10, 0.20), "megatron_bridge_b200": (0.10, 0.20),
           "megatron_bridge_gb200": (0.10, 0.20), "megatron_bridge_moe_h100": (0.15, 0.30),
           "megatron_bridge_moe_b200": (0.15, 0.30), "megatron_bridge_moe_gb200": (0.15, 0.30),
           "bf16_h100": (0.10, 0.20), "moe_ab_h100": (0.15, 0.30)}
"""Accuracy targets per group: (mean, max) absolute relative error (the issues' targets; the
Megatron-Bridge groups, one per system: issue 11; bf16_h100, issue 26: the same as those; the MoE groups'
held-out rows and moe_ab_h100, NVIDIA's matched MoE A/B runs: issue 27)."""


@dataclass(frozen=True)
class ValidationRow:
    id: str
    group: str
    source: str
    metric: str
    predicted: float
    expected: float
    assumptions: str
    subset: str = ""
    convention: str = ""      # the FLOPs convention both numbers count in (a TFLOP/s metric), '' = none

    @property
    def relative_error(self) -> float:
        return (self.predicted - self.expected) / self.expected


def layer_times(case, cluster: Cluster) -> tuple:
    """(forward, backward) seconds of one transformer layer on one micro-batch: the F and B
    quantities of that block's kind in the strategy's Evaluation (explorer.cost.evaluation)."""
    tree = cost_tree(case.model, case.strategy, cluster)
    placed = next(b for b in tree.plan.blocks if b.block.kind == "layer" and b.block.layer == 1)
    kind = next(i for i, k in enumerate(tree.kinds) if k.cost is placed.cost and k.degree == placed.split.degree)
    ev = build_evaluation(case.model, [case.strategy], cluster)      # its kinds are the tree's, in order
    return float(ev.block_q("F")[kind, 0]), float(ev.block_q("B")[kind, 0])


def predict(case, cluster: Cluster) -> float:
    if case.cluster:
        cluster = load_cluster(case.cluster)
    if case.metric == "model_tflops_per_gpu":     # the source's FLOPs over our time (Megatron-Bridge)
        time = evaluate(case.model, case.strategy, cluster, case.gpus).iteration_time_s
        return case.model_flops / (time * case.gpus) / 1e12
    if case.metric == "tokens_per_sec_per_gpu":   # tokens of one iteration over our time (Megatron-Bridge MoE rows)
        time = evaluate(case.model, case.strategy, cluster, case.gpus).iteration_time_s
        return case.strategy.global_batch * case.model.seq_len / (time * case.gpus)
    if case.metric == "iteration_time_s":
        return evaluate(case.model, case.strategy, cluster, case.gpus).iteration_time_s
    fwd, bwd = layer_times(case, cluster)
    return fwd if case.metric == "layer_fwd_s" else bwd


def validate(cases, cluster: Cluster) -> list:
    """Every case predicted on `cluster`, or on its own preset where it names one."""
    return [ValidationRow(c.id, c.group, c.source, c.metric, predict(c, cluster), c.expected, c.assumptions,
                          c.subset, c.convention) for c in cases]


def summarize(rows) -> dict:
    """Mean and max absolute relative error per group (and, where a group's constants were fitted
    on some of its rows, per subset: 'fitted' and 'held out')."""
    out = {}
    for group in sorted({r.group for r in rows}):
        errors = [abs(r.relative_error) for r in rows if r.group == group]
        out[group] = {"cases": len(errors), "mean_abs_error": float(np.mean(errors)),
                      "max_abs_error": float(np.max(errors))}
        for subset in sorted({r.subset for r in rows if r.group == group and r.subset}):
            part = [abs(r.relative_error) for r in rows if r.group == group and r.subset == subset]
            out[group][subset] = {"cases": len(part), "mean_abs_error": float(np.mean(part)),
                                  "max_abs_error": float(np.max(part))}
    return out
