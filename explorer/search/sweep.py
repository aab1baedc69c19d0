"""Bulk evaluation of every global choice with a uniform per-layer split (Megatron's by default).

For each (t, recompute, sequence parallelism) the chain's numbers are built
once (tables.Chain) as arrays over every micro-batch size; each (p, schedule)
then sums them by stage and the objective evaluates every micro-batch, ZeRO
stage and overlap setting as numpy arrays. The result is one row per
(global choice, uniform option). A family with expert-parallel overlap (space._with_ep_overlap) shares its
twin's stage sums, each stage's forward and backward then holding only the exposed all-to-alls
(tables.ep_overlapped): exact stage inputs, from which every bound and time below follows as for any other.

GPipe's stage ends are a closed form, priced for every row at once; the other schedules'
are first bounded below (explorer.schedules.critical_path.stage_end_lower_bounds: exact
for equal stages, a few per cent under otherwise) and their critical paths walked only
for the rows `settle` is asked for -- the fastest (settle_fastest) and those no exact row
dominates (settle_front). In the 175B / 1,024-GPU search that is ~1,900 of 45,840 rows.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from types import SimpleNamespace

import numpy as np

from explorer.cost.fused_dispatch import overlap_exposed_fraction
from explorer.hardware.cluster import BYTES_PER_ELEMENT
from explorer.limits import spend
from explorer.schedules import get as schedule_of
from explorer.schedules.critical_path import stage_end_lower_bounds
from explorer.strategy.frameworks import default_grad_dtype
from explorer.strategy.strategy import GRAD_BYTES, LayerSplit, Strategy, memory_options
from explorer.strategy.options import OPTIONS
from explorer.search.objective import Objective
from explorer.search.tables import AL, A, B, F, GS, PE, PSI, SB, SF, W, Chain, ep_overlapped, node_stages, stage_sums


@dataclass
class Points:
    """Evaluated candidates, one entry per (family, option, micro-batch, zero, overlap). `time_s` is
    the model's iteration time where `exact`, elsewhere a lower bound on it (the stage ends'
    lower bounds, explorer.schedules.critical_path.stage_end_lower_bounds: `settle` replaces them
    by the critical path where a search needs them)."""

    family: np.ndarray
    option: np.ndarray
    micro_batch: np.ndarray
    zero: np.ndarray
    overlap: np.ndarray
    time_s: np.ndarray
    memory_bytes: np.ndarray
    exact: np.ndarray
    pending: dict = field(default_factory=dict, repr=False)   # family -> _Pending: what settle() needs


@dataclass(frozen=True)
class _Pending:
    """A family, its stage sums (options, ROWS, b, pp), micro-batch sizes and counts per size, and
    its objective: what settle() needs to price its rows exactly."""

    family: object
    objective: Objective
    sums: np.ndarray
    micro_batches: np.ndarray
    micro_batch_counts: np.ndarray


def probe(family, global_batch: int, dtype: str = "bf16", framework: str = "generic") -> Strategy:
    """A strategy with the family's structure (micro-batch 1); stands in for the whole family (with the
    defaults of `framework`: its gradient dtype, explorer/strategy/frameworks.py)."""
    return Strategy(dp=family.dp, tp=family.tp, pp=family.pp, micro_batch=1,
                    global_batch=family.dp * schedule_of(family.schedule).base_micro_batches(family.pp),
                    schedule=family.schedule, chunks=family.chunks,
                    recompute=family.recompute, sequence_parallel=family.sequence_parallel, dtype=dtype,
                    cp=family.cp, cp_algo=family.cp_algo, ep=family.ep, expert_tp=family.expert_tp,
                    overlap_tp=tp_overlap(family), overlap_p2p=p2p_overlap(family),
                    framework=framework, pipeline_layout=family.pipeline_layout,
                    **family.carried(dtype, structure_only=True))


def precision_view(family, dtype: str):
    """The family's options as Strategy.memory_options reads them (the probe has ZeRO 0, which bf16 moments
    refuse: the options that do not change the blocks are priced here, by the objective; the probe carries
    those that do: Family.carried); with its ep, which expert-parallel overlap applies to."""
    return SimpleNamespace(dtype=dtype, ep=family.ep, **{**{o.name: o.default for o in OPTIONS},
                                                         **family.carried(dtype)})


def p2p_overlap(family, allowed: bool = True) -> bool:
    """The interleaved schedule's point-to-point sends run under computation (Megatron-LM
    overlap_p2p_comm, which Megatron-Core allows with a virtual pipeline only): never
    slower in the model (an edge's send replaces the same send inside its pass), so not a choice --
    unless the search is `allowed` none (a framework filter whose exporter cannot write it)."""
    return allowed and schedule_of(family.schedule).overlaps_sends and family.pp > 1


SENDS_OVERLAPPED_BY = (None, "megatron", "megatron-bridge", "torchtitan")
"""Framework filters under which the search overlaps the interleaved schedule's sends: none, Megatron-LM
and Megatron-Bridge (overlap_p2p_comm, which its recipe writes: explorer.codegen.megatron_bridge) and torchtitan (torch.distributed.pipelining issues its sends
asynchronously and waits on them later, 'Delay send waits' in its schedules)."""


def tp_overlap(family) -> bool:
    """With sequence parallelism the search runs the tensor-parallel collectives under the GEMMs
    (Megatron-LM --tp-comm-overlap, torchtitan's async TP): never slower in the model, so not a
    choice of its own (it would only add rows no faster than these)."""
    return family.sequence_parallel and family.tp > 1


def default_options(tp: int) -> tuple:
    """The sweep's per-layer split: Megatron's at the full degree t (the per-layer DP refines it)."""
    return (LayerSplit(tp, "megatron"),)


def sweep(model, cluster, families, global_batch: int, dtype: str = "bf16", progress=None,
          options=default_options, overlap_sends: bool = True, framework: str = "generic") -> Points:
    """Evaluate every family with each uniform option of `options(tp)`; progress(done, total);
    overlap_sends: the interleaved schedule's sends under computation (p2p_overlap); `framework`: the
    Strategy.framework every point is costed under (its default gradient dtype)."""
    groups = defaultdict(list)
    for index, fam in enumerate(families):
        groups[(fam.tp, fam.recompute, fam.sequence_parallel, fam.cp, fam.cp_algo, fam.ep, fam.expert_tp)].append(index)
    rows, pending, done = [], {}, 0
    for (tp, *_), members in groups.items():
        spend(f"searching (t={tp}: {len(members)} of {len(families)} families)")
        _sweep_group(model, cluster, families, members, global_batch, dtype, options(tp), rows, pending,
                     overlap_sends, framework)
        done += len(members)
        if progress:
            progress(done, len(families))
    columns = [np.concatenate([r[k] for r in rows]) if rows else np.zeros(0) for k in range(8)]
    columns[7] = columns[7].astype(bool)
    return Points(*columns, pending=pending)


def _sweep_group(model, cluster, families, members, global_batch, dtype, options, rows, pending,
                 overlap_sends=True, framework="generic"):
    first = families[members[0]]
    sizes = np.array(sorted({b for i in members for b in families[i].micro_batches}))
    base = Chain(model, cluster, probe(first, global_batch, dtype, framework), sizes)
    degree = np.array([o.degree if o.preset == "batch" else 1 for o in options])
    by_pp = defaultdict(list)
    for i in members:
        by_pp[families[i].pp].append(i)
    for pp, fams in by_pp.items():
        chain = base.for_probe(probe(families[fams[0]], global_batch, dtype, framework))
        fam0 = families[fams[0]]
        objective = Objective(cluster, BYTES_PER_ELEMENT[dtype], chain.hw, fam0.dp, fam0.tp, pp, fam0.cp,
                              chain.probe if model.is_moe else None,
                              lambda zero: GRAD_BYTES.get(default_grad_dtype(framework, dtype, zero)),
                              _shared(memory_options(precision_view(fam0, dtype))), dtype=dtype)
        objective.sends_allowed = overlap_sends
        by_stages = {}                 # schedules placing the blocks alike share their stage sums
        picked, precision = [], {}
        for i in fams:
            fam = families[i]
            stages = node_stages(model, probe(fam, global_batch, dtype, framework))
            if stages not in by_stages:
                by_stages[stages] = np.stack([stage_sums(chain, chain.chain([o] * model.layers, stages), stages, pp)
                                              for o in options]).transpose(0, 1, 3, 2)   # (options, ROWS, b, pp)
            pick = np.searchsorted(sizes, fam.micro_batches)
            sums = by_stages[stages][:, :, pick]
            if fam.overlap_ep:      # the all-to-alls under the partner pass's compute, stage by stage
                sums = ep_overlapped(sums, float(overlap_exposed_fraction(fam.moe_dispatcher, cluster.device.sms,
                                                                          fam.cuda_graphs)))
            picked.append((i, fam, sums, sizes[pick]))
            precision[i] = memory_options(precision_view(fam, dtype))   # each family's own memory (overlap_ep)
        exact = [k for k, (_, fam, _, _) in enumerate(picked) if schedule_of(fam.schedule).closed_form_exact]
        ends = dict(zip(exact, _stage_ends([picked[k] for k in exact], objective, global_batch)))
        for k, (i, fam, sums, b) in enumerate(picked):
            if k not in ends:
                pending[i] = _Pending(fam, objective, sums, b, global_batch / (b * fam.dp))
            _evaluate_family(i, fam, sums, b, ends.get(k), degree, objective, global_batch, rows, precision[i])


def _shared(memory: dict) -> dict:
    """The memory options the group's objective prices its times with: all but expert-parallel overlap's, which
    only its families' memory reads (_evaluate_family's `precision`), so that twins share compiled terms."""
    return {k: v for k, v in memory.items() if k != "ep_overlap"}


def _stage_ends(picked: list, objective, global_batch: int) -> list:
    """Each family's stage ends (options, b, pp), one critical-path call for all the families of one
    schedule and chunk count (explorer.schedules.critical_path groups their columns by pipeline)."""
    out = [None] * len(picked)
    by_schedule = defaultdict(list)
    for k, (_, fam, _, _) in enumerate(picked):
        by_schedule[(fam.schedule, fam.chunks)].append(k)
    for (schedule, chunks), ks in by_schedule.items():
        cols = {name: [] for name in (F, B, W)}
        ms, shapes = [], []
        for k in ks:
            _, fam, sums, b = picked[k]
            shapes.append(sums[:, F].shape)                                # (options, b, pp)
            for name in cols:
                cols[name].append(sums[:, name].reshape(-1, sums.shape[-1]))
            ms.append(np.broadcast_to(global_batch / (b * fam.dp), sums[:, F].shape[:2]).reshape(-1))
        ends = objective.stage_ends(*(np.concatenate(cols[name]) for name in (F, B)), np.concatenate(ms),
                                    chunks, schedule, np.concatenate(cols[W]))
        start = 0
        for k, shape in zip(ks, shapes):
            size = shape[0] * shape[1]
            out[k] = ends[start:start + size].reshape(shape)
            start += size
    return out


def _evaluate_family(index, fam, sums, b, ends, degree, objective, global_batch, rows, precision=None):
    """The family's rows; `ends` its stage ends (options, b, pp), or None: their lower bounds; `precision` the
    family's memory options (Strategy.memory_options of precision_view), None: the objective's."""
    m = global_batch / (b * fam.dp)                                   # micro-batches, per b
    Fs, Bs, psi, act, split, Ws, psi_e = (sums[:, k] for k in (F, B, PSI, A, GS, W, PE))  # each (options, b, pp)
    exact = ends is not None
    if not exact:       # (overlapped sends: the passes without them, which the edges only lengthen)
        busy = (Fs - sums[:, SF], Bs - sums[:, SB]) if p2p_overlap(fam, objective.sends_allowed) else (Fs, Bs)
        ends = np.moveaxis(stage_end_lower_bounds(fam.schedule, *(np.moveaxis(x, -1, 0) for x in (*busy, Ws)),
                                                  m[None, :], fam.chunks), 0, -1)
    valid = (b[None, :] % degree[:, None]) == 0                        # 'batch' needs b % degree == 0
    opt_idx, b_idx = np.nonzero(valid)
    for zero in fam.zeros:
        memory = objective.peak_memory(psi, act, m, fam.chunks, zero, fam.schedule, psi_e, sums[:, AL], precision)
        for overlap in fam.overlaps:
            time = (ends + objective.sync(psi, Bs, split, m[:, None], fam.chunks, zero, overlap,
                                          schedule=fam.schedule, fwd=Fs, psi_e=psi_e)).max(-1)
            count = opt_idx.size
            rows.append((np.full(count, index), opt_idx, b[b_idx], np.full(count, zero),
                         np.full(count, overlap), time[opt_idx, b_idx], memory[opt_idx, b_idx],
                         np.full(count, exact)))


# Schedules whose stage ends are a closed form (Schedule.closed_form_exact: exact for any stages,
# explorer.schedules.gpipe) are evaluated for every point at once; the others' critical paths are walked
# only where settle() asks.


def settle(points: Points, indices) -> None:
    """Replace the lower bounds at `indices` by the model's iteration time, in place: each family's
    stage ends on its schedule's critical path (one call per objective, schedule and chunk count, as
    the sweep would), plus each stage's synchronisation, as _evaluate_family."""
    indices = np.asarray(indices, dtype=np.int64).reshape(-1)
    indices = np.unique(indices[~points.exact[indices]])
    groups = defaultdict(list)
    for k in indices.tolist():
        pend = points.pending[int(points.family[k])]
        groups[(id(pend.objective), pend.family.schedule, pend.family.chunks)].append(k)
    for ks in groups.values():
        spend(f"walking the critical paths of {len(indices):,} candidates")
        pends = [points.pending[int(points.family[k])] for k in ks]
        objective, fam = pends[0].objective, pends[0].family
        at = [int(np.searchsorted(pend.micro_batches, points.micro_batch[k])) for pend, k in zip(pends, ks)]
        sums = np.stack([pend.sums[int(points.option[k]), :, j] for pend, k, j in zip(pends, ks, at)])  # (n, ROWS, pp)
        m = np.array([pend.micro_batch_counts[j] for pend, j in zip(pends, at)])
        column, first, of_row = {}, [], []           # each (family, option, b) priced once
        for n, (k, j) in enumerate(zip(ks, at)):
            key = (int(points.family[k]), int(points.option[k]), j)
            if key not in column:
                column[key] = len(first)
                first.append(n)
            of_row.append(column[key])
        sends = (sums[first, SF], sums[first, SB]) if p2p_overlap(fam, objective.sends_allowed) else None
        ends = objective.stage_ends(sums[first, F], sums[first, B], m[first], fam.chunks, fam.schedule,
                                    sums[first, W], sends)[of_row]
        ks = np.asarray(ks)
        variants = defaultdict(list)
        for n, k in enumerate(ks.tolist()):
            variants[(int(points.zero[k]), bool(points.overlap[k]))].append(n)
        for (zero, overlap), rows in variants.items():
            rows = np.asarray(rows)
            part = sums[rows]
            after = objective.sync(part[:, PSI], part[:, B], part[:, GS], m[rows, None], fam.chunks, zero, overlap,
                                   schedule=fam.schedule, fwd=part[:, F], psi_e=part[:, PE])
            points.time_s[ks[rows]] = (ends[rows] + after).max(-1)
            points.exact[ks[rows]] = True


def settle_fastest(points: Points, among: np.ndarray, count: int) -> None:
    """Make the `count` fastest points of `among` (by time, then memory) exact: every point whose
    bound is at most the count-th value is settled, until the count fastest are all exact. A point
    left with its bound is then no faster than any of them (the model's time is at least the bound)."""
    while among.size:
        order = among[np.lexsort((points.memory_bytes[among], points.time_s[among]))][:count]
        if points.exact[order].all():
            return
        bar = points.time_s[order[-1]]
        settle(points, among[~points.exact[among] & (points.time_s[among] <= bar)])


def settle_front(points: Points, among: np.ndarray, batch: int = 16) -> None:
    """Make exact every point of `among` that could be on its time/memory Pareto front: those left
    with their bound are each dominated by an exact point -- faster than the bound, with no more
    memory -- so the front of `among` is the same whatever their times (search.pareto). The points
    not yet so dominated are settled lowest bound first, `batch` at a time, since each settled
    point may dominate many of the others."""
    while True:
        uncovered = _undominated(points, among)
        if not uncovered.size:
            return
        settle(points, uncovered[np.argsort(points.time_s[uncovered], kind="stable")[:batch]])


def _undominated(points: Points, among: np.ndarray) -> np.ndarray:
    """The points of `among` left with a bound that no exact point of `among` dominates."""
    inexact = among[~points.exact[among]]
    exact = among[points.exact[among]]
    if not exact.size:
        return inexact
    order = exact[np.argsort(points.time_s[exact], kind="stable")]
    lowest = np.minimum.accumulate(points.memory_bytes[order])
    faster = np.searchsorted(points.time_s[order], points.time_s[inexact], side="left")   # exact points below each bound
    covered = (faster > 0) & (lowest[np.maximum(faster - 1, 0)] <= points.memory_bytes[inexact])
    return inexact[~covered]
