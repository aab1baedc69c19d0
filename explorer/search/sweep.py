"""Bulk evaluation of every global choice with a uniform per-layer split (Megatron's by default).

For each (t, recompute, sequence parallelism) the chain's numbers are built
once (tables.Chain) as arrays over every micro-batch size; each (p, schedule)
then sums them by stage and the objective evaluates every micro-batch, ZeRO
stage and overlap setting as numpy arrays. The result is one row per
(global choice, uniform option).
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from explorer.hardware.cluster import BYTES_PER_ELEMENT
from explorer.strategy.strategy import LayerSplit, Strategy
from explorer.search.objective import Objective
from explorer.search.tables import A, B, F, GS, PSI, W, Chain, node_stages, stage_sums


@dataclass
class Points:
    """Evaluated candidates, one entry per (family, option, micro-batch, zero, overlap)."""

    family: np.ndarray
    option: np.ndarray
    micro_batch: np.ndarray
    zero: np.ndarray
    overlap: np.ndarray
    time_s: np.ndarray
    memory_bytes: np.ndarray


def probe(family, global_batch: int, dtype: str = "bf16") -> Strategy:
    """A strategy with the family's structure (micro-batch 1); stands in for the whole family."""
    return Strategy(dp=family.dp, tp=family.tp, pp=family.pp, micro_batch=1,
                    global_batch=family.dp * family.pp, schedule=family.schedule, chunks=family.chunks,
                    recompute=family.recompute, sequence_parallel=family.sequence_parallel, dtype=dtype,
                    cp=family.cp, cp_algo=family.cp_algo, ep=family.ep, expert_tp=family.expert_tp,
                    overlap_tp=tp_overlap(family))


def tp_overlap(family) -> bool:
    """With sequence parallelism the search runs the tensor-parallel collectives under the GEMMs
    (Megatron-LM --tp-comm-overlap, torchtitan's async TP): never slower in the model, so not a
    choice of its own (it would only add rows no faster than these)."""
    return family.sequence_parallel and family.tp > 1


def default_options(tp: int) -> tuple:
    """The sweep's per-layer split: Megatron's at the full degree t (the per-layer DP refines it)."""
    return (LayerSplit(tp, "megatron"),)


def sweep(model, cluster, families, global_batch: int, dtype: str = "bf16", progress=None,
          options=default_options) -> Points:
    """Evaluate every family with each uniform option of `options(tp)`; progress(done, total)."""
    groups = defaultdict(list)
    for index, fam in enumerate(families):
        groups[(fam.tp, fam.recompute, fam.sequence_parallel, fam.cp, fam.cp_algo, fam.ep, fam.expert_tp)].append(index)
    rows, done = [], 0
    for (tp, *_), members in groups.items():
        _sweep_group(model, cluster, families, members, global_batch, dtype, options(tp), rows)
        done += len(members)
        if progress:
            progress(done, len(families))
    return Points(*(np.concatenate([r[k] for r in rows]) if rows else np.zeros(0) for k in range(7)))


def _sweep_group(model, cluster, families, members, global_batch, dtype, options, rows):
    first = families[members[0]]
    sizes = np.array(sorted({b for i in members for b in families[i].micro_batches}))
    base = Chain(model, cluster, probe(first, global_batch, dtype), sizes)
    degree = np.array([o.degree if o.preset == "batch" else 1 for o in options])
    by_pp = defaultdict(list)
    for i in members:
        by_pp[families[i].pp].append(i)
    for pp, fams in by_pp.items():
        chain = base.for_probe(probe(families[fams[0]], global_batch, dtype))
        fam0 = families[fams[0]]
        objective = Objective(cluster, BYTES_PER_ELEMENT[dtype], chain.hw, fam0.dp, fam0.tp, pp, fam0.cp)
        by_stages = {}                 # schedules placing the blocks alike share their stage sums
        picked = []
        for i in fams:
            fam = families[i]
            stages = node_stages(model, probe(fam, global_batch, dtype))
            if stages not in by_stages:
                by_stages[stages] = np.stack([stage_sums(chain, chain.chain([o] * model.layers, stages), stages, pp)
                                              for o in options]).transpose(0, 1, 3, 2)   # (options, ROWS, b, pp)
            pick = np.searchsorted(sizes, fam.micro_batches)
            picked.append((i, fam, by_stages[stages][:, :, pick], sizes[pick]))
        ends = _stage_ends(picked, objective, global_batch)
        for (i, fam, sums, b), fam_ends in zip(picked, ends):
            _evaluate_family(i, fam, sums, b, fam_ends, degree, objective, global_batch, rows)


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


def _evaluate_family(index, fam, sums, b, ends, degree, objective, global_batch, rows):
    m = global_batch / (b * fam.dp)                                   # micro-batches, per b
    Fs, Bs, psi, act, split, Ws = (sums[:, k] for k in (F, B, PSI, A, GS, W))  # each (options, b, pp)
    valid = (b[None, :] % degree[:, None]) == 0                        # 'batch' needs b % degree == 0
    opt_idx, b_idx = np.nonzero(valid)
    for zero in fam.zeros:
        memory = objective.peak_memory(psi, act, m, fam.chunks, zero, fam.schedule)
        for overlap in fam.overlaps:
            time = (ends + objective.sync(psi, Bs, split, m[:, None], fam.chunks, zero, overlap,
                                          schedule=fam.schedule, fwd=Fs)).max(-1)
            count = opt_idx.size
            rows.append((np.full(count, index), opt_idx, b[b_idx], np.full(count, zero),
                         np.full(count, overlap), time[opt_idx, b_idx], memory[opt_idx, b_idx]))
