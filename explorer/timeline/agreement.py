"""How the timeline compares with the symbolic cost: both numbers and their difference.

The cost model's pipeline term is each stage's end on the schedule's critical path
(explorer.schedules.critical_path), exact for any stage costs and every schedule
(fidelity issue, E8): the timeline's makespan equals the model's iteration time.
Drawn as a what-if for a 1f1b strategy, ZB-H1's timeline is compared with the 1F1B
total the model gives for that strategy.
"""
from __future__ import annotations

import numpy as np

from explorer.timeline.events import PIPELINE_KINDS, columns_of, makespan


def pipeline_end(events) -> float:
    """End of the pipeline part: the last forward, backward, weight pass or send (an EventTable, a DataFrame or
    their columns_of)."""
    ev = columns_of(events)
    mask = np.isin(ev["kind"], PIPELINE_KINDS) & ~ev["hidden"]
    return float(ev["end_s"][mask].max()) if mask.any() else 0.0


def _idle_seconds(ev: dict, until: float) -> np.ndarray:
    """Seconds each row with a non-hidden event is idle in [0, until] (explorer.timeline.events.idle_time
    without pandas: from the busy intervals, which never overlap on a row unless hidden)."""
    shown = ~ev["hidden"]
    rows, index = np.unique(ev["row"][shown].astype(str), return_inverse=True)
    busy = shown.copy()
    busy[shown] = (ev["kind"][shown] != "idle") & (ev["start_s"][shown] < until)
    inside = busy[shown]
    clipped = np.minimum(ev["end_s"][shown][inside], until) - ev["start_s"][shown][inside]
    return until - np.bincount(index[inside], weights=clipped, minlength=len(rows))


def idle_fraction(events) -> float:
    """Idle share of all stages' time in the pipeline part, [0, pipeline_end].

    Equal stages without communication: (p-1)/(m+p-1) for GPipe and 1F1B, that is a
    bubble of (p-1)/m of the ideal time; interleaved: (p-1)/(vm+p-1), bubble (p-1)/(vm)
    (Narayanan et al. SC'21 Sec 2.2).

    >>> from explorer.timeline import PassCosts, pipeline_events
    >>> round(idle_fraction(pipeline_events(PassCosts.simple([1.0] * 4, [2.0] * 4), 8, "gpipe")), 6)
    0.272727
    """
    ev = columns_of(events)
    end = pipeline_end(ev)
    idle = _idle_seconds(ev, end)
    # rounding leaves a back-to-back pipeline a few 1e-16 below zero (shown as "-0.0 %" in a browser walk)
    return max(0.0, float(idle.sum() / (len(idle) * end))) if end > 0 else 0.0


def compare(events, result, schedule: str, model_schedule: str | None = None) -> dict:
    """Timeline makespan vs the cost model's iteration time, and the bubble on the critical stage: as
    the model counts it, the makespan less that stage's passes and the finishing stage's step. The events'
    columns are read once (columns_of: a DataFrame's text columns are converted each time they are read)."""
    ev = columns_of(events)
    timeline, model = makespan(ev), float(result.iteration_time_s)
    after = sum(result.breakdown_s[c] for c in ("dp_comm", "zero_comm", "optimizer"))
    shown = ~ev["hidden"]
    passes = shown & np.isin(ev["phase"], ("fwd", "bwd")) & (ev["kind"] != "idle")
    busy = ev["duration_s"][passes & (ev["stage"] == result.critical_stage)].sum()
    step = ev["duration_s"][shown & (ev["stage"] == result.extra["sync_stage"]) & (ev["phase"] == "step")].sum()
    end = pipeline_end(ev)
    model_schedule = model_schedule or schedule
    note = (f"drawn as {schedule} from a {model_schedule} strategy (a what-if): the cost model's time is the "
            f"{model_schedule} iteration's, the timeline's makespan the {schedule} schedule's, so they differ"
            if model_schedule != schedule else "")
    return {"schedule": schedule, "model_schedule": model_schedule,
            "timeline_s": timeline, "model_s": model, "difference_s": timeline - model,
            "relative_difference": (timeline - model) / model if model else 0.0,
            "pipeline_timeline_s": end, "pipeline_model_s": model - after,
            # the timeline cannot tell a wait on an overlapped send from pipeline idling: the model's
            # bubble plus the sends' exposed part (which the model counts in pp_comm)
            "bubble_timeline_s": float(timeline - busy - step),
            "bubble_model_s": float(result.breakdown_s["bubble"] + result.extra.get("pp_sends_exposed_s", 0.0)),
            "idle_fraction": idle_fraction(ev), "note": note}


def summary_lines(cmp: dict) -> list:
    """The comparison as short lines for the command line."""
    lines = [f"timeline makespan ({cmp['schedule']}): {cmp['timeline_s']:.6g} s",
             f"cost model iteration time ({cmp['model_schedule']}): {cmp['model_s']:.6g} s",
             f"difference: {cmp['difference_s']:+.6g} s ({100 * cmp['relative_difference']:+.4g} %)",
             f"pipeline idle fraction: {cmp['idle_fraction']:.4g}"]
    return lines + ([f"note: {cmp['note']}"] if cmp["note"] else [])
