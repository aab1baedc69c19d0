"""Model specs -> blocks of operators -> networkx operator graphs."""
from explorer.model.graph.build import build_blocks, build_graph

__all__ = ["build_blocks", "build_graph"]
