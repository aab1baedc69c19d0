"""search(): the best hybrid-parallel strategies for a model on N devices.

Three passes (issue 5):
1. space.enumerate_space -- every global choice, pruned families counted by reason;
2. sweep.sweep -- every global choice evaluated in bulk (numpy) with Megatron's
   split on every layer and the default stage placement, its stage ends first bounded
   below; the critical path is walked (sweep.settle) for the fastest points and every
   point that could be on the Pareto front, the others being slower or dominated;
3. refine.refine -- the fastest `refine_top` choices within the memory cap
   (schedules without interleaving) get their per-layer splits (layer_dp) and
   their layer->stage partition (partition) chosen by dynamic programming.
The top-k and the Pareto front (time vs peak memory) are then re-evaluated
with explorer.evaluate(); every number reported is evaluate()'s.
"""
from __future__ import annotations

import math
import time
from collections import Counter
from dataclasses import dataclass, replace

import numpy as np

from explorer.errors import ExplorerError
from explorer.limits import check_count, spend
from explorer.schedules import get as schedule_of
from explorer.cost.evaluate import Result, evaluate
from explorer.strategy.frameworks import EXPORTER, GENERIC, check_framework
from explorer.strategy.strategy import Strategy
from explorer.strategy.options import searched
from explorer.strategy.rules import check as check_rules, graphs_refusal
from explorer.search.pareto import dominated, pareto_front
from explorer.search.report import label
from explorer.search.refine import refine
from explorer.search.space import MEMORY, enumerate_space
from explorer.search.objective import param_gather_with
from explorer.search.sweep import (SENDS_OVERLAPPED_BY, Points, p2p_overlap, settle_fastest, settle_front, sweep,
                                   tp_overlap)

MEMORY_RULE = MEMORY


@dataclass(frozen=True)
class Candidate:
    """One strategy and what explorer.evaluate() says of it."""

    strategy: Strategy
    iteration_time_s: float
    peak_memory_bytes: float
    breakdown_s: dict
    mfu: float
    result: Result
    equivalent: tuple = ()    # strategies within EQUIVALENT of this one in both time and memory
    searched_s: float | None = None   # the search's own price of it (sweep or DP): evaluate()'s time to rounding
    searched_bytes: float | None = None   # and its peak memory


SWEEP_AGREES = 1e-6
"""The sweep's and the DPs' times agree with evaluate()'s to far better than this fraction
(tests/test_search_search.py: 1e-12); _Pool.best stops reading candidates past the slowest row by
more than EQUIVALENT and this (no later one could join a row)."""

BEST_SCAN = 20
"""The top list of k rows is made from the scan x k fastest candidates (_Pool.best), and the sweep
settles (computes exactly) at least that many of its fastest points."""

MEMORY_HEADROOM = 0.05
"""Fraction of the device's memory the search leaves free when no cap is given (issue 30 item 5): what the
model does not count -- the CUDA context, NCCL's buffers, the caching allocator's fragmentation -- takes a few
GiB of an 80 GiB device in practice, so a strategy at 99 % of the modelled memory is not one to plan on. A
policy, not a fitted constant: search(memory_headroom=...), `--memory-headroom` and the Search page set it."""

EQUIVALENT = 1e-3
"""Relative time and memory within which two strategies are one row of the top list (the others are
listed as its equivalent variants: GPipe = 1F1B when memory does not bind, ZeRO-0/1, ...)."""


@dataclass(frozen=True)
class SearchResult:
    top: list                 # Candidate, fastest first
    pareto: list              # Candidate on the time / memory front, fastest first
    pruned: dict              # reason -> raw grid points dropped for it
    total: int                # raw grid points (kept + pruned)
    kept: int                 # global choices within every rule and the memory cap
    evaluated: int            # global choices the sweep evaluated
    refined: int              # global choices whose splits and stages the DPs chose
    memory_cap_bytes: float
    elapsed_s: float


def _positive_finite(value) -> bool:
    try:
        return value > 0 and math.isfinite(value)
    except (TypeError, OverflowError):          # not a number, or an integer beyond a float
        return False


def _check(model, cluster, gpus, global_batch, max_memory_bytes, top, memory_headroom=0.0):
    for name, value in (("gpus", gpus), ("global batch", global_batch), ("top", top)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ExplorerError(f"{name} must be a positive integer, got {value!r}")
    if max_memory_bytes is not None and not _positive_finite(max_memory_bytes):
        raise ExplorerError(f"the memory cap must be a positive finite number, got {max_memory_bytes!r}")
    if isinstance(memory_headroom, bool) or not isinstance(memory_headroom, (int, float)) or \
            not 0 <= memory_headroom < 1:
        raise ExplorerError(f"the memory headroom must be a fraction from 0 to below 1, got {memory_headroom!r}")
    check_count("GPUs N", gpus, "MAX_DEVICES")            # the cluster grows with the run; the limits bound it


def _check_ep(model, ep) -> None:
    if isinstance(ep, bool) or not isinstance(ep, int) or ep < 1:
        raise ExplorerError(f"ep must be a positive integer, got {ep!r}")
    if ep > 1 and not getattr(model, "is_moe", False):
        raise ExplorerError(f"ep={ep} needs a model with experts; {model.name} is dense")
    if ep > 1 and model.experts % ep:
        raise ExplorerError(f"ep={ep} does not divide the model's {model.experts} experts")


def point_strategy(space, points: Points, k: int, global_batch: int, dtype: str = "bf16",
                   overlap_sends: bool = True, framework: str = "generic") -> Strategy:
    """The Strategy of sweep point k (Megatron's split, default stage placement), costed under `framework`'s
    defaults (Strategy.framework)."""
    fam = space.families[points.family[k]]
    return Strategy(dp=fam.dp, tp=fam.tp, pp=fam.pp, micro_batch=int(points.micro_batch[k]),
                    global_batch=global_batch, schedule=fam.schedule, chunks=fam.chunks,
                    zero=int(points.zero[k]), recompute=fam.recompute,
                    sequence_parallel=fam.sequence_parallel, overlap_dp=bool(points.overlap[k]), dtype=dtype,
                    cp=fam.cp, cp_algo=fam.cp_algo, ep=fam.ep, expert_tp=fam.expert_tp,
                    overlap_tp=tp_overlap(fam), overlap_p2p=p2p_overlap(fam, overlap_sends),
                    overlap_param_gather=param_gather_with(int(points.zero[k]), bool(points.overlap[k])),
                    framework=framework, pipeline_layout=fam.pipeline_layout,
                    **fam.carried(dtype))


def candidate(model, cluster, strategy: Strategy, gpus: int) -> Candidate:
    r = evaluate(model, strategy, cluster, gpus)
    return Candidate(strategy, r.iteration_time_s, r.memory_bytes_per_device["total"], dict(r.breakdown_s),
                     r.mfu, r)


def search(model, cluster, gpus: int, global_batch: int, max_memory_bytes: float | None = None,
           top: int = 10, progress=None, refine_top: int = 8, dtype: str = "bf16",
           framework: str | None = None, cp: int | None = None, cp_algo: str = "ring",
           ep: int | None = None, memory_headroom: float = MEMORY_HEADROOM, **options) -> SearchResult:
    """Search the whole global space of `model` on `gpus` devices of `cluster` at `global_batch`.

    `progress(fraction, message)` is called as the search goes (fraction in [0, 1]). With
    `framework` (one of explorer.codegen.FRAMEWORKS) the top list and the Pareto front hold only
    strategies that framework can express -- the exporters' own rules decide -- each costed under that
    framework's defaults (Strategy.framework: its gradient reduction dtype, explorer/strategy/frameworks.py), so
    that what is listed, what is exported and what that framework runs agree. Context parallelism is
    searched (ring) for sequences of 8k tokens and more; `cp` fixes its degree, `cp_algo` its algorithm.
    With `ep`, only that expert-parallel degree is searched (a model with experts; ep must divide them).
    Without `max_memory_bytes` the cap is the device's memory less `memory_headroom` of it (MEMORY_HEADROOM);
    a cap given is taken as it is. `options`: the strategy options the search carries, fixed, into every
    candidate (explorer/strategy/options.py, those whose record says `search`): `cuda_graphs` and
    `moe_dispatcher` (the host side, explorer/model/kernels.py: where the host's issue time binds, larger
    micro-batches win), what `fp8_recipe` (dtype fp8) and `adam_moments` keep (explorer/hardware/precision.py:
    the memory that decides which fit), the modules its selective-recomputation candidates recompute
    (`recompute_modules`, explorer/model/recompute.py; () = the attention core).
    """
    start = time.perf_counter()
    _check(model, cluster, gpus, global_batch, max_memory_bytes, top, memory_headroom)
    report = progress or (lambda fraction, message: None)
    cap = float(cluster.device.memory_bytes * (1 - memory_headroom) if max_memory_bytes is None else max_memory_bytes)
    report(0.0, "enumerating the global choices")
    if ep is not None:
        _check_ep(model, ep)
    carried = {o.name for o in searched()}
    unknown = sorted(set(options) - carried)
    if unknown:
        raise ExplorerError(f"the search does not carry the option {unknown[0][:40]!r}; it carries "
                            f"{', '.join(sorted(carried))}")
    refused = graphs_refusal(Strategy(**{k: v for k, v in options.items() if k in ("cuda_graphs", "moe_dispatcher")}),
                             model)
    if refused:
        raise ExplorerError(refused)
    fixed = Strategy(dtype=dtype, zero=max([1] + [o.needs_zero for o in searched()]), recompute="selective",
                     **options)       # refuses a bad option in one line
    check_rules(model, fixed, None, cluster)     # and on the cluster: e.g. an FP8 recipe its device does not run
    space = enumerate_space(model, gpus, global_batch, cp, cp_algo, ep,
                            **{k: getattr(fixed, k) for k in options})
    target = check_framework(framework) if framework else GENERIC     # the Strategy.framework of every candidate
    framework = EXPORTER.get(target)              # its exporter's name (the filter), None for generic
    sends = framework in SENDS_OVERLAPPED_BY
    points = sweep(model, cluster, space.families, global_batch, dtype,
                   progress=lambda done, n: report(0.7 * done / n, f"evaluated {done}/{n} families"),
                   overlap_sends=sends, framework=target)
    fits = np.flatnonzero(points.memory_bytes <= cap)
    pruned = Counter(space.pruned)
    pruned[MEMORY_RULE] += int(points.time_s.size - fits.size)
    keep = expressible(framework, model, cluster) if framework else None
    # the sweep's times are lower bounds until settled: the fastest that the top list, the early
    # answer and the refinement read, and every point that could be on the Pareto front; with a
    # framework filter (whose kept points only the exporters know) every point within the cap
    settle_fastest(points, fits, BEST_SCAN * top if keep is None else fits.size)
    settle_front(points, fits)
    pool = _Pool(model, cluster, gpus, space, points, fits, global_batch, dtype, cap, keep, sends, target)
    order = _to_refine(space, points, fits, refine_top)
    first = pool.first_answer()
    if first is not None:      # an early answer: the fastest uniform strategy, before the refinement
        report(0.7, f"best so far {first[1]:.4g} s: {label(first[0])}; refining")
    chains = {}
    bar = _top_bar(points, fits, top) if keep is None else np.inf
    for n, k in enumerate(order):
        spend(f"refining candidate {n + 1} of {len(order)} by dynamic programming")
        report(0.7 + 0.2 * n / max(1, len(order)), f"dynamic programming {n + 1}/{len(order)}")
        found = refine(model, cluster, pool.strategy(k), min(float(points.time_s[k]), bar), cap, chains)
        if found is not None:
            pool.add(*found)
    report(0.9, "re-evaluating the best and the Pareto front")
    best = pool.best(top)
    front = pool.front()
    report(1.0, "done")
    return SearchResult(best, front, dict(pruned), space.total, int(fits.size), int(points.time_s.size),
                        len(order), cap, time.perf_counter() - start)


def _top_bar(points: Points, fits: np.ndarray, top: int) -> float:
    """The time a refined strategy must beat to matter: the top-th fastest sweep point within the cap
    (a slower refinement enters neither the top list nor, being no better than a point already there
    in time, changes the front's fastest part; the DP prunes against it)."""
    if fits.size < top:
        return np.inf
    return float(np.partition(points.time_s[fits], top - 1)[top - 1])


def _to_refine(space, points: Points, fits: np.ndarray, count: int) -> list:
    """_choose_refined, with more of the sweep's fastest points settled while it reads a bound."""
    settled = BEST_SCAN
    while True:
        chosen = _choose_refined(space, points, fits, count)
        if chosen is not None:
            return chosen
        settled *= 4
        settle_fastest(points, fits, settled)


def _choose_refined(space, points: Points, fits: np.ndarray, count: int) -> list | None:
    """The fastest `count` distinct sweep points within the cap whose schedule is not interleaved.

    A point with Megatron's first/last-stage layout is not refined either: the partition DP chooses
    every layer's stage of the same global choice without it (a free stage map, which covers those layouts).
    Interleaving revisits every stage once per chunk, so the DP's labels would
    carry all p stages' open sums and multiply; zero-bubble schedules need the
    weight-gradient sums the labels do not carry: those keep Megatron's split. So do the points with
    expert-parallel overlap: a stage's exposed all-to-alls, max(sigma E, E - C) of its sums
    (explorer.search.tables.ep_overlapped), are not monotone in its blocks (a block with more backward compute
    can shorten the stage's forward), which the labels' dominance and bounds assume.
    Points with the same time, degrees and micro-batch (variants that differ only
    in memory, e.g. ZeRO-1 vs 2, GPipe vs 1F1B without pipelining, selective
    recomputation of a model without attention) are refined once: the one with
    the least memory.
    """
    if count <= 0:
        return []
    order = fits[np.lexsort((points.memory_bytes[fits], points.time_s[fits]))]
    chosen, seen = [], set()
    for k in order:
        if not points.exact[k]:
            return None                                  # a bound, not a time: settle more first
        fam = space.families[points.family[k]]
        key = (float(f"{points.time_s[k]:.12g}"), fam.tp, fam.cp, fam.pp, int(points.micro_batch[k]),
               bool(points.overlap[k]))
        if schedule_of(fam.schedule).chunked or schedule_of(fam.schedule).splits_weight or fam.pipeline_layout \
                or fam.overlap_ep or key in seen:
            continue
        seen.add(key)
        chosen.append(int(k))
        if len(chosen) == count:
            break
    return chosen


def expressible(framework: str, model, cluster):
    """strategy -> whether `framework`'s exporter writes it (rather than refusing), cached by the
    choices an exporter reads (not the batch sizes)."""
    from explorer.codegen import FRAMEWORKS, export     # the exporters load only when asked for
    if framework not in FRAMEWORKS:
        raise ExplorerError(f"framework {framework!r} is unknown; use one of {', '.join(FRAMEWORKS)}")
    cache = {}

    def keep(strategy) -> bool:
        key = strategy.with_(micro_batch=1, global_batch=strategy.dp *
                             schedule_of(strategy.schedule).base_micro_batches(strategy.pp))
        if key not in cache:
            try:
                export(framework, model, strategy, cluster)
                cache[key] = True
            except ExplorerError:
                cache[key] = False
        return cache[key]
    return keep


class _Pool:
    """Every candidate within the cap: sweep points (built on demand) and refined strategies;
    `keep` (optional) drops the strategies a framework cannot express before they are evaluated."""

    def __init__(self, model, cluster, gpus, space, points, fits, global_batch, dtype, cap, keep=None, sends=True,
                 framework=GENERIC):
        self.model, self.cluster, self.gpus, self.cap, self.keep = model, cluster, gpus, cap, keep
        self.sends, self.framework = sends, framework
        self.space, self.points, self.batch, self.dtype = space, points, global_batch, dtype
        self.time = list(points.time_s[fits])
        self.memory = list(points.memory_bytes[fits])
        self.source = list(fits)                  # sweep index, or a Strategy
        self._done = {}

    def strategy(self, k) -> Strategy:
        return point_strategy(self.space, self.points, int(k), self.batch, self.dtype, self.sends, self.framework)

    def first_answer(self):
        """(strategy, seconds) of the fastest kept sweep point, or None (the sweep's own numbers)."""
        for i in np.argsort(np.asarray(self.time), kind="stable"):
            if self._kept(int(i)):
                return self._strategy_of(int(i)), float(self.time[int(i)])
        return None

    def add(self, strategy: Strategy, time_s: float, memory_bytes: float) -> None:
        self.time.append(time_s)
        self.memory.append(memory_bytes)
        self.source.append(strategy)

    def _strategy_of(self, i: int) -> Strategy:
        src = self.source[i]
        return src if isinstance(src, Strategy) else self.strategy(src)

    def _kept(self, i: int) -> bool:
        return self.keep is None or self.keep(self._strategy_of(i))

    def _candidate(self, i: int) -> Candidate:
        strategy = self._strategy_of(i)
        if strategy not in self._done:
            self._done[strategy] = replace(candidate(self.model, self.cluster, strategy, self.gpus),
                                           searched_s=float(self.time[i]), searched_bytes=float(self.memory[i]))
        return self._done[strategy]

    def _unique(self, indices, limit=None) -> list:
        """The distinct candidates of `indices` within the cap (up to `limit` of them)."""
        out = []
        for c in self._each_unique(indices):
            out.append(c)
            if limit is not None and len(out) == limit:
                break
        return out

    def _each_unique(self, indices, stop=None):
        """The distinct candidates of `indices` within the cap, evaluated one at a time as they are
        read, until stop(index) (asked before each is evaluated)."""
        seen = set()
        for i in indices:
            if stop is not None and stop(i):
                return
            if not self._kept(int(i)):
                continue
            c = self._candidate(int(i))
            if c.strategy not in seen and c.peak_memory_bytes <= self.cap:   # evaluate() has the last word
                seen.add(c.strategy)
                yield c

    def best(self, k: int, scan: int = BEST_SCAN) -> list:
        """The k fastest distinct rows: a candidate within EQUIVALENT of a row in both time and memory
        joins that row's `equivalent` strategies instead (at most scan x k candidates are looked at)."""
        order = np.lexsort((np.asarray(self.memory), np.asarray(self.time)))   # ties: less memory first
        if self.keep is not None:                       # the scan window counts kept strategies only
            order = [i for i in order[:50 * scan * k] if self._kept(int(i))]
        rows = []
        for c in self._each_unique(order[:scan * k], stop=lambda i: len(rows) == k and self.time[int(i)] > (
                1 + EQUIVALENT) * (1 + SWEEP_AGREES) * max(row.iteration_time_s for row in rows)):
            same = next((i for i, row in enumerate(rows)
                         if abs(c.iteration_time_s - row.iteration_time_s) <= EQUIVALENT * row.iteration_time_s
                         and abs(c.peak_memory_bytes - row.peak_memory_bytes) <= EQUIVALENT * row.peak_memory_bytes),
                        None)
            if same is None:
                if len(rows) < k:
                    rows.append(c)
            else:
                rows[same] = replace(rows[same], equivalent=rows[same].equivalent + (c.strategy,))
        return sorted(rows, key=lambda c: (c.iteration_time_s, c.peak_memory_bytes))

    def front(self) -> list:
        """The Pareto front of the pool, re-evaluated; evaluate() has the last word: a point the DP's
        sums put a rounding error ahead of another (1e-16 s) but evaluate() ties with it and finds
        heavier is dropped."""
        chosen = self._pool_front()
        t = [c.iteration_time_s for c in chosen]
        m = [c.peak_memory_bytes for c in chosen]
        return [c for i, c in enumerate(chosen) if not any(dominated(t, m, i, j) for j in range(len(chosen)))]

    def _pool_front(self) -> list:
        if self.keep is None:
            return self._unique(pareto_front(np.asarray(self.time), np.asarray(self.memory)))
        # the front of the kept strategies: only a point below every faster kept one's memory can be on it
        time_s, memory = np.asarray(self.time), np.asarray(self.memory)
        on, lowest = [], np.inf
        for i in np.lexsort((memory, time_s)):
            if memory[i] < lowest and self._kept(int(i)):
                on.append(i)
                lowest = memory[i]
        return self._unique(on)
