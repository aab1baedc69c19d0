"""Model specs -> blocks of operators -> networkx operator graphs."""
from .build import build_blocks, build_graph

__all__ = ["build_blocks", "build_graph"]
