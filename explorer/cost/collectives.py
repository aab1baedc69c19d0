"""Alpha-beta cost of collectives (ring algorithms), per device.

Sources: NVIDIA nccl-tests doc/PERFORMANCE.md (bus-bandwidth factors: all-reduce
2(n-1)/n, all-gather / reduce-scatter / all-to-all (n-1)/n of the total array
size S) and MPICH's ring algorithms (Thakur, Rabenseifner & Gropp 2005:
ring all-gather (p-1)alpha + n(p-1)/p beta; ring all-reduce twice that) --
published.json entries `nccl_busbw` and `mpich_alpha_beta`.
`size` is the whole array in bytes, `n` the group size, `g` seconds per byte
and `L` the per-step latency of the level the group crosses.
"""
from __future__ import annotations

from dataclasses import dataclass

import sympy as sp

KINDS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "p2p")


def bytes_per_device(kind: str, size, n):
    """Bytes each device sends (bus-bandwidth factor x S, nccl_busbw)."""
    if kind == "all_reduce":
        return 2 * (n - 1) / n * size
    if kind in ("all_gather", "reduce_scatter", "all_to_all"):
        return (n - 1) / n * size
    if kind == "p2p":
        return size
    raise ValueError(kind)


def latency_steps(kind: str, n):
    """Number of alpha terms of the ring algorithm (mpich_alpha_beta)."""
    if kind == "all_reduce":
        return 2 * (n - 1)
    if kind == "p2p":
        return sp.Integer(1)
    return n - 1


def time(kind: str, size, n, g, L):
    """BSP cost h*g + L of one collective (DESIGN.md)."""
    return bytes_per_device(kind, size, n) * g + latency_steps(kind, n) * L


@dataclass(frozen=True)
class Collective:
    """One collective of a micro-step, kept symbolic for display and tests."""

    kind: str          # one of KINDS
    phase: str         # 'fwd', 'bwd' or 'step'
    op: str            # operator (or boundary) that needs it
    category: str      # DESIGN.md cost category
    axis: str          # 'tp', 'dp' or 'pp': the mesh axis of the group
    size: sp.Expr      # whole array, bytes
    n: sp.Expr         # group size

    def bytes(self):
        return bytes_per_device(self.kind, self.size, self.n)

    def time(self, g, L):
        return time(self.kind, self.size, self.n, g, L)
