"""Super-step events: one iteration of every pipeline stage of one data-parallel replica.

The passes run in the schedule's order (schedules.py) at dependency-driven times
(simulate.py); each pass is drawn as its parts (costs.py). Idle gaps before a
stage's last pass are 'idle' events (category bubble). As in the cost model
(explorer/cost/superstep.py, fidelity issue E9), each stage then runs its exposed
gradient synchronisation and its optimizer step as soon as its own last pass has
ended; with overlap_dp the hidden part of the synchronisation is drawn
(hidden=True, row 'stage i · dp') ending with the stage's last backward. The
iteration ends when the last stage to finish has finished, which is the cost
model's max over stages of stage end + synchronisation.
"""
from __future__ import annotations

import numpy as np

from explorer.errors import ExplorerError
from explorer.cost.evaluate import evaluation_of, result_of
from explorer.cost.evaluation import evaluation
from explorer.limits import check_timeline, check_timeline_passes
from explorer.timeline.costs import PART_CATEGORIES, PART_KINDS, SEND_PART, PassCosts, from_result
from explorer.timeline.layout import pass_layout
from explorer.timeline.events import EventTable, concat, table
from explorer.schedules import SCHEDULES, get
from explorer.timeline.schedules import B, F, W, order_for
from explorer.timeline.simulate import simulate

CATEGORY_OF_PART = np.array(PART_CATEGORIES, dtype=object)


def superstep_events(model, strategy, cluster, gpus=None, schedule: str | None = None, result=None):
    """superstep_table as a pandas DataFrame (what the charts and pages read)."""
    return superstep_table(model, strategy, cluster, gpus, schedule, result).to_frame()


def superstep_table(model, strategy, cluster, gpus=None, schedule: str | None = None,
                    result=None) -> EventTable:
    """Events of one iteration; schedule defaults to the strategy's, or one it may be drawn as
    (Schedule.drawn_as: a 1f1b strategy as 'zb-h1', the same costs with the weight gradient moved to W
    passes). `result`: evaluate(model, strategy, cluster)'s Result, if at hand; its Evaluation is reused."""
    schedule = schedule or strategy.schedule
    if schedule != strategy.schedule and schedule not in get(strategy.schedule).drawn_as:
        origins = [name for name, s in SCHEDULES.items() if schedule in s.drawn_as]
        if origins:
            raise ExplorerError(f"{schedule} is drawn from a {' or '.join(origins)} strategy, "
                                f"got schedule {strategy.schedule!r}")
        raise ExplorerError(f"schedule {schedule!r} differs from the strategy's {strategy.schedule!r}")
    check_timeline_passes(strategy)      # before any cost is built (limits.py)
    # the one numeric evaluation (explorer.cost.evaluation): the given Result's own when it has one
    ev = evaluation_of(result) if result is not None else None
    if ev is None:
        ev = evaluation(model, strategy, cluster, gpus)
        result = result or result_of(ev, model, strategy, cluster)
    costs = from_result(result, strategy, pass_layout(model, strategy, ev), ev.nums.level_names,
                        get(schedule).splits_weight)
    return pipeline_table(costs, strategy.micro_batches, schedule, overlap_dp=strategy.overlap_dp)


def pipeline_events(costs: PassCosts, micro_batches: int, schedule: str, overlap_dp: bool = False):
    """pipeline_table as a pandas DataFrame.

    >>> ev = pipeline_events(PassCosts.simple([1.0, 1.0], [2.0, 2.0]), 4, "1f1b")
    >>> float(ev.end_s.max())  # (m + p - 1)(F + B)
    15.0
    """
    return pipeline_table(costs, micro_batches, schedule, overlap_dp).to_frame()


def pipeline_table(costs: PassCosts, micro_batches: int, schedule: str, overlap_dp: bool = False) -> EventTable:
    """Events of `schedule` over `costs` (e.g. PassCosts.simple(F, B) for hand-made stages)."""
    check_timeline(costs.seconds, micro_batches, costs.chunks)   # refuse before building (limits.py)
    orders = order_for(schedule, costs.stages, micro_batches, costs.chunks)
    sim = simulate(orders, costs.pass_seconds(), costs.chunks, micro_batches, costs.sends, get(schedule).input_of)
    ends = np.zeros(costs.stages)
    np.maximum.at(ends, sim["stage"], sim["end_s"])          # each stage's last pass
    rows = np.array([f"stage {i}" for i in range(costs.stages)], dtype=object)
    devices = np.array(costs.devices, dtype=object)
    frames = [_parts(sim, costs, rows, devices), _idle(sim, ends, rows, devices)]
    if costs.sends is not None:
        frames.append(_sends(sim, costs, rows, devices))
    if costs.after:
        frames += _after(sim, costs, ends, rows, devices, overlap_dp)
    return concat(frames)


def _parts(sim: dict, costs: PassCosts, rows, devices) -> EventTable:
    """Each pass cut into its non-empty parts, vectorised over passes."""
    stage, kind = sim["stage"], sim["pass"]
    sec = costs.seconds[stage, kind]                       # passes x parts
    starts = sim["start_s"][:, None] + np.cumsum(sec, axis=1) - sec
    pi, part = np.nonzero(sec > 0)
    st = stage[pi]
    phase = np.where(kind[pi] == F, "fwd", "bwd").astype(object)
    return table({"row": rows[st], "stage": st, "device": devices[st], "start_s": starts[pi, part],
                  "end_s": starts[pi, part] + sec[pi, part], "kind": PART_KINDS[kind[pi], part],
                  "phase": phase, "category": CATEGORY_OF_PART[part], "micro_batch": sim["micro_batch"][pi],
                  "chunk": sim["chunk"][pi], "operator": costs.operators[st, sim["chunk"][pi]],
                  "level": costs.levels[st, part], "bytes": costs.bytes[st, kind[pi], part]})


def _sends(sim: dict, costs: PassCosts, rows, devices) -> EventTable:
    """Overlapped point-to-point sends (hidden=True, row 'stage i · pp'): each forward pass's output
    to the next stage (the last stage's last chunk sends none) and each backward's gradient to the
    previous one (the first stage's first chunk sends none), from the pass's end."""
    stage, kind, chunk = sim["stage"], sim["pass"], sim["chunk"]
    p, v = costs.stages, costs.chunks
    sends = ((kind == F) & ~((stage == p - 1) & (chunk == v - 1))) | ((kind == B) & ~((stage == 0) & (chunk == 0)))
    secs = costs.sends[stage, kind]
    keep = sends & (secs > 0)
    st = stage[keep]
    part = SEND_PART
    return table({"row": rows[st] + " · pp", "stage": st, "device": devices[st], "start_s": sim["end_s"][keep],
                  "end_s": sim["end_s"][keep] + secs[keep], "kind": "send",
                  "phase": np.where(kind[keep] == F, "fwd", "bwd").astype(object), "category": "pp_comm",
                  "micro_batch": sim["micro_batch"][keep], "chunk": chunk[keep],
                  "operator": costs.operators[st, chunk[keep]], "level": costs.levels[st, part],
                  "bytes": costs.bytes[st, kind[keep], part], "hidden": True})


def _idle(sim: dict, ends: np.ndarray, rows, devices) -> EventTable:
    """Gaps on each stage between 0 and its passes, up to its last pass (`ends`, per stage)."""
    order = np.lexsort((sim["start_s"], sim["stage"]))
    stage, start, end = sim["stage"][order], sim["start_s"][order], sim["end_s"][order]
    first = np.r_[True, stage[1:] != stage[:-1]]
    gap_from = np.where(first, 0.0, np.r_[0.0, end[:-1]])
    gap_to, gap_stage = start, stage
    keep = gap_to - gap_from > 1e-12 * max(float(ends.max(initial=0.0)), 1e-300)
    st = gap_stage[keep]
    return table({"row": rows[st], "stage": st, "device": devices[st], "start_s": gap_from[keep],
                  "end_s": gap_to[keep], "kind": "idle", "category": "bubble"})


def _after(sim: dict, costs: PassCosts, ends: np.ndarray, rows, devices, overlap_dp: bool) -> list:
    """Exposed gradient sync, ZeRO gathers and optimizer after each stage's last pass (`ends`); hidden
    sync during backward."""
    after, p = costs.after, costs.stages
    sync = np.where(after["dp_sync_s"] > 0, after["dp_sync_s"], 1.0)
    share = after["dp_bytes"] / sync          # bytes split between exposed and hidden in proportion
    parts = (("dp_sync", "dp_comm", after["dp_exposed_s"], share * after["dp_exposed_s"], after["dp_level"]),
             ("zero_gather", "zero_comm", after["zero_comm_s"], np.zeros(p), after["dp_level"]),
             ("optimizer", "optimizer", after["optimizer_s"], np.zeros(p), ""))
    cols, clock = [], ends.astype(float)
    for kind, category, secs, nbytes, level in parts:
        cols.append(table({"row": rows, "stage": np.arange(p), "device": devices, "start_s": clock,
                           "end_s": clock + secs, "kind": kind, "phase": "step", "category": category,
                           "bytes": nbytes, "level": level if secs.any() else ""}))
        clock = clock + secs
    out = [df[df["duration_s"] > 0] for df in cols]
    hidden = after["dp_sync_s"] - after["dp_exposed_s"]
    if overlap_dp and hidden.any():
        if after.get("dp_per_backward"):     # ZeRO-2/3: one reduce-scatter from each backward's start on
            out.append(_per_backward_syncs(sim, hidden, share, rows, devices, after["dp_level"]))
        elif costs.chunks > 1:               # interleaved: each chunk's sync from its own launch
            out.append(_chunk_syncs(sim, after["dp_sync_s"], hidden, share, rows, devices, after["dp_level"],
                                    costs.chunks))
        else:                                # one sync under the last backward
            bwd = np.isin(sim["pass"], (B, W))
            last_end = np.full(p, -np.inf)
            np.maximum.at(last_end, sim["stage"][bwd], sim["end_s"][bwd])
            out.append(table({"row": rows + " · dp", "stage": np.arange(p), "device": devices,
                              "start_s": last_end - hidden, "end_s": last_end, "kind": "dp_sync", "phase": "bwd",
                              "category": "dp_comm", "bytes": share * hidden, "level": after["dp_level"],
                              "hidden": True}))
        out[-1] = out[-1][out[-1]["duration_s"] > 0]
    return out


def _chunk_syncs(sim: dict, sync, hidden, share, rows, devices, level, chunks: int):
    """The hidden part of an interleaved stage's sync as Megatron-Core launches it
    (schedules/interleaved.sync_exposed): chunk c's 1/v of the sync after the backward r passes past
    chunk c's last one on stage r (none past the stage's last backward: that one starts at the end,
    exposed), the chunks one after another, cut at the stage's end; of them, the model's hidden seconds
    are drawn, the last ones before the end (the simulation's cooldown waits, which the model leaves
    out of its windows, only start the syncs earlier, so the queue holds at least that much)."""
    cols = {k: [] for k in ("row", "stage", "device", "start_s", "end_s", "bytes")}
    for r in range(len(hidden)):
        on = np.flatnonzero((sim["stage"] == r) & (sim["pass"] == B))
        on = on[np.argsort(sim["start_s"][on])]
        chunk, end = sim["chunk"][on], sim["end_s"][on]
        lasts = [int(np.flatnonzero(chunk == c).max()) for c in range(chunks)]   # each chunk's last backward
        launches = sorted(end[k + r] for k in lasts if k + r < len(on))
        clock, piece, queue = -np.inf, float(sync[r]) / chunks, []
        for start in launches:                     # the chunks' syncs one after another, cut at the stage's end
            begin = max(clock, start)
            clock = begin + piece
            if begin < end[-1]:
                queue.append((begin, min(clock, end[-1])))
        left = float(hidden[r])
        for begin, stop in reversed(queue):        # the model's hidden seconds, the last ones before the end
            secs = min(stop - begin, left)
            if secs <= 0:
                break
            cols["row"].append(rows[r] + " · dp"); cols["stage"].append(r); cols["device"].append(devices[r])
            cols["start_s"].append(stop - secs); cols["end_s"].append(stop); cols["bytes"].append(share[r] * secs)
            left -= secs
    return table(dict(cols, kind="dp_sync", phase="bwd", category="dp_comm", level=level, hidden=True))


def _per_backward_syncs(sim: dict, hidden, share, rows, devices, level):
    """The hidden part of a ZeRO-2/3 sync drawn as equal reduce-scatters, one from the start of each
    backward of its stage (explorer.cost.gradient_sync.sharded_sync_exposed)."""
    bwd = sim["pass"] == B
    stage, start = sim["stage"][bwd], sim["start_s"][bwd]
    count = np.bincount(stage, minlength=len(hidden))
    each = hidden[stage] / count[stage]
    return table({"row": rows[stage] + " · dp", "stage": stage, "device": np.asarray(devices, dtype=object)[stage],
                  "start_s": start, "end_s": start + each, "kind": "dp_sync", "phase": "bwd",
                  "category": "dp_comm", "bytes": share[stage] * each, "level": level, "hidden": True})
