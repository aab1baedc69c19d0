"""Model FLOPs as Megatron-LM counts them: the "Megatron convention" (issue 26, item 4).

The explorer's `model_flops_per_iteration`, `tflops_per_gpu` and `mfu` count every GEMM of the
model graph three times (forward, weight and input gradients) with the full s x s attention core:
Narayanan et al. 2021 (SC'21, arXiv:2104.04473) Eq. 3 without the recomputation pass. Megatron-LM's
training log divides another count: `num_floating_point_operations(args, batch_size)` in
megatron/training/training.py (NVIDIA/Megatron-LM at d98e8a64ddf3, 2026-08-22; its
`transformer_flops()` for a standard transformer), which counts the causal attention core at half
("causal mask (only half of the mask is non-zero)": its core term is 3 x 2 x (a d) / 2 x 2 per token
and unit of sequence length), and the logits over the padded vocabulary (a multiple of
`--make-vocab-size-divisible-by` (default 128) x TP: megatron/core/tokenizers/utils/build_tokenizer.py,
vocab_size_with_padding). Megatron-Bridge's tables and its training log use the same count
(assets/validation/README.md, "How Megatron-Bridge counts model FLOPs"). The halving arrived in
Megatron-LM commit 8873b55d6a (2025-03-06, "Fixes in number of floating-point operation estimates for
MoE and attention layer"); before it (e.g. core_r0.8.0) Megatron counted the full s/h term, as Eq. 3.

Per sequence of s tokens (BSHD, every sequence full length; fwd+bwd = 3, multiply-add = 2):
  s x [ 6 h (f G L_dense + (f_e k + f_sh) G L_moe)                      MLP, G = 3/2 gated, else 1
      + L x 6 (h (q + 2 g d) + q h)  + L x 6 s q / 2 x 2 / 2            GQA/MHA: projections, causal core
      + 6 h V_pad ]                                                     logits
with q = a d (d = kv_channels), g the key/value heads; multi-head latent attention (DeepSeek-V3) has
its own projection term and a core of 6 s a (d_qk + d_rope + d_v) / 2 per token, as Megatron writes it.
Not counted (as in Megatron): norms, router, softmax, elementwise operators. Not expressed here:
multi-token-prediction layers (the model has none), linear-attention and Mamba layers, packed (THD)
sequences.

Defined for causal decoders (families gpt and llama); BERT's bidirectional attention, MLPs and CNNs
get None (Megatron's formula is a causal language model's).
"""
from __future__ import annotations

from explorer.model.spec import ModelSpec

CAUSAL_FAMILIES = ("gpt", "llama")
MAKE_VOCAB_SIZE_DIVISIBLE_BY = 128
"""Megatron-LM's default --make-vocab-size-divisible-by (megatron/training/arguments.py)."""
CONVENTION = ("Megatron-LM num_floating_point_operations (megatron/training/training.py): causal attention "
              "core counted at half, logits over the vocabulary padded to a multiple of 128 x TP, no recomputation")
EQ3_CONVENTION = ("Narayanan et al. 2021 Eq. 3 (SC'21): every GEMM of the model, full (non-causal) s x s attention "
                  "core, no recomputation")


def padded_vocab(vocab: int, tp: int) -> int:
    """The vocabulary Megatron-LM pads to: a multiple of 128 x TP (vocab_size_with_padding)."""
    step = MAKE_VOCAB_SIZE_DIVISIBLE_BY * max(1, tp)
    return -(-vocab // step) * step


def megatron_flops_per_sequence(model: ModelSpec, tp: int = 1) -> float | None:
    """FLOPs of one s-token sequence (forward and backward) in Megatron-LM's count; None where the count
    does not apply (not a causal decoder)."""
    if model.family not in CAUSAL_FAMILIES:
        return None
    s, h, a, L = model.seq_len, model.hidden, model.heads, model.layers
    gated = 1.5 if model.family == "llama" else 1.0         # Megatron's swiglu: 3 stacked MLP GEMMs, else 2
    fb_fma = 3 * 2                                           # fwd + wgrad + dgrad, and a multiply-add is 2 FLOPs
    moe_layers = sum(1 for i in range(L) if model.is_moe_layer(i))
    dense_layers = L - moe_layers
    mlp = fb_fma * h * 2 * gated * (model.ffn_hidden * dense_layers
                                    + (model.moe_ffn_hidden * model.experts_per_token + model.shared_ffn_hidden)
                                    * moe_layers)
    if model.kv_lora_rank:       # multi-head latent attention (transformer_flops, multi_latent_attention)
        qk, rope, dv = model.qk_nope_head_dim, model.qk_rope_head_dim, model.v_head_dim
        q_term = (model.q_lora_rank * (h + a * (qk + rope) + 1) if model.q_lora_rank else h * a * (qk + rope))
        linear = fb_fma * (q_term + model.kv_lora_rank * (h + a * (qk + dv) + 1) + h * rope + a * dv * h)
        core = fb_fma * (a * (qk + rope) / 2 + a * dv / 2)
    else:                        # MHA or GQA
        d = model.head_dim or h // a
        q, kv = a * d, model.kv_heads * d
        linear = fb_fma * (h * (q + 2 * kv) + q * h)
        core = fb_fma * q / 2 * 2                            # causal half of QK^T and of (softmax) V
    logits = fb_fma * h * padded_vocab(model.vocab, tp)
    per_token = mlp + L * linear + logits
    return float(s * per_token + s * s * L * core)


def megatron_model_flops(model: ModelSpec, global_batch: int, tp: int = 1) -> float | None:
    """Megatron-LM's num_floating_point_operations(args, batch_size=global_batch) for this model."""
    per_sequence = megatron_flops_per_sequence(model, tp)
    return None if per_sequence is None else global_batch * per_sequence
