"""What the super-step timeline draws of the plan besides seconds, in numbers: each stage's bytes per
pass and part, the machine levels each part crosses, and the blocks each model chunk runs.

Read from the strategy's Evaluation (explorer.cost.evaluation: each stage's block quantities by name, whose
fwd/bwd_comm_bytes and cp_fwd/bwd_bytes are each operator's collectives by phase, and the bytes of the boundary
groups the stage pays by phase, Evaluation.boundary) and from the model's block outlines with the
plan's placement rule (explorer.cost.placement.block_place), so a timeline whose tree is on disk builds no
sympy expression. The same plan priced collective by collective (explorer.timeline.numbers, what the
micro-steps draw) gives the same bytes and levels: tests/test_timeline_layout.py.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from explorer.cost import collectives as coll
from explorer.cost.collectives import cp_kind
from explorer.cost.evaluation import Evaluation
from explorer.cost.numbers import Numbers
from explorer.cost.numeric import COMM_CATEGORIES
from explorer.cost.placement import block_ends, block_place, block_stages
from explorer.cost.outline import block_outlines
from explorer.timeline.parts import CP_PART, OP_PART, PART_CATEGORIES
from explorer.timeline.schedules import B, F

BOUNDARY_CATEGORIES = ("op_comm", "ep_comm", "redistribution", "pp_comm")
"""The categories of the collectives between blocks (and of the MoE all-to-alls), each its own part."""


def context(model, strategy, cluster) -> Numbers:
    """The numeric context of one strategy (explorer.cost.numbers.Numbers)."""
    return Numbers.of(model, strategy.micro_batch, cluster, strategy.dtype)


@dataclass(frozen=True)
class PassLayout:
    bytes: np.ndarray       # stages x passes (F, B, W) x parts: bytes per device, one micro-batch, whole stage
    levels: np.ndarray      # stages x parts: '+'-joined names of the machine levels a part crosses ('' if none)
    operators: np.ndarray   # stages x chunks: 'first..last' block names of each chunk


def pass_layout(model, strategy, ev: Evaluation) -> PassLayout:
    """The PassLayout of `strategy` from its Evaluation `ev` (explorer.cost.evaluation.evaluation)."""
    tree, nums = ev.tree, ev.nums
    p, n_levels = tree.stages, len(nums.level_names)
    q = lambda name: ev.stage_q(name)[:, 0]                        # per stage, one micro-batch
    nbytes = np.zeros((p, 3, len(PART_CATEGORIES)))
    nbytes[:, F, OP_PART], nbytes[:, B, OP_PART] = q("fwd_comm_bytes"), q("bwd_comm_bytes")
    nbytes[:, F, CP_PART], nbytes[:, B, CP_PART] = q("cp_fwd_bytes"), q("cp_bwd_bytes")
    cp_kinds = ev.block_q("cp_fwd_bytes")[:, 0] + ev.block_q("cp_bwd_bytes")[:, 0]
    crossed = np.zeros((p, len(PART_CATEGORIES), n_levels), dtype=bool)
    for k, kind in enumerate(tree.kinds):
        on = tree.counts[:, k] > 0
        for name in kind.collective_kinds:
            crossed[on, OP_PART] |= _crosses(name, kind.route, n_levels)
        if cp_kinds[k]:
            crossed[on, CP_PART] |= _crosses(cp_kind(tree.cp_algo), kind.cp_route, n_levels)
    where = tree.boundary_levels(n_levels)                        # category x stage x level
    for category in BOUNDARY_CATEGORIES:
        part = PART_CATEGORIES.index(category)
        nbytes[:, F, part] += ev.boundary.fwd_bytes[category][:, 0]
        nbytes[:, B, part] += ev.boundary.bwd_bytes[category][:, 0]
        crossed[:, part] |= where[COMM_CATEGORIES.index(category)]
    names = np.array(nums.level_names, dtype=object)
    levels = np.array([["+".join(names[row]) for row in stage] for stage in crossed], dtype=object)
    return PassLayout(nbytes, levels, _operators(model, strategy))


def _crosses(kind: str, route: tuple, n_levels: int) -> np.ndarray:
    """The machine levels that carry part of a collective's bytes (explorer.cost.collectives.level_shares)."""
    shares = coll.level_shares(kind, route) if route else ()
    out = np.zeros(n_levels, dtype=bool)
    out[[i for i, w in enumerate(shares) if w]] = True
    return out


def _operators(model, strategy) -> np.ndarray:
    """'first..last' block names of each stage's chunk, the blocks placed as the plan places them."""
    out = np.full((strategy.pp, strategy.chunks), "", dtype=object)
    places, ends = block_stages(model, strategy), block_ends(model, strategy)
    for outline in block_outlines(model):
        stage, chunk = block_place(outline.kind, outline.layer, places, ends)
        cur = out[stage, chunk]
        out[stage, chunk] = outline.name if not cur else f"{cur.split('..')[0]}..{outline.name}"
    return out
