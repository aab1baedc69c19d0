"""A plain MLP: each layer is Linear(h, f) -> ReLU -> Linear(f, h); a classifier head."""
from __future__ import annotations

from explorer.model.ops import ActTerm, Block, Operator
from explorer.symbols import V, b, beta, f, h, s
from explorer.model.graph.transformer import linear


def mlp_layer(index: int) -> Block:
    relu = Operator("relu", "elementwise", "follow", (b, s, f), (b, s, f),
                    mem_bytes_fwd=2 * beta * b * s * f, act=(ActTerm(b * s * f, "out"),))
    ops = (linear("fc1", "column", h, f), relu, linear("fc2", "row", f, h))
    return Block(f"layer{index}", "layer", index, ("mlp-layer",), ops)


def mlp_blocks(layers: int) -> list:
    source = Block("input", "embedding", -1, ("mlp-input",), (
        Operator("input", "elementwise", "stream", (b, s, h), (b, s, h), mem_bytes_fwd=beta * b * s * h),))
    loss = Operator("loss", "loss", "follow", (b, s, V), (b, s), mem_bytes_fwd=2 * 4 * b * s * V,
                    act=(ActTerm(4 * b * s * V, "in"),))
    out = Block("head", "head", layers, ("mlp-head",), (linear("classifier", "none", h, V), loss))
    return [source] + [mlp_layer(i) for i in range(layers)] + [out]
