"""A model's chain of blocks as the search reads it, without the operators' sympy expressions.

The search (explorer.search.tables) needs of each block (explorer.model.ops.Block) its name, kind, layer,
structure key, whether it is an MoE layer (`routed`) and whether it holds parameters -- the blocks'
operator shapes and FLOPs matter only where a block's cost is built, which a search whose block summaries
are on disk (explorer.cost.summary) never does. `block_outlines` returns those facts, from memory, from the
disk cache (explorer.cost.cache, keyed by the model's full description) or, on a miss, from the blocks
themselves (explorer.model.graph.build_blocks, with sympy); `BlockOutline.block()` builds the real block
when its cost is needed. tests/test_block_summary.py checks outlines against the blocks.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from explorer.cost import cache

FIELDS = ("name", "kind", "layer", "key", "routed", "without_params")


@dataclass(frozen=True)
class BlockOutline:
    name: str
    kind: str               # 'embedding', 'layer', 'head'
    layer: int              # layer index; -1 for the embedding, l for the head
    key: tuple              # Block.key: blocks with equal keys have equal expressions
    routed: bool            # Block.routed: routed experts or token routing (an MoE layer)
    without_params: bool    # Block.params == 0 (the input data of the first block gets no gradient)
    block: Callable = field(repr=False, compare=False)   # () -> the explorer.model.ops.Block itself


_OUTLINES = cache.BoundedCache(16)
_BLOCKS = cache.BoundedCache(8)


def model_blocks(model) -> tuple:
    """build_blocks(model), built once per model in this process (sympy)."""
    def build():
        from explorer.model.graph import build_blocks
        return build_blocks(model)
    return _BLOCKS.get(repr(model), build)


def block_outlines(model) -> tuple:
    """The outline of every block of `model`, in chain order (embedding, layers, head)."""
    text = repr(model)
    return _OUTLINES.get(text, lambda: _outlines(text, model))


def _outlines(text: str, model) -> tuple:
    stored = cache.load("outline", text)
    made = _from_stored(stored, model) if isinstance(stored, list) else None
    if made is not None:
        return made
    blocks = model_blocks(model)
    made = tuple(BlockOutline(b.name, b.kind, b.layer, b.key, b.routed, b.params == 0, _real(model, i))
                 for i, b in enumerate(blocks))
    cache.store("outline", text, [[getattr(o, name) for name in FIELDS] for o in made])
    return made


def _real(model, i: int):
    return lambda: model_blocks(model)[i]


def _from_stored(stored: list, model):
    """The outlines a verified cache entry holds, or None (a stale or damaged entry)."""
    out = []
    for i, row in enumerate(stored):
        if not (isinstance(row, list) and len(row) == len(FIELDS)):
            return None
        name, kind, layer, key, routed, without = row
        if not (isinstance(name, str) and isinstance(kind, str) and isinstance(layer, int)
                and isinstance(routed, bool) and isinstance(without, bool)):
            return None
        key = _tuple(key)
        if key is _BAD or not isinstance(key, tuple):
            return None
        out.append(BlockOutline(name, kind, layer, key, routed, without, _real(model, i)))
    return tuple(out) if out else None


_BAD = object()


def _tuple(value):
    """A stored structure key (JSON lists) as the tuple it was, or _BAD."""
    if isinstance(value, list):
        items = [_tuple(x) for x in value]
        return _BAD if any(x is _BAD for x in items) else tuple(items)
    return value if isinstance(value, (str, int, float, bool)) or value is None else _BAD
