"""The MoE layer's own device-side terms (issue 27 item 2), each a named sympy expression of the layer's
micro-step, added to its operators by explorer/cost/block.py; the host side (launches, synchronisations) is
explorer/model/kernels.py. What is already elsewhere: the permute/unpermute traffic of both sorts (the token
order of the experts, then the received chunks sorted by local expert) is the dispatch and combine operators'
memory traffic (explorer/model/graph/moe.py); token-drop with a capacity factor (drop-and-pad: static shapes,
no host synchronisation) is the busiest expert's load c (explorer/cost/experts.py expert_load) and the recipe's
`dropless` (kernels.syncs); the router's ~28 routing kernels (softmax, top-k, the aux loss over b s E values) are
its launches (kernels.ROUTER_KERNELS), each a GPU-side tau_k in explorer/cost/block.py: 28 x 3 us = 0.08 ms per layer
and micro-batch, issue 27's "~0.1 ms"; their bytes (b s E fp32) are below a microsecond of HBM.

* quantise_time -- FP8 quantisation of the grouped GEMMs' operands. Transformer Engine's GroupedLinear
  quantises the expert GEMMs' inputs in its forward and their output gradients in its backward with a kernel
  of its own (transformer_engine/pytorch/module/grouped_linear.py at d0067d0d, _GroupedLinear.forward and
  .backward: _split_quantize of the inputs and of grad_output), each for both GEMM orientations (row-wise
  for the forward/dgrad GEMM, column-wise for the wgrad GEMM, MXFP8's 1x32 blocks in each direction): it
  reads the BF16 operand (2 B per element) and writes two FP8 copies (1 B each; the E8M0 scales, 1 B per 32
  elements, are neglected): QUANTISE_BYTES = 4 B per element, at the achieved HBM bandwidth. A dense
  layer's casts are fused into its norm and activation kernels (TE LayerNormLinear/LayerNormMLP quantise
  their outputs) and sit inside the fitted FP8 GEMM efficiency (efficiency.gemm_max_fp8); the experts'
  permuted tokens come from the dispatcher in BF16, so theirs are separate. Issue 27's estimate for
  Qwen3-30B-A3B on B200 at b=1: 0.12 ms per layer and micro-batch (this term: 0.124 ms).
* grouped_gemm_time -- a grouped GEMM is one GEMM per local expert (TE GroupedLinear; kernels.py counts
  them), each on its own tokens: every one pays the GEMM size curve's phi (the FLOPs at which a GEMM reaches
  half its efficiency: efficiency.gemm_half_flops, explorer/cost/block.py compute_time), so n local experts
  on a device cost (x + n phi)/(F eta) instead of (x + phi)/(F eta): small tokens per expert run at the
  small-GEMM efficiency (the partial last wave over the SMs, Calculon's size-stepped GEMM efficiency).
* gather_collectives -- the all-gather dispatcher (Megatron-Core MoEAllGatherTokenDispatcher, at
  NVIDIA/Megatron-LM d98e8a64 megatron/core/transformer/moe/token_dispatcher.py): dispatch all-gathers every
  token of the ep group (gather_from_sequence_parallel_region over the tp x ep group), each device keeps the
  copies routed to its experts; combine reduce-scatters the outputs (reduce_scatter_to_sequence_parallel_
  region); the backward the reverse. Whole array: ep x the device's b s h elements, whatever the balance
  (sized by explorer.cost.experts.ep_sized). Its host synchronisation: kernels.syncs.
* fp32_bias_time -- the experts' second bias (gpt-oss; explorer/model/graph/moe.py expert_bias, t + b p per local
  expert) in fp32 behind a fused dispatcher: DeepEP and HybridEP hand the experts fp32 routing weights (Megatron-Core
  token_dispatcher.py _HybridEPManager / _DeepepManager: "HybridEP only supports float32 probs", the probabilities
  cast with .float(); at d7288711 and d98e8a64), so b p and t + b p are fp32 and torch.cat copies fp32 before the
  cast back: per element b p written (4), t and b p read and the sum written (beta + 4 + 4), cat read and written
  (4 + 4), the cast read and written (4 + beta) = 24 + 2 beta bytes forward (28 at beta = 2, as torch's dispatcher
  counts it on CPU) against expert_bias's 6 beta in 16 bits (the all-to-all dispatcher's probabilities keep the
  router's dtype: moe_utils.py topk_softmax_with_capacity .type_as(logits)); backward the memory-bound rule (3/2).
* fused_rdma_factor -- the fused dispatchers' bytes between NVLink domains: explorer/cost/fused_dispatch.py.
* expert-parallel overlap (Strategy.overlap_ep; Megatron-LM --overlap-moe-expert-parallel-comm
  with --delay-wgrad-compute, as Megatron-Bridge's moe_a2a_overlap sets them: scripts/performance/utils/
  overrides.py _set_moe_a2a_overlap_overrides at v0.5.0): the 1F1B steady state runs the forward of one
  micro-batch and the backward of another as one merged pass, layer by layer, each one's dispatch and combine
  on a communication stream under the other's computation (NVIDIA/Megatron-LM d98e8a64 megatron/core/
  pipeline_parallel/combined_1f1b.py: combined_1f1b_schedule_for_no_pipelining, _for_interleaved_pipelining;
  DeepSeek-V3's DualPipe,
  arXiv:2412.19437 Sec 3.2.1, overlaps the same pairs). Per micro-batch on a stage: the forward's all-to-alls
  hide under the backward's compute and the backward's under the forward's, exposed max(0, E_f - C_b) and
  max(0, E_b - C_f) (explorer/cost/numeric.py stage_values). The warm-up forwards and cool-down backwards that
  have no partner are priced as overlapped too (an O(p/m) optimism).
"""
from __future__ import annotations

import sympy as sp

from explorer.cost import collectives as coll
from explorer.cost import layouts as lay
from explorer.model.ops import Operator
from explorer.symbols import F, W_hbm, beta, eta, phi, t

QUANTISE_BYTES = 4        # B per element: read BF16 (2), write the row-wise and the column-wise FP8 copies (1 + 1)
AMAX_BYTES = {"tensorwise": 2}
"""B per element a recipe reads before it casts: per-tensor current scaling takes each split's amax in a kernel of its
own, one more read of the BF16 operand (Transformer Engine v2.13 quantizer.cpp Float8CurrentScalingQuantizer,
common/recipe/current_scaling.cu amax_kernel); delayed scaling uses the last step's amax, MXFP8 and blockwise take
their block scales inside the cast (explorer/model/kernels.py QUANTISE_PER_SPLIT)."""


def quantise_time(op: Operator, divisor, recipe: str = "delayed") -> tuple:
    """(forward, backward) seconds of the FP8 quantisation of expert GEMM `op`'s operands on one device under FP8
    recipe `recipe`: its input forward, its output gradient backward (module docstring; AMAX_BYTES)."""
    if not (op.expert and op.kind == "matmul"):
        return sp.Integer(0), sp.Integer(0)
    per_element = QUANTISE_BYTES + AMAX_BYTES.get(recipe, 0)
    fwd = per_element * sp.Mul(*op.in_shape) / divisor / W_hbm
    bwd = per_element * op.out_elements / divisor / W_hbm
    return fwd, bwd




def fp32_bias_time(op: Operator, divisor) -> tuple:
    """(forward, backward) seconds the experts' second bias adds on one device when the routing weights are fp32
    (a fused dispatcher): (24 + 2 beta) - 6 beta bytes per element over expert_bias's own at beta 2, nothing in fp32
    training (module docstring)."""
    if not (op.expert and op.name == "expert_bias"):
        return sp.Integer(0), sp.Integer(0)
    # (24 + 2 beta) - 6 beta = 16 B more per element at beta 2; none at beta 4 (fp32 training keeps no cast back:
    # 24 = 6 beta): 32 - 8 beta, exact at both
    extra_per_element = sp.Max(0, 32 - 8 * beta)
    extra = op.mem_bytes_fwd * extra_per_element / (6 * beta) / divisor / W_hbm
    return extra, sp.Rational(3, 2) * extra


def grouped_gemm_time(op: Operator, local_experts: int) -> tuple:
    """(forward, backward) seconds the n = `local_experts` GEMMs of a grouped GEMM add over one GEMM of their
    total size: (n - 1) phi / (F eta) per GEMM, one forward, two backward (module docstring)."""
    if not (op.expert and op.kind == "matmul") or local_experts <= 1:
        return sp.Integer(0), sp.Integer(0)
    one = (local_experts - 1) * phi / (F * eta)
    return one, 2 * one


def gather_collectives(op: Operator, needed: str, cps=1) -> tuple:
    """The all-gather dispatcher's collectives of `op` (dispatch: all-gather forward, reduce-scatter backward;
    combine: the reverse), sized here at one device's b s h tokens (/ t when sequence-parallel, / cp):
    explorer.cost.experts.ep_sized multiplies by ep, the group the plan sets (module docstring)."""
    tokens = sp.Mul(*(op.in_shape if op.name == "dispatch" else op.out_shape))
    size = beta * tokens / (t if lay.is_sharded(needed) else 1) / cps
    kinds = ("all_gather", "reduce_scatter") if op.name == "dispatch" else ("reduce_scatter", "all_gather")
    return tuple(coll.Collective(kind, phase, op.name, "ep_comm", "ep", size, sp.Integer(1))
                 for kind, phase in zip(kinds, ("fwd", "bwd")))

