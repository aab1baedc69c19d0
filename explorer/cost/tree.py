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
from explorer.cost.plan import ExecutionPlan, cp_group_route, ep_group_route, plan
from explorer.cost.superstep import CP_r, E_r, GSB_r, COMM_CATEGORIES, Psi_e_r
from explorer.strategy.mesh import group_route, pair_route, top_level
from explorer.symbols import (A_r, B_r, C_r, F, F_r, GS_r, L_c, L_t, O_r, P_r, Psi_r, R_r, V, W_hbm, W_r, X_r,
                              a, a_kv, b, beta, eta, f, g_c, g_t, h, phi, s, t, t_launch)

BLOCK_ARGS = (b, s, h, a, a_kv, f, V, t, g_t, L_t, F, eta, phi, W_hbm, t_launch, beta, g_c, L_c)
SIZE_ARGS = (b, s, h, a, a_kv, f, V, beta)
COMM_KINDS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all")
BLOCK_Q = ("F", "B", "W", "fwd_compute", "bwd_compute", "bwd_weight", "fwd_comm", "bwd_comm", "recompute",
           "act", "params_dev", "params", "flops_fwd", "flops_bwd", "recompute_flops", "comm_bytes",
           "grad_sync", "grad_sync_bytes", "hidden_comm", "cp_fwd", "cp_bwd", "cp_bytes", "cp_total") + \
    tuple(f"t_{k}" for k in COMM_KINDS) + tuple(f"b_{k}" for k in COMM_KINDS) + tuple(f"h_{k}" for k in COMM_KINDS) + \
    ("expert_params_dev",)
"""A block's named quantities for one micro-batch on one device. F and B are the block's
forward and backward pass (B includes recomputation); W is the weight-gradient part of B.
t_<kind> is the exposed time of its collectives of that kind, h_<kind> the part hidden under
computation, b_<kind> their bytes."""
Q = {name: i for i, name in enumerate(BLOCK_Q)}


def block_exprs(cost: BlockCost, g=g_t, L=L_t) -> tuple:
    """The BLOCK_Q expressions of one block (its collectives at seconds/byte g, latency L)."""
    per_kind_t = {k: sp.Integer(0) for k in COMM_KINDS}
    per_kind_b = {k: sp.Integer(0) for k in COMM_KINDS}
    per_kind_h = {k: sp.Integer(0) for k in COMM_KINDS}
    for step in cost.steps:
        for c in step.collectives:
            per_kind_t[c.kind] += c.exposed(g, L)
            per_kind_h[c.kind] += c.hidden(g, L)
            per_kind_b[c.kind] += c.bytes()
    forward = cost.fwd_compute_s + cost.fwd_comm_s + cost.cp_fwd_s
    backward = cost.bwd_compute_s + cost.bwd_comm_s + cost.recompute_s + cost.cp_bwd_s
    return (forward, backward, cost.bwd_weight_s, cost.fwd_compute_s, cost.bwd_compute_s, cost.bwd_weight_s,
            cost.fwd_comm_s, cost.bwd_comm_s, cost.recompute_s, cost.act_bytes, cost.params_dev, cost.params,
            cost.flops_fwd, cost.flops_bwd, cost.recompute_flops, cost.comm_bytes, cost.grad_sync_s,
            cost.grad_sync_bytes, cost.hidden_comm_s, cost.cp_fwd_s, cost.cp_bwd_s, cost.cp_bytes,
            cost.cp_total_s) + tuple(per_kind_t[k] for k in COMM_KINDS) + \
        tuple(per_kind_b[k] for k in COMM_KINDS) + tuple(per_kind_h[k] for k in COMM_KINDS) + \
        (cost.expert_params_dev,)


def block_function(cost: BlockCost):
    """BLOCK_ARGS -> BLOCK_Q values of a block, lambdified once per block structure."""
    return compile_exprs(("block", cost.key), BLOCK_ARGS, lambda: block_exprs(cost))


def step_exprs(cost: BlockCost) -> list:
    """Per operator: forward, backward and weight-gradient seconds, then bytes sent, latency steps
    and seconds hidden under computation of each of its collectives (the micro-step view of the
    same block)."""
    out = []
    for step in cost.steps:
        out += [step.fwd_s, step.bwd_s, step.bwd_weight_s]
        for c in step.collectives:
            out += [c.bytes(), sp.Integer(0) + coll.latency_steps(c.kind, c.n), sp.Integer(0) + c.hidden(g_t, L_t)]
    out.append(cost.params_dev)
    for step in cost.steps:   # then per operator: in-kernel recomputation, context-parallel exchange
        x = step.cp
        out += [step.recompute_s, x.fwd_s, x.bwd_s, x.fwd_bytes, x.bwd_bytes, x.fwd_total_s, x.bwd_total_s]
    return out


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
    route: tuple        # fan-in per machine level of the block's operator group
    exprs: tuple        # the BLOCK_Q sympy expressions (for display and tests)
    cp_route: tuple = ()  # route of the context-parallel group (() without cp)

    @property
    def fn(self):
        return block_function(self.cost)


@dataclass(frozen=True)
class BoundaryGroup:
    size: sp.Expr       # bytes of the whole array
    kind: str
    n: int
    route: tuple        # fan-in per machine level (mesh.group_route / pair_route)
    category: str
    phase: str
    stage: int          # the stage that pays it
    count: int


TIED_FAMILIES = ("gpt", "bert")
"""Families whose output layer reuses the word embedding (explorer.model.graph.transformer.head)."""


@dataclass(frozen=True)
class TiedCopy:
    """The last stage's copy of a tied word embedding (fidelity issue, E3). With p > 1 Megatron-LM
    keeps the embedding on stage 0 and a copy for the output layer on the last stage, and after
    every backward all-reduces the two copies' gradients over the pair (Megatron-LM
    finalize_model_grads -> _allreduce_word_embedding_grads; Shoeybi et al. 2019 Sec 3 for the
    vocab-parallel split over t)."""

    params: sp.Expr      # parameters per device of the copy: V h / t
    last: int            # the stage holding the copy
    route: tuple         # of the pair (stage 0, last stage): mesh.pair_route


def tied_copy(model, strategy, cluster) -> TiedCopy | None:
    if strategy.pp < 2 or model.family not in TIED_FAMILIES:
        return None
    last = strategy.pp - 1
    return TiedCopy(V * h / t, last, pair_route(cluster, strategy.mesh, "pp", 0, last))


@dataclass(frozen=True)
class CostTree:
    plan: ExecutionPlan
    kinds: tuple        # BlockKind, ...
    counts: np.ndarray  # stages x kinds: blocks of each kind on each stage
    groups: tuple       # BoundaryGroup, ...
    sizes: tuple = ()   # the distinct boundary array sizes (sympy)
    arrays: dict = None  # per group: size index, bytes factor, latency steps, level shares, count, stage;
    #                      selectors
    tied: TiedCopy | None = None

    @property
    def size_fn(self):
        return size_function(self.sizes)

    def block_values(self, nums) -> np.ndarray:
        """kinds x BLOCK_Q x candidates."""
        C = np.size(nums.dims[0])
        out = np.empty((len(self.kinds), len(Q), C))
        for i, kind in enumerate(self.kinds):
            for j, x in enumerate(kind.fn(*nums.block_args(kind.degree, kind.route, kind.cp_route,
                                                           self.plan.strategy.cp_algo))):
                out[i, j] = x
        return out

    def boundary_values(self, nums, C: int):
        """Per stage: fwd/bwd seconds and bytes by category; time and bytes by (category, kind, level).
        One matrix product per quantity: the groups' selectors were built with the tree. A group's
        levels carry their shares at once (explorer.cost.collectives.route_g_L): its seconds per
        byte is the largest share x g; its time is attributed to the levels in proportion to how
        long each is busy."""
        stages = self.plan.stages
        if not self.groups:
            zeros = {c: np.zeros((stages, C)) for c in COMM_CATEGORIES}
            return zeros, dict(zeros), dict(zeros), {}
        arr = self.arrays
        sizes = np.empty((len(self.sizes), C))
        for i, x in enumerate(self.size_fn(*nums.size_args())):
            sizes[i] = x
        sent = arr["factor"][:, None] * sizes[arr["size"]]                        # groups x C
        busy = arr["shares"] * np.asarray(nums.hw["g"])[None, :]                 # groups x levels
        g_eff, L_top = busy.max(axis=1), np.asarray(nums.hw["L"])[arr["top"]]
        secs = sent * g_eff[:, None] + (arr["steps"] * L_top)[:, None]
        secs, sent = secs * arr["count"][:, None], sent * arr["count"][:, None]
        timed = (arr["phase_sel"] @ secs).reshape(2, len(COMM_CATEGORIES), stages, C)
        moved = (arr["cat_sel"] @ sent).reshape(len(COMM_CATEGORIES), stages, C)
        fwd = {c: timed[0, i] for i, c in enumerate(COMM_CATEGORIES)}
        bwd = {c: timed[1, i] for i, c in enumerate(COMM_CATEGORIES)}
        nbytes = {c: moved[i] for i, c in enumerate(COMM_CATEGORIES)}
        part = busy / busy.sum(axis=1, keepdims=True)                            # time share per level
        by_kind = {}
        for level in range(busy.shape[1]):
            if not arr["shares"][:, level].any():
                continue
            kind_secs = (arr["kind_sel"] @ (secs * part[:, level, None])).reshape(len(arr["kinds"]), stages, C)
            kind_sent = (arr["kind_sel"] @ (sent * arr["shares"][:, level, None])).reshape(
                len(arr["kinds"]), stages, C)
            for i, (category, kind) in enumerate(arr["kinds"]):
                by_kind[(category, kind, level)] = np.stack([kind_secs[i], kind_sent[i]])
        return fwd, bwd, nbytes, by_kind


def stage_inputs(per_stage: np.ndarray, fwd_b: dict, bwd_b: dict, tied: dict | None = None) -> dict:
    """The one composition of a stage: its blocks' quantities (per_stage: stages x BLOCK_Q x C)
    plus the boundary collectives it pays, as the super-step's per-stage symbols; `tied` adds the
    tied embedding's copy and gradient all-reduce (tied_terms) to Psi_r, GS_r and GSB_r."""
    q = lambda name: per_stage[:, Q[name]]
    both = lambda c: fwd_b[c] + bwd_b[c]
    out = {F_r: q("F") + sum(fwd_b.values()), B_r: q("B") + sum(bwd_b.values()), W_r: q("bwd_weight"),
           C_r: q("fwd_compute") + q("bwd_compute"), R_r: q("recompute"),
           O_r: q("fwd_comm") + q("bwd_comm") + both("op_comm"), X_r: both("redistribution"),
           CP_r: q("cp_fwd") + q("cp_bwd"),
           P_r: both("pp_comm"), Psi_r: q("params_dev") - q("expert_params_dev"), A_r: q("act"),
           GS_r: q("grad_sync"), GSB_r: q("grad_sync_bytes"),
           E_r: both("ep_comm"), Psi_e_r: q("expert_params_dev")}
    for sym, extra in (tied or {}).items():
        out[sym] = out[sym] + extra
    return out


def tied_terms(tied: TiedCopy | None, stages: int, params, seconds, sent) -> dict:
    """Per-stage additions of a tied embedding: the copy's parameters on the last stage, and the
    all-reduce of its gradient (`seconds`, `sent` bytes per device) on stage 0 and the last stage.
    The values may be numbers (arrays over candidates) or sympy expressions."""
    if tied is None:
        return {}
    zero = 0 * params
    on = lambda stage_set, x: np.array([x if i in stage_set else zero for i in range(stages)],
                                       dtype=object if isinstance(x, sp.Basic) else float)
    return {Psi_r: on({tied.last}, params), GS_r: on({0, tied.last}, seconds), GSB_r: on({0, tied.last}, sent)}


def tied_values(tied: TiedCopy | None, tp: int, stages: int, nums) -> dict:
    """tied_terms in numbers (stages x candidates): V h / t through the compiled size function, the
    pair's all-reduce priced by the one collective rule (Numbers.collective_seconds)."""
    if tied is None:
        return {}
    C = np.size(nums.dims[0])
    expr = tied.params.xreplace({t: tp})
    params = np.broadcast_to(np.asarray(size_function((expr,))(*nums.size_args())[0], dtype=float), (C,))
    sent = coll.bytes_per_device("all_reduce", nums.hw["beta"] * params, 2)
    seconds = nums.collective_seconds(sent, float(coll.latency_steps("all_reduce", 2)), "all_reduce", tied.route)
    out = {sym: np.zeros((stages, C)) for sym in (Psi_r, GS_r, GSB_r)}
    out[Psi_r][tied.last] = params
    for stage in (0, tied.last):
        out[GS_r][stage], out[GSB_r][stage] = seconds, sent
    return out


def _group_arrays(groups: tuple, stages: int):
    """Boundary groups as parallel numpy arrays and 0/1 selector matrices, so evaluation is a few
    vector operations: (phase, category, stage) rows, (category, stage) rows, (category, kind,
    stage) rows, each summing the groups that belong to it."""
    sizes = tuple(dict.fromkeys(grp.size for grp in groups))
    kinds = list(dict.fromkeys((grp.category, grp.kind) for grp in groups))
    ncat = len(COMM_CATEGORIES)
    phase_sel = np.zeros((2 * ncat * stages, len(groups)))
    cat_sel = np.zeros((ncat * stages, len(groups)))
    kind_sel = np.zeros((len(kinds) * stages, len(groups)))
    for i, grp in enumerate(groups):
        c = COMM_CATEGORIES.index(grp.category)
        phase_sel[((grp.phase != "fwd") * ncat + c) * stages + grp.stage, i] = 1
        cat_sel[c * stages + grp.stage, i] = 1
        kind_sel[kinds.index((grp.category, grp.kind)) * stages + grp.stage, i] = 1
    arrays = {
        "size": np.array([sizes.index(grp.size) for grp in groups], dtype=int),
        "factor": np.array([float(coll.bytes_per_device(grp.kind, 1, grp.n)) for grp in groups]),
        "steps": np.array([float(coll.latency_steps(grp.kind, grp.n)) for grp in groups]),
        "shares": np.array([[float(w) for w in coll.level_shares(grp.kind, grp.route)] for grp in groups]),
        "top": np.array([top_level(grp.route) for grp in groups], dtype=int),
        "count": np.array([grp.count for grp in groups], dtype=float),
        "stage": np.array([grp.stage for grp in groups], dtype=int),
        "phase_sel": phase_sel, "cat_sel": cat_sel, "kind_sel": kind_sel, "kinds": kinds,
    }
    return sizes, arrays


_TREES = BoundedCache(64)
STRUCTURE_FIELDS = ("tp", "pp", "schedule", "chunks", "recompute", "sequence_parallel", "scatter_gather",
                    "dtype", "layer_splits", "stage_map", "rank_order", "cp", "cp_algo", "overlap_tp", "ep",
                    "expert_tp")


@lru_cache(maxsize=4096)
def levels_signature(cluster, strategy) -> tuple:
    """Everything about machine levels a tree bakes in: each stage's group levels for every
    degree its layers use, and the point-to-point levels between neighbouring stages."""
    mesh = strategy.mesh
    degrees = sorted({s.degree for s in strategy.layer_splits} | {strategy.tp})
    tp_levels = tuple(group_route(cluster, mesh, "tp", k, pp=stage) for stage in range(strategy.pp)
                      for k in degrees)
    wraps = strategy.chunks > 1
    pp = strategy.pp
    pairs = {(x, (x + 1) % pp) for x in range(pp)} if wraps else {(x, x + 1) for x in range(pp - 1)}
    if strategy.pp > 1:
        pairs.add((0, pp - 1))          # a tied embedding's gradient all-reduce (tied_copy)
    cp_routes = tuple(cp_group_route(cluster, strategy, stage) for stage in range(pp)) if strategy.cp > 1 else ()
    out = tp_levels, tuple(pair_route(cluster, mesh, "pp", i, j) for i, j in sorted(pairs)), cp_routes
    if strategy.ep > 1:   # the expert layers' all-to-all routes (MoE)
        out += (tuple(ep_group_route(cluster, strategy, stage) for stage in range(strategy.pp)),)
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
        key = (placed.cost, placed.split.degree, placed.route, placed.cp_route)
        if key not in index:
            index[key] = len(kinds)
            kinds.append(BlockKind(placed.cost, placed.split.degree, placed.route, _block_exprs(placed.cost),
                                   placed.cp_route))
        kind_of.append(index[key])
    counts = np.zeros((the_plan.stages, len(kinds)))
    for placed, k in zip(the_plan.blocks, kind_of):
        counts[placed.stage, k] += 1
    groups = _boundary_groups(the_plan)
    return CostTree(the_plan, tuple(kinds), counts, groups, *_group_arrays(groups, the_plan.stages),
                    tied=tied_copy(the_plan.model, the_plan.strategy, the_plan.cluster))


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
        for c, route in zip(boundary.collectives, boundary.routes):
            key = (c.size, c.kind, int(c.n), route, c.category, c.phase, payer(boundary, c))
            tally[key] = tally.get(key, 0) + 1
    for c, route, stage in expert_collectives(the_plan):     # MoE all-to-alls (explorer.cost.experts)
        key = (c.size, c.kind, int(c.n), route, c.category, c.phase, stage)
        tally[key] = tally.get(key, 0) + 1
    return tuple(BoundaryGroup(size, kind, n, route, category, phase, stage, count)
                 for (size, kind, n, route, category, phase, stage), count in tally.items())
