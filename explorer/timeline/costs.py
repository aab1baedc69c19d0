"""Seconds and bytes of one pass (one micro-batch, one chunk) on each stage, by part.

A pass is drawn as consecutive parts (explorer.timeline.parts), each in one DESIGN.md
category. The seconds are the cost model's own (Result.stage_times_s; a chunk of the
interleaved schedule is 1/v of its stage, as the cost model's pipeline formula assumes);
bytes, levels and each chunk's blocks come from the plan in numbers (explorer.timeline.layout).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from explorer.cost import collectives as coll
from explorer.timeline.layout import PassLayout
from explorer.timeline.parts import (COMPUTE_PART, CP_PART, PART_CATEGORIES, PART_KINDS, RECOMPUTE_PART,  # noqa: F401
                                     SEND_PART, ZERO_PART)
from explorer.timeline.schedules import B, F, W

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


def from_result(result, strategy, layout: PassLayout, level_names: tuple, split_weight: bool) -> PassCosts:
    """PassCosts of an evaluated strategy: its seconds from the Result, its bytes, levels and chunks'
    blocks from its PassLayout (explorer.timeline.layout); split_weight moves bwd_weight_s to a W pass
    (ZB-H1)."""
    p, v = strategy.pp, strategy.chunks
    sec = np.zeros((p, 3, len(PART_CATEGORIES)))
    after = {k: np.zeros(p) for k in ("dp_sync_s", "dp_exposed_s", "zero_comm_s", "optimizer_s")}
    for i, row in enumerate(result.stage_times_s):
        sec[i, F] = [row[k] if k else 0.0 for k in _FWD_KEYS]
        sec[i, B] = [row[k] if k else 0.0 for k in _BWD_KEYS]
        # what the host's issue time and synchronisations add (explorer/model/kernels.py): part of compute
        sec[i, F, COMPUTE_PART] += row.get("fwd_host_s", 0.0)
        sec[i, B, COMPUTE_PART] += row.get("bwd_host_s", 0.0)
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
        # exposed part: with prefetch the rest runs under the pass, explorer.cost.gradient_sync.zero_pass_exposed)
        sec[:, F, ZERO_PART] = [row["zero_pass_fwd_exposed_s"] for row in result.stage_times_s]
        sec[:, B, ZERO_PART] = [row["zero_pass_bwd_exposed_s"] for row in result.stage_times_s]
        after["zero_comm_s"] = np.zeros(p)
    nbytes, levels = layout.bytes.copy(), layout.levels.copy()
    after["dp_bytes"] = np.array([row["dp_bytes"] for row in result.stage_times_s])
    after["dp_per_backward"] = strategy.zero >= 2     # a reduce-scatter after every backward (E2)
    routes = (result.extra["dp_route"], result.extra["expert_dp_route"])
    used = [any(w for w in ws) for ws in zip(*(coll.level_shares("all_reduce", r) for r in routes))]
    after["dp_level"] = "+".join(name for name, u in zip(level_names, used) if u)   # the dense and expert groups'
    # levels together (MoE: the experts' d / e replicas may cross other levels than the dense weights' d)
    if strategy.zero == 3:   # bytes of the gather before each pass
        gather = np.array([row["zero_pass_bytes"] for row in result.stage_times_s])
        nbytes[:, F, ZERO_PART] = nbytes[:, B, ZERO_PART] = gather
        levels[:, ZERO_PART] = after["dp_level"]
    t, d = strategy.tp, strategy.dp * strategy.cp     # a stage's ranks: t x cp x d (rank order tp-cp-ep-dp-pp)
    devices = tuple(f"{i * d * t}-{i * d * t + t - 1}" if t > 1 else str(i * d * t) for i in range(p))
    return PassCosts(sec / v, nbytes / v, levels, layout.operators, devices, v, after, sends)

