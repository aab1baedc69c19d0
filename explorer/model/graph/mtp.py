"""Multi-token-prediction (MTP) modules after the decoder layers (DeepSeek-V3, arXiv:2412.19437 Sec 2.2).

Module k predicts the token k + 1 ahead: it normalises the previous depth's hidden state and the
embedding of the shifted tokens (two RMSNorms), concatenates them and projects 2h -> h (M_k, Eq. 21),
runs one transformer block TRM_k (Eq. 22) and the output head (Eq. 23). The embedding and the output
head are shared with the main model (Sec 2.2: "shared embedding layer", "shared output head"): no
parameters of their own here, but their computation is run again. Megatron-Core builds it the same
way (megatron/core/transformer/multi_token_prediction.py at NVIDIA/Megatron-LM d98e8a64:
MultiTokenPredictionLayer enorm, hnorm, eh_proj as a column-parallel linear, the decoder's layer spec,
then the shared output layer and its loss), and keeps a copy of the word embedding on the MTP's stage
(megatron/core/models/gpt/gpt_model.py: `if self.pre_process or self.mtp_process: self.embedding = ...`),
whose gradient is all-reduced with stage 0's as for tied embeddings (explorer.cost.numeric.tied_place).

The block sits between the last layer and the head in the chain, as "t...mL" in a pipeline layout.
"""
from __future__ import annotations

from explorer.model.graph.transformer import linear, norm
from explorer.model.ops import ActTerm, Block, Operator
from explorer.symbols import V, b, beta, h, s

BSH = (b, s, h)


def mtp_block(index: int, layer: Block, family: str, layers: int) -> Block:
    """MTP module `index` around `layer` (the decoder's last layer's structure: Megatron's MTP block spec
    reuses the decoder layer spec)."""
    embed = Operator("mtp_embed", "embedding", "row", (b, s), BSH, mem_bytes_fwd=2 * beta * b * s * h)
    head_norm = "rms" if family == "llama" else "ln"
    norm_params = h if family == "llama" else 2 * h          # RMSNorm h, LayerNorm 2h (as the decoder's)
    ops = (embed, norm("mtp_enorm", params=norm_params), norm("mtp_hnorm", params=norm_params),
           linear("mtp_eh_proj", "column", 2 * h, h, bias=False), *layer.ops,
           norm(f"mtp_final_{head_norm}", params=norm_params),
           Operator("mtp_logits", "matmul", "column", BSH, (b, s, V), 2 * b * s * h * V, 4 * b * s * h * V,
                    act=(ActTerm(beta * b * s * h, "in"),), gemm=(b * s, V, h)),
           Operator("mtp_loss", "loss", "follow", (b, s, V), (b, s), mem_bytes_fwd=2 * 4 * b * s * V,
                    act=(ActTerm(4 * b * s * V, "in"),)))
    return Block(f"mtp{index}", "mtp", layers, ("mtp",) + layer.key, ops)


def mtp_blocks(spec, last_layer: Block) -> list:
    """The model's spec.mtp_layers MTP modules, each around a copy of `last_layer`'s operators."""
    return [mtp_block(k, last_layer, spec.family, spec.layers) for k in range(spec.mtp_layers)]


__all__ = ["mtp_block", "mtp_blocks"]
