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

import numpy as np
import sympy as sp

from explorer.cost import collectives as coll
from explorer.cost.boundary import payer_side
from explorer.cost.block import BlockCost
from explorer.cost.compile import BoundedCache, compile_exprs
from explorer.cost.experts import block_expert_collectives, expert_collectives
from explorer.cost.plan import ExecutionPlan, plan
from explorer.cost.numeric import COMM_KINDS, block_values, boundary_values, stage_values, structure_key
from explorer.cost.numeric import BLOCK_ARG_NAMES, tied_place
from explorer.cost.numeric import COMM_CATEGORIES, holds_layer_activations
from explorer.cost.numeric import tied_values as numeric_tied_values
from explorer.cost.superstep_inputs import STAGE_INPUTS
from explorer.symbols import QuickMax
from explorer.symbols import (ATTENTION_KERNEL, F, F_a, L_c, L_t, V, W_hbm, a, a_kv, b, beta, eta, eta_a, f, g_c,
                              g_t, h, phi, s, t, t_launch, tau_h, tau_s)

BLOCK_ARGS = (b, s, h, a, a_kv, f, V, t, g_t, L_t, F, eta, phi, W_hbm, t_launch, beta, g_c, L_c, F_a, eta_a) + \
    ATTENTION_KERNEL + (tau_h, tau_s)
SIZE_ARGS = (b, s, h, a, a_kv, f, V, beta)
assert tuple(map(str, BLOCK_ARGS)) == BLOCK_ARG_NAMES


def block_function(cost: BlockCost):
    """BLOCK_ARGS -> BLOCK_Q values of a block, lambdified once per block structure: from memory, from the disk
    cache by the cost's key, or from block_exprs (explorer.cost.summary.block_function finds the same compiled
    function by the same key without sympy)."""
    return compile_exprs(("block", cost.key), lambda: BLOCK_ARGS, lambda: block_exprs(cost), names=BLOCK_ARG_NAMES)


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
    forward, backward, host_exposed = host_bound(cost)
    return (forward, backward, cost.bwd_weight_s, cost.fwd_compute_s, cost.bwd_compute_s, cost.bwd_weight_s,
            cost.fwd_comm_s, cost.bwd_comm_s, cost.recompute_s, cost.act_bytes, cost.params_dev, cost.params,
            cost.flops_fwd, cost.flops_bwd, cost.recompute_flops, cost.comm_bytes, cost.grad_sync_s,
            cost.grad_sync_bytes, cost.hidden_comm_s, cost.cp_fwd_s, cost.cp_bwd_s, cost.cp_bytes,
            cost.cp_total_s) + tuple(per_kind_t[k] for k in COMM_KINDS) + \
        tuple(per_kind_b[k] for k in COMM_KINDS) + tuple(per_kind_h[k] for k in COMM_KINDS) + \
        (cost.expert_params_dev,) + _phase_bytes(cost) + (cost.host_fwd_s, cost.host_bwd_s) + host_exposed


def host_bound(cost: BlockCost) -> tuple:
    """(F, B, (what the host adds to F, to B)) of one block: a pass costs max(GPU time, host issue time)
    plus its synchronisation stalls (DESIGN.md "Device and host"; explorer/model/kernels.py). The GPU
    time is the pass's compute, exposed collectives and context-parallel exchange; the host's is tau_h
    per kernel it issues one by one (CUDA graphs remove the captured ones); each device-to-host
    synchronisation stalls the GPU tau_s and keeps the host from running ahead into the next layer, so
    the max is taken per block, not per pass."""
    gpu_fwd = cost.fwd_compute_s + cost.fwd_comm_s + cost.cp_fwd_s
    gpu_bwd = cost.bwd_compute_s + cost.bwd_comm_s + cost.recompute_s + cost.cp_bwd_s
    forward = (QuickMax(gpu_fwd, cost.host_fwd_s) if cost.host_fwd_s != 0 else gpu_fwd) + cost.sync_fwd_s
    backward = (QuickMax(gpu_bwd, cost.host_bwd_s) if cost.host_bwd_s != 0 else gpu_bwd) + cost.sync_bwd_s
    return forward, backward, (_beyond(cost.host_fwd_s, gpu_fwd) + cost.sync_fwd_s,
                               _beyond(cost.host_bwd_s, gpu_bwd) + cost.sync_bwd_s)


def _beyond(host, gpu):
    """What the host's issue time adds to a pass, max(0, host - GPU): the same number as max(GPU, host) - GPU, written
    so that the compute category's formula (compute plus this) shows the GPU's exposed collectives only inside the
    host's excess over the GPU time, never as a bare negative network term (a lecturer read `- 2 L (2t - 2)` at the
    front of T_compute as "compute depends on the network", 2026-12-07)."""
    return QuickMax(sp.Integer(0), host - gpu) if host != 0 else sp.Integer(0)


def _phase_bytes(cost: BlockCost) -> tuple:
    """fwd_comm_bytes, bwd_comm_bytes, cp_fwd_bytes, cp_bwd_bytes: each operator's collectives by
    their phase and its context-parallel exchange by direction, once each (as the micro-steps draw them)."""
    fwd = sp.Add(*[c.bytes() for step in cost.steps for c in step.collectives if c.phase == "fwd"])
    bwd = sp.Add(*[c.bytes() for step in cost.steps for c in step.collectives if c.phase != "fwd"])
    return (fwd, bwd, sp.Add(*[step.cp.fwd_bytes for step in cost.steps]),
            sp.Add(*[step.cp.bwd_bytes for step in cost.steps]))


def out_elements_function(cost: BlockCost):
    """SIZE_ARGS -> the elements of the block's output array (what a boundary after it moves)."""
    return compile_exprs(("out_elements", cost.key), SIZE_ARGS, lambda: (cost.out_elements,))


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


CP_STEP_FIELDS = ("recompute_s", "cp_fwd_s", "cp_bwd_s", "cp_fwd_bytes", "cp_bwd_bytes", "cp_fwd_total_s",
                  "cp_bwd_total_s")
"""The per-operator tail of step_exprs, in its order: in-kernel recomputation, then the context-parallel
exchange's exposed seconds, bytes and whole transfer by direction."""


@dataclass(frozen=True)
class StepValues:
    """One operator's numbers of step_exprs, by name (one micro-batch)."""

    fwd_s: float
    bwd_s: float
    bwd_weight_s: float
    collectives: tuple   # per collective of the operator: (bytes sent per device, latency steps, hidden seconds)
    cp: dict             # CP_STEP_FIELDS -> seconds or bytes


def decode_steps(cost: BlockCost, values) -> tuple:
    """((StepValues per operator), parameters per device) of `values`, what steps_function(cost) returned:
    the one reader of step_exprs' positions, written next to it."""
    steps, k = [], 0
    for step in cost.steps:
        n = len(step.collectives)
        colls = tuple((float(values[at]), float(values[at + 1]), float(values[at + 2]))
                      for at in range(k + 3, k + 3 + 3 * n, 3))
        steps.append((float(values[k]), float(values[k + 1]), float(values[k + 2]), colls))
        k += 3 + 3 * n
    params_dev, width = float(values[k]), len(CP_STEP_FIELDS)
    tail = [float(x) for x in values[k + 1:]]
    return tuple(StepValues(*head, dict(zip(CP_STEP_FIELDS, tail[width * i:width * (i + 1)])))
                 for i, head in enumerate(steps)), params_dev


def size_function(sizes: tuple):
    """SIZE_ARGS -> the given array sizes (bytes), lambdified once per tuple of sizes."""
    return compile_exprs(("sizes", sizes), SIZE_ARGS, sizes,
                         disk_key=lambda: ("sizes",) + tuple(sp.srepr(x) for x in sizes))   # the expressions' full text


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
    place = tied_place(model, strategy, cluster)
    return None if place is None else TiedCopy(V * h / t, *place)


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
        """kinds x BLOCK_Q x candidates (explorer.cost.numeric.block_values)."""
        return block_values(self.kinds, nums, self.plan.strategy.cp_algo)

    def boundary_values(self, nums, C: int):
        """Per stage: fwd/bwd seconds and bytes by category; time and bytes by (category, kind, level)
        (explorer.cost.numeric.boundary_values)."""
        return boundary_values(self.plan.stages, self.arrays if self.groups else None, self.size_fn,
                               len(self.sizes), nums, C)


def stage_inputs(per_stage: np.ndarray, fwd_b: dict, bwd_b: dict, tied: dict | None = None, sends=None,
                 ep_overlap: bool = False, ep_share: float = 0.0, layer_act=None) -> dict:
    """The one composition of a stage (explorer.cost.numeric.stage_values) keyed by the super-step's
    per-stage symbols; `tied` (by name) adds a tied embedding's copy and gradient all-reduce; `sends`
    (fwd, bwd) the point-to-point sends within pp_comm; `ep_overlap`: the MoE all-to-alls under the partner
    pass's compute (explorer.cost.placement.ep_overlaps), as max(sigma E, E - C) of sympy expressions with `ep_share`
    sigma (explorer.cost.placement.ep_sm_share); `layer_act`: each stage's largest layer's activations (A^l_r)."""
    by_name = {sym.name: sym for sym in STAGE_INPUTS}
    maximum = _SYMBOLIC_MAX if ep_overlap else None
    values = stage_values(per_stage, fwd_b, bwd_b, tied, sends, maximum, ep_share, layer_act)
    return {by_name[name]: x for name, x in values.items() if name in by_name}   # not E^f_r, C^f_r...


_SYMBOLIC_MAX = np.frompyfunc(lambda x, y: QuickMax(x, y), 2, 1)   # element by element over object arrays


def tied_terms(tied: TiedCopy | None, stages: int, params, seconds, sent) -> dict:
    """Per-stage additions of a tied embedding, by name: the copy's parameters on the last stage, and the
    all-reduce of its gradient (`seconds`, `sent` bytes per device) on stage 0 and the last stage.
    The values may be numbers (arrays over candidates) or sympy expressions (explain)."""
    if tied is None:
        return {}
    zero = 0 * params
    on = lambda stage_set, x: np.array([x if i in stage_set else zero for i in range(stages)],
                                       dtype=object if isinstance(x, sp.Basic) else float)
    return {"Psi_r": on({tied.last}, params), "GS_r": on({0, tied.last}, seconds),
            "GSB_r": on({0, tied.last}, sent)}


def tied_values(tied: TiedCopy | None, tp: int, stages: int, nums) -> dict:
    """tied_terms in numbers (explorer.cost.numeric.tied_values)."""
    return numeric_tied_values(None if tied is None else (tied.last, tied.route), tp, stages, nums)


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
        "latency_shares": np.array([[float(w) for w in coll.latency_shares(grp.kind, grp.route)] for grp in groups]),
        "count": np.array([grp.count for grp in groups], dtype=float),
        "stage": np.array([grp.stage for grp in groups], dtype=int),
        "phase_sel": phase_sel, "cat_sel": cat_sel, "kind_sel": kind_sel, "kinds": kinds,
    }
    return sizes, arrays


_TREES = BoundedCache(64)


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
    # the one kind whose activations A^l_r leaves out (numeric.holds_layer_activations: the head) is the last:
    # numeric.layer_activations and explain read it so
    left_out = {k for placed, k in zip(the_plan.blocks, kind_of) if not holds_layer_activations(placed.block.kind)}
    assert left_out == {len(kinds) - 1} and kind_of[-1] == len(kinds) - 1, "the head's kind is not the last"
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
    """The stage that pays collective `c` of `boundary` (explorer.cost.boundary.payer_side)."""
    return boundary.stage_from if payer_side(c.kind, c.phase) == "from" else boundary.stage_to


def _boundary_groups(the_plan: ExecutionPlan) -> tuple:
    paid = [(c, route, payer(boundary, c)) for boundary in the_plan.boundaries
            for c, route in zip(boundary.collectives, boundary.routes)]
    return _groups(paid + list(expert_collectives(the_plan)))     # MoE all-to-alls (explorer.cost.experts)


def _groups(paid) -> tuple:
    """BoundaryGroups of (Collective, route, paying stage) triples: equal ones counted once."""
    tally = {}
    for c, route, stage in paid:
        key = (c.size, c.kind, int(c.n), route, c.category, c.phase, stage)
        tally[key] = tally.get(key, 0) + 1
    return tuple(BoundaryGroup(size, kind, n, route, category, phase, stage, count)
                 for (size, kind, n, route, category, phase, stage), count in tally.items())


def expert_seconds(cost: BlockCost, degree: int, route: tuple, ep: int, replay: bool, nums, fused=1) -> tuple:
    """(forward, backward) seconds of one block's MoE all-to-alls for one micro-batch (arrays over the micro-batch
    sizes of `nums`): its collectives as the plan places them (explorer.cost.experts.block_expert_collectives),
    grouped as the tree groups them and priced by the function evaluate() prices ep_comm with
    (explorer.cost.numeric.boundary_values) -- for the search's chain of nodes, one block on one stage. `fused`:
    the fused dispatchers' bytes over the all-to-all's (explorer.cost.fused_dispatch.fused_factor)."""
    groups = _groups((c, route, 0) for c in block_expert_collectives(cost, degree, ep, replay, fused))
    if not groups:
        return 0.0, 0.0
    sizes, arrays = _group_arrays(groups, 1)
    bound = boundary_values(1, arrays, size_function(sizes), len(sizes), nums, np.size(nums.dims[0]))
    return bound.fwd_s["ep_comm"][0], bound.bwd_s["ep_comm"][0]
