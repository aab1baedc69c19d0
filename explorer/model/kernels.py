"""The kernels each operator launches, and which of them a CUDA graph captures: the host side of a pass.

A training step is issued by the host CPU kernel by kernel: Python and PyTorch dispatch, the library
(cuBLAS, cuDNN, Transformer Engine), then the launch path (TaxBreak, Vellaisamy et al., arXiv:2603.12465,
decomposes this host time per kernel into framework, library and launch-path parts, measured on H100 and
H200). The GPU cannot start a kernel before the host has issued it, so a pass takes at least the host's
issue time: explorer/cost/block.py prices a block's pass as max(GPU time, tau_h x launches + min(tau_k, tau_h) x
the kernels a library launches inside one call) plus tau_s per device-to-host synchronisation (symbols tau_h, tau_s;
cluster fields efficiency.host_launch_s, host_sync_s). The GPU-side cost of a launch, tau_k
(efficiency.kernel_launch_s), is charged on the GPU as well.

Counts per operator of the graph (explorer/model/graph/*.py), for an eager Megatron-Core + Transformer
Engine step -- the framework recipe of every published run we validate on (Megatron-Bridge) -- read off
the modules that implement each operator (one count per CUDA kernel or NCCL call they issue):
* a linear layer (TE Linear/LayerNormLinear, cuBLASLt): 1 GEMM forward; dgrad and wgrad GEMMs backward
  (the wgrad accumulates into main_grad in its epilogue, gradient_accumulation_fusion). FP8 adds the
  quantisation of its input forward and of the output gradient and the saved input's transpose backward
  (TE cast/cast-transpose kernels; the weight's cast is cached across a step's micro-batches) -- not for
  the output layer and the router, which Megatron runs outside TE in BF16 (explorer/hardware/precision.py
  BF16_GEMMS).
* RMSNorm/LayerNorm (TE fused): 1 forward; the input gradient and the gamma-gradient reduction backward. Qwen3's
  query and key norms (qk_norm): QK_NORM_KERNELS.
* FlashAttention (TE fused attention) with rotary embeddings: the fused RoPE kernel on Q and on K and the
  attention kernel, each forward and backward. The unfused core: one kernel per GEMM forward, two backward.
  YaRN's rotary embedding runs unfused instead (gpt-oss): YARN_ROPE_KERNELS.
* element-wise (residual add, SwiGLU/GeLU, dropout), softmax: 1 forward, 1 backward.
* embedding: the gather forward; zero-fill, index-add and its sort backward (3). Cross-entropy over a
  vocabulary split (Megatron vocab_parallel_cross_entropy): max, subtract, exp, sum, log, target gather,
  masks (8) forward, 4 backward.
* MoE (Megatron-Core MoELayer, TopKRouter, MoEAlltoAllTokenDispatcher, TEGroupedMLP):
  - router: the gating GEMM and about 28 routing kernels (fp32 cast, softmax, top-k, the probability
    gather and normalisation, the routing map's scatter, the load-balancing loss' sums and scaling, and
    their backward): 15 forward, 15 backward (issue 27: "about 30 router kernels").
  - dispatch: the preprocess (tokens per expert, their exchange, the copy to the host: 6 kernels, which
    the moe_preprocess graph scope captures), the permute (5), the all-to-all (1) and the second permute
    that sorts the received tokens by local expert (sort_chunks_by_idxs, 3): 15 forward; 7 backward.
  - the experts' grouped GEMMs (TE GroupedLinear): one GEMM per local expert (E/ep of them) and the split
    forward, two GEMMs per expert backward; FP8 quantises each grouped operand in one call, which launches
    QUANTISE_PER_SPLIT kernels per local expert from C++ (internal(): tau_k each on the host).
  - the experts' second bias (gpt-oss, ModelSpec.linear_bias; TEGroupedMLP._apply_bias): per local expert
    the product b * p and the add forward, and torch.cat (2n + 1); backward per expert the two products and
    their two sums and the bias gradient's accumulation, and the two gradients' concatenations (5n + 2).
  - gpt-oss' clamp of the GLU halves (ModelSpec.glu_clamp; Megatron-Core fused_bias_geglu.py
    weighted_bias_quick_geglu_impl, eager around the compiled activation): 3 forward, 9 backward (CLAMP_KERNELS).
  - combine: the inverse sort (3), the all-to-all (1), the unpermute with the routing weights (4): 8
    forward; 10 backward (the weights' gradient too).
  - the fused dispatchers (Megatron-Core MoEFlexTokenDispatcher with DeepEP or HybridEP: fused_dispatch /
    fused_combine permute inside their communication kernels): dispatch 6 forward (the routing map's
    conversion 4, the dispatch kernel, its completion event), 3 backward; combine 3 forward, 4 backward.
  - the all-gather dispatcher (Megatron-Core MoEAllGatherTokenDispatcher): dispatch gathers the routing map,
    the probabilities and the tokens over the ep group (3), selects the local experts' columns and their
    probabilities (2), counts the tokens per expert and copies them to the host (3), the fused permute (3) and the
    local probabilities' transpose and masked select (4): 15 forward; the reduce-scatter of the gradient, the
    permute's and the probabilities' backward: 5. Combine: the unpermute (2), the casts around the reduce-scatter
    (2) and the reduce-scatter (1): 5 forward, 5 backward.
  A Qwen3-30B-A3B layer with 16 local experts: 86 kernels forward, 116 backward (202, bf16, its query and key
  norms included; 214 under FP8 with delayed scaling, and 128 more launched inside TE's quantisation calls under
  current scaling: internal()), against 30 for a dense Llama layer: the ~200-300 of an eager Megatron-Core MoE layer.

CUDA graphs (Strategy.cuda_graphs): "none" (eager); "layer": each transformer layer's static-shape parts
captured and replayed as one graph launch (Megatron-LM --cuda-graph-impl transformer_engine|local with
--cuda-graph-scope attn mlp moe_router moe_preprocess; Megatron-Bridge's cuda_graph_scope): everything
of a layer but, in a dropless MoE layer, what follows the dispatcher's synchronisation (the permutes,
the all-to-alls and the experts, whose shapes change every step) -- under token-drop with padding
(a capacity factor) the whole layer (scope "moe"); the embedding and the output layer stay eager.
"full": the whole iteration (--cuda-graph-scope full_iteration with --cuda-graph-impl local; the older
--enable-cuda-graph / --external-cuda-graph): no kernel is issued one by one; refused with a dropless
MoE dispatcher, whose device-to-host synchronisation a graph cannot hold (explorer.strategy.rules).
"""
from __future__ import annotations

from typing import NamedTuple

from explorer.hardware.precision import BF16_GEMMS
from explorer.strategy.strategy import CUDA_GRAPHS as GRAPHS  # noqa: F401 (eager, per layer, full iteration)

ROUTER_KERNELS = (14, 13)     # routing kernels around the gating GEMM, forward and backward
DISPATCH_KERNELS = (15, 7)    # preprocess 6 + permute 5 + all-to-all 1 + chunk sort 3; backward
DISPATCH_PREPROCESS = 6       # of the forward's: the part the moe_preprocess graph scope captures
COMBINE_KERNELS = (8, 10)
FLEX_DISPATCH_KERNELS = (6, 3)   # DeepEP/HybridEP: preprocess 4, the fused dispatch-and-permute kernel, its event
FLEX_COMBINE_KERNELS = (3, 4)    # the fused unpermute-and-combine kernel and the weights; backward a dispatch
GATHER_DISPATCH_KERNELS = (15, 5)   # the all-gather dispatcher (module docstring)
GATHER_COMBINE_KERNELS = (5, 5)
CLAMP_KERNELS = (3, 9)        # gpt-oss' clamp: two clamps and torch.cat; backward the masks (ge, le, le, and, two
#                               scalar tensors), two wheres and the gradients' cat (explorer/model/graph/moe.py)
QUANTISE_PER_SPLIT = {"delayed": 0, "tensorwise": 4, "blockwise": 1, "mxfp8": 1}
"""Kernels Transformer Engine launches per local expert inside one split_quantize call of a grouped GEMM's operand
(transformer_engine/pytorch/module/grouped_linear.py: tex.split_quantize of the inputs forward and of grad_output
backward; TE v2.13 at 287770466f, the TE of NeMo 26.04): delayed scaling takes the fused multi-tensor cast, one
kernel for all splits (csrc/extensions/cast.cpp multi-tensor path, pybind.h: only Float8Quantizer), the one call
counted by launches(); per-tensor current scaling ('tensorwise', Float8CurrentScalingQuantizer) quantises each
split alone -- zero the amax, the amax kernel, the scale from it, the cast-transpose (quantizer.cpp,
common/recipe/current_scaling.cu): 4; blockwise and MXFP8 one bulk-allocated kernel per split (cast.cpp). A fused
current-scaling group quantise first came with TE v2.18 (PR 3114)."""
QK_NORM_KERNELS = (4, 6)      # Qwen3's query and key norms: per tensor the contiguous copy TE's RMSNorm makes of a
#                               strided view and the norm forward; the norm's input gradient and gamma-gradient
#                               reduction (as any norm's) and the gradient's copy into the QKV gradient backward
#                               (explorer/model/graph/moe.py qk_norm)
YARN_ROPE_KERNELS = (24, 14)  # YaRN's unfused rotary embedding of Q and K: 12 kernels per tensor forward, 7 backward
#                               (explorer/model/graph/moe.py yarn_rope), in place of the fused RoPE pair counted
#                               in flash_attn's launches (FUSED_ROPE_KERNELS), which then does not run; the unfused
#                               core's score and context counts hold no RoPE kernel, plain or YaRN (both 2 short)
FUSED_ROPE_KERNELS = (2, 2)   # Transformer Engine's fused RoPE on Q and on K, forward and backward
MANY_KERNELS = ("router", "yarn_rope")
"""Operators outside the MoE dispatch and experts whose kernels each pay the GPU-side launch tau_k
(explorer/cost/block.py): the router's routing kernels and YaRN's unfused rotary embedding."""
CLAMP_SYNCS = 1               # gpt-oss' activation makes its GLU offset a device tensor each call (syncs() docstring)
SYNCS_DROPLESS = 1            # device-to-host synchronisations per dropless MoE layer forward


class Recipe(NamedTuple):
    """What decides a block's launches: the CUDA graph scope, FP8, the local experts per device
    (E / ep), whether its MoE routing is dropless (dynamic shapes) and whether its dispatcher
    synchronises with the host (explorer.cost.placement.host_options); and what else of the framework's recipe
    changes a block's terms (selective recomputation's modules, the asynchronous input-gradient collective)."""

    graphs: str = "none"
    fp8: str | bool = False  # the FP8 recipe's name (explorer/hardware/precision.py), False without FP8
    local_experts: int = 1
    dropless: bool = True
    syncs: bool = True
    flex: bool = False      # a fused dispatcher (DeepEP, HybridEP): permutes inside its communication kernels
    gather: bool = False    # the all-gather dispatcher (all-gather in, reduce-scatter out)
    recompute_modules: tuple = ()   # selective recomputation's modules when not core_attn (explorer/model/recompute.py)
    async_dgrad: bool = False       # a column-parallel linear's input-gradient collective under its weight-gradient
    #                                 GEMM (explorer/strategy/frameworks.py ASYNC_DGRAD; explorer/cost/block.py)

    @classmethod
    def of(cls, key: tuple) -> "Recipe":
        return cls(*key)


def launches(op, recipe: Recipe = Recipe()) -> tuple:
    """(forward, backward) kernels operator `op` launches per micro-batch (module docstring)."""
    fp8 = bool(recipe.fp8) and op.kind in ("matmul", "conv") and op.name not in BF16_GEMMS
    if op.routes and recipe.flex:
        return FLEX_DISPATCH_KERNELS if op.name == "dispatch" else FLEX_COMBINE_KERNELS
    if op.routes and recipe.gather:
        return GATHER_DISPATCH_KERNELS if op.name == "dispatch" else GATHER_COMBINE_KERNELS
    if op.routes:
        return DISPATCH_KERNELS if op.name == "dispatch" else COMBINE_KERNELS
    if op.name == "router":
        return 1 + ROUTER_KERNELS[0], 2 + ROUTER_KERNELS[1]
    if op.expert and op.name == "expert_clamp":
        return CLAMP_KERNELS
    if op.expert and op.name == "expert_bias":
        n = recipe.local_experts
        return 2 * n + 1, 5 * n + 2
    if op.expert and op.kind == "matmul":
        n = recipe.local_experts
        return n + 1 + int(fp8), 2 * n + 2 * int(fp8)
    if op.kind in ("matmul", "conv"):
        return 1 + int(fp8), 2 + 2 * int(fp8)
    if op.kind == "attention":
        return (3, 3) if op.name == "flash_attn" else (1, 2)
    if op.name == "qk_norm":
        return QK_NORM_KERNELS
    if op.name == "yarn_rope":
        return tuple(n - fused for n, fused in zip(YARN_ROPE_KERNELS, FUSED_ROPE_KERNELS))
    if op.kind == "norm":
        return 1, 2
    if op.kind == "embedding":
        return 1, 3
    if op.kind == "loss":
        return 8, 4
    return 1, 1


def internal(op, recipe: Recipe = Recipe()) -> tuple:
    """(forward, backward) kernels `op` launches inside one library call, from C++ (no Python per launch): the
    per-split quantisation of an FP8 grouped GEMM's operands (QUANTISE_PER_SPLIT x local experts, once forward for
    the input and once backward for the output gradient). The host pays the driver's launch for each, tau_k
    (explorer/cost/block.py host_terms), not the framework's tau_h."""
    if not (recipe.fp8 and op.expert and op.kind == "matmul"):
        return 0, 0
    n = QUANTISE_PER_SPLIT.get(recipe.fp8, 0) * recipe.local_experts
    return n, n


def eager_internal(op, block_kind: str, recipe: Recipe = Recipe()) -> tuple:
    """internal() where the host issues `op` one by one (eager()), else none: a CUDA graph captures them too."""
    return internal(op, recipe) if any(eager(op, block_kind, recipe)) else (0, 0)


def eager(op, block_kind: str, recipe: Recipe = Recipe()) -> tuple:
    """(forward, backward) kernels of `op` the host still issues one by one under the recipe's CUDA
    graphs (module docstring): all of them eagerly, none under full-iteration graphs; per-layer graphs
    leave the embedding and output layer, and a dropless MoE layer's part after the dispatcher's
    preprocess; the router scope (moe_router + moe_preprocess) captures only the router and that preprocess."""
    fwd, bwd = launches(op, recipe)
    if recipe.graphs == "full":
        return 0, 0
    if recipe.graphs == "none" or block_kind != "layer":
        return fwd, bwd
    preprocess = (fwd - DISPATCH_PREPROCESS, bwd) if op.name == "dispatch" else None
    if recipe.graphs == "router":
        return (0, 0) if op.name == "router" else preprocess or (fwd, bwd)
    if recipe.dropless and (op.routes or op.expert):
        return preprocess or (fwd, bwd)
    return 0, 0


def syncs(op, recipe: Recipe = Recipe(), block_kind: str = "layer") -> int:
    """Device-to-host synchronisations of `op` per forward: the dropless all-to-all dispatcher copies
    the tokens per expert to the host to size its all-to-all and grouped GEMMs (Megatron-Core
    MoEAlltoAllTokenDispatcher preprocess; NVIDIA/Megatron-LM PR 3496: the AlltoAll dispatcher and
    GroupedGEMM 'rely on CPU-resident tensors for token-expert assignments, which breaks CUDA graph capture
    due to host synchronizations'), as DeepEP's normal kernels do (the host waits for the received counts) and
    the all-gather dispatcher (MoEAllGatherTokenDispatcher.dispatch_postprocess: tokens_per_expert ... .cpu()), and
    dropless HybridEP too unless it is given a static receive budget: Megatron-Core core_v0.16.0
    token_dispatcher.py _HybridEPManager "num_permuted_tokens = None ... None means no up-bound, will cause a CPU
    sync" (fused_a2a.py hybrid_ep_dispatch: "HybridEP obtains the size from a GPU tensor, which causes a D2H
    synchronization"; core_v0.16.x and 0.17.x have no budget at all); the budget, moe_expert_rank_capacity_factor
    (core_v0.18.0 _HybridEPManager.setup_metadata: "Static upper bound on permuted tokens passed to HybridEP"), is what
    full-iteration graphs need, and Megatron-Bridge sets it exactly there (scripts/performance/configs/
    *_llm_pretrain.py set_full_iter_cg_configs at v0.5.0: 1.5). Token-drop with padding has static shapes: none
    (explorer.cost.placement.host_options). And gpt-oss' clamped activation, CLAMP_SYNCS per call where the host
    issues it one by one (eager(); a captured graph holds no such copy): Megatron-Core's weighted_bias_quick_geglu_impl
    builds its GLU offset with torch.tensor(linear_offset, device=input.device) on every call
    (megatron/core/fusions/fused_bias_geglu.py, core_v0.15.0 to d98e8a64), a host-to-device copy that PyTorch makes
    blocking (torch/csrc/utils/tensor_new.cpp internal_new_from_data: .to(device, non_blocking=false);
    aten/src/ATen/native/cuda/Copy.cu copy_kernel_cuda -> at::cuda::memcpy_and_sync: cudaMemcpyAsync, then
    cudaStreamSynchronize): the host waits for the stream as at a device-to-host copy -- once per forward, and once
    more where moe_act's recomputation replays it (explorer/cost/block.py host_terms)."""
    if op.name == "expert_clamp":     # issued one by one (eager()), not inside a captured graph
        return CLAMP_SYNCS if any(eager(op, block_kind, recipe)) else 0
    return SYNCS_DROPLESS if op.routes and op.name == "dispatch" and recipe.dropless and recipe.syncs else 0
