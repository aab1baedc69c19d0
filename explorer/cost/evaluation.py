"""The one numeric evaluation of candidates sharing a cost tree: every number, by name.

`build_evaluation(model, strategies, cluster)` is the one function that turns a tree's compiled
functions into numbers (axis -1 = candidates): the block quantities (explorer.cost.tree.block_function,
BLOCK_Q), summed into stages (NumericTree.stage_quantities), the boundary collectives each stage pays
(explorer.cost.numeric.boundary_values), the stage's super-step inputs composed by
explorer.cost.numeric.stage_values, and the super-step variant's compiled terms (explorer.cost.superstep).
evaluate(), evaluate_batch() (explorer.cost.evaluate), the timeline (explorer.timeline.layout) and the
lessons read its fields by name; nothing outside explorer/cost/ decodes BLOCK_Q positions
(tests/test_evaluation.py). `evaluation(model, strategy, cluster)` is the checked single-strategy form.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from explorer.cost.cold import NumericTree, numeric_tree, superstep_function
from explorer.cost.numbers import Numbers
from explorer.cost.numeric import (MEMORY_PARTS, OUTPUTS, SCALAR_INPUT_NAMES, STAGE_INPUT_NAMES, BoundaryNumbers,
                                   block_quantity, ep_exposed, expert_dp_ratio, grad_norm_seconds, layer_activations,
                                   optimizer_state_bytes, optimizer_update_bytes, sharded_expert_params,
                                   stage_dp_g_L, stage_expert_dp_g_L, stage_values, tied_values)
from explorer.cost.placement import ep_overlaps, ep_sm_share
from explorer.errors import ExplorerError
from explorer.hardware.cluster import Cluster
from explorer.limits import check_work
from explorer.model.spec import ModelSpec
from explorer.strategy import rules
from explorer.strategy.strategy import Strategy, options_of

PER_STAGE_OUTPUTS = ("stage_end", "dp_sync", "dp_exposed", "zero_gather", "optimizer_step", "after", "dp_bytes",
                     "dp_sync_experts", "dp_bytes_experts", "zero_gather_experts", "zero_bytes_experts",
                     "zero_bytes", "zero_gather_pass", "zero_bytes_pass", "zero_exposed", "zero_pass_fwd_exposed",
                     "zero_pass_bwd_exposed") + tuple(f"memory_{part}" for part in MEMORY_PARTS)
"""The super-step outputs (OUTPUTS) that are per stage (stages x candidates); the others are per candidate."""


@dataclass(frozen=True, eq=False)
class Evaluation:
    """Every number of candidates sharing a cost tree and a super-step variant; arrays end with the candidates'
    axis. Read by name: block_q / stage_q (BLOCK_Q), boundary (by phase and category, by (category, kind,
    level), the point-to-point sends), stage_input (the super-step's per-stage inputs), output (its terms)."""

    strategies: tuple
    tree: NumericTree            # the compiled tree they share (its block kinds, counts per stage, boundary groups)
    nums: Numbers                # the numeric context (dimensions, hardware) of the candidates' micro-batches
    micro_batches: np.ndarray    # C: m, micro-batches per replica
    block_values: np.ndarray     # kinds x BLOCK_Q x C: one micro-batch of each block kind (read with block_q)
    stage_values: np.ndarray     # stages x BLOCK_Q x C: each stage's blocks summed (read with stage_q)
    boundary: BoundaryNumbers    # the boundary collectives each stage pays, by phase and category
    stage_inputs: dict           # STAGE_INPUT_NAMES -> stages x C: the super-step's per-stage inputs
    scalar_inputs: dict          # SCALAR_INPUT_NAMES -> C or a number
    outputs: dict                # OUTPUTS -> C, or stages x C for PER_STAGE_OUTPUTS
    memory_total: np.ndarray     # stages x C: bytes per device, all MEMORY_PARTS
    peak_stage: np.ndarray       # C: the most loaded stage
    model_flops: np.ndarray      # C: per iteration, all replicas (Narayanan et al. 2021 Eq. 3 via the blocks)
    hardware_flops: np.ndarray   # C: model_flops plus recomputation
    ep_overlap: bool             # the MoE all-to-alls run under the partner pass (Strategy.overlap_ep)
    ep_share: float = 0.0        # under that overlap, the SMs the fused dispatcher's kernels hold (placement.ep_sm_share)

    def __post_init__(self):
        C = len(self.strategies)
        if self.stage_values.shape[1:] != self.block_values.shape[1:] or self.stage_values.shape[-1] != C or \
                self.stage_values.shape[0] != self.tree.stages:
            raise ExplorerError(f"an evaluation of {C} candidates on {self.tree.stages} stages got block quantities "
                                f"shaped {self.block_values.shape} and stage quantities {self.stage_values.shape}")

    @property
    def stages(self) -> int:
        return self.stage_values.shape[0]

    @property
    def candidates(self) -> int:
        return len(self.strategies)

    def block_q(self, name: str) -> np.ndarray:
        """kinds x C: block quantity `name` (BLOCK_Q) of one micro-batch of each block kind."""
        return block_quantity(self.block_values, name)

    def stage_q(self, name: str) -> np.ndarray:
        """stages x C: block quantity `name` (BLOCK_Q) summed over each stage's blocks, one micro-batch."""
        return block_quantity(self.stage_values, name)

    def stage_input(self, name: str) -> np.ndarray:
        """stages x C: the super-step's per-stage input `name` (F_r, B_r, Psi_r, ...; STAGE_INPUT_NAMES)."""
        return self.stage_inputs[name]

    def output(self, name: str) -> np.ndarray:
        """The super-step term `name` (OUTPUTS): C, or stages x C for PER_STAGE_OUTPUTS."""
        return self.outputs[name]

    def memory(self, part: str) -> np.ndarray:
        """stages x C: bytes per device of one of MEMORY_PARTS."""
        return self.outputs[f"memory_{part}"]

    def exposed_boundary(self) -> tuple:
        """(fwd, bwd) seconds by category with what expert-parallel overlap hides taken out of ep_comm
        (explorer.cost.numeric.ep_exposed, as stage_values composes F_r and B_r)."""
        return ep_exposed(self.stage_values, self.boundary.fwd_s, self.boundary.bwd_s,
                          np.maximum if self.ep_overlap else None, self.ep_share)


def evaluation(model: ModelSpec, strategy: Strategy, cluster: Cluster, gpus: int | None = None) -> Evaluation:
    """The Evaluation of one strategy (candidate axis of length 1), after the same checks as evaluate()."""
    check_work(model, strategy, cluster)     # sizes and magnitudes within explorer/limits.py
    rules.check(model, strategy, gpus, cluster)
    return build_evaluation(model, [strategy], cluster)


def _dp_g_L(cluster, strategies, stages: int) -> tuple:
    """stages x candidates: the seconds per byte and latency of each stage's data-parallel groups
    (explorer.cost.numeric.stage_dp_g_L)."""
    pairs = [stage_dp_g_L(cluster, s.mesh, stages) for s in strategies]
    return np.array([gs for gs, _ in pairs]).T, np.array([ls for _, ls in pairs]).T


def _expert_dp_g_L(cluster, strategies, stages: int) -> tuple:
    """stages x candidates: seconds per byte and latency of each stage's expert-data-parallel groups
    (MoE; explorer.cost.numeric.stage_expert_dp_g_L)."""
    pairs = [stage_expert_dp_g_L(cluster, s, stages) for s in strategies]
    return np.array([gs for gs, _ in pairs]).T, np.array([ls for _, ls in pairs]).T


def build_evaluation(model: ModelSpec, strategies: list, cluster: Cluster,
                     tree: NumericTree | None = None) -> Evaluation:
    """All numbers for candidates sharing a tree and a super-step variant (the caller groups them:
    evaluate_batch); axis -1 = candidates. `tree`: the first strategy's numeric tree, if already at hand."""
    first = strategies[0]
    tree = tree or numeric_tree(model, first, cluster)
    C = len(strategies)
    micro = np.array([s.micro_batch for s in strategies], dtype=float)
    M = np.array([s.micro_batches for s in strategies], dtype=float)
    nums = Numbers.of(model, micro, cluster, first.dtype)
    hw = nums.hw
    values = tree.block_values(nums)                                      # kinds x BLOCK_Q x C
    per_stage = tree.stage_quantities(values)                              # stages x BLOCK_Q x C
    bound = tree.boundary_values(nums, C)
    ep_overlap = ep_overlaps(model, first)                                 # expert-parallel overlap (moe_terms.py)
    ep_share = ep_sm_share(model, first, cluster)                  # its dispatch kernels' SMs (fused_dispatch.py)
    stage = stage_values(per_stage, bound.fwd_s, bound.bwd_s, tied_values(tree.tied, first.tp, tree.stages, nums),
                         (bound.sends_fwd_s, bound.sends_bwd_s), np.maximum if ep_overlap else None, ep_share,
                         layer_activations(tree.counts, block_quantity(values, "act")))
    stage["g_r"], stage["L_r"] = _dp_g_L(cluster, strategies, tree.stages)
    stage["r"] = np.arange(tree.stages, dtype=float)[:, None]
    # the gradients are reduced (and ZeRO shards them) over dp x cp (Megatron-LM's data-parallel group
    # "with context parallel"); m = B / (b dp) micro-batches stays that of the dp replicas
    scalars = {"m": M, "v": first.chunks, "p": first.pp, "d": np.array([s.dp * s.cp for s in strategies], dtype=float),
               "beta": hw["beta"], "W_{hbm}": hw["W"], "K_{opt}": optimizer_update_bytes(hw["beta"]),
               "T_{norm}": np.array([grad_norm_seconds(cluster, s.mesh, s.zero, s.dtype) for s in strategies])}
    if model.is_moe:     # the expert weights' own data-parallel group: d / e replicas
        stage["g^e_r"], stage["L^e_r"] = _expert_dp_g_L(cluster, strategies, tree.stages)
        scalars["e"] = np.array([expert_dp_ratio(s) for s in strategies], dtype=float)   # d / e: expert-DP size
        stage["Psi^e_r"] = sharded_expert_params(stage["Psi^e_r"], np.array([s.ep for s in strategies], dtype=float))
    fn = superstep_function(first.schedule, first.zero, first.overlap_dp, optimizer_state_bytes(hw["beta"]),
                            model.is_moe, **options_of(first))
    raw = zip(OUTPUTS, fn(*[stage.get(name, 0.0) for name in STAGE_INPUT_NAMES],
                          *[scalars.get(name, 1.0) for name in SCALAR_INPUT_NAMES]))
    shape = per_stage[:, 0].shape
    outputs = {k: (x if np.shape(x) == (shape if k in PER_STAGE_OUTPUTS else (C,)) else
                   np.broadcast_to(x, shape if k in PER_STAGE_OUTPUTS else (C,))) for k, x in raw}
    memory_total = sum(outputs[f"memory_{part}"] for part in MEMORY_PARTS)
    over_b = np.array([s.global_batch for s in strategies], dtype=float) / micro   # micro-batches, all replicas
    col = lambda name: block_quantity(per_stage, name)
    model_flops = over_b * (col("flops_fwd") + col("flops_bwd")).sum(axis=0)
    hardware_flops = model_flops + over_b * col("recompute_flops").sum(axis=0)
    return Evaluation(tuple(strategies), tree, nums, M, values, per_stage, bound, stage, scalars, outputs, memory_total,
                      np.argmax(memory_total, axis=0), model_flops, hardware_flops, ep_overlap, ep_share)
