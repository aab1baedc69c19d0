"""Operators of GPT (Megatron-LM), BERT and LLaMA blocks.

FLOPs follow Narayanan et al. SC'21 Appendix (Eq. 3): per layer forward
24bsh^2 + 4bs^2h, backward twice the forward, logits 2bshV forward.
Kept activations follow Korthikanti et al. MLSys'23 Sec 4.1 (Table 2):
per layer sbh(34 + 5as/h) bytes at 16-bit; masks are 1 byte per element.
"""
from __future__ import annotations

from functools import lru_cache

import sympy as sp

from explorer.model.ops import ActTerm, Block, Operator
from explorer.symbols import V, a, a_kv, b, beta, f, h, s

ZERO = sp.Integer(0)
BSH = (b, s, h)
KV_WIDTH = a_kv * h / a          # width of K (or V) under grouped-query attention
QKV_WIDTH = h + 2 * KV_WIDTH     # = 3h without GQA


def norm(name, params=2 * h, role="stream"):
    """LayerNorm (2h params) or RMSNorm (h params): reads and writes bsh."""
    return Operator(name, "norm", role, BSH, BSH, mem_bytes_fwd=2 * beta * b * s * h,
                    params=params, act=(ActTerm(beta * b * s * h, "in"),))


def linear(name, role, k_in, n_out, bias=True):
    """Y[bs, n] = X[bs, k] W[k, n]: 2bskn FLOPs forward, twice that backward."""
    flops = 2 * b * s * k_in * n_out
    return Operator(name, "matmul", role, (b, s, k_in), (b, s, n_out), flops_fwd=flops,
                    flops_bwd=2 * flops, params=k_in * n_out + (n_out if bias else 0),
                    act=(ActTerm(beta * b * s * k_in, "in"),), gemm=(b * s, n_out, k_in))


def residual(name, dropout=True):
    """Dropout + residual add (reads branch and residual, writes out and a 1-byte mask)."""
    mask = (ActTerm(b * s * h, "out"),) if dropout else ()
    return Operator(name, "elementwise", "stream", BSH, BSH,
                    mem_bytes_fwd=(3 * beta + (1 if dropout else 0)) * b * s * h, act=mask)


def attention_core(dropout=True):
    """QK^T, softmax, attention dropout, attention x V: split by heads."""
    scores = (b, a, s, s)
    score = Operator("score", "attention", "heads", (b, s, QKV_WIDTH), scores,
                     flops_fwd=2 * b * s * s * h, flops_bwd=4 * b * s * s * h,
                     act=(ActTerm(beta * b * s * (h + KV_WIDTH), "in"),), gemm=(s, s, h / a, b * a),
                     attention_core=True)
    softmax = Operator("softmax", "softmax", "heads", scores, scores,
                       mem_bytes_fwd=2 * beta * b * a * s * s,
                       act=(ActTerm(beta * b * a * s * s, "out", True),), attention_core=True)
    ops = [score, softmax]
    if dropout:
        ops.append(Operator("attn_dropout", "elementwise", "heads", scores, scores,
                            mem_bytes_fwd=(2 * beta + 1) * b * a * s * s,
                            act=(ActTerm(b * a * s * s, "out", True),), attention_core=True))
    # The context GEMM keeps its input scores for its backward: the dropout output (Korthikanti
    # Sec 4.1, 2as^2b) -- or, without dropout (LLaMA), the softmax output already kept above: the
    # same tensor, counted once (fidelity issue, E4).
    kept_scores = (ActTerm(beta * b * a * s * s, "in", True),) if dropout else ()
    ops.append(Operator("context", "attention", "heads", scores, BSH,
                        flops_fwd=2 * b * s * s * h, flops_bwd=4 * b * s * s * h,
                        act=kept_scores + (ActTerm(beta * b * s * KV_WIDTH, "in"),),
                        gemm=(s, h / a, s, b * a), attention_core=True))
    return ops


FLASH_BLOCK = 128
"""FlashAttention-2's tile edge along the sequence (Br = Bc = 128 for head sizes up to 128, Dao 2023
Sec 3.3 / the kernels' kBlockM): the unit of its causal block skipping."""


def causal_fraction():
    """The fraction of the s x s blocks a causal FlashAttention kernel computes: FlashAttention-2 Sec 3.1.1
    skips every block above the diagonal and masks the diagonal ones, n(n+1)/2 of n^2 blocks for
    n = s / 128: 1/2 + 64/s (about 1.7-1.8x faster than without the mask, the paper says)."""
    return sp.Min(1, (s + FLASH_BLOCK) / (2 * s))


def flash_attention_core(causal: bool = True):
    """FlashAttention (Dao et al. NeurIPS 2022; FlashAttention-2, Dao 2023): QK^T, softmax, dropout and
    attention x V in one fused kernel, tiled in on-chip memory, split by heads.

    FLOPs: the same GEMMs as the standard core, 4bs^2h forward and 8bs^2h backward (Narayanan et al.
    SC'21 Eq. 3; model FLOPs), plus the recomputation of S = QK^T in the backward: FlashAttention-2
    Sec 4.1 counts the backward as 2.5x the forward FLOPs "because of recomputation", i.e. 2bs^2h more
    (hardware FLOPs only). No s x s tensor reaches HBM, so the kernel is compute-bound (no roofline
    bytes on s^2). Kept for the backward (FlashAttention Algorithm 2 inputs): Q, K, V (as in
    Korthikanti Table 2) and the fp32 logsumexp L of each query row (b a s x 4 bytes); the output O
    is the projection's input, counted there. Softmax output, dropout mask and dropout output --
    Korthikanti's 5as^2b -- are gone (the mask is regenerated from the RNG state). A causal model's
    kernel runs only causal_fraction() of those FLOPs (its time; model FLOPs keep Eq. 3's count);
    BERT's bidirectional attention runs them all. Its time is priced on the kernel's efficiency curve
    (tokens per call, head dimension h/a, the mask, the direction: explorer/cost/attention_kernel.py)."""
    return [Operator("flash_attn", "attention", "heads", (b, s, QKV_WIDTH), BSH,
                     flops_fwd=4 * b * s * s * h, flops_bwd=8 * b * s * s * h,
                     act=(ActTerm(beta * b * s * QKV_WIDTH, "in"), ActTerm(4 * b * a * s, "out")),
                     bwd_recompute_flops=2 * b * s * s * h,
                     executed=causal_fraction() if causal else sp.Integer(1), causal=causal, head_dim=h / a)]


def attention_ops(attention: str, dropout=True, causal=True):
    """The attention core of a layer: standard (Megatron-LM's unfused core, which computes the masked
    scores too) or FlashAttention."""
    return flash_attention_core(causal) if attention == "flash" else attention_core(dropout)


def mlp_ops(gated=False, bias=True):
    """GeLU MLP (h -> f -> h), or LLaMA's SwiGLU (gate and up: h -> 2f, then f -> h)."""
    width = 2 * f if gated else f
    up = linear("fc1", "column", h, width, bias)
    if gated:
        act = Operator("swiglu", "elementwise", "follow", (b, s, width), (b, s, f),
                       mem_bytes_fwd=3 * beta * b * s * f, act=(ActTerm(beta * b * s * width, "in"),))
    else:
        act = Operator("gelu", "elementwise", "follow", (b, s, f), (b, s, f),
                       mem_bytes_fwd=2 * beta * b * s * f, act=(ActTerm(beta * b * s * f, "in"),))
    return [up, act, linear("fc2", "row", f, h, bias)]


def gpt_layer(index: int, attention: str = "standard") -> Block:
    return Block(f"layer{index}", "layer", index, _key("gpt-layer", attention), _gpt_ops(attention))


def bert_layer(index: int, attention: str = "standard") -> Block:
    """Post-LN encoder layer (Devlin et al. 2019): sublayer, dropout+add, then LayerNorm."""
    return Block(f"layer{index}", "layer", index, _key("bert-layer", attention), _bert_ops(attention))


def llama_layer(index: int, attention: str = "standard") -> Block:
    """Pre-RMSNorm, grouped-query attention, SwiGLU, no biases, no dropout (Touvron et al. 2023)."""
    return Block(f"layer{index}", "layer", index, _key("llama-layer", attention), _llama_ops(attention))


# A layer's operators do not depend on its index: built once per attention kind and shared by every
# layer (frozen Operators), so a 2,048-layer model costs one layer's sympy work, not 2,048.
@lru_cache(maxsize=None)
def _gpt_ops(attention: str) -> tuple:
    return (norm("ln1"), linear("qkv", "column", h, QKV_WIDTH), *attention_ops(attention),
            linear("proj", "row", h, h), residual("add1"), norm("ln2"), *mlp_ops(), residual("add2"))


@lru_cache(maxsize=None)
def _bert_ops(attention: str) -> tuple:
    return (linear("qkv", "column", h, QKV_WIDTH), *attention_ops(attention, causal=False),
            linear("proj", "row", h, h), residual("add1"), norm("ln1"), *mlp_ops(), residual("add2"), norm("ln2"))


@lru_cache(maxsize=None)
def _llama_ops(attention: str) -> tuple:
    return (norm("rms1", params=h), linear("qkv", "column", h, QKV_WIDTH, bias=False),
            *attention_ops(attention, dropout=False), linear("proj", "row", h, h, bias=False),
            residual("add1", dropout=False), norm("rms2", params=h),
            *mlp_ops(gated=True, bias=False), residual("add2", dropout=False))


def _key(name: str, attention: str) -> tuple:
    """A layer's structure key: the standard attention keeps the historical key."""
    return (name,) if attention == "standard" else (name, attention)


def embedding(family: str) -> Block:
    """Token (+ learned position, + BERT token-type) embedding, vocab-parallel."""
    extra = {"gpt": s * h, "bert": s * h + 2 * h, "llama": ZERO}[family]
    ops = [Operator("embed", "embedding", "row", (b, s), BSH, mem_bytes_fwd=2 * beta * b * s * h,
                    params=V * h + extra)]
    if family == "bert":
        ops.append(norm("emb_ln"))
    if family != "llama":
        ops.append(Operator("emb_dropout", "elementwise", "stream", BSH, BSH,
                            mem_bytes_fwd=(2 * beta + 1) * b * s * h, act=(ActTerm(b * s * h, "out"),)))
    return Block("embedding", "embedding", -1, (f"{family}-embedding",), tuple(ops))


def head(family: str, layers: int) -> Block:
    """Final norm, logits over the vocabulary (tied to the embedding except LLaMA), loss."""
    ops = []
    if family == "bert":  # MLM transform: dense + GeLU + LayerNorm (Devlin et al. 2019)
        ops += [linear("mlm_dense", "none", h, h), Operator(
            "mlm_gelu", "elementwise", "follow", BSH, BSH, mem_bytes_fwd=2 * beta * b * s * h,
            act=(ActTerm(beta * b * s * h, "in"),)), norm("mlm_ln")]
    elif family == "llama":
        ops.append(norm("final_norm", params=h))
    else:
        ops.append(norm("final_ln"))
    logits = linear("logits", "column", h, V, bias=family == "bert")
    if family != "llama":  # weights tied to the embedding: no new parameters
        logits = Operator(logits.name, logits.kind, logits.role, logits.in_shape, logits.out_shape,
                          logits.flops_fwd, logits.flops_bwd, params=V if family == "bert" else ZERO,
                          act=logits.act, gemm=logits.gemm)
    # Cross-entropy in fp32 over the vocabulary (Korthikanti Sec 4.1: 4sbV/t bytes kept).
    loss = Operator("loss", "loss", "follow", (b, s, V), (b, s), mem_bytes_fwd=2 * 4 * b * s * V,
                    act=(ActTerm(4 * b * s * V, "in"),))
    return Block("head", "head", layers, (f"{family}-head",), tuple(ops + [logits, loss]))


LAYER_BUILDERS = {"gpt": gpt_layer, "bert": bert_layer, "llama": llama_layer}


def transformer_blocks(family: str, layers: int, attention: str = "standard") -> list:
    build = LAYER_BUILDERS[family]
    return [embedding(family)] + [build(i, attention) for i in range(layers)] + [head(family, layers)]
