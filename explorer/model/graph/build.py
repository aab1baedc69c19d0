"""ModelSpec -> blocks -> networkx DiGraph of operators (networkx imported when a graph is built)."""
from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING

from explorer.model.spec import ModelSpec
from explorer.model.graph.cnn import cnn_blocks
from explorer.model.graph.mlp import mlp_blocks
from explorer.model.graph.moe import moe_blocks
from explorer.model.graph.mtp import mtp_blocks
from explorer.model.graph.transformer import transformer_blocks

if TYPE_CHECKING:
    import networkx as nx


@lru_cache(maxsize=32)
def build_blocks(spec: ModelSpec) -> tuple:
    """The model as a chain of blocks: embedding, the layers, the MTP modules (if any), the head."""
    if spec.family == "cnn":
        return tuple(cnn_blocks(spec.image_size, spec.in_channels, spec.stage_blocks,
                                spec.base_width, spec.vocab))
    if spec.family == "mlp":
        return tuple(mlp_blocks(spec.layers))
    if spec.uses_moe_graph:     # experts, a head size of its own or latent attention (core per spec.attention)
        blocks = moe_blocks(spec)
    else:
        blocks = transformer_blocks(spec.family, spec.layers, spec.attention)
    if spec.mtp_layers:         # multi-token prediction: between the last layer and the head ("...tmL")
        blocks = blocks[:-1] + mtp_blocks(spec, blocks[-2]) + blocks[-1:]
    return tuple(blocks)


@lru_cache(maxsize=8)
def build_graph(spec: ModelSpec) -> nx.DiGraph:
    """Operator graph: one node per operator, named 'block.op'.

    Node attributes: block, layer, kind, role, in_shape, out_shape, flops_fwd,
    flops_bwd, params, act_bytes (sympy expressions in explorer.symbols).
    Edges follow data flow; residual edges carry residual=True.

    >>> from explorer.io.models import load_model
    >>> g = build_graph(load_model("tiny-gpt"))
    >>> g.nodes["layer0.qkv"]["kind"]
    'matmul'
    """
    import networkx as nx      # only the graph needs it: the cost tree and the search read the blocks

    graph = nx.DiGraph(model=spec.name, family=spec.family)
    previous = None
    for block in build_blocks(spec):
        block_input = previous
        for op in block.ops:
            node = f"{block.name}.{op.name}"
            graph.add_node(node, block=block.name, layer=block.layer, kind=op.kind, role=op.role,
                           in_shape=op.in_shape, out_shape=op.out_shape, flops_fwd=op.flops_fwd,
                           flops_bwd=op.flops_bwd, params=op.params, act_bytes=op.act_bytes)
            if previous is not None:
                graph.add_edge(previous, node, residual=False)
            if op.role == "stream" and op.kind == "elementwise" and block_input is not None \
                    and block.kind == "layer" and op.name.startswith("add"):
                graph.add_edge(block_input, node, residual=True)
                block_input = node
            previous = node
    return graph
