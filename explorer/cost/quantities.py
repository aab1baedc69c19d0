"""The named per-block quantities the numeric path evaluates."""
from __future__ import annotations

import sympy as sp

from explorer.cost.block import BlockCost

COMM_KINDS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all")
BLOCK_Q = ("fwd_compute", "bwd_compute", "bwd_weight", "fwd_comm", "bwd_comm", "recompute", "act",
           "params_dev", "params", "flops_fwd", "flops_bwd", "recompute_flops", "comm_bytes",
           "grad_sync", "grad_sync_bytes") + \
    tuple(f"t_{k}" for k in COMM_KINDS) + tuple(f"b_{k}" for k in COMM_KINDS)
Q = {name: i for i, name in enumerate(BLOCK_Q)}


def block_exprs(cost: BlockCost, g, L) -> tuple:
    """The BLOCK_Q expressions of one block (its collectives at seconds/byte g, latency L)."""
    per_kind_t = {k: sp.Integer(0) for k in COMM_KINDS}
    per_kind_b = {k: sp.Integer(0) for k in COMM_KINDS}
    for step in cost.steps:
        for c in step.collectives:
            per_kind_t[c.kind] += c.time(g, L)
            per_kind_b[c.kind] += c.bytes()
    return (cost.fwd_compute_s, cost.bwd_compute_s, cost.bwd_weight_s, cost.fwd_comm_s, cost.bwd_comm_s,
            cost.recompute_s, cost.act_bytes, cost.params_dev, cost.params, cost.flops_fwd,
            cost.flops_bwd, cost.recompute_flops, cost.comm_bytes, cost.grad_sync_s, cost.grad_sync_bytes) + \
        tuple(per_kind_t[k] for k in COMM_KINDS) + tuple(per_kind_b[k] for k in COMM_KINDS)
