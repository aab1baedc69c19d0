"""The event table: one row per interval of time a stage (or device) spends on something.

Both Gantt levels share these columns (COLUMNS maps each to its meaning), so a
figure, an export or a test reads one kind of table. Times are seconds from the
start of the iteration (super-step) or of the layer's forward (micro-step).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

COLUMNS = {
    "row": "Gantt row label: 'stage i' (super-step), 'gpu r' (micro-step); "
           "'stage i · dp' holds the gradient sync hidden under the last backward",
    "stage": "pipeline stage (int)",
    "device": "global ranks of the row in data-parallel replica 0, e.g. '8-15' or '17'",
    "start_s": "start, seconds",
    "end_s": "end, seconds",
    "duration_s": "end_s - start_s",
    "kind": "what happens. super-step: forward, backward, weight (ZB-H1's W pass), send, idle, "
            "dp_sync, zero_gather, optimizer, cp_exchange; micro-step: compute, weight_grad, a collective "
            "(all_reduce, all_gather, reduce_scatter, all_to_all, p2p) or barrier (its latency)",
    "phase": "fwd, bwd, step (after the pipeline) or '' (idle)",
    "category": "DESIGN.md cost category: compute, recompute, op_comm, redistribution, pp_comm, "
                "bubble, dp_comm, zero_comm, optimizer, cp_comm",
    "micro_batch": "micro-batch number, -1 when none",
    "chunk": "model chunk on the stage (interleaved), -1 when none",
    "operator": "operator or blocks the event belongs to ('' when none)",
    "level": "machine level a communication crosses (cluster level name), '' for computation",
    "bytes": "bytes each device sends, 0 for computation",
    "hidden": "True when the event overlaps other work on its stage (not on the critical path)",
}
DEFAULTS = {"row": "", "stage": -1, "device": "", "kind": "", "phase": "", "category": "",
            "micro_batch": -1, "chunk": -1, "operator": "", "level": "", "bytes": 0.0, "hidden": False}
PIPELINE_KINDS = ("forward", "backward", "weight", "send", "zero_gather")


def frame(columns: dict) -> pd.DataFrame:
    """A DataFrame with COLUMNS in order; missing columns take DEFAULTS, scalars broadcast.

    >>> frame({"start_s": [0.0, 1.0], "end_s": [1.0, 3.0], "kind": "forward"}).duration_s.tolist()
    [1.0, 2.0]
    """
    n = len(np.atleast_1d(columns["start_s"]))
    data = {}
    for name in COLUMNS:
        if name == "duration_s":
            data[name] = np.asarray(data["end_s"], dtype=float) - np.asarray(data["start_s"], dtype=float)
            continue
        value = columns.get(name, DEFAULTS.get(name))
        data[name] = np.asarray(value) if np.ndim(value) else np.full(n, value, dtype=object
                                                                       if isinstance(value, str) else None)
    df = pd.DataFrame(data, columns=list(COLUMNS))
    return df.astype({"stage": int, "micro_batch": int, "chunk": int, "bytes": float, "hidden": bool,
                      "start_s": float, "end_s": float})


def concat(frames) -> pd.DataFrame:
    """Tables in the given order, sorted by row then start (stable)."""
    frames = [f for f in frames if len(f)]
    if not frames:
        return frame({"start_s": np.zeros(0), "end_s": np.zeros(0)})
    df = pd.concat(frames, ignore_index=True)
    return df.sort_values(["stage", "row", "start_s"], kind="stable").reset_index(drop=True)


def makespan(events: pd.DataFrame) -> float:
    """Time at which the last event ends."""
    return float(events["end_s"].max()) if len(events) else 0.0


def busy_time(events: pd.DataFrame) -> pd.Series:
    """Seconds each row spends on non-idle, non-hidden events."""
    busy = events[(events["kind"] != "idle") & ~events["hidden"]]
    return busy.groupby("row", sort=False)["duration_s"].sum()


def idle_time(events: pd.DataFrame, until: float | None = None) -> pd.Series:
    """Seconds each row is idle in [0, until] (default: the makespan).

    Computed from the busy intervals (events on a row never overlap unless
    hidden), so it holds with or without explicit 'idle' events.
    """
    until = makespan(events) if until is None else until
    rows = events.loc[~events["hidden"], "row"].unique()
    inside = events[(events["kind"] != "idle") & ~events["hidden"] & (events["start_s"] < until)]
    clipped = np.minimum(inside["end_s"].to_numpy(), until) - inside["start_s"].to_numpy()
    busy = pd.Series(clipped, index=inside["row"].to_numpy()).groupby(level=0).sum()
    return (until - busy.reindex(rows, fill_value=0.0)).rename("idle_s")
