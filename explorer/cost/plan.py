"""plan(model, strategy, cluster): micro-steps and the super-step structure.

The plan is the model's chain of blocks placed on pipeline stages, each block
with its operator-parallel split (block_cost.py), plus the boundaries between
consecutive blocks: a redistribution where neighbouring blocks chose different
splits and a point-to-point send where they sit on different stages.
Everything here is structure; numbers come from evaluate.py.
"""
from __future__ import annotations

from dataclasses import dataclass

import sympy as sp

from explorer.cost import collectives as coll
from explorer.cost import layouts as lay
from explorer.cost.block import BlockCost, block_cost
from explorer.hardware.cluster import Cluster
from explorer.errors import ExplorerError
from explorer.model.graph import build_blocks
from explorer.model.spec import ModelSpec
from explorer.model.ops import Block
from explorer.cost.numeric import (cp_group_route, ep_group_route,  # noqa: F401 (the one place each is chosen)
                                   expert_dp_route)
from explorer.cost.boundary import boundary_parts, part_route, same_split
from explorer.cost.placement import block_place, block_splits, block_stages, expert_options  # noqa: F401
from explorer.cost.placement import block_ends, host_options
from explorer.strategy.mesh import group_route
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


def plan(model: ModelSpec, strategy: Strategy, cluster: Cluster) -> ExecutionPlan:
    """Place the model's blocks and price their micro-steps symbolically (the strategy was
    checked against the model by explorer.strategy.rules before)."""
    blocks = build_blocks(model)
    splits = block_splits(model, strategy, blocks)
    layer_places, ends = block_stages(model, strategy), block_ends(model, strategy)
    placed, incoming = [], lay.R
    for block, split in zip(blocks, splits):
        _check_overrides(block, split)
        stage, chunk = block_place(block.kind, block.layer, layer_places, ends)
        experts = {**expert_options(model, strategy), **host_options(model, strategy)}
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


def _check_overrides(block: Block, split: LayerSplit) -> None:
    names = {op.name for op in block.ops}
    for name, _ in split.overrides:
        if name not in names:
            raise ExplorerError(f"{block.name}: the split override names operator {name!r}, which this "
                                f"block does not have (its operators: {', '.join(op.name for op in block.ops)})")


def parts_of(prev: PlacedBlock, cur: PlacedBlock, index: int, strategy: Strategy) -> tuple:
    """boundary_parts of two placed blocks."""
    return boundary_parts(prev.cost.layout_out, cur.cost.layout_in, returned_grad(cur.block, cur.cost),
                          prev.split.degree, cur.split.degree, same_split(prev.split, cur.split),
                          not (index == 1 and prev.block.params == 0),
                          prev.stage != cur.stage, strategy.tp, strategy.scatters_sends)


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
