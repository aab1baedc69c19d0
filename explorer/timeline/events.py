"""The event table: one row per interval of time a stage (or device) spends on something.

Both Gantt levels share these columns (COLUMNS maps each to its meaning), so a
figure, an export or a test reads one kind of table. Times are seconds from the
start of the iteration (super-step) or of the layer's forward (micro-step).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

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


TYPES = {"stage": np.int64, "micro_batch": np.int64, "chunk": np.int64, "bytes": np.float64, "hidden": np.bool_,
         "start_s": np.float64, "end_s": np.float64, "duration_s": np.float64}
"""Column dtypes (the others hold str objects)."""


@dataclass(frozen=True, eq=False)
class EventTable:
    """Events as numpy columns, COLUMNS in order: what the timelines compute and the exports write,
    without pandas. `to_frame()` gives the DataFrame the charts and pages read (the same columns)."""

    columns: dict

    def __len__(self) -> int:
        return len(self.columns["start_s"])

    def __getitem__(self, key):
        """A column by name, or the rows where a boolean array is True (a new table)."""
        if isinstance(key, str):
            return self.columns[key]
        return EventTable({name: col[key] for name, col in self.columns.items()})

    def to_frame(self):
        import pandas as pd
        return pd.DataFrame(self.columns, columns=list(COLUMNS))


def table(columns: dict) -> EventTable:
    """An EventTable with COLUMNS in order; missing columns take DEFAULTS, scalars broadcast.

    >>> table({"start_s": [0.0, 1.0], "end_s": [1.0, 3.0], "kind": "forward"})["duration_s"].tolist()
    [1.0, 2.0]
    """
    n = len(np.atleast_1d(columns["start_s"]))
    data = {}
    for name in COLUMNS:
        if name == "duration_s":
            data[name] = data["end_s"] - data["start_s"]
            continue
        value = columns.get(name, DEFAULTS.get(name))
        kind = TYPES.get(name, object)
        data[name] = np.asarray(value, dtype=kind) if np.ndim(value) else np.full(n, value, dtype=kind)
    return EventTable(data)


def frame(columns: dict):
    """table(columns) as a pandas DataFrame.

    >>> frame({"start_s": [0.0, 1.0], "end_s": [1.0, 3.0], "kind": "forward"}).duration_s.tolist()
    [1.0, 2.0]
    """
    return table(columns).to_frame()


def concat(tables) -> EventTable:
    """Tables in the given order, sorted by stage, row, then start (stable)."""
    tables = [t for t in tables if len(t)]
    if not tables:
        return table({"start_s": np.zeros(0), "end_s": np.zeros(0)})
    data = {name: np.concatenate([t.columns[name] for t in tables]) for name in COLUMNS}
    order = np.lexsort((data["start_s"], data["row"].astype(str), data["stage"]))
    return EventTable({name: col[order] for name, col in data.items()})


def columns_of(events) -> dict:
    """The columns of an EventTable or of its DataFrame, as numpy arrays (a dict of them is returned as it is: a
    DataFrame's text columns cost a conversion each time, so a caller reading them often converts once)."""
    if isinstance(events, EventTable):
        return events.columns
    if isinstance(events, dict):
        return events
    return {name: events[name].to_numpy() for name in COLUMNS}


def makespan(events) -> float:
    """Time at which the last event ends (an EventTable or a DataFrame)."""
    end = events["end_s"]
    return float(np.max(end)) if len(end) else 0.0


def busy_time(events):
    """Seconds each row spends on non-idle, non-hidden events."""
    busy = events[(events["kind"] != "idle") & ~events["hidden"]]
    return busy.groupby("row", sort=False)["duration_s"].sum()


def idle_time(events, until: float | None = None):
    """Seconds each row is idle in [0, until] (default: the makespan).

    Computed from the busy intervals (events on a row never overlap unless
    hidden), so it holds with or without explicit 'idle' events.
    """
    import pandas as pd
    until = makespan(events) if until is None else until
    rows = events.loc[~events["hidden"], "row"].unique()
    inside = events[(events["kind"] != "idle") & ~events["hidden"] & (events["start_s"] < until)]
    clipped = np.minimum(inside["end_s"].to_numpy(), until) - inside["start_s"].to_numpy()
    busy = pd.Series(clipped, index=inside["row"].to_numpy()).groupby(level=0).sum()
    return (until - busy.reindex(rows, fill_value=0.0)).rename("idle_s")
