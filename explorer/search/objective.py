"""Iteration time and peak memory per device from per-stage sums, vectorised.

The same formulas `evaluate()` assembles, taken from the core's sympy
expressions (superstep.py: pipeline makespan, gradient synchronisation, ZeRO
gathers, optimizer; memory.py: model states and activations in flight) and
lambdified once per variant. Arrays carry the pipeline stages on their last
axis; any leading axes broadcast (candidates, micro-batch sizes).
"""
from __future__ import annotations

import numpy as np

from explorer.cost import memory as mem
from explorer.cost import superstep as ss
from explorer.cost.compile import compile_exprs
from explorer.strategy.placement import dp_level
from explorer.symbols import B_max, F_max, S_T, T_star, W_hbm, beta, d, m, p, v


def _pipeline():
    return compile_exprs(("search-pipeline",), (S_T, F_max, B_max, T_star, m, v), (ss.PIPELINE,))


def _sync(zero: int, overlap: bool):
    """Per stage: exposed gradient sync + ZeRO gathers + optimizer step (seconds)."""
    return compile_exprs(("search-sync", zero, overlap),
                         (ss.G, ss.Psi, d, ss.g_dp, ss.L_dp, ss.B_last, m, ss.K_opt, W_hbm, ss.T_split),
                         lambda: (ss.exposed(ss.dp_sync(zero), overlap) + ss.zero_gathers(zero)
                                  + ss.optimizer(zero),))


def _memory(zero: int, k_opt: float, schedule: str):
    return compile_exprs(("search-memory", zero, k_opt, schedule), (mem.Psi, mem.A, mem.r, beta, d, m, p, v),
                         lambda: (sum(mem.model_states(zero, k_opt).values()) + mem.activations(schedule),))


class Objective:
    """Time and memory of candidates sharing a cluster, dtype, d, t and p."""

    def __init__(self, cluster, dtype_bytes: int, hw: dict, dp: int, tp: int, pp: int):
        self.hw, self.dp, self.pp, self.beta = hw, dp, pp, dtype_bytes
        levels = [dp_level(cluster, tp, dp, stage) for stage in range(pp)]   # each stage's dp groups
        self.g, self.L = np.asarray(hw["g"])[levels], np.asarray(hw["L"])[levels]
        self.ranks = np.arange(pp)

    def pipeline(self, F, B, m, v):
        """Makespan of the pipelined forward/backward (superstep.PIPELINE)."""
        total = F + B
        return _pipeline()(total.sum(-1), F.max(-1), B.max(-1), total.max(-1), m, v)[0]

    def sync(self, psi, bwd, split_sync, m, v, zero: int, overlap: bool, ranks=None):
        """Per stage (`ranks`, default all on the last axis), what follows the pipeline: dp sync
        (exposed under the last backward, one chunk's: bwd / v), ZeRO gathers, optimizer."""
        k_opt = ss.optimizer_bytes_per_param(self.beta)
        g, L = (self.g, self.L) if ranks is None else (self.g[ranks], self.L[ranks])
        out = _sync(zero, overlap)(self.beta * psi, psi, self.dp, g, L, bwd / v, m, k_opt, self.hw["W"],
                                   split_sync)[0]
        return np.broadcast_to(out, np.broadcast_shapes(np.shape(psi), np.shape(bwd), np.shape(split_sync)))

    def time(self, F, B, psi, split_sync, m, v, zero: int, overlap: bool):
        """Iteration time: pipeline + the slowest stage's synchronisation and optimizer."""
        m_stage = np.asarray(m)[..., None] if np.ndim(m) else m
        return self.pipeline(F, B, m, v) + self.sync(psi, B, split_sync, m_stage, v, zero, overlap).max(-1)

    def memory(self, psi, act, m, v, zero: int, schedule: str, ranks=None):
        """Per stage bytes per device (model states + activations in flight); `ranks` default all stages."""
        k_opt = mem.optimizer_bytes_per_param(self.beta)
        m_stage = np.asarray(m)[..., None] if np.ndim(m) else m
        ranks = self.ranks if ranks is None else ranks
        out = _memory(zero, k_opt, schedule)(psi, act, ranks, self.beta, self.dp, m_stage, self.pp, v)[0]
        return np.broadcast_to(out, np.broadcast_shapes(np.shape(psi), np.shape(act)))

    def peak_memory(self, psi, act, m, v, zero: int, schedule: str):
        return self.memory(psi, act, m, v, zero, schedule).max(-1)

    def pipeline_total(self, total_s, f_max, b_max, m, v):
        """superstep.PIPELINE from the sums themselves (scalars or arrays)."""
        return _pipeline()(total_s, f_max, b_max, 0.0, m, v)[0]
