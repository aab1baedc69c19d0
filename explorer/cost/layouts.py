"""Tensor layouts over an operator-parallel group and the collectives between them.

A layout is 'R' (replicated), 'P' (partial sums to be reduced) or 'S:<dim>'
(sharded along dim: feat = hidden/heads/channels, seq, batch). Each operator's
split fixes the layout it needs for its input, the layout of its output and
the layout of the gradient it returns (Megatron-LM's f/g conjugate operators,
Shoeybi et al. 2019 Sec 3: identity forward <-> all-reduce backward).
"""
from __future__ import annotations

from explorer.errors import ExplorerError
from explorer.model.ops import Operator

R, P = "R", "P"
FEAT, SEQ, BATCH = "S:feat", "S:seq", "S:batch"

PRESET_SPLIT = {
    # preset -> role -> split; 'stream' ops take 'seq' under sequence parallelism
    "megatron": {"column": "column", "row": "row", "heads": "heads", "stream": "stream",
                 "follow": "follow", "none": "replicated"},
    "column": {"column": "column", "row": "column", "heads": "heads", "stream": "stream",
               "follow": "follow", "none": "replicated"},
    "row": {"column": "row", "row": "row", "heads": "heads", "stream": "stream",
            "follow": "follow", "none": "replicated"},
    "batch": dict.fromkeys(("column", "row", "heads", "stream", "follow", "none"), "batch"),
    "replicated": dict.fromkeys(("column", "row", "heads", "stream", "follow", "none"), "replicated"),
}
SPLIT_LAYOUTS = {
    # split -> (needed input, output, gradient returned for the input)
    "replicated": (R, R, R),
    "column": (R, FEAT, P),
    "row": (FEAT, P, FEAT),
    "heads": (FEAT, FEAT, FEAT),
    "seq": (SEQ, SEQ, SEQ),
    "batch": (BATCH, BATCH, BATCH),
}
WEIGHTED = ("matmul", "conv", "embedding")


def resolve_split(op: Operator, preset: str, overrides: dict, sequence_parallel: bool) -> str:
    split = overrides.get(op.name) or PRESET_SPLIT[preset][op.role]
    if split == "stream":
        split = "seq" if sequence_parallel else "replicated"
    if split in ("column", "row") and op.kind not in WEIGHTED:
        raise ExplorerError(f"operator '{op.name}' ({op.kind}) has no weights to split by {split}")
    return split


def layouts(op: Operator, split: str, incoming: str) -> tuple:
    """(needed input, output, returned gradient) layouts of `op` given its input's layout."""
    if split == "follow":
        needed = R if incoming == P else incoming
        return needed, needed, needed
    needed, out, grad = SPLIT_LAYOUTS[split]
    if op.kind == "embedding" and split == "row":  # vocab-parallel embedding: ids are replicated
        needed, grad = R, R
    return needed, out, grad


def needed_grad(out_layout: str) -> str:
    """Layout an operator needs for the gradient of its output (partial outputs need it whole)."""
    return R if out_layout == P else out_layout


def conversion(src: str, dst: str) -> str | None:
    """Collective turning layout src into dst, or None when it is free."""
    if src == dst or dst == P:
        return None
    if src == P:
        return "all_reduce" if dst == R else "reduce_scatter"
    if src == R:
        return None          # slicing a replicated tensor is local
    if dst == R:
        return "all_gather"
    return "all_to_all"


def is_sharded(layout: str) -> bool:
    return layout != R
