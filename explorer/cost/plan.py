"""plan(model, strategy, cluster): micro-steps and the super-step structure.

The plan is the model's chain of blocks placed on pipeline stages, each block
with its operator-parallel split (block_cost.py), plus the boundaries between
consecutive blocks: a redistribution where neighbouring blocks chose different
splits and a point-to-point send where they sit on different stages.
Everything here is structure; numbers come from evaluate.py.
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import sympy as sp

from explorer.cost import collectives as coll
from explorer.cost import layouts as lay
from explorer.cost.block import BlockCost, block_cost
from explorer.cost.experts import expert_load
from explorer.hardware.cluster import Cluster
from explorer.errors import ExplorerError
from explorer.model.graph import build_blocks
from explorer.model.spec import ModelSpec
from explorer.model.ops import Block
from explorer.schedules import chunked
from explorer.cost.numeric import (cp_group_route, ep_group_route,  # noqa: F401 (the one place each is chosen)
                                   expert_dp_route)
from explorer.strategy.mesh import group_route, pair_route
from explorer.strategy.strategy import LayerSplit, Strategy
from explorer.symbols import beta

ZERO = sp.Integer(0)


@dataclass(frozen=True)
class PlacedBlock:
    block: Block
    split: LayerSplit
    stage: int
    chunk: int                 # model chunk on its stage (interleaved), else 0
    cost: BlockCost
    route: tuple               # its operator-parallel group's fan-in per machine level (mesh.group_route)
    cp_route: tuple = ()       # its context-parallel group's route (cp_group_route); () without cp
    ep_route: tuple = ()       # its expert-parallel group's route (ep_group_route; MoE layers)


@dataclass(frozen=True)
class Boundary:
    """What passes between block `index-1` and block `index` (per micro-batch)."""

    index: int                 # index of the consumer block
    stage_from: int
    stage_to: int
    collectives: tuple         # Collective, ... (category op_comm, redistribution or pp_comm)
    routes: tuple              # route of each collective's group (mesh.group_route / pair_route)


@dataclass(frozen=True)
class ExecutionPlan:
    model: ModelSpec
    strategy: Strategy
    cluster: Cluster
    blocks: tuple              # PlacedBlock, ...
    boundaries: tuple          # Boundary, ... (one per consecutive pair)

    @property
    def stages(self) -> int:
        return self.strategy.pp


def block_splits(model: ModelSpec, strategy: Strategy, blocks) -> list:
    """Each block's split: layers from the strategy; embedding and head use tp (Megatron)."""
    outer = LayerSplit(degree=strategy.tp, preset="megatron")
    return [strategy.split_of(b.layer) if b.kind == "layer" else outer for b in blocks]


def block_stages(model: ModelSpec, strategy: Strategy) -> tuple:
    """(stage, chunk) of every layer; interleaving deals chunks round-robin (Narayanan Sec 2.2.2)."""
    layers = model.layers
    if not chunked(strategy.schedule):
        return tuple((stage, 0) for stage in strategy.stages(layers))
    chunks = strategy.pp * strategy.chunks
    base, extra = divmod(layers, chunks)
    out = []
    for c in range(chunks):
        out += [(c % strategy.pp, c // strategy.pp)] * (base + (1 if c < extra else 0))
    return tuple(out)


def plan(model: ModelSpec, strategy: Strategy, cluster: Cluster) -> ExecutionPlan:
    """Place the model's blocks and price their micro-steps symbolically (the strategy was
    checked against the model by explorer.strategy.rules before)."""
    blocks = build_blocks(model)
    splits = block_splits(model, strategy, blocks)
    layer_places = block_stages(model, strategy)
    last_stage = layer_places[-1][0]
    placed, incoming = [], lay.R
    for block, split in zip(blocks, splits):
        _check_overrides(block, split)
        stage, chunk = layer_places[block.layer] if block.kind == "layer" else \
            ((0, 0) if block.kind == "embedding" else (last_stage, layer_places[-1][1]))
        experts = expert_options(model, strategy)
        cost = block_cost(block, split.effective_preset, split.overrides, strategy.sequence_parallel,
                          strategy.recompute, incoming, strategy.cp, strategy.cp_algo, strategy.overlap_tp,
                          **experts)
        route = group_route(cluster, strategy.mesh, "tp", split.degree, pp=stage)
        cp_route = cp_group_route(cluster, strategy, stage) if strategy.cp > 1 else ()
        ep_route = ep_group_route(cluster, strategy, stage) if cost.ep_collectives and strategy.ep > 1 else ()
        placed.append(PlacedBlock(block, split, stage, chunk, cost, route, cp_route, ep_route))
        incoming = cost.layout_out
    boundaries = tuple(boundary(placed[i - 1], placed[i], i, strategy, cluster) for i in range(1, len(placed)))
    return ExecutionPlan(model, strategy, cluster, tuple(placed), boundaries)


def expert_options(model: ModelSpec, strategy: Strategy) -> dict:
    """block_cost's expert arguments for `strategy` (none for a dense model)."""
    if not model.is_moe:
        return {}
    return {"load": expert_load(model, strategy.ep), "experts_by_seq": strategy.etp != strategy.tp}


def _check_overrides(block: Block, split: LayerSplit) -> None:
    names = {op.name for op in block.ops}
    for name, _ in split.overrides:
        if name not in names:
            raise ExplorerError(f"{block.name}: the split override names operator {name!r}, which this "
                                f"block does not have (its operators: {', '.join(op.name for op in block.ops)})")


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


def same_split(a: LayerSplit, b: LayerSplit) -> bool:
    """Do two neighbouring blocks take the same split (their conversions are then op_comm)?"""
    return (a.effective_preset, a.overrides, a.degree) == (b.effective_preset, b.overrides, b.degree)


def parts_of(prev: PlacedBlock, cur: PlacedBlock, index: int, strategy: Strategy) -> tuple:
    """boundary_parts of two placed blocks."""
    return boundary_parts(prev.cost.layout_out, cur.cost.layout_in, returned_grad(cur.block, cur.cost),
                          prev.split.degree, cur.split.degree, same_split(prev.split, cur.split),
                          not (index == 1 and prev.block.params == 0),
                          prev.stage != cur.stage, strategy.tp, strategy.scatter_gather)


def part_route(part: BoundaryPart, stage_from: int, stage_to: int, strategy: Strategy, cluster: Cluster) -> tuple:
    """The route of a boundary part's group (explorer.strategy.mesh)."""
    if part.side == "pair":
        return pair_route(cluster, strategy.mesh, "pp", stage_from, stage_to)
    return group_route(cluster, strategy.mesh, "tp", part.n, pp=part.stage(stage_from, stage_to))


def boundary(prev: PlacedBlock, cur: PlacedBlock, index: int, strategy: Strategy, cluster: Cluster) -> Boundary:
    """Collectives between two consecutive blocks (boundary_parts), each of its size: the producer's
    output array, of the local s/cp tokens under context parallelism, times the part's fraction."""
    size = beta * prev.cost.out_elements / strategy.cp
    parts = parts_of(prev, cur, index, strategy)
    colls = tuple(coll.Collective(p.kind, p.phase, cur.block.name, p.category, p.axis,
                                  size if p.fraction == 1 else size * sp.Rational(p.fraction.numerator,
                                                                                 p.fraction.denominator),
                                  sp.Integer(p.n)) for p in parts)
    routes = tuple(part_route(p, prev.stage, cur.stage, strategy, cluster) for p in parts)
    return Boundary(index, prev.stage, cur.stage, colls, routes)


def returned_grad(block: Block, cost) -> str:
    """Layout of the gradient the consumer's first operator returns for its input."""
    step = cost.steps[0]
    return lay.layouts(block.ops[0], step.split, step.layout_in)[2]
