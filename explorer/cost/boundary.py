"""The boundary rule between two consecutive blocks, before sizes and routes (sympy-free): which
collectives pass, in which phase and category, moving which fraction of the producer's output array over
which group. explorer.cost.plan.boundary builds its sympy collectives from these parts; the search's links
(explorer.search.tables.Chain.link) price the same parts in numbers."""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from explorer.cost import layouts as lay
from explorer.hardware.cluster import Cluster
from explorer.strategy.mesh import group_route, pair_route
from explorer.strategy.strategy import LayerSplit, Strategy


@dataclass(frozen=True)
class BoundaryPart:
    """One collective of a boundary, before sizes and routes: its kind, phase and category, the mesh
    axis of its group, the fraction of the producer's output array it moves, its group size, and
    whose group it is -- the tensor-parallel sub-group on the producer's ('from') or the consumer's
    ('to') stage, or the point-to-point pair between them ('pair')."""

    kind: str
    phase: str
    category: str
    axis: str
    fraction: Fraction
    n: int
    side: str

    def stage(self, stage_from: int, stage_to: int) -> int:
        """The stage of its tensor-parallel group ('from' or 'to' side)."""
        return stage_to if self.side == "to" else stage_from


def boundary_parts(src: str, dst: str, grad: str, n_prev: int, n_cur: int, same_split: bool,
                   needs_grad: bool, crosses: bool, tp: int, scatter_gather: bool) -> tuple:
    """The collectives between two consecutive blocks: the producer hands layout `src` from a group of
    n_prev, the consumer needs `dst` in a group of n_cur and returns its input gradient as `grad`.

    Where both blocks chose the same split, a conversion is part of that split's own pattern (e.g.
    Megatron's backward all-reduce before a column-parallel QKV) and counts as op_comm; where they
    differ it is a redistribution. `needs_grad`: False for the input data (no gradient goes back).
    Across a stage cut (`crosses`), the point-to-point activation (forward) and gradient (backward):
    Narayanan et al. SC'21 Sec 4.1 -- a replicated boundary tensor is sent as bsh/t per rank and
    all-gathered over NVLink at the receiver (scatter/gather); without it each rank sends the whole
    bsh; a sharded tensor sends its shard."""
    category = "op_comm" if same_split else "redistribution"
    wanted = ((lay.reshard(src, n_prev, dst, n_cur, tp), "fwd", "to"),
              (lay.reshard(grad, n_cur, lay.needed_grad(src), n_prev, tp), "bwd", "from"))
    if not needs_grad:
        wanted = wanted[:1]
    parts = [BoundaryPart(how[0], phase, category, "tp", Fraction(how[1]), int(how[2]), side)
             for how, phase, side in wanted if how]
    if crosses:
        sharded = lay.is_sharded(src)
        scatter = scatter_gather and tp > 1 and not sharded   # splits a replicated tensor over the t ranks
        part = Fraction(1, n_prev) if sharded else (Fraction(1, tp) if scatter else Fraction(1))
        for phase, receiver in (("fwd", "to"), ("bwd", "from")):
            parts.append(BoundaryPart("p2p", phase, "pp_comm", "pp", part, 2, "pair"))
            if scatter:   # the receiver of this phase all-gathers the pieces
                parts.append(BoundaryPart("all_gather", phase, "pp_comm", "tp", Fraction(1), tp, receiver))
    return tuple(parts)


def payer_side(kind: str, phase: str) -> str:
    """Which side of a boundary pays a collective's time: the sender pays a point-to-point send (the
    producer forward, the consumer backward); a conversion is paid by the side that needs it (the
    consumer forward, the producer backward). 'from' or 'to'; the cost tree (tree.payer) and the
    search's links (tables.Chain.link) both read it."""
    sender = kind == "p2p"
    if phase == "fwd":
        return "from" if sender else "to"
    return "to" if sender else "from"


def same_split(a: LayerSplit, b: LayerSplit) -> bool:
    """Do two neighbouring blocks take the same split (their conversions are then op_comm)?"""
    return (a.effective_preset, a.overrides, a.degree) == (b.effective_preset, b.overrides, b.degree)


def part_route(part: BoundaryPart, stage_from: int, stage_to: int, strategy: Strategy, cluster: Cluster) -> tuple:
    """The route of a boundary part's group (explorer.strategy.mesh)."""
    if part.side == "pair":
        return pair_route(cluster, strategy.mesh, "pp", stage_from, stage_to)
    return group_route(cluster, strategy.mesh, "tp", part.n, pp=part.stage(stage_from, stage_to))
