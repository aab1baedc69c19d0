"""The numeric side of the cost tree, without sympy: names, keys and the array code.

The expressions live in explorer.cost.tree (blocks) and explorer.cost.superstep
(the iteration); what turns their compiled functions into numbers -- the block
quantities' names, the structure key, a stage's composition from its blocks and
boundaries, the boundary groups' matrix products, the stage reductions' numpy
meanings -- is here, so that evaluate() can run from functions loaded from the
disk cache (explorer.cost.cold) without importing sympy. Both paths call these
same functions: one composition.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from explorer.cost import collectives as coll
from explorer.cost.reductions import STAGE_FUNCTIONS  # noqa: F401 (re-exported)
from explorer.strategy.mesh import group_route, joint_route, pair_route
from explorer.strategy.options import structure_fields as option_structure_fields

CATEGORIES = ("compute", "recompute", "op_comm", "ep_comm", "redistribution", "pp_comm", "bubble",
              "dp_comm", "zero_comm", "optimizer", "cp_comm")
COMM_CATEGORIES = ("op_comm", "ep_comm", "redistribution", "pp_comm", "dp_comm", "zero_comm", "cp_comm")
MEMORY_PARTS = ("params", "grads", "optimizer", "activations")
OUTPUTS = ("iteration", "makespan", "stage_end") + CATEGORIES + ("critical_stage", "sync_stage", "dp_sync", "dp_exposed",
                                                    "zero_gather", "optimizer_step", "after", "dp_bytes",
                                                    "zero_bytes", "zero_gather_pass", "zero_bytes_pass", "zero_exposed",
                                                    "zero_pass_fwd_exposed", "zero_pass_bwd_exposed",
                                                    "pp_sends_exposed", "pp_sends_hidden", "dp_sync_experts",
                                                    "dp_bytes_experts", "zero_gather_experts",
                                                    "zero_bytes_experts") + \
    tuple(f"memory_{part}" for part in MEMORY_PARTS)
"""The super-step terms evaluate() reads (explorer.cost.superstep.terms)."""
STAGE_INPUT_NAMES = ("F_r", "B_r", "W_r", "C_r", "R_r", "O_r", "X_r", "P_r", "Psi_r", "A_r", "GS_r", "GSB_r",
                     "g_r", "L_r", "r", "CP_r", "E_r", "Psi^e_r", "g^e_r", "L^e_r", "S^f_r", "S^b_r", "A^l_r")
"""Names of explorer.cost.superstep_inputs.STAGE_INPUTS, in order (superstep checks it)."""
SCALAR_INPUT_NAMES = ("m", "v", "p", "d", "beta", "W_{hbm}", "K_{opt}", "e", "T_{norm}")
"""Names of explorer.cost.superstep_inputs.SCALAR_INPUTS, in order."""

COMM_KINDS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all")
BLOCK_Q = ("F", "B", "W", "fwd_compute", "bwd_compute", "bwd_weight", "fwd_comm", "bwd_comm", "recompute",
           "act", "params_dev", "params", "flops_fwd", "flops_bwd", "recompute_flops", "comm_bytes",
           "grad_sync", "grad_sync_bytes", "hidden_comm", "cp_fwd", "cp_bwd", "cp_bytes", "cp_total") + \
    tuple(f"t_{k}" for k in COMM_KINDS) + tuple(f"b_{k}" for k in COMM_KINDS) + tuple(f"h_{k}" for k in COMM_KINDS) + \
    ("expert_params_dev", "fwd_comm_bytes", "bwd_comm_bytes", "cp_fwd_bytes", "cp_bwd_bytes", "host_fwd", "host_bwd",
     "host_fwd_exposed", "host_bwd_exposed")
"""A block's named quantities for one micro-batch on one device. F and B are the block's
forward and backward pass (B includes recomputation); W is the weight-gradient part of B.
t_<kind> is the exposed time of its collectives of that kind, h_<kind> the part hidden under
computation, b_<kind> their bytes; fwd/bwd_comm_bytes the bytes of its forward and backward
collectives (the replayed forward's not counted again), cp_fwd/bwd_bytes its context-parallel
exchange's, by phase (what the super-step timeline draws on each pass, explorer.timeline.layout); host_fwd/bwd
the host's issue time of each pass (tau_h per eager kernel, min(tau_k, tau_h) per kernel launched inside a library
call, explorer/model/kernels.py) and host_fwd/bwd_exposed
what the host adds to F and B: max(0, host - GPU) plus the synchronisation stalls (explorer.cost.tree.host_bound),
a named part of the compute category (C_r)."""
Q = {name: i for i, name in enumerate(BLOCK_Q)}


def block_quantity(values, name: str):
    """Quantity `name` (BLOCK_Q) of an array with BLOCK_Q on axis 1 (kinds or stages x BLOCK_Q [x candidates]):
    with function_quantity, the one place that decodes BLOCK_Q by position."""
    return values[:, Q[name]]


def function_quantity(outputs, name: str):
    """Quantity `name` of what one block function returned (a sequence in BLOCK_Q order)."""
    return outputs[Q[name]]


BLOCK_ARG_NAMES = ("b", "s", "h", "a", "a_{kv}", "f", "V", "t", "g_t", "L_t", "F", "eta", "phi", "W_{hbm}",
                   "tau_k", "beta", "g_c", "L_c", "F_a", "eta_a", "eta_af", "eta_ab", "n_af", "n_ab", "d_af",
                   "d_ab", "kappa_a", "tau_h", "tau_s")
"""Names of explorer.cost.tree.BLOCK_ARGS, in order (tree checks it): the compiled block functions'
arguments, which the disk cache keys them by."""
TIED_FAMILIES = ("gpt", "bert")
"""Families whose output layer reuses the word embedding (Megatron-LM's GPT and BERT)."""


def tied_place(model, strategy, cluster):
    """(last stage, route of the (stage 0, last stage) pair) of a tied embedding's copy, or None when
    there is none (one stage, or an untied family without MTP modules): explorer.cost.tree.TiedCopy places
    it here. MTP modules keep a copy of the word embedding on their stage, the last (Megatron-Core
    GPTModel builds the embedding where mtp_process; explorer/model/graph/mtp.py), shared as a tied one."""
    if strategy.pp < 2 or (model.family not in TIED_FAMILIES and not getattr(model, "mtp_layers", 0)):
        return None
    last = strategy.pp - 1
    return last, pair_route(cluster, strategy.mesh, "pp", 0, last)


def optimizer_update_bytes(dtype_bytes: int) -> int:
    """K_opt: bytes an Adam step moves per parameter. Mixed precision reads and writes fp32
    master weights, momentum and variance (3 x 4 B each way = 24 B, ZeRO Sec 3.1's K = 12
    states), reads the fp32 gradient (4 B) and writes the 16-bit weights (2 B): 30 B;
    fp32 training reads and writes weights, momentum and variance and reads the gradient: 28 B."""
    return 30 if dtype_bytes == 2 else 28


def optimizer_state_bytes(dtype_bytes: int) -> int:
    """K of ZeRO Sec 3.1: fp32 master weights + momentum + variance = 12 B per parameter with
    16-bit training; fp32 training keeps no master copy: 8 B."""
    return 12 if dtype_bytes == 2 else 8


STRUCTURE_FIELDS = ("tp", "pp", "schedule", "chunks", "recompute", "sequence_parallel", "scatter_gather",
                    "dtype", "layer_splits", "stage_map", "rank_order", "cp", "cp_algo", "overlap_tp", "ep",
                    "expert_tp", "pipeline_layout", "framework")
"""The Strategy fields that decide the tree's shape, beside the option table's (structure_fields). The framework:
Megatron's asynchronous input-gradient collective (explorer/strategy/frameworks.py ASYNC_DGRAD) changes the blocks."""


def structure_fields() -> tuple:
    """STRUCTURE_FIELDS and the options whose record says they change the blocks (explorer/strategy/options.py:
    cuda_graphs, moe_dispatcher, fp8_recipe, recompute_modules, ...), read from the table when called."""
    return STRUCTURE_FIELDS + option_structure_fields()


def cp_group_route(cluster, strategy, stage: int) -> tuple:
    """The route of stage `stage`'s context-parallel groups through the machine levels (the one
    place the cp_comm group is chosen)."""
    return group_route(cluster, strategy.mesh, "cp", pp=stage)


def ep_group_route(cluster, strategy, stage: int) -> tuple:
    """The route of stage `stage`'s expert-parallel groups (their all-to-alls): ep consecutive
    indices of the expert mesh (Strategy.expert_mesh), the one place this is decided."""
    return group_route(cluster, strategy.expert_mesh, "ep", pp=stage)


def expert_dp_route(cluster, strategy, stage: int) -> tuple:
    """The route of the expert weights' data-parallel groups (their gradient sync, MoE)."""
    return group_route(cluster, strategy.expert_mesh, "dp", pp=stage)


@lru_cache(maxsize=4096)
def stage_dp_routes(cluster, mesh, stages: int) -> tuple:
    """Each stage's gradient-reducing groups' route through the machine levels: the data-parallel
    groups, with context parallelism the dp x cp groups (mesh.joint_route)."""
    return tuple(joint_route(cluster, mesh, ("cp", "dp"), pp=stage) for stage in range(stages))


def _g_L(cluster, routes) -> tuple:
    """((g per route), (L per route)): each route's all-reduce seconds per byte and latency, its levels
    at once (explorer.cost.collectives.route_g_L)."""
    g, L = [lv.seconds_per_byte for lv in cluster.levels], [lv.latency_s for lv in cluster.levels]
    pairs = [coll.route_g_L("all_reduce", route, g, L) for route in routes]
    return tuple(x for x, _ in pairs), tuple(y for _, y in pairs)


NORM_ALL_REDUCES = {"fp16": 2}
"""Small all-reduces before the optimizer step, by dtype (default 1): the global gradient norm that Megatron-LM's
clipping waits for (--clip-grad, default 1.0: megatron/core/optimizer/clip_grads.py get_grad_norm_fp32, an
all_reduce(SUM) of the sum of squares over the optimizer's grad_stats_parallel_group); with fp16 also the loss
scaler's inf/nan flag (optimizer.py MixedPrecisionOptimizer._unscale_main_grads_and_check_for_nan, all_reduce(MAX)
over the same group). NVIDIA/Megatron-LM at d98e8a64."""


def grad_norm_time(cluster, mesh, zero: int, dtype: str, g, L):
    """T_norm: the small all-reduces (NORM_ALL_REDUCES) every rank runs after its gradient synchronisation and
    before its optimizer step (issue 26 item 8b), over Megatron's grad_stats_parallel_group: the whole job with
    the distributed optimizer (ZeRO >= 1: "Distributed optimizer ... Return the entire world",
    MegatronOptimizer.get_grad_stats_parallel_group, optimizer.py), the model-parallel tp x pp group without it.
    Each is priced as NCCL's tree prices a message of a few bytes (collectives.small_all_reduce_seconds), at
    the levels' seconds per byte g and latencies L: numbers, or sympy symbols (explorer.cost.elasticity)."""
    route = joint_route(cluster, mesh, ("tp", "cp", "dp", "pp") if zero >= 1 else ("tp", "pp"))
    return NORM_ALL_REDUCES.get(dtype, 1) * coll.small_all_reduce_seconds(coll.NORM_BYTES, route, g, L)


@lru_cache(maxsize=4096)
def grad_norm_seconds(cluster, mesh, zero: int, dtype: str) -> float:
    """grad_norm_time in seconds, at the cluster's own levels."""
    g, L = [lv.seconds_per_byte for lv in cluster.levels], [lv.latency_s for lv in cluster.levels]
    return float(grad_norm_time(cluster, mesh, zero, dtype, g, L))


@lru_cache(maxsize=4096)
def stage_dp_g_L(cluster, mesh, stages: int) -> tuple:
    """((g_r), (L_r)) of each stage's data-parallel (x cp) groups: the super-step's g_r and L_r, read
    by evaluate() and the search's objective alike."""
    return _g_L(cluster, stage_dp_routes(cluster, mesh, stages))


@lru_cache(maxsize=4096)
def stage_expert_dp_g_L(cluster, strategy, stages: int) -> tuple:
    """((g^e_r), (L^e_r)) of each stage's expert-data-parallel groups (MoE): read by evaluate() and
    the search's objective alike."""
    return _g_L(cluster, [expert_dp_route(cluster, strategy, stage) for stage in range(stages)])


def expert_dp_ratio(strategy) -> float:
    """e = d / (the expert weights' data-parallel replicas) = ep etp / t (Strategy.expert_mesh)."""
    return strategy.ep * strategy.etp / strategy.tp


def sharded_expert_params(expert_params_dev, ep: int):
    """Expert parameters per device after the ep sharding: E/ep experts each (Megatron-Core), from the
    block quantity expert_params_dev (before the sharding)."""
    return expert_params_dev / ep


@lru_cache(maxsize=4096)
def levels_signature(cluster, strategy) -> tuple:
    """Everything about machine levels a tree bakes in: each stage's group routes for every
    degree its layers use, the point-to-point routes between neighbouring stages (and between the
    first and last stage: a tied embedding's gradient), the cp and ep groups' routes."""
    mesh = strategy.mesh
    degrees = sorted({s.degree for s in strategy.layer_splits} | {strategy.tp})
    tp_levels = tuple(group_route(cluster, mesh, "tp", k, pp=stage) for stage in range(strategy.pp)
                      for k in degrees)
    wraps = strategy.chunks > 1
    pp = strategy.pp
    pairs = {(x, (x + 1) % pp) for x in range(pp)} if wraps else {(x, x + 1) for x in range(pp - 1)}
    if strategy.pp > 1:
        pairs.add((0, pp - 1))          # a tied embedding's gradient all-reduce (tree.tied_copy)
    cp_routes = tuple(cp_group_route(cluster, strategy, stage) for stage in range(pp)) if strategy.cp > 1 else ()
    out = tp_levels, tuple(pair_route(cluster, mesh, "pp", i, j) for i, j in sorted(pairs)), cp_routes
    if strategy.ep > 1:   # the expert layers' all-to-all routes (MoE)
        out += (tuple(ep_group_route(cluster, strategy, stage) for stage in range(strategy.pp)),)
    return out


def structure_key(model, strategy, cluster) -> tuple:
    """What decides the tree's shape; micro-batch, batch, dp, ZeRO and overlap enter as numbers
    (or choose the super-step variant) and leave it alone."""
    shape = tuple(getattr(strategy, name) for name in structure_fields())
    return (model, shape, cluster, levels_signature(cluster, strategy))


def block_values(kinds, nums, cp_algo: str = "ring") -> np.ndarray:
    """kinds x BLOCK_Q x candidates: each block kind's compiled function at its degree and routes."""
    C = np.size(nums.dims[0])
    out = np.empty((len(kinds), len(Q), C))
    for i, kind in enumerate(kinds):
        for j, x in enumerate(kind.fn(*nums.block_args(kind.degree, kind.route, kind.cp_route, cp_algo))):
            out[i, j] = x
    return out


@dataclass(frozen=True, eq=False)
class BoundaryNumbers:
    """What the boundary collectives (between blocks, and the MoE all-to-alls) cost each stage that pays them,
    per micro-batch; arrays are stages x candidates, keyed by category (COMM_CATEGORIES)."""

    fwd_s: dict          # category -> seconds in the forward pass
    bwd_s: dict          # category -> seconds in the backward pass
    bytes: dict          # category -> bytes sent per device, both phases
    by_kind: dict        # (category, collective kind, level index) -> 2 (seconds, bytes) x stages x candidates
    sends_fwd_s: np.ndarray   # the point-to-point sends within pp_comm (S^f_r): seconds, forward
    sends_bwd_s: np.ndarray   # ... backward (S^b_r)
    group_bytes: np.ndarray | None = None   # groups x candidates: bytes per device of each group, all its copies
    phase_sel: np.ndarray | None = None     # (phase, category, stage) rows x groups (the tree's selector)

    @property
    def fwd_bytes(self) -> dict:
        """category -> stages x candidates: bytes sent per device in the forward pass (what the timeline draws)."""
        return self._phase_bytes(0)

    @property
    def bwd_bytes(self) -> dict:
        """category -> stages x candidates: bytes sent per device in the backward pass."""
        return self._phase_bytes(1)

    def _phase_bytes(self, phase: int) -> dict:
        stages, C = self.sends_fwd_s.shape
        if self.phase_sel is None:
            return {c: np.zeros((stages, C)) for c in COMM_CATEGORIES}
        rows = self.phase_sel.reshape(2, -1, self.phase_sel.shape[1])[phase]
        moved = (rows @ self.group_bytes).reshape(len(COMM_CATEGORIES), stages, C)
        return {c: moved[i] for i, c in enumerate(COMM_CATEGORIES)}


def boundary_values(stages: int, arr: dict, size_fn, n_sizes: int, nums, C: int) -> BoundaryNumbers:
    """Per stage: fwd/bwd seconds and bytes by category; time and bytes by (category, kind, level);
    the point-to-point sends' seconds by phase (fwd, bwd: what each stage sends, part of pp_comm).
    One matrix product per quantity: the groups' selectors were built with the tree. A group's
    levels carry their shares at once (explorer.cost.collectives.route_g_L): its seconds per
    byte is the largest share x g; its time is attributed to the levels in proportion to how
    long each is busy. `arr` is None for a tree without boundary collectives."""
    if arr is None:
        zeros = {c: np.zeros((stages, C)) for c in COMM_CATEGORIES}
        return BoundaryNumbers(zeros, dict(zeros), dict(zeros), {}, np.zeros((stages, C)), np.zeros((stages, C)))
    sent = _sent(arr, size_fn, n_sizes, nums, C)                              # groups x C
    busy = arr["shares"] * np.asarray(nums.hw["g"])[None, :]                 # groups x levels
    g_eff = busy.max(axis=1)
    L_eff = np.asarray(arr["latency_shares"]) @ np.asarray(nums.hw["L"])     # route_g_L's mean latency per step
    secs = coll.bsp_seconds(sent, g_eff[:, None], arr["steps"][:, None], L_eff[:, None])
    secs, sent = secs * arr["count"][:, None], sent * arr["count"][:, None]
    timed = (arr["phase_sel"] @ secs).reshape(2, len(COMM_CATEGORIES), stages, C)
    moved = (arr["cat_sel"] @ sent).reshape(len(COMM_CATEGORIES), stages, C)
    named = lambda a: {c: a[i] for i, c in enumerate(COMM_CATEGORIES)}
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
    sends = (_sends_selector(arr, stages) @ secs).reshape(2, stages, C)
    return BoundaryNumbers(named(timed[0]), named(timed[1]), named(moved), by_kind, sends[0], sends[1], sent,
                           arr["phase_sel"])


def _sent(arr: dict, size_fn, n_sizes: int, nums, C: int) -> np.ndarray:
    """groups x candidates: the bytes each device of a boundary group sends, once."""
    sizes = np.empty((n_sizes, C))
    for i, x in enumerate(size_fn(*nums.size_args())[:n_sizes]):
        sizes[i] = x
    return arr["factor"][:, None] * sizes[arr["size"]]


def boundary_levels(stages: int, arr: dict, levels: int) -> np.ndarray:
    """COMM_CATEGORIES x stages x machine levels: True where a boundary group of that category paid by
    that stage carries bytes over that level (explorer.cost.collectives.level_shares)."""
    if arr is None:
        return np.zeros((len(COMM_CATEGORIES), stages, levels), dtype=bool)
    crossing = (arr["cat_sel"] @ (arr["shares"] > 0).astype(float)) > 0
    return crossing.reshape(len(COMM_CATEGORIES), stages, -1)


def _sends_selector(arr: dict, stages: int) -> np.ndarray:
    """(phase, stage) rows x groups: the pp_comm point-to-point groups of each phase and sending stage
    (phase_sel's pp_comm rows, p2p groups only: not the receiver's scatter/gather all-gather), made
    once per tree's arrays."""
    if "sends_sel" not in arr:
        kinds = arr["kinds"]
        p2p = np.array([kinds[k][1] == "p2p" for k in arr["kind_sel"].argmax(axis=0) // stages], dtype=float)
        ncat, c = len(COMM_CATEGORIES), COMM_CATEGORIES.index("pp_comm")
        rows = arr["phase_sel"].reshape(2, ncat, stages, -1)[:, c].reshape(2 * stages, -1)
        arr["sends_sel"] = rows * p2p[None, :]
    return arr["sends_sel"]


def ep_exposed(per_stage, fwd_b: dict, bwd_b: dict, maximum=None, share=0.0) -> tuple:
    """(fwd_b, bwd_b) with the MoE all-to-alls that expert-parallel overlap hides taken out of ep_comm: the
    forward's under the backward's compute, max(sigma E_f, E_f - C_b), the backward's under the forward's,
    max(sigma E_b, E_b - C_f) (explorer/cost/moe_terms.py), sigma = `share`, the SMs the fused dispatcher's
    kernels take from that compute while they run (explorer/cost/fused_dispatch.py; 0: max(0, E - C));
    `maximum`: np.maximum, or QuickMax element by element for sympy; None (no overlap): unchanged."""
    if maximum is None:
        return fwd_b, bwd_b
    q = lambda name: per_stage[:, Q[name]]
    return ({**fwd_b, "ep_comm": exposed_all_to_alls(fwd_b["ep_comm"], q("bwd_compute"), share, maximum)},
            {**bwd_b, "ep_comm": exposed_all_to_alls(bwd_b["ep_comm"], q("fwd_compute"), share, maximum)})


def exposed_all_to_alls(a2a, partner_compute, share, maximum):
    """What expert-parallel overlap leaves exposed of a pass's MoE all-to-alls `a2a` (seconds) under the partner
    pass's compute: max(sigma E, E - C) (explorer/cost/fused_dispatch.py: the dispatch kernels' SM share sigma slows
    the compute beside them; sigma = 0: max(0, E - C)); ep_exposed for a stage, the search's
    explorer.search.tables.ep_overlapped for its stage sums."""
    return maximum(share * a2a, a2a - partner_compute)


def holds_layer_activations(block_kind: str) -> bool:
    """Whether a block of `block_kind` counts towards A^l_r, the one more layer of activations a merged
    forward-backward step of expert-parallel overlap holds (explorer.cost.model_states.activations_in_flight):
    every block but the head, whose logits are made after the partner pass's layers are freed. The one statement of
    that rule: explorer.cost.tree.build checks with it that the head is the last kind (what layer_activations and
    explorer.cost.explain read), explorer.search.tables asks it per block."""
    return block_kind != "head"


def layer_activations(counts: np.ndarray, act: np.ndarray) -> np.ndarray:
    """Per stage (stages x candidates), the activations of the largest block on it but the head (counts: stages x
    kinds; `act`: each kind's activation bytes, kinds x candidates): what a merged forward-backward step of
    expert-parallel overlap holds beyond the micro-batches in flight (explorer.cost.model_states.activations_in_flight).
    The last kind is the one that does not count (holds_layer_activations: the head; explorer.cost.tree.build numbers
    the kinds in chain order and checks it). explorer.cost.explain composes the same maximum."""
    act = np.asarray(act, dtype=float)
    if counts.shape[1] < 2:
        return np.zeros((counts.shape[0],) + act.shape[1:])
    return np.where(counts[:, :-1, None] > 0, act[None, :-1], 0.0).max(axis=1)


def stage_values(per_stage, fwd_b: dict, bwd_b: dict, tied: dict | None = None, sends=None, ep_overlap=None,
                 ep_share=0.0, layer_act=None) -> dict:
    """The one composition of a stage: its blocks' quantities (per_stage: stages x BLOCK_Q x C)
    plus the boundary collectives it pays, by the super-step's per-stage symbol names (arrays,
    or sympy expressions when explain() composes the same sums); `tied` adds a tied embedding's
    copy and gradient all-reduce (tied_values, or explorer.cost.tree.tied_terms symbolically); `sends`
    (fwd, bwd) the point-to-point sends within P_r (boundary_values). `ep_overlap`: a two-argument max
    (np.maximum for numbers, QuickMax for sympy) when the MoE all-to-alls run under the partner pass's compute
    (Strategy.overlap_ep, explorer/cost/moe_terms.py): the forward's exposed max(0, E_f - C_b), the
    backward's max(0, E_b - C_f), or max(sigma E, E - C) with `ep_share` sigma (ep_exposed); None: all exposed.
    `layer_act`: A^l_r, each stage's largest layer's activations (layer_activations), 0 if not given."""
    q = lambda name: per_stage[:, Q[name]]
    a2a = {"E^f_r": fwd_b["ep_comm"], "E^b_r": bwd_b["ep_comm"]}              # before the overlap hides any
    fwd_b, bwd_b = ep_exposed(per_stage, fwd_b, bwd_b, ep_overlap, ep_share)   # the hidden part leaves ep_comm
    both = lambda c: fwd_b[c] + bwd_b[c]
    out = {"F_r": q("F") + sum(fwd_b.values()), "B_r": q("B") + sum(bwd_b.values()), "W_r": q("bwd_weight"),
           "C_r": q("fwd_compute") + q("bwd_compute") + q("host_fwd_exposed") + q("host_bwd_exposed"),
           "R_r": q("recompute"),
           "O_r": q("fwd_comm") + q("bwd_comm") + both("op_comm"), "X_r": both("redistribution"),
           "CP_r": q("cp_fwd") + q("cp_bwd"),
           "P_r": both("pp_comm"), "Psi_r": q("params_dev") - q("expert_params_dev"), "A_r": q("act"),
           "GS_r": q("grad_sync"), "GSB_r": q("grad_sync_bytes"),
           "E_r": both("ep_comm"), "Psi^e_r": q("expert_params_dev"),
           # what expert-parallel overlap reads (ep_exposed; not super-step inputs): each pass's all-to-alls before
           # it hides any, and the compute of each pass that hides the partner's (the search composes its stage
           # sums' overlap from them: explorer.search.tables.ep_overlapped)
           **a2a, "C^f_r": q("fwd_compute"), "C^b_r": q("bwd_compute"),
           "A^l_r": 0 * q("act") if layer_act is None else layer_act}
    if sends is not None:
        out["S^f_r"], out["S^b_r"] = sends
    for name, extra in (tied or {}).items():
        out[name] = out[name] + extra
    return out


def tied_values(tied, tp: int, stages: int, nums) -> dict:
    """A tied embedding's per-stage additions in numbers (stages x candidates), by name: the copy's
    V h / t parameters on the last stage (explorer.cost.tree.TiedCopy.params, the same product), and
    the all-reduce of its gradient over the (stage 0, last stage) pair on both, priced by the one
    collective rule (Numbers.collective_seconds). `tied`: (last stage, route) or None."""
    if tied is None:
        return {}
    last, route = tied
    C = np.size(nums.dims[0])
    V, h = nums.dims[6], nums.dims[2]
    params = np.broadcast_to(np.asarray(V * h / tp, dtype=float), (C,))
    sent = coll.bytes_per_device("all_reduce", nums.hw["beta"] * params, 2)
    seconds = nums.collective_seconds(sent, float(coll.latency_steps("all_reduce", 2)), "all_reduce", route)
    out = {name: np.zeros((stages, C)) for name in ("Psi_r", "GS_r", "GSB_r")}
    out["Psi_r"][last] = params
    for stage in (0, last):
        out["GS_r"][stage], out["GSB_r"][stage] = seconds, sent
    return out
