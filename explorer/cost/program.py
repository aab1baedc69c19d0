"""A plan compiled for numbers: distinct block kinds, stage counts, boundary groups.

Built once per structure (model, strategy shape, cluster) and cached; evaluating
it is a handful of lambdified calls and numpy sums (evaluate.py).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import sympy as sp

from explorer.cost import collectives as coll
from explorer.cost.compile import BoundedCache, compile_exprs
from explorer.strategy.placement import levels_signature
from explorer.cost.plan import ExecutionPlan, plan
from explorer.cost.quantities import BLOCK_Q, block_exprs
from explorer.symbols import F, L_t, V, W_hbm, a, a_kv, b, beta, eta, f, g_t, h, phi, s, t, t_launch

BLOCK_ARGS = (b, s, h, a, a_kv, f, V, t, g_t, L_t, F, eta, phi, W_hbm, t_launch, beta)
SIZE_ARGS = (b, s, h, a, a_kv, f, V, beta)
CATEGORIES = ("compute", "recompute", "op_comm", "redistribution", "pp_comm", "bubble",
              "dp_comm", "zero_comm", "optimizer")
COMM_CATEGORIES = ("op_comm", "redistribution", "pp_comm", "dp_comm", "zero_comm")


@dataclass(frozen=True)
class BlockKind:
    fn: object          # compiled: BLOCK_ARGS -> BLOCK_Q values
    degree: int
    level: int
    exprs: tuple        # the BLOCK_Q sympy expressions (for display and tests)


@dataclass(frozen=True)
class BoundaryGroup:
    size: sp.Expr       # bytes of the whole array
    kind: str
    n: int
    level: int
    category: str
    phase: str
    stage: int          # the stage that pays it
    count: int


@dataclass(frozen=True)
class Program:
    plan: ExecutionPlan
    kinds: tuple        # BlockKind, ...
    counts: np.ndarray  # stages x kinds: blocks of each kind on each stage
    groups: tuple       # BoundaryGroup, ...
    sizes_fn: object = None   # compiled: SIZE_ARGS -> the distinct boundary array sizes
    arrays: dict = None       # per group: size index, bytes factor, latency steps, level, count, stage


def _group_arrays(groups: tuple):
    """Boundary groups as parallel numpy arrays, so evaluation is a few vector operations."""
    sizes = list(dict.fromkeys(grp.size for grp in groups))
    fn = compile_exprs(("sizes", tuple(sizes)), SIZE_ARGS, tuple(sizes)) if sizes else None
    arrays = {
        "size": np.array([sizes.index(grp.size) for grp in groups], dtype=int),
        "factor": np.array([float(coll.bytes_per_device(grp.kind, 1, grp.n)) for grp in groups]),
        "steps": np.array([float(coll.latency_steps(grp.kind, grp.n)) for grp in groups]),
        "level": np.array([grp.level for grp in groups], dtype=int),
        "count": np.array([grp.count for grp in groups], dtype=float),
        "stage": np.array([grp.stage for grp in groups], dtype=int),
    }
    return fn, arrays


_PROGRAMS = BoundedCache(64)
STRUCTURE_FIELDS = ("tp", "pp", "schedule", "chunks", "zero", "recompute", "sequence_parallel",
                    "scatter_gather", "dtype", "layer_splits", "stage_map")


def structure_key(model, strategy, cluster, gpus):
    """What decides the program's shape; micro-batch, batch and dp enter only as numbers."""
    shape = tuple(getattr(strategy, name) for name in STRUCTURE_FIELDS)
    degrees = {s.degree for s in strategy.layer_splits}
    return (model, shape, cluster, gpus is None, levels_signature(cluster, strategy, degrees))


def program_for(model, strategy, cluster, gpus=None) -> Program:
    """The compiled program; the plan inside it is for this exact strategy's structure."""
    key = structure_key(model, strategy, cluster, gpus)
    prog = _PROGRAMS.get(key, lambda: build_program(plan(model, strategy, cluster, gpus)))
    if prog.plan.strategy is strategy or prog.plan.strategy == strategy:
        return prog
    # Same structure, other numbers (dp, batch sizes, ZeRO, overlap): the plan says so.
    fresh = replace(prog.plan, strategy=strategy)
    return replace(prog, plan=fresh)


def build_program(the_plan: ExecutionPlan) -> Program:
    kinds, index = [], {}
    counts = np.zeros((the_plan.stages, 0))
    kind_of = []
    for placed in the_plan.blocks:
        key = (placed.cost, placed.split.degree, placed.level)
        if key not in index:
            exprs = _block_exprs(placed.cost)
            fn = compile_exprs(("block", placed.cost.key), BLOCK_ARGS, exprs)
            index[key] = len(kinds)
            kinds.append(BlockKind(fn, placed.split.degree, placed.level, exprs))
        kind_of.append(index[key])
    counts = np.zeros((the_plan.stages, len(kinds)))
    for placed, k in zip(the_plan.blocks, kind_of):
        counts[placed.stage, k] += 1
    groups = _boundary_groups(the_plan)
    return Program(the_plan, tuple(kinds), counts, groups, *_group_arrays(groups))


_EXPRS = BoundedCache(512)


def _block_exprs(cost) -> tuple:
    return _EXPRS.get(cost.key, lambda: block_exprs(cost, g_t, L_t))


def payer(boundary, c) -> int:
    """Sender pays a p2p; the consumer converts forward, the producer backward."""
    forward = c.phase == "fwd"
    if c.kind == "p2p":
        return boundary.stage_from if forward else boundary.stage_to
    return boundary.stage_to if forward else boundary.stage_from


def _boundary_groups(the_plan: ExecutionPlan) -> tuple:
    tally = {}
    for boundary in the_plan.boundaries:
        for c, level in zip(boundary.collectives, boundary.levels):
            key = (c.size, c.kind, int(c.n), level, c.category, c.phase, payer(boundary, c))
            tally[key] = tally.get(key, 0) + 1
    groups = []
    for (size, kind, n, level, category, phase, stage), count in tally.items():
        groups.append(BoundaryGroup(size, kind, n, level, category, phase, stage, count))
    return tuple(groups)


__all__ = ["BLOCK_Q", "CATEGORIES", "COMM_CATEGORIES", "Program", "program_for", "build_program"]
