"""Events as CSV, JSON records, or Chrome trace-event JSON (Perfetto, chrome://tracing).

Trace events follow the Trace Event Format (Google, "Trace Event Format",
docs.google.com/document/d/1CvAClvFfyA5R-PhYUmn5OOQtYMH4h6I0nSsKchNAySU):
complete events {"name", "ph": "X", "ts", "dur", "pid", "tid", "args"} with
microsecond times, plus "M" metadata events naming each row.
"""
from __future__ import annotations

import json

import numpy as np
import pandas as pd

FORMATS = ("csv", "json", "chrome-trace")


def to_csv(events: pd.DataFrame) -> str:
    return events.to_csv(index=False)


def to_json(events: pd.DataFrame) -> str:
    """JSON list of records, one per event, with the COLUMNS as keys."""
    return events.to_json(orient="records", double_precision=15)


def trace_events(events: pd.DataFrame, process: str = "explorer timeline") -> dict:
    """{"traceEvents": [...]}: one thread per row (stage or device), times in microseconds."""
    rows = list(dict.fromkeys(events["row"]))
    tid = {row: k for k, row in enumerate(rows)}
    meta = [{"name": "process_name", "ph": "M", "pid": 0, "tid": 0, "args": {"name": process}}]
    meta += [{"name": "thread_name", "ph": "M", "pid": 0, "tid": k, "args": {"name": row}}
             for row, k in tid.items()]
    meta += [{"name": "thread_sort_index", "ph": "M", "pid": 0, "tid": k, "args": {"sort_index": k}}
             for k in tid.values()]
    ts = (events["start_s"].to_numpy() * 1e6).tolist()
    dur = (events["duration_s"].to_numpy() * 1e6).tolist()
    tids = events["row"].map(tid).tolist()
    names = _names(events)
    cols = [events[c].tolist() for c in ("category", "micro_batch", "chunk", "operator", "level", "bytes", "device")]
    body = [{"name": n, "cat": c, "ph": "X", "ts": t, "dur": d, "pid": 0, "tid": k,
             "args": {"category": c, "micro_batch": mb, "chunk": ch, "operator": op, "level": lv, "bytes": nb,
                      "device": dev}}
            for n, t, d, k, c, mb, ch, op, lv, nb, dev in zip(names, ts, dur, tids, *cols)]
    return {"traceEvents": meta + body, "displayTimeUnit": "ms"}


def _names(events: pd.DataFrame) -> list:
    """'forward 3', 'forward 3 c1', 'qkv all_reduce', 'idle' ..."""
    kind = events["kind"].astype(str)
    mb = events["micro_batch"].to_numpy()
    chunk = events["chunk"].to_numpy()
    op = events["operator"].astype(str)
    super_level = (mb >= 0) & events["phase"].isin(["fwd", "bwd"]).to_numpy() & (events["stage"] >= 0)
    label = np.where(events["row"].str.startswith("gpu").to_numpy(), (op + " " + kind).to_numpy(), kind.to_numpy())
    with_mb = np.where(super_level & ~events["row"].str.startswith("gpu").to_numpy(),
                       label + " " + mb.astype(str), label)
    return np.where(chunk > 0, with_mb + " c" + chunk.astype(str), with_mb).tolist()


def to_chrome_trace(events: pd.DataFrame) -> str:
    return json.dumps(trace_events(events))


def export(events: pd.DataFrame, fmt: str) -> str:
    """The events in one of FORMATS."""
    return {"csv": to_csv, "json": to_json, "chrome-trace": to_chrome_trace}[fmt](events)
