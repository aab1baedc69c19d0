"""When each pipeline stage runs its last pass: the longest path through a schedule's dependency graph.

A stage runs its passes one at a time in the schedule's order, and a pass waits for its input
(the schedule's own rule, Schedule.input_of, which the timeline's simulation follows too; by default
explorer.schedules.base.input_of): the forward of (stage i, chunk c, micro-batch j)
for the forward of (i-1, c, j), or of (p-1, c-1, j) on the first stage; the backward for (i+1, c, j),
or (0, c+1, j) on the last stage, whose last chunk waits for its own forward. Each pass's end is
then its duration plus the later of its stage's previous pass and its input: a max-plus recursion,
and the end of a stage's last pass is the longest path to it (the critical path of the super-step;
Narayanan et al. SC'21 Sec 2.2, Fig. 4 for the orders). For equal stages it is the schedules' closed
forms ((m+p-1)(F+B) for 1F1B); with unequal stages no closed form in the stage sums is exact
(fidelity issue, E8): GPipe's flow-shop bound pairs the slowest forward with the slowest backward,
and 1F1B runs ahead of it when the heavy stages come first.

Two exact ways to compute it, both vectorised over candidates (any axes after the stage axis):
* `ends_1f1b` (explorer.schedules.one_f_one_b: Schedule.fast_ends), for 1F1B with m >= p: step s of stage i is its forward of micro-batch p-1-i+s followed
  by its backward of micro-batch s, so the ends of step s follow from those of step s-1 by
  X_s = F + max(Y_{s-1}, X_{s-1} shifted a stage down), Y_s = B + max(X_s, Y_s shifted a stage up)
  (a reversed cumulative max). In the steady part every stage repeats the same recursion, and once
  one step adds the same amount to every end it adds it at every later step (max-plus linearity),
  so the remaining steady steps are added at once: O(p) numpy operations per step up to that point.
* `ends_graph`, any order: the passes grouped by their depth in the dependency graph (built once per
  (schedule, p, m, v) and cached), one vectorised max-plus update per depth (or, for few candidates,
  one Python step per pass). A long interleaved or ZB-H1 pipeline is three short ones extended
  (`_ends_periodic`): once a block more of micro-batches adds T_* per micro-batch to every stage's
  end, so does every later block; where the three have not settled, the whole graph is walked.
For one candidate (evaluate()) both run on Python floats: numpy's per-call overhead dominates arrays
of p numbers. tests/test_critical_path.py checks every path against the timeline's simulation.
With the sends overlapped (Megatron-LM overlap_p2p_comm) an edge between stages carries
its send: end = duration + max(previous pass on the stage, input + send), walked on the graph
(tests/test_p2p_overlap.py).
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np

from explorer.errors import ExplorerError
from explorer.schedules.base import B, F
from explorer.schedules.base import PERIODIC_RTOL, inputs_of  # noqa: F401 (the default dependency rule over arrays)
from explorer.schedules.one_f_one_b import ends_1f1b  # noqa: F401 (1F1B's fast walk, Schedule.fast_ends)
from explorer.schedules.registry import get

PASSES_PER_DEPTH = 30
"""A graph is walked pass by pass in Python while its passes times the candidates stay under this
many per depth (a depth's numpy update costs about as much as 30 passes in Python: measured on the
2-core development machine); beyond, depth by depth in numpy."""
MAX_GRAPH_PASSES = 150_000
"""An interleaved or ZB-H1 pipeline whose graphs would hold more passes than this (about 110 stages
and more, interleaved) takes the schedule's closed form instead (_ends_closed_form: exact for equal
stages, an approximation otherwise), so that a 2,048-layer model's presets stay within the inputs'
work bound (tests/test_fuzz_inputs.py)."""


def stage_ends(schedule: str, fwd, bwd, weight, m, v=1, sends=None) -> np.ndarray:
    """Per stage (axis 0), the end of its last pass of one iteration, from per-stage seconds of one
    micro-batch: `fwd` F_r, `bwd` B_r (input and weight gradient), `weight` W_r (the part a
    zero-bubble schedule runs as its own W pass), `m` micro-batches, `v` chunks. A chunk's pass takes
    1/v of its stage's. Any further axes (candidates) broadcast, m among them.

    `sends` (send_fwd, send_bwd), per stage like `fwd`: point-to-point sends overlapped with
    computation (Megatron-LM overlap_p2p_comm): not part of the sender's passes, a pass
    on another stage waits for its input's end plus the send of the stage that ran it (1/v of it per
    chunk, as the passes). Without them sends are part of the sender's pass (in `fwd`, `bwd`)."""
    fwd, bwd, weight = (np.asarray(x, dtype=float) for x in (fwd, bwd, weight))
    p = max(fwd.shape[0] if fwd.ndim else 1, bwd.shape[0] if bwd.ndim else 1)
    arrays = (fwd, bwd, weight) + (() if sends is None else tuple(np.asarray(x, dtype=float) for x in sends))
    shape = np.broadcast_shapes(*(_rest(x) for x in arrays), np.shape(m))
    full = lambda x: np.broadcast_to(x.reshape(x.shape if x.ndim else (1,)), (p,) + shape) if x.ndim \
        else np.full((p,) + shape, float(x))
    arrays = [full(x).reshape(p, -1) for x in arrays]
    fwd, bwd, weight = arrays[:3]
    sent = None if sends is None else np.stack([arrays[3], arrays[4], np.zeros_like(arrays[3])], axis=1)
    ms = np.broadcast_to(np.asarray(m, dtype=float), shape).reshape(-1)
    v = int(v)
    out = np.empty_like(fwd)
    ms = np.rint(ms).astype(int)
    for key in _distinct(_group(schedule, ms, p, v)):
        cols = _group(schedule, ms, p, v) == key
        out[:, cols] = _ends(schedule, fwd[:, cols], bwd[:, cols], weight[:, cols], ms[cols], v,
                             None if sent is None else sent[..., cols])
    return out.reshape((p,) + shape)


def stage_end_lower_bounds(schedule: str, fwd, bwd, weight, m, v=1) -> np.ndarray:
    """Per stage (axis 0), a lower bound on stage_ends(...) with the same arguments, in a few numpy
    operations (the search prices every candidate with it and the critical path only where the
    bound does not already rule a candidate out: explorer.search.sweep.settle).

    Every stage starts with the forward of micro-batch 0, chunk 0, which waits for that forward on
    every stage before it: it starts at Σ_{l<r} F_l/v at the earliest, and the stage then runs its
    m (F_r + B_r) of passes one at a time, so end_r >= Σ_{l<r} F_l/v + m (F_r + B_r). Each stage's
    last backward (input gradient) pass is micro-batch m-1's of chunk 0 and waits for that pass on
    the next stage: Q_r >= Q_{r+1} + (B_r - W_r)/v, with Q_r >= Σ_{l<r} F_l/v + m (F_r + B_r - W_r)
    (every forward and input-gradient pass runs before it). Without a separate W pass (W = 0 but
    zero-bubble) that pass is the stage's last, end_r = Q_r; under ZB-H1 micro-batch m-1's W follows
    it, end_r >= Q_r + W_r/v. And any backward pass on stage r waits for its micro-batch's forward
    through every chunk of every stage and its backward from the last stage down to r, so the
    stage's first backward ends at ΣF + Σ_{l>=r} (B_l - W_l)/v at the earliest, with all but the
    w_r forwards run before it (_warmup) and itself still to run. tests/test_critical_path.py
    checks these facts on the registered orders and the bound against the simulation; for equal
    stages and no W pass the bound is the closed form, exact."""
    sched = get(schedule)
    fwd, bwd, weight = (np.asarray(x, dtype=float) for x in (fwd, bwd, weight))
    fwd, bwd, weight = np.broadcast_arrays(fwd, bwd, weight if sched.splits_weight else np.zeros(()))
    m = np.asarray(m, dtype=float)
    v = float(sched.chunk_count(v))
    arrive = (np.cumsum(fwd, axis=0) - fwd) / v                      # Σ_{l<r} F_l / v
    climb = (bwd - weight) / v
    suffix = np.cumsum(climb[::-1], axis=0)[::-1]                     # Σ_{l>=r} (B_l - W_l)/v
    own = arrive + m * (fwd + bwd - weight)
    last_b = suffix + np.maximum.accumulate((own - suffix)[::-1], axis=0)[::-1]   # max_{s>=r} own_s + climb r..s-1
    warm = np.minimum(np.asarray(_warmup(schedule, fwd.shape[0], int(v)), dtype=float).reshape(
        (-1,) + (1,) * (fwd.ndim - 1)), m * v)                       # forwards before the first backward
    first_b = fwd.sum(axis=0) + suffix + m * (fwd + bwd) - warm * fwd / v - climb
    if not sched.first_backward_climbs:     # a V: the first backward climbs from stage 0 (not bounded here)
        first_b = arrive
    return np.maximum.reduce([arrive + m * (fwd + bwd), last_b + weight / v, first_b])


@lru_cache(maxsize=64)
def _warmup(schedule: str, p: int, v: int) -> tuple:
    """Per stage, the forward passes its order runs before its first backward when micro-batches are
    plenty (with m of them it is the lesser of this and m v): p - r under 1F1B and ZB-H1, 2(p-r-1) +
    (v-1)p + 1 interleaved, every one (inf) under GPipe -- each schedule's own `warmup`
    (tests/test_critical_path.py checks it against its order), else read off the order for (v+2)p
    micro-batches."""
    rule = get(schedule).warmup
    if rule is not None:
        return tuple(float(rule(p, r, v)) for r in range(p))
    m = (v + 2) * p
    out = []
    for order in get(schedule).order(p, m, v):
        count = next((n for n, step in enumerate(order) if step[0] != F), len(order))
        out.append(float("inf") if count >= m * v else count)
    return tuple(out)


def _distinct(keys: np.ndarray) -> list:
    """The distinct integers of `keys`, ascending, as np.unique gives them; numpy 2's np.unique imports numpy.ma
    on first use (numpy/lib/_arraysetops_impl.py, _unique1d: np.ma.is_masked), ~0.05 s of a fresh process."""
    return sorted(set(keys.tolist()))


def _group(schedule: str, ms: np.ndarray, p: int, v: int) -> np.ndarray:
    """Columns computed together: those of one m, or of one short pipeline a long one extends
    (_ends_periodic's m_1, as -m_1 to keep the two apart)."""
    sched = get(schedule)
    if sched.fast_ends is not None:
        return ms
    k = sched.block(p)
    return np.where(ms >= _base(sched, p, k, ms), -_base(sched, p, k, ms), ms)


def _base(sched, p: int, k: int, ms):
    """m_1 of _ends_periodic: p (or the fewest micro-batches the order takes) plus m's remainder modulo
    the block."""
    return ms % k + sched.base_micro_batches(p)


def _rest(x: np.ndarray) -> tuple:
    return x.shape[1:] if x.ndim else ()


def _ends(schedule: str, fwd, bwd, weight, ms: np.ndarray, v: int, sent=None) -> np.ndarray:
    """Stage ends of columns sharing one _group key; `ms` their micro-batch counts; `sent` the
    overlapped sends (stages x (F, B, W) x columns) or None."""
    p, m = fwd.shape[0], int(ms[0])
    sched = get(schedule)
    if sched.fast_ends is not None and m >= p:
        if sent is None:
            return sched.fast_ends(fwd, bwd, m)
        return ends_graph(schedule, np.stack([fwd, bwd, np.zeros_like(fwd)], axis=1), m, 1, sent)
    if sched.splits_weight:
        durations = np.stack([fwd / v, (bwd - weight) / v, weight / v], axis=1)
    else:
        durations = np.stack([fwd / v, bwd / v, np.zeros_like(fwd)], axis=1)
    v = sched.chunk_count(v)
    block = sched.block(p)
    if _passes_in(schedule, p, min(m, 3 * _base(sched, p, block, m) + 2 * block), v) > MAX_GRAPH_PASSES:
        if sent is not None:         # the sends as part of their passes: what overlapping can only shorten
            fwd, bwd = fwd + sent[:, F], bwd + sent[:, B]
        return _ends_closed_form(schedule, fwd, bwd, weight, m, v)
    if m >= _base(sched, p, block, m):
        return _ends_periodic(schedule, durations, ms, v, block, sent=sent)
    return ends_graph(schedule, durations, m, v, sent)


def _passes_in(schedule: str, p: int, m: int, v: int) -> int:
    """Passes of one graph: F and B (and W) of every micro-batch and chunk on every stage."""
    return get(schedule).pass_kinds * p * m * v


def _ends_closed_form(schedule: str, fwd, bwd, weight, m: int, v: int) -> np.ndarray:
    """Beyond MAX_GRAPH_PASSES: the schedule's closed-form makespan (its sympy `makespan`, lambdified once:
    Schedule.numeric_makespan; exact for equal stages) for stage 0, each later stage ending its last
    micro-batch's backward that much earlier."""
    sched = get(schedule)
    climb = np.concatenate([np.zeros_like(bwd[:1]),
                            np.cumsum(bwd - (weight if sched.splits_weight else 0), axis=0)[:-1]])
    makespan = sched.numeric_makespan(fwd, bwd, weight if sched.splits_weight else 0 * fwd, m, v)
    return makespan - climb / v


def _ends_periodic(schedule: str, durations: np.ndarray, ms: np.ndarray, v: int, k: int,
                   m1: int | None = None, sent=None) -> np.ndarray:
    """ends_graph for a long pipeline from three short ones. Each block of k more micro-batches (one,
    or a group of p under interleaving) adds k more steady steps; once the steady part runs at the
    most loaded stage's pace, T_* = max_r (F_r + B_r) per micro-batch (no stage can go faster, and a
    max-plus recursion never leaves that regime once every end moves by the same amount), each block
    adds k T_* to every stage's end. With m_1 < m_2 < m_3 one block apart (m_1 = p plus m's remainder
    modulo k), where both differences are k T_* on every stage, the ends at m follow by adding the
    remaining blocks (m up to m_3 is one of the three). Candidates whose pipeline has not settled by
    then try again from four times m_1, and are computed in full once that would reach m. (With
    overlapped sends the pace may exceed T_* after looking steady: such candidates are computed in full up to
    MAX_GRAPH_PASSES passes.)"""
    p = durations.shape[0]
    m1 = int(_base(get(schedule), p, k, int(ms[0]))) if m1 is None else m1    # the same for every column here
    if int(ms.max()) < m1 + 2 * k:       # every column is one of the short ones: only those are walked
        counts = tuple(sorted({int(x) for x in ms}))
        ends = dict(zip(counts, ends_graphs(schedule, durations, counts, v, sent)))
        return np.stack([ends[int(x)][:, c] for c, x in enumerate(ms)], axis=1)
    e1, e2, e3 = ends_graphs(schedule, durations, (m1, m1 + k, m1 + 2 * k), v, sent)
    pace = k * durations.sum(axis=1).max(axis=0) * v              # k micro-batches at T_* (chunks: v F/v)
    tol = PERIODIC_RTOL * 10 * np.maximum(np.abs(e3).max(axis=0), 1e-300)
    steady = (np.abs(e2 - e1 - pace) <= tol).all(axis=0) & (np.abs(e3 - e2 - pace) <= tol).all(axis=0)
    out = e3 + ((ms - m1 - 2 * k) // k) * pace
    short = ms <= m1 + 2 * k                                     # one of the three itself
    out[:, short] = np.choose(((ms[short] - m1) // k)[None, :], (e1[:, short], e2[:, short], e3[:, short]))
    # with overlapped sends, stage ends that moved by T_* twice do not show that every pass did: the pace can
    # still rise (a 6-stage ZB-H1 with two sends: 6, 6, then 7 a micro-batch, period 3), so such columns are
    # computed in full wherever their graph stays within MAX_GRAPH_PASSES (past that the extrapolation stands)
    walked = np.zeros(len(ms), dtype=bool) if sent is None else \
        (sent.reshape(-1, sent.shape[-1]) > 0).any(axis=0) & (get(schedule).pass_kinds * p * ms * v <= MAX_GRAPH_PASSES)
    walked &= ~short
    for count in _distinct(ms[walked]):                          # one walk per micro-batch count
        cols = np.flatnonzero(walked & (ms == count))
        out[:, cols] = ends_graph(schedule, durations[..., cols], int(count), v, sent[..., cols])
    steady |= short | walked
    later = m1 + 3 * m1 // k * k                                 # four times m_1, the same remainder
    for c in np.flatnonzero(~steady):
        one, one_sent = durations[..., c:c + 1], None if sent is None else sent[..., c:c + 1]
        out[:, c] = (_ends_periodic(schedule, one, ms[c:c + 1], v, k, later, one_sent) if later + 2 * k < ms[c]
                     else ends_graph(schedule, one, int(ms[c]), v, one_sent))[:, 0]
    return out


def ends_graph(schedule: str, durations: np.ndarray, m: int, v: int, sent=None) -> np.ndarray:
    """Stages x candidates: end of each stage's last pass, for `durations` stages x (F, B, W) x
    candidates, by depth in the dependency graph of the schedule's order; `sent` (same shape, or
    None) the overlapped sends each kind of pass makes (stage_ends)."""
    return ends_graphs(schedule, durations, (m,), v, sent)[0]


def ends_graphs(schedule: str, durations: np.ndarray, ms: tuple, v: int, sent=None) -> list:
    """ends_graph for each micro-batch count of `ms`, the graphs walked side by side (one numpy
    update per depth for all of them)."""
    p = durations.shape[0]
    graph = _graph(schedule, p, tuple(ms), v)
    per_pass = durations[graph["stage"], graph["kind"]]         # passes x candidates
    if sent is not None:    # the wait on each pass's input: what the input's pass sends, if it ran elsewhere
        delay = np.vstack([sent[graph["stage"], graph["kind"]] / v, np.zeros((1, per_pass.shape[1]))])
        delay = delay[_remote(graph)]                           # passes x candidates
    if per_pass.shape[0] * per_pass.shape[1] < PASSES_PER_DEPTH * len(graph["levels"]):
        # few candidates: a loop over the passes in Python floats
        out = np.empty((len(ms), p, per_pass.shape[1]))
        for c in range(per_pass.shape[1]):
            dur, end = per_pass[:, c].tolist(), [0.0] * (per_pass.shape[0] + 1)
            if sent is None:
                for n, a, b in _topological(graph):
                    x, y = end[a], end[b]
                    end[n] = dur[n] + (x if x > y else y)
            else:
                wait = delay[:, c].tolist()
                for n, a, b in _topological(graph):
                    x, y = end[a], end[b] + wait[n]
                    end[n] = dur[n] + (x if x > y else y)
            out[:, :, c] = [[end[k] for k in last] for last in graph["last"]]
        return list(out)
    end = np.zeros((per_pass.shape[0] + 1, per_pass.shape[1]))  # the last row: 'no predecessor', 0
    for nodes, first, second in graph["levels"]:
        arrive = end[second] if sent is None else end[second] + delay[nodes]
        end[nodes] = per_pass[nodes] + np.maximum(end[first], arrive)
    return [end[last] for last in graph["last"]]


def _remote(graph: dict) -> np.ndarray:
    """Per pass, its input's index when the input ran on another stage, else the 'none' index (no
    send to wait for), made once per graph."""
    if "remote" not in graph:
        second, none = graph["second"], len(graph["stage"])
        stage = np.append(graph["stage"], -1)
        graph["remote"] = np.where((second != none) & (stage[second] != stage[:none]), second, none)
    return graph["remote"]


@lru_cache(maxsize=256)
def _graph(schedule: str, p: int, ms: tuple, v: int) -> dict:
    """The passes of `schedule`'s order for each m of `ms` (one graph each, side by side) as index
    arrays: stage, kind, and per depth the passes with their two predecessors (previous pass on the
    stage, input; the index after the last pass: none), plus each graph's stages' last passes. The
    pass-by-pass order for the Python walk ('topological') is made on first use."""
    parts = [_passes(schedule, p, m, v) for m in ms]
    total = sum(len(part["stage"]) for part in parts)
    stage, kind, first, second, depth, lasts, offset = [], [], [], [], [], [], 0
    for part in parts:
        n = len(part["stage"])
        shift = lambda idx: np.where(np.asarray(idx) == n, total, np.asarray(idx) + offset)
        stage.append(np.asarray(part["stage"]))
        kind.append(np.asarray(part["kind"]))
        first.append(shift(part["first"]))
        second.append(shift(part["second"]))
        depth.append(np.asarray(part["depth"]))
        lasts.append(np.array(part["last"]) + offset)
        offset += n
    depth_arr, first_arr, second_arr = (np.concatenate(x) for x in (depth, first, second))
    order_by_depth = np.argsort(depth_arr, kind="stable")
    cuts = np.flatnonzero(np.diff(depth_arr[order_by_depth])) + 1
    levels = [(nodes, first_arr[nodes], second_arr[nodes]) for nodes in np.split(order_by_depth, cuts)]
    return {"stage": np.concatenate(stage), "kind": np.concatenate(kind), "levels": levels, "last": lasts,
            "order": order_by_depth, "first": first_arr, "second": second_arr}


def _topological(graph: dict) -> list:
    """(pass, previous on its stage, input) in an order where both come first, made once per graph."""
    if "topological" not in graph:
        order = graph["order"]
        graph["topological"] = list(zip(order.tolist(), graph["first"][order].tolist(),
                                        graph["second"][order].tolist()))
    return graph["topological"]


def _passes(schedule: str, p: int, m: int, v: int) -> dict:
    """One graph as lists: each pass's stage, kind, predecessors (len = none) and depth; each stage's
    last pass. The inputs by `inputs_of` (numpy), the depths -- 1 + the larger of the two predecessors'
    -- with each stage running ahead in turn while its passes' inputs are known."""
    sched = get(schedule)
    orders = sched.order(p, m, v)
    lengths = [len(order) for order in orders]
    table = np.array([step for order in orders for step in order], dtype=np.int64).reshape(-1, 3)
    stage = np.repeat(np.arange(p), lengths)
    kind, chunk, mb = table.T
    none = len(stage)
    where = np.full((p, 3, v, m), none, dtype=np.int64)
    where[stage, kind, chunk, mb] = np.arange(none)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
    first = np.arange(none, dtype=np.int64) - 1
    first[starts] = none
    second = sched.inputs_of(kind, stage, chunk, mb, p, v, where, none).tolist()
    depth, known = [0] * (none + 1), [False] * none + [True]
    ptr, ends, begin = starts.tolist(), (starts + np.array(lengths)).tolist(), starts.tolist()
    left = none
    while left:                      # each stage in turn runs ahead while its passes' inputs are known
        before = left
        for i in range(p):
            n, end = ptr[i], ends[i]
            while n < end and known[second[n]]:
                a = depth[n - 1] if n > begin[i] else 0
                depth[n] = 1 + (a if a > depth[second[n]] else depth[second[n]])
                known[n] = True
                n += 1
            left -= n - ptr[i]
            ptr[i] = n
        if left == before:           # cannot happen for registered orders
            raise ValueError(f"the {schedule} order deadlocks")
    last = [e - 1 for e in ends]
    return {"stage": stage.tolist(), "kind": kind.tolist(), "first": first.tolist(), "second": second,
            "depth": depth[:none], "last": last}


__all__ = ["stage_ends", "stage_end_lower_bounds", "ends_1f1b", "ends_graph", "ends_graphs", "path_weights"]


def path_weights(schedule: str, fwd, bwd, weight, m: int, v: int = 1, sends=None) -> tuple:
    """The longest path to each stage's last pass, as weights: (ends, weights), weights[i, r, j] the
    coefficient of stage r's argument j (0 `fwd`, 1 `bwd`, 2 `weight`, 3 and 4 the overlapped sends
    forward and backward) in stage i's end, so that ends[i] = sum over r, j of weights[i, r, j] times
    argument j of stage r (per-stage 1-D arrays: one candidate). A longest path is a maximum of sums;
    its derivative is that of the path that attains it (the first of equals), so these weights are
    the stage end's derivative with respect to each stage's pass times: what the symbolic
    sensitivities chain with the stages' own derivatives (explorer.cost.elasticity). The walk is
    ends_graph's, pass by pass, remembering which predecessor each pass waited for."""
    sched = get(schedule)
    fwd, bwd, weight = (np.asarray(x, dtype=float).reshape(-1) for x in (fwd, bwd, weight))
    p, m = len(fwd), int(round(float(m)))
    split = sched.splits_weight
    durations = np.stack([fwd / v, (bwd - weight) / v if split else bwd / v,
                          weight / v if split else np.zeros_like(fwd)], axis=1)
    chunks = sched.chunk_count(v)
    if _passes_in(schedule, p, m, chunks) > MAX_GRAPH_PASSES:
        raise ExplorerError(f"a pipeline of more than {MAX_GRAPH_PASSES:,} passes has no exact path weights (its "
                            "time is the schedule's closed form there): no sensitivity for it")
    graph = _graph(schedule, p, (m,), chunks)
    stage, kind = graph["stage"].tolist(), graph["kind"].tolist()
    none = len(stage)
    dur = durations[graph["stage"], graph["kind"]].tolist()
    sent = None if sends is None else [np.asarray(x, dtype=float).reshape(-1) for x in sends]
    end, took_input = [0.0] * (none + 1), [False] * none
    for n, a, b in _topological(graph):
        wait = 0.0
        if sent is not None and b != none and stage[b] != stage[n] and kind[b] < 2:
            wait = sent[kind[b]][stage[b]] / v
        x, y = end[a], end[b] + wait
        took_input[n] = not x > y
        end[n] = dur[n] + (x if x > y else y)
    first, second = graph["first"].tolist(), graph["second"].tolist()
    weights = np.zeros((p, p, 5))
    for i, n in enumerate(graph["last"][0].tolist()):
        while n != none:
            r, k = stage[n], kind[n]
            if k == 2:
                weights[i, r, 2] += 1 / v
            else:
                weights[i, r, k] += 1 / v
                if k == 1 and split:
                    weights[i, r, 2] -= 1 / v
            nxt = second[n] if took_input[n] else first[n]
            if took_input[n] and sent is not None and nxt != none and stage[nxt] != r and kind[nxt] < 2:
                weights[i, stage[nxt], 3 + kind[nxt]] += 1 / v
            n = nxt
    ends = np.array([end[n] for n in graph["last"][0].tolist()])
    return ends, weights
