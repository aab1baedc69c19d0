"""The cost tree of one structure: its blocks' micro-steps compiled, summed into stages.

For a model, the structure of a strategy and a cluster (structure_key), the plan
(explorer.cost.plan) is built once: each distinct block kind's named quantities
(BLOCK_Q, from its BlockCost) are lambdified once, the blocks are counted per
stage and the collectives between blocks grouped. `stage_inputs` is the one place
where blocks and boundaries add up to a stage's F_r, B_r, W_r and their parts;
explorer.cost.superstep turns those into the iteration. evaluate(),
evaluate_batch(), explain(), the timeline and validation read this object; the
search prices its chain of nodes with the same compiled block functions.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np
import sympy as sp

from explorer.cost import collectives as coll
from explorer.cost.block import BlockCost
from explorer.cost.compile import BoundedCache, compile_exprs
from explorer.cost.experts import expert_collectives
from explorer.cost.plan import ExecutionPlan, ep_group_level, plan
from explorer.cost.superstep import E_r, GSB_r, COMM_CATEGORIES, Psi_e_r
from explorer.strategy.mesh import group_level, pair_level
from explorer.symbols import (A_r, B_r, C_r, F, F_r, GS_r, L_t, O_r, P_r, Psi_r, R_r, V, W_hbm, W_r, X_r, a,
                              a_kv, b, beta, eta, f, g_t, h, phi, s, t, t_launch)

BLOCK_ARGS = (b, s, h, a, a_kv, f, V, t, g_t, L_t, F, eta, phi, W_hbm, t_launch, beta)
SIZE_ARGS = (b, s, h, a, a_kv, f, V, beta)
COMM_KINDS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all")
BLOCK_Q = ("F", "B", "W", "fwd_compute", "bwd_compute", "bwd_weight", "fwd_comm", "bwd_comm", "recompute",
           "act", "params_dev", "params", "flops_fwd", "flops_bwd", "recompute_flops", "comm_bytes",
           "grad_sync", "grad_sync_bytes") + \
    tuple(f"t_{k}" for k in COMM_KINDS) + tuple(f"b_{k}" for k in COMM_KINDS) + ("expert_params_dev",)
"""A block's named quantities for one micro-batch on one device. F and B are the block's
forward and backward pass (B includes recomputation); W is the weight-gradient part of B."""
Q = {name: i for i, name in enumerate(BLOCK_Q)}


def block_exprs(cost: BlockCost, g=g_t, L=L_t) -> tuple:
    """The BLOCK_Q expressions of one block (its collectives at seconds/byte g, latency L)."""
    per_kind_t = {k: sp.Integer(0) for k in COMM_KINDS}
    per_kind_b = {k: sp.Integer(0) for k in COMM_KINDS}
    for step in cost.steps:
        for c in step.collectives:
            per_kind_t[c.kind] += c.time(g, L)
            per_kind_b[c.kind] += c.bytes()
    forward = cost.fwd_compute_s + cost.fwd_comm_s
    backward = cost.bwd_compute_s + cost.bwd_comm_s + cost.recompute_s
    return (forward, backward, cost.bwd_weight_s, cost.fwd_compute_s, cost.bwd_compute_s, cost.bwd_weight_s,
            cost.fwd_comm_s, cost.bwd_comm_s, cost.recompute_s, cost.act_bytes, cost.params_dev, cost.params,
            cost.flops_fwd, cost.flops_bwd, cost.recompute_flops, cost.comm_bytes, cost.grad_sync_s,
            cost.grad_sync_bytes) + tuple(per_kind_t[k] for k in COMM_KINDS) + \
        tuple(per_kind_b[k] for k in COMM_KINDS) + (cost.expert_params_dev,)


def block_function(cost: BlockCost):
    """BLOCK_ARGS -> BLOCK_Q values of a block, lambdified once per block structure."""
    return compile_exprs(("block", cost.key), BLOCK_ARGS, lambda: block_exprs(cost))


def step_exprs(cost: BlockCost) -> list:
    """Per operator: forward, backward and weight-gradient seconds, then bytes sent and latency
    steps of each of its collectives (the micro-step view of the same block)."""
    out = []
    for step in cost.steps:
        out += [step.fwd_s, step.bwd_s, step.bwd_weight_s]
        for c in step.collectives:
            out += [c.bytes(), sp.Integer(0) + coll.latency_steps(c.kind, c.n)]
    return out + [cost.params_dev]


def steps_function(cost: BlockCost):
    """BLOCK_ARGS -> step_exprs values, lambdified once per block structure (the timeline's)."""
    return compile_exprs(("steps", cost.key), BLOCK_ARGS, lambda: step_exprs(cost))


def size_function(sizes: tuple):
    """SIZE_ARGS -> the given array sizes (bytes), lambdified once per tuple of sizes."""
    return compile_exprs(("sizes", sizes), SIZE_ARGS, sizes)


@dataclass(frozen=True)
class BlockKind:
    cost: BlockCost
    degree: int
    level: int
    exprs: tuple        # the BLOCK_Q sympy expressions (for display and tests)

    @property
    def fn(self):
        return block_function(self.cost)


@dataclass(frozen=True)
class BoundaryGroup:
    size: sp.Expr       # bytes of the whole array
    kind: str
    n: int
    level: int
    category: str
    phase: str
    stage: int          # the stage that pays it
    count: int


@dataclass(frozen=True)
class CostTree:
    plan: ExecutionPlan
    kinds: tuple        # BlockKind, ...
    counts: np.ndarray  # stages x kinds: blocks of each kind on each stage
    groups: tuple       # BoundaryGroup, ...
    sizes: tuple = ()   # the distinct boundary array sizes (sympy)
    arrays: dict = None  # per group: size index, bytes factor, latency steps, level, count, stage; selectors

    @property
    def size_fn(self):
        return size_function(self.sizes)

    def block_values(self, nums) -> np.ndarray:
        """kinds x BLOCK_Q x candidates."""
        C = np.size(nums.dims[0])
        out = np.empty((len(self.kinds), len(Q), C))
        for i, kind in enumerate(self.kinds):
            for j, x in enumerate(kind.fn(*nums.block_args(kind.degree, kind.level))):
                out[i, j] = x
        return out

    def boundary_values(self, nums, C: int):
        """Per stage: fwd/bwd seconds and bytes by category; time and bytes by (category, kind, level).
        One matrix product per quantity: the groups' selectors were built with the tree."""
        stages = self.plan.stages
        if not self.groups:
            zeros = {c: np.zeros((stages, C)) for c in COMM_CATEGORIES}
            return zeros, dict(zeros), dict(zeros), {}
        arr = self.arrays
        sizes = np.empty((len(self.sizes), C))
        for i, x in enumerate(self.size_fn(*nums.size_args())):
            sizes[i] = x
        sent = arr["factor"][:, None] * sizes[arr["size"]]                        # groups x C
        secs = nums.collective_seconds(sent, arr["steps"][:, None], arr["level"][:, None])
        secs, sent = secs * arr["count"][:, None], sent * arr["count"][:, None]
        timed = (arr["phase_sel"] @ secs).reshape(2, len(COMM_CATEGORIES), stages, C)
        moved = (arr["cat_sel"] @ sent).reshape(len(COMM_CATEGORIES), stages, C)
        fwd = {c: timed[0, i] for i, c in enumerate(COMM_CATEGORIES)}
        bwd = {c: timed[1, i] for i, c in enumerate(COMM_CATEGORIES)}
        nbytes = {c: moved[i] for i, c in enumerate(COMM_CATEGORIES)}
        kind_secs = (arr["kind_sel"] @ secs).reshape(len(arr["kinds"]), stages, C)
        kind_sent = (arr["kind_sel"] @ sent).reshape(len(arr["kinds"]), stages, C)
        by_kind = {key: np.stack([kind_secs[i], kind_sent[i]]) for i, key in enumerate(arr["kinds"])}
        return fwd, bwd, nbytes, by_kind


def stage_inputs(per_stage: np.ndarray, fwd_b: dict, bwd_b: dict) -> dict:
    """The one composition of a stage: its blocks' quantities (per_stage: stages x BLOCK_Q x C)
    plus the boundary collectives it pays, as the super-step's per-stage symbols."""
    q = lambda name: per_stage[:, Q[name]]
    both = lambda c: fwd_b[c] + bwd_b[c]
    return {F_r: q("F") + sum(fwd_b.values()), B_r: q("B") + sum(bwd_b.values()), W_r: q("bwd_weight"),
            C_r: q("fwd_compute") + q("bwd_compute"), R_r: q("recompute"),
            O_r: q("fwd_comm") + q("bwd_comm") + both("op_comm"), X_r: both("redistribution"),
            P_r: both("pp_comm"), Psi_r: q("params_dev") - q("expert_params_dev"), A_r: q("act"),
            GS_r: q("grad_sync"), GSB_r: q("grad_sync_bytes"),
            E_r: both("ep_comm"), Psi_e_r: q("expert_params_dev")}


def _group_arrays(groups: tuple, stages: int):
    """Boundary groups as parallel numpy arrays and 0/1 selector matrices, so evaluation is a few
    vector operations: (phase, category, stage) rows, (category, stage) rows, (category, kind,
    level, stage) rows, each summing the groups that belong to it."""
    sizes = tuple(dict.fromkeys(grp.size for grp in groups))
    kinds = list(dict.fromkeys((grp.category, grp.kind, grp.level) for grp in groups))
    ncat = len(COMM_CATEGORIES)
    phase_sel = np.zeros((2 * ncat * stages, len(groups)))
    cat_sel = np.zeros((ncat * stages, len(groups)))
    kind_sel = np.zeros((len(kinds) * stages, len(groups)))
    for i, grp in enumerate(groups):
        c = COMM_CATEGORIES.index(grp.category)
        phase_sel[((grp.phase != "fwd") * ncat + c) * stages + grp.stage, i] = 1
        cat_sel[c * stages + grp.stage, i] = 1
        kind_sel[kinds.index((grp.category, grp.kind, grp.level)) * stages + grp.stage, i] = 1
    arrays = {
        "size": np.array([sizes.index(grp.size) for grp in groups], dtype=int),
        "factor": np.array([float(coll.bytes_per_device(grp.kind, 1, grp.n)) for grp in groups]),
        "steps": np.array([float(coll.latency_steps(grp.kind, grp.n)) for grp in groups]),
        "level": np.array([grp.level for grp in groups], dtype=int),
        "count": np.array([grp.count for grp in groups], dtype=float),
        "stage": np.array([grp.stage for grp in groups], dtype=int),
        "phase_sel": phase_sel, "cat_sel": cat_sel, "kind_sel": kind_sel, "kinds": kinds,
    }
    return sizes, arrays


_TREES = BoundedCache(64)
STRUCTURE_FIELDS = ("tp", "pp", "schedule", "chunks", "recompute", "sequence_parallel", "scatter_gather",
                    "dtype", "layer_splits", "stage_map", "rank_order", "ep", "expert_tp")


@lru_cache(maxsize=4096)
def levels_signature(cluster, strategy) -> tuple:
    """Everything about machine levels a tree bakes in: each stage's group levels for every
    degree its layers use, and the point-to-point levels between neighbouring stages."""
    mesh = strategy.mesh
    degrees = sorted({s.degree for s in strategy.layer_splits} | {strategy.tp})
    tp_levels = tuple(group_level(cluster, mesh, "tp", k, pp=stage) for stage in range(strategy.pp)
                      for k in degrees)
    wraps = strategy.chunks > 1
    pp = strategy.pp
    pairs = {(x, (x + 1) % pp) for x in range(pp)} if wraps else {(x, x + 1) for x in range(pp - 1)}
    out = tp_levels, tuple(pair_level(cluster, mesh, "pp", i, j) for i, j in sorted(pairs))
    if strategy.ep > 1:   # the expert layers' all-to-all levels (MoE)
        out += (tuple(ep_group_level(cluster, strategy, stage) for stage in range(strategy.pp)),)
    return out


def structure_key(model, strategy, cluster) -> tuple:
    """What decides the tree's shape; micro-batch, batch, dp, ZeRO and overlap enter as numbers
    (or choose the super-step variant) and leave it alone."""
    shape = tuple(getattr(strategy, name) for name in STRUCTURE_FIELDS)
    return (model, shape, cluster, levels_signature(cluster, strategy))


def cost_tree(model, strategy, cluster) -> CostTree:
    """The compiled tree; its plan is for this exact strategy (numbers that do not change the
    structure are replaced, not rebuilt)."""
    tree = _TREES.get(structure_key(model, strategy, cluster), lambda: build(plan(model, strategy, cluster)))
    if tree.plan.strategy is strategy or tree.plan.strategy == strategy:
        return tree
    return replace(tree, plan=replace(tree.plan, strategy=strategy))


def build(the_plan: ExecutionPlan) -> CostTree:
    kinds, index, kind_of = [], {}, []
    for placed in the_plan.blocks:
        key = (placed.cost, placed.split.degree, placed.level)
        if key not in index:
            index[key] = len(kinds)
            kinds.append(BlockKind(placed.cost, placed.split.degree, placed.level, _block_exprs(placed.cost)))
        kind_of.append(index[key])
    counts = np.zeros((the_plan.stages, len(kinds)))
    for placed, k in zip(the_plan.blocks, kind_of):
        counts[placed.stage, k] += 1
    groups = _boundary_groups(the_plan)
    return CostTree(the_plan, tuple(kinds), counts, groups, *_group_arrays(groups, the_plan.stages))


_EXPRS = BoundedCache(512)


def _block_exprs(cost) -> tuple:
    return _EXPRS.get(cost.key, lambda: block_exprs(cost))


def payer(boundary, c) -> int:
    """Sender pays a p2p; the consumer converts forward, the producer backward."""
    forward = c.phase == "fwd"
    if c.kind == "p2p":
        return boundary.stage_from if forward else boundary.stage_to
    return boundary.stage_to if forward else boundary.stage_from


def _boundary_groups(the_plan: ExecutionPlan) -> tuple:
    tally = {}
    for boundary in the_plan.boundaries:
        for c, level in zip(boundary.collectives, boundary.levels):
            key = (c.size, c.kind, int(c.n), level, c.category, c.phase, payer(boundary, c))
            tally[key] = tally.get(key, 0) + 1
    for c, level, stage in expert_collectives(the_plan):     # MoE all-to-alls (explorer.cost.experts)
        key = (c.size, c.kind, int(c.n), level, c.category, c.phase, stage)
        tally[key] = tally.get(key, 0) + 1
    return tuple(BoundaryGroup(size, kind, n, level, category, phase, stage, count)
                 for (size, kind, n, level, category, phase, stage), count in tally.items())
