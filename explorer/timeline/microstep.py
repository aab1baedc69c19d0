"""Micro-step events: one layer's (or one operator's) forward and backward on one micro-batch.

Each operator's micro-step is a BSP step (DESIGN.md): the collectives that bring
its input to the layout its split needs, its local computation, then the
collectives of its output; every collective is drawn as its transfer (h*g at
its machine level) followed by its latency/barrier part (steps*L). The backward
runs the operators in reverse: gradient conversions, computation (the weight-
gradient GEMM drawn apart as 'weight_grad'), the input-gradient collectives.
Recomputation replays the forward first (category recompute). Between blocks,
the stage that pays a collective in the cost model (explorer.program) draws it,
so the micro-steps of all blocks of a stage add up to its fwd_s and bwd_s.
"""
from __future__ import annotations

import numpy as np

from explorer.errors import ExplorerError
from explorer.model import recompute as rc
from explorer.cost.tree import block_function, cost_tree, payer  # payer: the cost model's own rule for boundary collectives
from explorer.cost.numeric import function_quantity
from explorer.cost import collectives as coll
from explorer.timeline.events import EventTable, table
from explorer.cost.collectives import cp_kind
from explorer.cost.numbers import Numbers
from explorer.timeline.numbers import block_numbers, boundary_numbers, context
from explorer.timeline.experts import expert_numbers


def find_block(the_plan, layer: int | None = None, op: str | None = None) -> int:
    """Index in plan.blocks of layer `layer` (default: the first block holding `op`, else layer 0)."""
    blocks = the_plan.blocks
    if layer is not None:
        found = [k for k, pb in enumerate(blocks) if pb.block.kind == "layer" and pb.block.layer == layer]
        if not found:
            raise ExplorerError(f"--layer {layer} is outside the model's layers 0..{the_plan.model.layers - 1}")
        k = found[0]
    elif op is not None:
        k = next((k for k, pb in enumerate(blocks) if op in [o.name for o in pb.block.ops]), -1)
    else:
        k = next(k for k, pb in enumerate(blocks) if pb.block.kind == "layer")
    if k < 0 or (op is not None and op not in [o.name for o in blocks[k].block.ops]):
        names = sorted({o.name for pb in blocks for o in pb.block.ops}) if k < 0 else \
            [o.name for o in blocks[k].block.ops]
        raise ExplorerError(f"operator {op!r} not found; operators: {', '.join(names)}")
    return k


def _coll(phase, category, operator, cn, level_names) -> list:
    name = "+".join(level_names[i] for i in cn.levels())
    return [(phase, cn.coll.kind, category or cn.coll.category, operator, cn.transfer_s, cn.bytes, name),
            (phase, "barrier", category or cn.coll.category, operator, cn.barrier_s, 0.0, name)]


def _cp(phase, category, sn, cp) -> list:
    """An operator's context-parallel exchange (cp = (kind, level name)), after its compute: the
    whole transfer as a hidden segment drawn under the compute (ring attention overlaps it,
    explorer.cost.context_parallel), then the exposed remainder on the critical path."""
    forward = phase == "fwd" or category == "recompute"
    secs, nbytes, whole = (sn.cp_fwd_s, sn.cp_fwd_bytes, sn.cp_fwd_total_s) if forward else \
        (sn.cp_bwd_s, sn.cp_bwd_bytes, sn.cp_bwd_total_s)
    if not nbytes:
        return []
    cat = category or "cp_comm"
    if secs >= whole:                      # nothing hidden (Ulysses' all-to-alls)
        return [(phase, cp[0], cat, sn.step.op, secs, nbytes, cp[1])]
    return [(phase, cp[0], cat, sn.step.op, whole, nbytes, cp[1], HIDDEN),
            (phase, cp[0], cat, sn.step.op, secs, 0.0, cp[1])]


HIDDEN = "hidden"   # an 8th field: the segment overlaps the compute before it (its own row, no time taken)
HOST = "host"       # an 8th field: the host's issue time of the phase, on the row 'gpu N · host' from the phase's start
HOST_CATEGORY = "host"
"""The category of the host's issue time (kind host_issue): the CPU launching the phase's kernels
(explorer/model/kernels.py), which takes no device time of its own. The cost model prices only what the device
waits for it (kind host_wait, category compute), so this is no cost category (explorer.cost.numeric.CATEGORIES);
the Gantt gives it its own legend entry and colour (explorer/charts/palette.py) like every other row's category."""


def _host(placed, ctx: Numbers, cp_algo: str) -> tuple:
    """(issue fwd, issue bwd, exposed fwd, exposed bwd) seconds of the block's host side (explorer/model/kernels.py,
    explorer.cost.tree.host_bound): the same compiled block quantities evaluate() reads."""
    v = block_function(placed.cost)(*ctx.block_args(placed.split.degree, placed.route, placed.cp_route, cp_algo))
    names = ("host_fwd", "host_bwd", "host_fwd_exposed", "host_bwd_exposed")
    return tuple(float(function_quantity(v, name)) for name in names)


def _host_segments(phase: str, issue: float, exposed: float) -> list:
    """The host row of a phase (its issue time, drawn from the phase's start; category HOST_CATEGORY) and what it
    adds to the GPU's row: the wait for the host's kernels and the synchronisation stalls (category compute,
    explorer/model/kernels.py)."""
    out = [(phase, "host_issue", HOST_CATEGORY, "host", issue, 0.0, "", HOST)] if issue > 0 else []
    return out + ([(phase, "host_wait", "compute", "host", exposed, 0.0, "")] if exposed > 0 else [])


COMBINE_OPS = ("combine",)   # explorer/model/graph/moe.py: the operator that brings routed tokens home


def _all_to_all(ep: dict, op: str, phase: str, names) -> list:
    """The MoE all-to-all of a dispatch/combine operator (category ep_comm, at the ep group's level)."""
    return [seg for cn in ep.get((op, phase), ()) for seg in _coll(phase, None, op, cn, names)]


def _forward(steps, names, recompute: bool = False, cp=("p2p", ""), ep: dict | None = None) -> list:
    """Forward micro-steps; replayed in the backward (category recompute) when `recompute`.
    `ep`: (operator, phase) -> the expert layer's all-to-alls, drawn after the operator's compute
    (router -> dispatch -> experts -> combine)."""
    phase, category = ("bwd", "recompute") if recompute else ("fwd", None)
    ep = ep or {}
    out = []
    for sn in steps:
        op = sn.step.op
        fwd = [cn for cn in sn.collectives if cn.coll.phase == "fwd"]
        for cn in (c for c in fwd if c.coll.op == op):        # bring the input to the needed layout
            out += _coll(phase, category, op, cn, names)
        key = op + (" (recomputed)" if recompute else "")
        gathers = op in COMBINE_OPS             # combine receives its tokens first, then un-permutes them
        out += _all_to_all(ep, key, phase, names) if gathers else []
        out.append((phase, "compute", category or "compute", op, sn.fwd_s, 0.0, ""))
        out += _cp(phase, category, sn, cp)
        out += [] if gathers else _all_to_all(ep, key, phase, names)
        for cn in (c for c in fwd if c.coll.op != op):        # reduce the block's partial output
            out += _coll(phase, category, op, cn, names)
    return out


def _backward(steps, names, cp=("p2p", ""), ep: dict | None = None) -> list:
    ep = ep or {}
    out = []
    for sn in reversed(steps):
        op = sn.step.op
        for cn in (c for c in sn.collectives if c.coll.phase == "bwd" and c.coll.op != op):
            out += _coll("bwd", None, op, cn, names)
        out += _all_to_all(ep, op, "bwd", names)     # the gradient's way back over the ep group
        out.append(("bwd", "compute", "recompute", op, sn.recompute_s, 0.0, ""))   # FlashAttention's QK^T
        out.append(("bwd", "compute", "compute", op, sn.bwd_s - sn.bwd_weight_s, 0.0, ""))
        out += _cp("bwd", None, sn, cp)
        out.append(("bwd", "weight_grad", "compute", op, sn.bwd_weight_s, 0.0, ""))
        for cn in (c for c in sn.collectives if c.coll.phase == "bwd" and c.coll.op == op):
            out += _coll("bwd", None, op, cn, names)
    return out


def _boundary(the_plan, index: int, ctx: Numbers, phase: str, p2p: bool) -> list:
    """Collectives of the boundary into block `index` in `phase` that block `index`'s stage pays."""
    if not 0 < index < len(the_plan.blocks):
        return []
    b = the_plan.boundaries[index - 1]
    # forward: the consumer converts, the sender pays the p2p; backward: the other way round
    stage = the_plan.blocks[index - 1 if (phase == "fwd") == p2p else index].stage
    label = f"{the_plan.blocks[index - 1].block.name}->{the_plan.blocks[index].block.name}"
    out = []
    for cn in boundary_numbers(b, ctx):
        c = cn.coll
        if c.phase == phase and (c.kind == "p2p") == p2p and payer(b, c) == stage:
            out += _coll(phase, None, label, cn, ctx.level_names)
    return out


def block_segments(the_plan, k: int, ctx: Numbers) -> list:
    """(phase, kind, category, operator, seconds, bytes, level) of block k's forward then backward."""
    placed = the_plan.blocks[k]
    steps, _ = block_numbers(placed, ctx, the_plan.strategy.cp_algo)
    names, recompute = ctx.level_names, the_plan.strategy.recompute
    how = cp_kind(the_plan.strategy.cp_algo)
    crossed = [i for i, w in enumerate(coll.level_shares(how, placed.cp_route)) if w] if placed.cp_route else [0]
    cp = (how, "+".join(names[i] for i in crossed))
    ep = {}
    for cn, _ in expert_numbers(the_plan, ctx, k):
        ep.setdefault((cn.coll.op, cn.coll.phase), []).append(cn)
    issue_f, issue_b, wait_f, wait_b = _host(placed, ctx, the_plan.strategy.cp_algo)
    fwd = _boundary(the_plan, k, ctx, "fwd", False) + _forward(steps, names, cp=cp, ep=ep) + \
        _host_segments("fwd", issue_f, wait_f) + _boundary(the_plan, k + 1, ctx, "fwd", True)
    redo = []
    if placed.block.kind == "layer" and recompute == "full":       # the whole forward again
        redo = _forward(steps, names, recompute=True, cp=cp, ep=ep)
    elif placed.block.kind == "layer" and recompute == "selective":  # the modules it recomputes, as the cost does
        modules = the_plan.strategy.recompute_modules or rc.DEFAULT
        redone = rc.recomputed_names(placed.block.ops, modules)
        core = {o.name for o in placed.block.ops if o.attention_core}
        redo = [seg for sn in steps if sn.step.op in redone & core for seg in        # no collective in core_attn
                [("bwd", "compute", "recompute", sn.step.op, sn.fwd_s, 0.0, "")] + _cp("bwd", "recompute", sn, cp)]
        redo += _forward([sn for sn in steps if sn.step.op in redone - core], names, recompute=True, cp=cp, ep=ep)
    bwd = _boundary(the_plan, k + 1, ctx, "bwd", False) + redo + _backward(steps, names, cp=cp, ep=ep) + \
        _host_segments("bwd", issue_b, wait_b) + _boundary(the_plan, k, ctx, "bwd", True)
    return [s for s in fwd + bwd if s[4] > 0]


def microstep_events(model, strategy, cluster, gpus=None, layer: int | None = None, op: str | None = None):
    """microstep_table as a pandas DataFrame (what the charts and pages read)."""
    return microstep_table(model, strategy, cluster, gpus, layer, op).to_frame()


def microstep_table(model, strategy, cluster, gpus=None, layer: int | None = None,
                    op: str | None = None) -> EventTable:
    """Events of one layer's forward and backward (or one operator's) on the devices of its
    operator-parallel group, one micro-batch, from time 0."""
    the_plan = cost_tree(model, strategy, cluster).plan
    k = find_block(the_plan, layer, op)
    segments = block_segments(the_plan, k, context(model, strategy, cluster))
    if op is not None:
        segments = [s for s in segments if s[3] == op]
    return segments_table(segments, the_plan.blocks[k], strategy)


def segments_table(segments: list, placed, strategy) -> EventTable:
    """Segments laid end to end from 0, repeated on each device of the block's group; a hidden
    segment (8th field HIDDEN) starts with the segment before it, on the row 'gpu N · cp', and
    takes no time of the device's own row; a host segment (8th field HOST) starts with its phase's first
    segment, on the row 'gpu N · host' (the host issuing that phase's kernels), and takes none either."""
    marker = [seg[7] if len(seg) > 7 else "" for seg in segments]
    host = np.array([m == HOST for m in marker], dtype=bool)
    hidden = np.array([m in (HIDDEN, HOST) for m in marker], dtype=bool)
    phase, kind, category, operator, secs, nbytes, level = (np.array(col, dtype=object) for col in
                                                            zip(*(seg[:7] for seg in segments))) \
        if segments else [np.zeros(0, dtype=object)] * 7
    secs = secs.astype(float)
    n_all = len(secs)
    end = np.cumsum(np.where(hidden, 0.0, secs))
    start = end - np.where(hidden, 0.0, secs)
    if hidden.any():    # under the previous segment: it starts when that one starts
        under = hidden & ~host
        prev = np.maximum(np.flatnonzero(under) - 1, 0)
        start[under] = start[prev]
        for i in np.flatnonzero(host):      # from the start of the phase's first segment on the device
            first = next((j for j in range(n_all) if phase[j] == phase[i] and not hidden[j]), i)
            start[i] = start[first]
        end[hidden] = start[hidden] + secs[hidden]
    base = placed.stage * strategy.dp * strategy.tp * strategy.cp
    ranks = np.arange(base, base + placed.split.degree)
    n, r = len(secs), len(ranks)
    rank = np.repeat(ranks, n)
    tile = lambda a: np.tile(a, r)
    rows = np.array([f"gpu {x}" + ((" · host" if on_host else " · cp") if hide else "")
                     for x, hide, on_host in zip(rank, tile(hidden), tile(host))], dtype=object)
    return table({"row": rows, "stage": placed.stage, "hidden": tile(hidden),
                  "device": rank.astype(str).astype(object), "start_s": tile(start), "end_s": tile(end),
                  "kind": tile(kind), "phase": tile(phase), "category": tile(category), "micro_batch": 0,
                  "chunk": placed.chunk, "operator": tile(operator), "level": tile(level),
                  "bytes": tile(nbytes).astype(float)})
