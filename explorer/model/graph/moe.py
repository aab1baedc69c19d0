"""Mixture-of-Experts transformer layers, and the attention variants MoE models use.

A layer of a model with experts (ModelSpec.experts > 0), a head size of its own
(head_dim) or multi-head latent attention (kv_lora_rank) is built here; the
dense families keep explorer/model/graph/transformer.py. The layer is
LLaMA-style (pre-RMSNorm, SwiGLU, no biases: Mixtral, Qwen3-MoE, DeepSeek-V3,
gpt-oss all are), and its FFN is either dense (the first layers of DeepSeek-V3)
or a routed MoE:

    rms2 -> router -> dispatch -> expert_fc1 -> expert_act -> expert_fc2 -> combine
         [-> shared_fc1 -> shared_act -> shared_fc2] -> add2

* router: logits h -> E, top-k (Shazeer et al., ICLR'17; Fedus et al., JMLR'22 Sec 2);
  2bshE FLOPs forward. Its weight is replicated over the operator-parallel group and it
  works on the tokens the device holds (Megatron-Core TopKRouter).
* dispatch / combine: permute each token to its k experts and back (Megatron-Core
  MoEAlltoAllTokenDispatcher); across the ep group each is an all-to-all (priced in
  explorer/cost/block.py, category ep_comm); on the device, memory-bound copies of the kb s h
  routed elements: two permutes each way (issue 27: the expert-ordering sort of the received chunks,
  sort_chunks_by_idxs, is the second pair), and the kernels of explorer/model/kernels.py.
* experts: grouped GEMMs over the bsk routed token copies (Megatron-Core GroupedMLP):
  forward 2 bsk h (2 f_e) + 2 bsk f_e h FLOPs -- tokens x top_k x the expert FFN's
  6 h f_e per token (the model-FLOPs count of Megatron-Bridge's MoE rows, which counts k
  routed experts per token plus the shared ones).
* shared experts (DeepSeekMoE, Dai et al. 2024 Sec 3.2): a dense SwiGLU every token passes.

Expert-specific numbers (E, k, f_e, head sizes) enter the expressions as integers and the
block's key; the symbols of explorer.symbols stay the model's b, s, h, a, a_kv, f.
"""
from __future__ import annotations

from functools import lru_cache

import sympy as sp

from explorer.model.graph.transformer import (FLASH_BLOCK, causal_fraction, embedding, head, linear, mlp_ops, norm,
                                              residual)
from explorer.model.ops import ActTerm, Block, Operator
from explorer.symbols import V, a, a_kv, b, beta, f, h, s

BSH = (b, s, h)


def _int(x) -> sp.Expr:
    return sp.Integer(int(x))


def _gated(prefix: str, width: sp.Expr, tokens: sp.Expr, expert: bool, params_scale=1,
           input_kept_by: str = "") -> list:
    """SwiGLU FFN h -> 2 width -> width -> h over `tokens` rows per sequence (b, tokens, .); `input_kept_by`: an
    earlier operator that keeps the first GEMM's input tensor itself (ActTerm.kept_by)."""
    def gemm_op(name, role, k_in, n_out, kept_by=""):
        flops = 2 * b * tokens * k_in * n_out
        return Operator(name, "matmul", role, (b, tokens, k_in), (b, tokens, n_out), flops_fwd=flops,
                        flops_bwd=2 * flops, params=params_scale * k_in * n_out,
                        act=(ActTerm(beta * b * tokens * k_in, "in", kept_by=kept_by),),
                        gemm=(b * tokens, n_out, k_in),
                        expert=expert)
    up = gemm_op(f"{prefix}_fc1", "column", h, 2 * width, input_kept_by)
    act = Operator(f"{prefix}_act", "elementwise", "follow", (b, tokens, 2 * width), (b, tokens, width),
                   mem_bytes_fwd=3 * beta * b * tokens * width,
                   act=(ActTerm(beta * b * tokens * 2 * width, "in"),), expert=expert)
    return [up, act, gemm_op(f"{prefix}_fc2", "row", width, h)]


def moe_ffn(spec) -> list:
    """Router, dispatch, the E experts as grouped GEMMs, combine, then the shared experts."""
    E, k = _int(spec.experts), _int(spec.experts_per_token)
    routed = s * k                      # routed token copies per sequence
    router = Operator("router", "matmul", "stream", BSH, (b, s, E), flops_fwd=2 * b * s * h * E,
                      flops_bwd=4 * b * s * h * E, params=h * E, act=(ActTerm(beta * b * s * h, "in"),),
                      gemm=(b * s, E, h))
    # two permutes each way: the tokens to their experts' order, and after the all-to-all the received chunks
    # sorted by local expert (Megatron-Core sort_chunks_by_idxs), each a read and a write of the routed copies
    dispatch = Operator("dispatch", "elementwise", "stream", BSH, (b, routed, h),
                        mem_bytes_fwd=4 * beta * b * routed * h, routes=True)
    combine = Operator("combine", "elementwise", "stream", (b, routed, h), BSH,
                       mem_bytes_fwd=beta * b * (3 * routed + s) * h, act=(ActTerm(beta * b * s * k, "out"),),
                       routes=True)
    experts = _gated("expert", _int(spec.moe_ffn_hidden), routed, True, E)
    if spec.glu_clamp:
        experts.insert(1, expert_clamp(routed, _int(spec.moe_ffn_hidden)))
    if spec.linear_bias:
        experts.append(expert_bias(routed))
    ops = [router, dispatch, *experts, combine]
    if spec.shared_ffn_hidden:
        # the shared experts read the tensor the router reads and keeps (Megatron-Core MoELayer.forward:
        # shared_experts_compute(hidden_states) and route(hidden_states); RouterGatingLinearFunction saves its
        # input as it came, moe_utils.py; NVIDIA/Megatron-LM at d98e8a64): one storage, kept once -- the shared
        # fc1 keeps bytes of its own only as Transformer Engine's FP8 copy
        ops += _gated("shared", _int(spec.shared_ffn_hidden), s, False, input_kept_by="router")
    return ops


def expert_clamp(routed: sp.Expr, width: sp.Expr) -> Operator:
    """The clamp of the experts' GLU halves before the activation (gpt-oss: ModelSpec.glu_clamp, Megatron
    activation_func_clamp_value 7.0 with bias_activation_fusion): Megatron-Core's weighted_bias_quick_geglu_impl
    clamps each half and concatenates them again eagerly, outside the compiled activation
    (megatron/core/fusions/fused_bias_geglu.py, NVIDIA/Megatron-LM at d7288711, the Megatron-LM of Megatron-Bridge
    v0.4.x, and at d98e8a64). Forward, per element of the b s k x 2 width GEMM output: each clamp reads and writes
    its half (2), torch.cat reads and writes the whole (2): 4 beta bytes; backward the memory-bound rule (3/2;
    its masks and wheres and the gradient's concatenation counted 7.5 beta with torch's dispatcher on CPU). It
    keeps the GEMM's output for the masks; the activation then keeps the clamped copy. Both sit inside the
    moe_act checkpoint (explorer/model/recompute.py). Kernels: explorer/model/kernels.py."""
    return Operator("expert_clamp", "elementwise", "follow", (b, routed, 2 * width), (b, routed, 2 * width),
                    mem_bytes_fwd=4 * beta * b * routed * 2 * width,
                    act=(ActTerm(beta * b * routed * 2 * width, "in"),), expert=True)


def expert_bias(routed: sp.Expr) -> Operator:
    """The experts' second bias, added outside the grouped GEMM (gpt-oss: ModelSpec.linear_bias).

    Megatron-Core's TEGroupedMLP builds linear_fc2 with skip_bias_add=True and applies its bias afterwards,
    eagerly and one local expert at a time, scaled by the routing weight (TEGroupedMLP._apply_bias,
    megatron/core/transformer/moe/experts.py at d7288711, the Megatron-LM of Megatron-Bridge v0.4.x: torch.cat
    of t + b * p over torch.split(output, tokens_per_expert)); fc1's bias rides in the grouped GEMM's
    epilogue (skip_bias_add=False; Transformer Engine fuses its gradient with the wgrad GEMM). Forward, per
    routed element: b * p written (1), t + b p read twice and written (3), torch.cat read and written (2):
    6 beta bytes over the b s k routed rows of h; backward the memory-bound rule (3/2: the two products
    grad x p, grad x b and their sums). Kernels: explorer/model/kernels.py (per local expert)."""
    return Operator("expert_bias", "elementwise", "follow", (b, routed, h), (b, routed, h),
                    mem_bytes_fwd=6 * beta * b * routed * h, expert=True)


def bias_add(name: str, width: sp.Expr = h) -> Operator:
    """A row-parallel linear's bias, added after its reduction (Megatron-Core builds linear_proj and a dense
    linear_fc2 with skip_bias_add=True; gpt-oss' bias_dropout_fusion=False leaves the add unfused,
    megatron/core/fusions/fused_bias_dropout.py _bias_dropout_add_func: x + bias): reads and writes b s width."""
    return Operator(name, "elementwise", "stream", (b, s, width), (b, s, width),
                    mem_bytes_fwd=2 * beta * b * s * width)


def window_keys(window: int) -> int:
    """The keys a query block of a windowed kernel loops over: the FLASH_BLOCK-wide key blocks that meet
    [q0 - w + 1, q0 + FLASH_BLOCK - 1] for a block starting at q0, 1 + ceil((w - 1) / FLASH_BLOCK) of them (cuDNN
    and FlashAttention skip the blocks left of the band as they skip those above the diagonal: the cuDNN
    frontend's GB200 benchmark of gpt-oss attention with a 128-token window, benchmark/sdpa_benchmark_training/
    results/gpt_oss/gb200/gpt_oss_20260424_100011.csv, grows linearly in s, 0.109 -> 0.822 ms forward from
    s = 2048 to 16384)."""
    return FLASH_BLOCK * (1 + -(-(window - 1) // FLASH_BLOCK))


def flash_core(qk: sp.Expr, v: sp.Expr, kept_in: sp.Expr, causal: bool = True, window: int = 0) -> list:
    """FlashAttention as one fused kernel (as explorer/model/graph/transformer.py flash_attention_core
    for the dense families; Dao et al. NeurIPS 2022, FlashAttention-2 Sec 4.1): per sequence QK^T
    2bs^2 (a qk) and attention x V 2bs^2 (a v) FLOPs forward, twice that backward, plus the
    backward's recomputation of S = QK^T (hardware FLOPs only); no s x s tensor in HBM or kept.
    Kept: Q, K, V (`kept_in` elements per sequence) and the fp32 logsumexp of each query row. A causal
    kernel runs causal_fraction() of the FLOPs (transformer.py). The kernel's head dimension, for its
    efficiency curve (explorer/cost/attention_kernel.py), is the mean of its two GEMMs' per head: (qk + v)/(2a).
    A sliding window of `window` tokens (gpt-oss: 128 on every other layer; Transformer Engine window_size
    (window - 1, 0), causal) runs only the band of key blocks, window_keys(window) of the s keys per query
    block (at most the causal kernel's); its efficiency curve is read at that many keys per call."""
    fwd = 2 * b * s * s * (qk + v)
    executed = causal_fraction() if causal else sp.Integer(1)
    keys = window_keys(window) if window else 0
    if keys:
        executed = sp.Min(executed, sp.Integer(keys) / s)
    return [Operator("flash_attn", "attention", "heads", (b, s, kept_in), (b, s, v), flops_fwd=fwd,
                     flops_bwd=2 * fwd, act=(ActTerm(beta * b * s * kept_in, "in"), ActTerm(4 * b * a * s, "out")),
                     bwd_recompute_flops=2 * b * s * s * qk,
                     executed=executed, causal=causal, head_dim=(qk + v) / (2 * a), window=keys)]


def attention(spec, window: int = 0) -> list:
    """Grouped-query attention with head size d (head_dim, else h/a), or DeepSeek's latent attention;
    the core follows ModelSpec.attention ('flash': one fused kernel, else the unfused core, which masks the
    window's s x s scores without skipping them: `window` changes the fused kernel only); with
    ModelSpec.linear_bias the output projection's bias is added after it (bias_add)."""
    if spec.kv_lora_rank:
        return latent_attention(spec)
    d = _int(spec.head_dim) if spec.head_dim else h / a
    q, kv = a * d, a_kv * d
    bias = spec.linear_bias
    after = [bias_add("proj_bias")] if bias else []
    norms = [qk_norm(q, kv, d)] if spec.qk_layernorm else []
    norms += [yarn_rope(q, kv)] if spec.yarn_scaling_factor else []
    if spec.attention == "flash":
        return [linear("qkv", "column", h, q + 2 * kv, bias=bias), *norms,
                *flash_core(q, q, q + 2 * kv, spec.family != "bert", window),
                linear("proj", "row", q, h, bias=bias), *after]
    scores = (b, a, s, s)
    qkv = linear("qkv", "column", h, q + 2 * kv, bias=bias)
    score = Operator("score", "attention", "heads", (b, s, q + 2 * kv), scores,
                     flops_fwd=2 * b * s * s * q, flops_bwd=4 * b * s * s * q,
                     act=(ActTerm(beta * b * s * (q + kv), "in"),), gemm=(s, s, d, b * a), attention_core=True)
    softmax = Operator("softmax", "softmax", "heads", scores, scores, mem_bytes_fwd=2 * beta * b * a * s * s,
                       act=(ActTerm(beta * b * a * s * s, "out", True),), attention_core=True)
    context = Operator("context", "attention", "heads", scores, (b, s, q), flops_fwd=2 * b * s * s * q,
                       flops_bwd=4 * b * s * s * q, act=(ActTerm(beta * b * s * kv, "in"),),
                       gemm=(s, d, s, b * a), attention_core=True)
    return [qkv, *norms, score, softmax, context, linear("proj", "row", q, h, bias=bias), *after]


def qk_norm(q: sp.Expr, kv: sp.Expr, d: sp.Expr) -> Operator:
    """Qwen3's RMSNorm over each head's queries and over each head's keys (ModelSpec.qk_layernorm; Megatron-Core
    SelfAttention q_layernorm / k_layernorm, TENorm of hidden_size_per_attention_head, applied after the QKV split
    and before RoPE: megatron/core/transformer/attention.py; Megatron-Bridge qwen3_moe_bridge.py qk_layernorm=True).
    Split by heads like the attention core. Transformer Engine's RMSNorm takes a contiguous input, and the queries
    and keys are strided views of the QKV output: per tensor a copy and the norm, each a read and a write, 4 beta
    bytes per element of the b s (q + kv) normalised forward (the backward by the memory-bound rule, 3/2); each
    keeps its input. Parameters: two weights of d. Kernels: explorer/model/kernels.py QK_NORM_KERNELS."""
    return Operator("qk_norm", "norm", "heads", (b, s, q + 2 * kv), (b, s, q + 2 * kv),
                    mem_bytes_fwd=4 * beta * b * s * (q + kv), params=2 * d,
                    act=(ActTerm(beta * b * s * (q + kv), "in"),))


def yarn_rope(q: sp.Expr, kv: sp.Expr) -> Operator:
    """YaRN's rotary embedding of the queries and keys, run unfused (ModelSpec.yarn_scaling_factor; gpt-oss).

    Both frameworks run YaRN unfused at any factor: Megatron-LM and Megatron-Bridge turn the RoPE fusion off for
    every position embedding but 'rope' (megatron/training/arguments.py at d98e8a64: "if
    args.position_embedding_type != 'rope': args.apply_rope_fusion = False"; src/megatron/bridge/utils/fusions.py
    validate_rope_fusion_compatibility, v0.2.0 to v0.6.0), and apply_rotary_pos_emb falls back to the unfused
    _apply_rotary_pos_emb_bshd itself whenever YaRN's concentration factor, 0.1 ln(factor) + 1 (1.347 at gpt-oss'
    32: yarn_rotary_pos_embedding.py _yarn_get_mscale), is not 1, since Transformer Engine's fused RoPE takes no
    such factor (megatron/core/models/common/embeddings/rope_utils.py at d7288711, the Megatron-LM of
    Megatron-Bridge v0.4.x). Per tensor (Q, then K) that path runs cos, sin, the scaling and casts of the
    frequencies, then t cos, the rotated half (a negation and torch.cat), its product with sin, their sum and a
    last torch.cat: 12 kernels, 12 beta bytes per element of the b s (q + kv) rotated forward; autograd's backward
    runs 7 per tensor (the two products, the negation, the halves' concatenation, two accumulations and the
    zero-fill of the empty pass-through slice's gradient), 14 beta bytes per element -- counted with torch 2.13's
    dispatcher on CPU over that function's source (the frequencies' own bytes, s x head_dim in fp32, left out).
    Split by heads like the attention core; it keeps nothing for the backward (the products keep only cos and
    sin). Kernels: explorer/model/kernels.py."""
    rotated = b * s * (q + kv)
    return Operator("yarn_rope", "elementwise", "heads", (b, s, q + 2 * kv), (b, s, q + 2 * kv),
                    mem_bytes_fwd=12 * beta * rotated, mem_bytes_bwd=14 * beta * rotated)


def latent_attention(spec) -> list:
    """Multi-head latent attention (DeepSeek-V2, arXiv:2405.04434 Sec 2.1, Eq. 9-19; V3 Sec 2.1.1).

    Down-projections h -> d_c' (queries, q_lora_rank) and h -> d_c + d_R (the key/value latent
    kv_lora_rank and the shared rotary key), RMSNorms on the latents, up-projections to
    a (d_nope + d_R) queries and a (d_nope + d_v) keys/values, attention with query/key size
    d_nope + d_R and value size d_v, output a d_v -> h. The two down-projections are replicated
    over the operator-parallel group and, under sequence parallelism, run on the device's s/t tokens (role
    'stream', as a norm): Megatron-Core builds them as 'duplicated' TELinear on the [s/t, b, h] input, gathers only
    the latents for the up-projections, and all-reduces their weight gradients over the group as a norm's
    (sequence_parallel set on them: transformer/multi_latent_attention.py linear_q_down_proj / linear_kv_down_proj,
    extensions/transformer_engine.py TELinear 'duplicated'; NVIDIA/Megatron-LM at d98e8a64). The up-projections
    are split by heads (Megatron-Core MLASelfAttention); each pair is one operator here (the chain of the graph has one input
    per operator). Parameters: the README of assets/models_moe_sources (derived_params).
    """
    n, r, dv = _int(spec.qk_nope_head_dim), _int(spec.qk_rope_head_dim), _int(spec.v_head_dim)
    cq, ckv = _int(spec.q_lora_rank), _int(spec.kv_lora_rank)
    q_in = cq if spec.q_lora_rank else h        # without a query latent the queries come from h
    down_out = (cq if spec.q_lora_rank else 0) + ckv + r
    down = linear("mla_down", "stream", h, down_out, bias=False)   # replicated; s/t tokens under SP (docstring)
    latent_norm = norm("mla_norm", params=(cq if spec.q_lora_rank else 0) + ckv)
    latent_norm = Operator(latent_norm.name, "norm", "follow", (b, s, down_out), (b, s, down_out),
                           mem_bytes_fwd=2 * beta * b * s * down_out, params=latent_norm.params,
                           act=(ActTerm(beta * b * s * down_out, "in"),))
    up_params = q_in * a * (n + r) + ckv * a * (n + dv)
    up_flops = 2 * b * s * up_params
    width = a * (2 * n + r + dv)                     # queries, keys (nope part) and values per token
    up = Operator("mla_up", "matmul", "column", (b, s, down_out), (b, s, width), flops_fwd=up_flops,
                  flops_bwd=2 * up_flops, params=up_params,
                  act=(ActTerm(beta * b * s * down_out, "in"),), gemm=(b * s, width, q_in + ckv))
    if spec.attention == "flash":      # Q and K of size n + r per head, V of size v_head_dim
        return [down, latent_norm, up, *flash_core(a * (n + r), a * dv, a * (2 * (n + r) + dv), spec.family != "bert"),
                linear("proj", "row", a * dv, h, bias=False)]
    scores = (b, a, s, s)
    score = Operator("score", "attention", "heads", (b, s, width), scores, flops_fwd=2 * b * s * s * a * (n + r),
                     flops_bwd=4 * b * s * s * a * (n + r),
                     act=(ActTerm(beta * b * s * 2 * a * (n + r), "in"),), gemm=(s, s, n + r, b * a),
                     attention_core=True)
    softmax = Operator("softmax", "softmax", "heads", scores, scores, mem_bytes_fwd=2 * beta * b * a * s * s,
                       act=(ActTerm(beta * b * a * s * s, "out", True),), attention_core=True)
    context = Operator("context", "attention", "heads", scores, (b, s, a * dv), flops_fwd=2 * b * s * s * a * dv,
                       flops_bwd=4 * b * s * s * a * dv, act=(ActTerm(beta * b * s * a * dv, "in"),),
                       gemm=(s, dv, s, b * a), attention_core=True)
    return [down, latent_norm, up, score, softmax, context, linear("proj", "row", a * dv, h, bias=False)]


def layer_key(spec, moe: bool, window: int = 0) -> tuple:
    """The structure of a layer: equal keys, equal expressions."""
    attn = ("mla", spec.q_lora_rank, spec.kv_lora_rank, spec.qk_nope_head_dim, spec.qk_rope_head_dim,
            spec.v_head_dim) if spec.kv_lora_rank else ("gqa", spec.head_dim)
    if spec.attention == "flash":
        attn += ("flash",)
    if window and spec.attention == "flash":
        attn += ("window", window)
    if spec.linear_bias:
        attn += ("bias",)
    if spec.qk_layernorm:
        attn += ("qk_norm",)
    if spec.yarn_scaling_factor:
        attn += ("yarn",)
    ffn = ("moe", spec.experts, spec.experts_per_token, spec.moe_ffn_hidden, spec.shared_ffn_hidden,
           bool(spec.glu_clamp)) if moe \
        else ("dense",)
    return ("moe-layer",) + attn + ffn


@lru_cache(maxsize=64)
def _layer_ops(spec, moe: bool, window: int) -> tuple:
    """A layer's operators depend on its kind (dense or MoE, its window), not its index: built once per kind
    and shared by the layers of that kind (frozen Operators), as transformer.py's _gpt_ops. Built per layer,
    a 2,048-layer gpt-oss from a link cost 15 s of CPU in sympy's Min before any cost was asked (issue 31)."""
    ffn = moe_ffn(spec) if moe else mlp_ops(gated=True, bias=spec.linear_bias) + \
        ([bias_add("fc2_bias")] if spec.linear_bias else [])
    return (norm("rms1", params=h), *attention(spec, window), residual("add1", dropout=False),
            norm("rms2", params=h), *ffn, residual("add2", dropout=False))


def moe_layer(spec, index: int) -> Block:
    moe = spec.is_moe_layer(index)
    window = spec.sliding_window_tokens if spec.is_window_layer(index) else 0
    return Block(f"layer{index}", "layer", index, layer_key(spec, moe, window if spec.attention == "flash" else 0),
                 _layer_ops(spec, moe, window))


def moe_blocks(spec) -> list:
    """Embedding, the layers (dense or MoE), head: LLaMA-style (untied output layer)."""
    return [embedding("llama")] + [moe_layer(spec, i) for i in range(spec.layers)] + [head("llama", spec.layers)]


def parameter_counts(spec) -> dict:
    """Total and active parameters (active: k of the E routed experts, everything else kept),
    from the operators' own parameter expressions at the model's dimensions."""
    dims = {h: spec.hidden, a: spec.heads, a_kv: spec.kv_heads, V: spec.vocab, f: spec.ffn_hidden}
    total = active = 0
    for block in moe_blocks(spec):
        for op in block.ops:
            n = int(op.params.xreplace(dims) if isinstance(op.params, sp.Basic) else op.params)
            total += n
            active += n * spec.experts_per_token // spec.experts if op.expert else n
    embed = spec.vocab * spec.hidden
    return {"total": total, "active": active, "active_without_embedding": active - embed}
