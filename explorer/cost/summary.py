"""What the search's chain reads of a block's cost, without building it: a block summary.

The search (explorer.search.tables) prices hundreds of (block, split, producer layout) nodes. Of each
BlockCost it needs only the compiled block function (explorer.cost.tree.block_function, found on disk
by the cost's key), the layouts at its two ends, the layout of the input gradient it returns
(explorer.cost.plan.returned_grad) and its output array's elements (a compiled function of the model's
dimensions) -- or, where the split does not apply to the block's operators, the refusal. A summary is
all of that, made from the BlockCost once and kept on disk (explorer.cost.cache) under the cost's key,
so a later process prices the node without sympy expressions being built; `full()` builds the
BlockCost itself when something else is asked of it. tests/test_block_summary.py checks a summary
against its BlockCost.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from explorer.cost import cache
from explorer.cost.compile import compile_exprs
from explorer.cost.generated import function_of, plain_key, source_of
from explorer.cost.keys import cost_key
from explorer.cost.numeric import BLOCK_ARG_NAMES
from explorer.errors import ExplorerError
from explorer.limits import WorkCancelled
from explorer.cost.outline import BlockOutline

LAYOUT_FIELDS = ("layout_in", "layout_out", "returned_grad")


@dataclass(frozen=True, eq=False)
class BlockSummary:
    """Compared and hashed by identity, as BlockCost: block_summary() returns one per key."""

    key: tuple                      # explorer.cost.block.cost_key
    layout_in: str                  # layout the first operator needs
    layout_out: str
    returned_grad: str              # layout of the input gradient its first operator returns
    out_elements: Callable          # SIZE_ARGS (explorer.cost.tree) -> [elements of its output array]
    full: Callable = field(repr=False)  # () -> the BlockCost (built with sympy, once)


_SUMMARIES = cache.BoundedCache(1024)


def block_summary(block, preset: str, overrides: tuple, sequence_parallel: bool, recompute: str, incoming: str,
                  cp: int = 1, cp_algo: str = "ring", overlap_tp: bool = False, host: tuple = ()) -> BlockSummary:
    """The summary of block_cost(block, ...) (a dense block: no expert arguments; `block` a Block or its
    outline, explorer.cost.outline; `host` the host side's recipe, explorer.cost.placement.host_options);
    ExplorerError where block_cost refuses the split, with its message."""
    args = (block, preset, overrides, sequence_parallel, recompute, incoming, cp, cp_algo, overlap_tp, 1.0, False,
            host)
    key = cost_key(*args)
    found = _SUMMARIES.get(key, lambda: _summary(key, args))
    if isinstance(found, ExplorerError):
        raise type(found)(*found.args)
    return found


def block_function(cost):
    """BLOCK_ARGS -> BLOCK_Q values of a block (a BlockCost, or its summary), lambdified once per block
    structure: from memory, from the disk cache by the cost's key, or -- only then with sympy -- from
    explorer.cost.tree.block_exprs."""
    def exprs():
        from explorer.cost.tree import block_exprs
        return block_exprs(cost.full() if isinstance(cost, BlockSummary) else cost)

    def args():
        from explorer.cost.tree import BLOCK_ARGS
        return BLOCK_ARGS
    return compile_exprs(("block", cost.key), args, exprs, names=BLOCK_ARG_NAMES)


def _real(block):
    """The Block of a block or of its outline."""
    return block.block() if isinstance(block, BlockOutline) else block


def _full(args):
    def build():
        from explorer.cost.block import block_cost
        return block_cost(_real(args[0]), *args[1:])
    return build


def _summary(key: tuple, args: tuple):
    text = plain_key(("summary", key))
    stored = cache.load("summary", text) if text else None
    if isinstance(stored, dict):
        made = _from_stored(key, stored, args)
        if made is not None:
            return made
    try:
        cost = _full(args)()
    except WorkCancelled:
        raise                           # a stopped build (a cancelled search), not a refusal: nothing remembered
    except ExplorerError as error:      # the split does not apply: remembered, refused again when asked
        if text:
            cache.store("summary", text, {"error": str(error)})
        return error
    made = summarise(_real(args[0]), cost)
    source = source_of(made.out_elements)
    if text and source:
        cache.store("summary", text, {"layouts": [getattr(made, name) for name in LAYOUT_FIELDS],
                                      "out_elements": source})
    return made


def summarise(block, cost) -> BlockSummary:
    """The summary of a BlockCost of `block` (built with sympy: an MoE block's, or on a cache miss)."""
    from explorer.cost.plan import returned_grad
    from explorer.cost.tree import out_elements_function
    return BlockSummary(cost.key, cost.layout_in, cost.layout_out, returned_grad(block, cost),
                        out_elements_function(cost), lambda: cost)


def _from_stored(key: tuple, stored: dict, args: tuple):
    """The summary or refusal a verified cache entry holds, or None (a stale or damaged entry)."""
    if isinstance(stored.get("error"), str):
        return ExplorerError(stored["error"])
    layouts = stored.get("layouts")
    if not (isinstance(layouts, list) and len(layouts) == len(LAYOUT_FIELDS)
            and all(isinstance(x, str) for x in layouts)):
        return None
    fn = function_of(stored.get("out_elements")) if isinstance(stored.get("out_elements"), dict) else None
    if fn is None:
        return None
    return BlockSummary(key, *layouts, fn, _full(args))   # block_cost keeps the one it builds
