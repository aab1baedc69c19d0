"""Tensor layouts over an operator-parallel group and the collectives between them.

A layout is 'R' (replicated), 'P' (partial sums to be reduced) or 'S:<dim>'
(sharded along dim: feat = hidden/heads/channels, seq, batch). Each operator's
split fixes the layout it needs for its input, the layout of its output and
the layout of the gradient it returns (Megatron-LM's f/g conjugate operators,
Shoeybi et al. 2019 Sec 3: identity forward <-> all-reduce backward).
"""
from __future__ import annotations

from fractions import Fraction
from functools import lru_cache

from explorer.errors import ExplorerError
from typing import TYPE_CHECKING

if TYPE_CHECKING:       # annotations only: the search reads layouts without the operators' sympy
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


@lru_cache(maxsize=4096)     # pure in plain values; the search asks for the same few again and again
def reshard(src: str, n_src: int, dst: str, n_dst: int, tp: int):
    """(kind, fraction, group size) of the collective turning `src` over n_src devices into `dst`
    over n_dst devices (consecutive sub-groups of the tp group), or None when it is free. The
    collective's array is `fraction` of the whole tensor (explorer.cost.collectives.bytes_per_device).

    Same group size: the conversion's collective; an all-to-all's buffer is a device's 1/n of the
    tensor (nccl-tests PERFORMANCE.md: all-to-all bus bytes are (n-1)/n of the per-rank buffer).
    Different sizes (fidelity issue, E10): partial sums are reduced and a shard gathered over the
    source group as before; between two shardings each device receives only what its new shard
    lacks -- the largest such part over the group's devices (the same dimension: its new interval
    minus its old one; different dimensions: 1/n_dst - 1/(n_src n_dst))."""
    if n_src == n_dst:
        kind = conversion(src, dst)
        if kind is None or n_src <= 1:
            return None
        return kind, (Fraction(1, n_src) if kind == "all_to_all" else Fraction(1)), n_src
    if src == R or dst == P:
        return None
    if src == P or dst == R:
        return (conversion(src, R), Fraction(1), n_src) if n_src > 1 else None
    if src == dst:
        def lacking(i: int) -> Fraction:
            lo, hi = Fraction(i % n_dst, n_dst), Fraction(i % n_dst + 1, n_dst)
            own_lo, own_hi = Fraction(i % n_src, n_src), Fraction(i % n_src + 1, n_src)
            return (hi - lo) - max(Fraction(0), min(hi, own_hi) - max(lo, own_lo))
        missing = max(lacking(i) for i in range(tp))
    else:
        missing = Fraction(1, n_dst) - Fraction(1, n_src * n_dst)
    return ("reshard", missing, max(n_src, n_dst)) if missing else None


def is_sharded(layout: str) -> bool:
    return layout != R
