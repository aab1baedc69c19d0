"""Seconds and bytes of one pass (one micro-batch, one chunk) on each stage, by part.

A pass is drawn as consecutive parts, each in one DESIGN.md category:
ZeRO-3 gather, recomputation, computation, operator-parallel collectives,
redistribution, point-to-point send. The seconds are the cost model's own
(Result.stage_times_s; a chunk of the interleaved schedule is 1/v of its stage,
as the cost model's pipeline formula assumes); bytes and levels come from the plan.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from explorer.cost import collectives as coll
from explorer.cost.tree import payer  # who pays a boundary collective: the cost model's own rule
from explorer.cost.collectives import cp_kind
from explorer.cost.numbers import Numbers
from explorer.timeline.numbers import block_numbers, boundary_numbers
from explorer.timeline.experts import expert_numbers
from explorer.timeline.schedules import PASS_NAMES, B, F, W

PART_CATEGORIES = ("zero_comm", "recompute", "compute", "op_comm", "ep_comm", "cp_comm", "redistribution", "pp_comm")
ZERO_PART, RECOMPUTE_PART, COMPUTE_PART, CP_PART, SEND_PART = 0, 1, 2, 5, 7
PART_KINDS = np.array([["zero_gather", name, name, name, name, "cp_exchange", name, "send"] for name in PASS_NAMES],
                      dtype=object)
_FWD_KEYS = (None, None, "fwd_compute_s", "fwd_op_comm_s", "fwd_ep_comm_s", "fwd_cp_comm_s", "fwd_redistribution_s",
             "fwd_pp_comm_s")
_BWD_KEYS = (None, "recompute_s", "bwd_compute_s", "bwd_op_comm_s", "bwd_ep_comm_s", "bwd_cp_comm_s",
             "bwd_redistribution_s",
             "bwd_pp_comm_s")


@dataclass(frozen=True)
class PassCosts:
    seconds: np.ndarray                 # stages x passes (F, B, W) x parts
    bytes: np.ndarray                   # same shape: bytes sent per device
    levels: np.ndarray                  # stages x parts: machine level names ('' for computation)
    operators: np.ndarray               # stages x chunks: the blocks each chunk runs
    devices: tuple                      # per stage: ranks of its group in replica 0
    chunks: int = 1
    after: dict = field(default_factory=dict)   # per stage arrays: dp_sync_s, dp_exposed_s, zero_comm_s,
    #                                             optimizer_s, dp_bytes; 'dp_level' name; 'dp_per_backward'
    #                                             (ZeRO-2/3: the sync is one reduce-scatter per backward)
    sends: np.ndarray | None = None     # stages x passes: point-to-point sends overlapped with computation
    #                                     (not in `seconds`; the receiver waits for them), or None

    @property
    def stages(self) -> int:
        return self.seconds.shape[0]

    def pass_seconds(self) -> np.ndarray:
        """stages x passes: seconds each pass occupies its stage."""
        return self.seconds.sum(axis=2)

    @classmethod
    def simple(cls, fwd_s, bwd_s, weight_s=None, chunks: int = 1) -> "PassCosts":
        """Computation only, from per-stage forward and backward seconds of a whole stage
        (weight_s: the part of bwd_s that ZB-H1 moves to its W pass)."""
        fwd, bwd = np.asarray(fwd_s, float), np.asarray(bwd_s, float)
        wgt = np.zeros_like(fwd) if weight_s is None else np.asarray(weight_s, float)
        sec = np.zeros((len(fwd), 3, len(PART_CATEGORIES)))
        sec[:, F, COMPUTE_PART], sec[:, B, COMPUTE_PART], sec[:, W, COMPUTE_PART] = fwd, bwd - wgt, wgt
        ops = np.full((len(fwd), chunks), "", dtype=object)
        return cls(sec / chunks, np.zeros_like(sec), np.full((len(fwd), sec.shape[2]), "", dtype=object),
                   ops, tuple(str(i) for i in range(len(fwd))), chunks, {})


def from_result(result, the_plan, ctx: Numbers, split_weight: bool) -> PassCosts:
    """PassCosts of an evaluated strategy; split_weight moves bwd_weight_s to a W pass (ZB-H1)."""
    strategy = the_plan.strategy
    p, v = strategy.pp, strategy.chunks
    sec = np.zeros((p, 3, len(PART_CATEGORIES)))
    after = {k: np.zeros(p) for k in ("dp_sync_s", "dp_exposed_s", "zero_comm_s", "optimizer_s")}
    for i, row in enumerate(result.stage_times_s):
        sec[i, F] = [row[k] if k else 0.0 for k in _FWD_KEYS]
        sec[i, B] = [row[k] if k else 0.0 for k in _BWD_KEYS]
        if split_weight:
            sec[i, W, COMPUTE_PART] = row["bwd_weight_s"]
            sec[i, B, COMPUTE_PART] -= row["bwd_weight_s"]
        for k in after:
            after[k][i] = row[k]
    sends = None
    if getattr(strategy, "overlap_p2p", False):   # the sends leave the passes: the receiver waits for them
        sends = np.zeros((p, 3))
        sends[:, F] = [row["fwd_p2p_s"] for row in result.stage_times_s]
        sends[:, B] = [row["bwd_p2p_s"] for row in result.stage_times_s]
        sec[:, F, SEND_PART] -= sends[:, F]
        sec[:, B, SEND_PART] -= sends[:, B]
        sends = sends / v
    if strategy.zero == 3:   # ZeRO-3 gathers the parameters before every forward and backward pass (their
        # exposed part: with prefetch the rest runs under the pass, explorer.cost.superstep.zero_pass_exposed)
        sec[:, F, ZERO_PART] = [row["zero_pass_fwd_exposed_s"] for row in result.stage_times_s]
        sec[:, B, ZERO_PART] = [row["zero_pass_bwd_exposed_s"] for row in result.stage_times_s]
        after["zero_comm_s"] = np.zeros(p)
    nbytes, levels, params = _bytes_and_levels(the_plan, ctx)
    after["dp_bytes"] = np.array([row["dp_bytes"] for row in result.stage_times_s])
    after["dp_per_backward"] = strategy.zero >= 2     # a reduce-scatter after every backward (E2)
    shares = coll.level_shares("all_reduce", result.extra["dp_route"])
    after["dp_level"] = "+".join(name for name, w in zip(ctx.level_names, shares) if w)
    if strategy.zero == 3:   # bytes of the gather before each pass
        gather = np.array([row["zero_pass_bytes"] for row in result.stage_times_s])
        nbytes[:, F, ZERO_PART] = nbytes[:, B, ZERO_PART] = gather
        levels[:, ZERO_PART] = after["dp_level"]
    t, d = strategy.tp, strategy.dp * strategy.cp     # a stage's ranks: t x cp x d (rank order tp-cp-ep-dp-pp)
    devices = tuple(f"{i * d * t}-{i * d * t + t - 1}" if t > 1 else str(i * d * t) for i in range(p))
    return PassCosts(sec / v, nbytes / v, levels, _operators(the_plan, p, v), devices, v, after, sends)


def _bytes_and_levels(the_plan, ctx: Numbers):
    """Bytes per device per stage, pass and part; level names per stage and part; params per device."""
    p = the_plan.strategy.pp
    nbytes = np.zeros((p, 3, len(PART_CATEGORIES)))
    names = [[set() for _ in PART_CATEGORIES] for _ in range(p)]
    params = np.zeros(p)
    part_of = {c: j for j, c in enumerate(PART_CATEGORIES)}

    def add(stage, c, numbers):
        j, phase = part_of[c.category], (F if c.phase == "fwd" else B)
        nbytes[stage, phase, j] += numbers.bytes
        names[stage][j].update(numbers.levels())

    for placed in the_plan.blocks:
        steps, params_dev = block_numbers(placed, ctx, the_plan.strategy.cp_algo)
        params[placed.stage] += params_dev
        for step in steps:
            for cn in step.collectives:
                add(placed.stage, cn.coll, cn)
            if step.cp_fwd_bytes or step.cp_bwd_bytes:   # the context-parallel exchange (cp_comm)
                nbytes[placed.stage, F, CP_PART] += step.cp_fwd_bytes
                nbytes[placed.stage, B, CP_PART] += step.cp_bwd_bytes
                shares = coll.level_shares(cp_kind(the_plan.strategy.cp_algo), placed.cp_route)
                names[placed.stage][CP_PART].update(i for i, w in enumerate(shares) if w)
    for boundary in the_plan.boundaries:
        for cn in boundary_numbers(boundary, ctx):
            add(payer(boundary, cn.coll), cn.coll, cn)
    for cn, stage in expert_numbers(the_plan, ctx):      # MoE all-to-alls (ep_comm)
        add(stage, cn.coll, cn)
    levels = np.array([["+".join(ctx.level_names[k] for k in sorted(s)) for s in row] for row in names],
                      dtype=object)
    return nbytes, levels, params


def _operators(the_plan, p: int, v: int) -> np.ndarray:
    """'first..last' block names of each stage's chunk."""
    out = np.full((p, v), "", dtype=object)
    for placed in the_plan.blocks:
        name = placed.block.name
        cur = out[placed.stage, placed.chunk]
        out[placed.stage, placed.chunk] = name if not cur else f"{cur.split('..')[0]}..{name}"
    return out
