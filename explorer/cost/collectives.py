"""Alpha-beta cost of collectives (ring algorithms), per device.

Sources: NVIDIA nccl-tests doc/PERFORMANCE.md (bus-bandwidth factors: all-reduce
2(n-1)/n, all-gather / reduce-scatter (n-1)/n of the total array size S,
all-to-all (n-1)/n of a device's buffer) and MPICH's ring algorithms (Thakur, Rabenseifner & Gropp 2005:
ring all-gather (p-1)alpha + n(p-1)/p beta; ring all-reduce twice that) --
published.json entries `nccl_busbw` and `mpich_alpha_beta`.
`size` is the whole array in bytes (all-to-all: one device's buffer; p2p and
reshard: what one device sends or receives), `n` the group size, `g` seconds per
byte and `L` the per-step latency of the group.

A group that spans machine levels (k ranks on each of N nodes, say) runs as NCCL
runs it: rings over k channels, each channel crossing the network at a different
rank, so the k ranks' own NICs carry 1/k of a device's bytes each while NVLink
carries the rest, all levels at once (pipelined). NVIDIA/nccl#812: 16 DGX-A100
GPUs on 2 nodes reach 192 GB/s all-reduce bus bandwidth = 8 NICs x 24 GB/s; a
flat "slowest level" ring would give 24 GB/s. `level_shares` says which fraction
of the bytes per device crosses each level; the levels work concurrently, so the
group's seconds per byte is the largest share x g of a level (route_g_L). Bytes per
device are those of the flat ring (the shares sum to 1). A ring's latency steps are
charged level by level, as NCCL's tuning model charges them (latency_shares: only the
steps that cross the network pay its latency); other kinds' steps wait for their
slowest hop, the outermost level crossed.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

KINDS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "p2p", "reshard")


def bytes_per_device(kind: str, size, n):
    """Bytes each device sends (bus-bandwidth factor x S, nccl_busbw)."""
    if kind == "all_reduce":
        return 2 * (n - 1) / n * size
    if kind in ("all_gather", "reduce_scatter", "all_to_all"):
        return (n - 1) / n * size
    if kind in ("p2p", "reshard"):      # reshard: `size` is what each device receives (layouts.reshard)
        return size
    raise ValueError(kind)


def latency_steps(kind: str, n):
    """Number of alpha terms of the ring algorithm (mpich_alpha_beta)."""
    if kind == "all_reduce":
        return 2 * (n - 1)
    if kind in ("p2p", "reshard"):
        return 1
    return n - 1


def bsp_seconds(bytes_sent, g, steps, L):
    """The BSP cost h g + L of a communication step (Valiant's BSP; DESIGN.md): `bytes_sent` per device
    at g seconds per byte, plus `steps` latencies L -- the one spelling of it, for sympy expressions
    (time), numbers (Numbers.collective_seconds) and arrays of groups (numeric.boundary_values) alike."""
    return bytes_sent * g + steps * L


def time(kind: str, size, n, g, L):
    """BSP cost h*g + L of one collective (DESIGN.md)."""
    return bsp_seconds(bytes_per_device(kind, size, n), g, latency_steps(kind, n), L)


RING_KINDS = ("all_reduce", "all_gather", "reduce_scatter")


@lru_cache(maxsize=4096)
def level_shares(kind: str, route: tuple) -> tuple:
    """Fraction of a device's bytes (bytes_per_device) that crosses each machine level, for a group
    whose fan-in at level i is route[i] (explorer.strategy.mesh.group_route), innermost first.

    Ring kinds (NCCL rings, one channel per rank of the innermost unit): a ring over the n ranks
    ordered unit by unit has n hops, of which prod(c_j, j >= i) - prod(c_j, j > i) first leave a
    level-i unit (the outermost level crossed takes the prod(c_j, j >= top) hops that close the
    ring); every hop carries the same bytes, and the channels spread the crossing hops evenly over
    the ranks, so each device sends that fraction of its bytes over level i. All-to-all: a device
    sends the (prod(c_j, j <= i) - prod(c_j, j < i))/n of its array whose destinations first differ
    at level i (nothing can be aggregated). A point-to-point pair sends all over the level it crosses."""
    n = 1
    for c in route:
        n *= c
    if n <= 1:
        return tuple(Fraction(1) if i == 0 else Fraction(0) for i in range(len(route)))
    top = max(i for i, c in enumerate(route) if c > 1)
    weights = []
    if kind == "p2p":
        weights = [Fraction(1) if i == top else Fraction(0) for i in range(len(route))]
    elif kind in ("all_to_all", "reshard"):
        below = Fraction(1)
        for c in route:
            weights.append(below * (Fraction(c) - 1))
            below *= c
    else:
        above = [Fraction(1)] * (len(route) + 1)          # above[i] = prod(c_j, j >= i)
        for i in range(len(route) - 1, -1, -1):
            above[i] = above[i + 1] * Fraction(route[i])
        weights = [above[i] - (above[i + 1] if i < top else 0) if i <= top else Fraction(0)
                   for i in range(len(route))]
    total = sum(weights)
    return tuple(w / total for w in weights)


@lru_cache(maxsize=4096)
def latency_shares(kind: str, route: tuple) -> tuple:
    """Fraction of a collective's latency steps (latency_steps) that pays each machine level's latency,
    for a group whose fan-in at level i is route[i], innermost first (issue 26 item 8a).

    Ring kinds, as NCCL's tuning model prices a ring (NVIDIA/nccl src/graph/tuning.cc, ncclTopoTuneModel, at
    5067397c, 2026-06-11: latency += (nsteps - nInterSteps) x intraLat + nInterSteps x interLat, with
    nsteps = 2(nRanks - 1) for all-reduce and nRanks - 1 for all-gather/reduce-scatter, nInterSteps =
    2(nNodes - 1) or nNodes - 1): of the n - 1 steps of each pass round the ring, prod(c_j, j > i) x (c_i - 1)
    cross level i (N nodes of k ranks: N(k - 1) inside the nodes, N - 1 between them; the counts sum to
    n - 1), each at that level's latency. (NCCL also floors the intra-node latency at its net overhead,
    1-2 us, on a multi-node ring: not modelled.) Every other kind: all steps at the outermost level
    crossed (a step waits for its slowest hop)."""
    route = tuple(int(c) for c in route)            # (numpy integers from the mesh make no Fraction)
    n = 1
    for c in route:
        n *= c
    top = max((i for i, c in enumerate(route) if c > 1), default=0)
    if kind not in RING_KINDS or n <= 1:
        return tuple(Fraction(1) if i == top else Fraction(0) for i in range(len(route)))
    above, weights = 1, [Fraction(0)] * len(route)
    for i in range(len(route) - 1, -1, -1):        # above = prod(c_j, j > i)
        weights[i] = Fraction(above * (route[i] - 1), n - 1)
        above *= route[i]
    return tuple(weights)


NORM_BYTES = 4
"""The global gradient norm Megatron-LM's clipping all-reduces: one fp32 value per rank (the sum of squares,
megatron/core/optimizer/clip_grads.py get_grad_norm_fp32)."""


def tree_latency_steps(route: tuple) -> tuple:
    """Latency steps per machine level of an all-reduce of a few bytes, as NCCL prices the tree it picks for
    them (NVIDIA/nccl src/graph/tuning.cc at 5067397c, NCCL_ALGO_TREE all-reduce: latency
    2 ((nRanks/nNodes - 1) intraLat + log2i(nNodes) interLat)): a chain through the ranks of the innermost
    unit, a binary tree over the units of each level above (floor log2, as log2i), up and then down."""
    return tuple(0 if c <= 1 else 2 * (int(c) - 1) if i == 0 else 2 * (int(c).bit_length() - 1)
                 for i, c in enumerate(route))


def small_all_reduce_seconds(size, route: tuple, g: list, L: list):
    """BSP cost h g + L (bsp_seconds) of an all-reduce of `size` bytes (a handful: a norm, a flag) over a group
    with this route: the ring's bytes at the group's seconds per byte, the tree's latency steps at each level's
    latency (tree_latency_steps). 0 for a group of one."""
    n = 1
    for c in route:
        n *= c
    if n <= 1:
        return 0.0
    g_eff, _ = route_g_L("all_reduce", route, g, L)
    latency = sum(steps * L[i] for i, steps in enumerate(tree_latency_steps(route)))
    return bsp_seconds(bytes_per_device("all_reduce", size, n), g_eff, 1, latency)


def cp_kind(algo: str) -> str:
    """How a context-parallel group's exchange is priced over machine levels: ring attention's
    point-to-point steps wait for their slowest hop; Ulysses' all-to-alls (explorer.cost.context_parallel)."""
    return "p2p" if algo == "ring" else "all_to_all"


def route_g_L(kind: str, route: tuple, g: list, L: list) -> tuple:
    """The group's seconds per byte and mean latency per step: the levels carry their shares at once, so
    the slowest (share x g) decides; its steps pay the latencies of the levels they cross (latency_shares),
    so that latency_steps x L is NCCL's ring latency. g, L may be numbers or sympy symbols (explain shows
    the same expression)."""
    shares = level_shares(kind, route)
    parts = [_num(w, g[i]) for i, w in enumerate(shares) if w]
    symbolic = any(_symbolic(x) for x in parts)
    g_eff = parts[0] if len(parts) == 1 else (_quick_max(*parts) if symbolic else max(parts))
    lat = [(w, L[i]) for i, w in enumerate(latency_shares(kind, route)) if w]
    L_eff = lat[0][1] if len(lat) == 1 else sum(_num(w, x) for w, x in lat)
    return g_eff, L_eff


def _symbolic(x) -> bool:
    """A sympy expression? (Without sympy imported nothing is: the numeric path never imports it.)"""
    sp = sys.modules.get("sympy")
    return sp is not None and isinstance(x, sp.Basic)


def _num(fraction: Fraction, x):
    if _symbolic(x):
        return sys.modules["sympy"].Rational(fraction.numerator, fraction.denominator) * x
    return float(fraction) * x


@lru_cache(maxsize=4096)
def _exposed(c, g, L):
    """Max(0, time - under) of a collective, built once (QuickMax: sympy's Max proves orders, slowly),
    and a block asks for it several times (its exposed and hidden parts, per phase and per kind)."""
    return _quick_max(0, c.time(g, L) - c.under)


def _quick_max(*args):
    from explorer.symbols import QuickMax   # symbolic path only: the numeric one never imports sympy
    return QuickMax(*args)


@dataclass(frozen=True)
class Collective:
    """One collective of a micro-step, kept symbolic for display and tests."""

    kind: str          # one of KINDS
    phase: str         # 'fwd', 'bwd' or 'step'
    op: str            # operator (or boundary) that needs it
    category: str      # DESIGN.md cost category
    axis: str          # 'tp', 'dp' or 'pp': the mesh axis of the group
    size: object       # whole array, bytes (a sympy expression)
    n: object          # group size
    under: object = 0  # seconds of computation it runs under (0: none, it is all exposed)

    def bytes(self):
        return bytes_per_device(self.kind, self.size, self.n)

    def time(self, g, L):
        return time(self.kind, self.size, self.n, g, L)

    def exposed(self, g, L):
        """The part of its time the computation it runs under does not hide: max(0, time - under)."""
        return self.time(g, L) if self.under == 0 else _exposed(self, g, L)

    def hidden(self, g, L):
        return self.time(g, L) - self.exposed(g, L)
