"""Events as CSV, JSON records, or Chrome trace-event JSON (Perfetto, chrome://tracing).

Trace events follow the Trace Event Format (Google, "Trace Event Format",
docs.google.com/document/d/1CvAClvFfyA5R-PhYUmn5OOQtYMH4h6I0nSsKchNAySU):
complete events {"name", "ph": "X", "ts", "dur", "pid", "tid", "args"} with
microsecond times, plus "M" metadata events naming each row.
"""
from __future__ import annotations

import csv
import io
import json


from explorer.timeline.events import COLUMNS, columns_of

FORMATS = ("csv", "json", "chrome-trace")


def _rows(events) -> tuple:
    """(column names, rows of Python values) of an EventTable or a DataFrame."""
    cols = columns_of(events)
    return list(COLUMNS), list(zip(*(cols[name].tolist() for name in COLUMNS)))


def to_csv(events) -> str:
    """CSV with a header row, the COLUMNS in order (what pandas' to_csv(index=False) writes)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    names, rows = _rows(events)
    writer.writerow(names)
    writer.writerows(rows)
    return out.getvalue()


def to_json(events) -> str:
    """JSON list of records, one per event, with the COLUMNS as keys; numbers at full precision (they read
    back as the very floats of the events)."""
    names, rows = _rows(events)
    return json.dumps([dict(zip(names, row)) for row in rows], separators=(",", ":"))


def trace_events(events, process: str = "explorer timeline") -> dict:
    """{"traceEvents": [...]}: one thread per row (stage or device), times in microseconds."""
    events = columns_of(events)
    rows = list(dict.fromkeys(events["row"].tolist()))
    tid = {row: k for k, row in enumerate(rows)}
    meta = [{"name": "process_name", "ph": "M", "pid": 0, "tid": 0, "args": {"name": process}}]
    meta += [{"name": "thread_name", "ph": "M", "pid": 0, "tid": k, "args": {"name": row}}
             for row, k in tid.items()]
    meta += [{"name": "thread_sort_index", "ph": "M", "pid": 0, "tid": k, "args": {"sort_index": k}}
             for k in tid.values()]
    ts = (events["start_s"] * 1e6).tolist()
    dur = (events["duration_s"] * 1e6).tolist()
    tids = [tid[row] for row in events["row"].tolist()]
    names = _names(events)
    cols = [events[c].tolist() for c in ("category", "micro_batch", "chunk", "operator", "level", "bytes", "device")]
    body = [{"name": n, "cat": c, "ph": "X", "ts": t, "dur": d, "pid": 0, "tid": k,
             "args": {"category": c, "micro_batch": mb, "chunk": ch, "operator": op, "level": lv, "bytes": nb,
                      "device": dev}}
            for n, t, d, k, c, mb, ch, op, lv, nb, dev in zip(names, ts, dur, tids, *cols)]
    return {"traceEvents": meta + body, "displayTimeUnit": "ms"}


def _names(events: dict) -> list:
    """'forward 3', 'forward 3 c1', 'qkv all_reduce', 'idle' ..."""
    out = []
    for row, kind, mb, chunk, op, phase, stage in zip(*(events[c].tolist() for c in (
            "row", "kind", "micro_batch", "chunk", "operator", "phase", "stage"))):
        device_row = row.startswith("gpu")
        name = f"{op} {kind}" if device_row else str(kind)
        if mb >= 0 and phase in ("fwd", "bwd") and stage >= 0 and not device_row:
            name += f" {mb}"
        out.append(name + f" c{chunk}" if chunk > 0 else name)
    return out


def to_chrome_trace(events) -> str:
    return json.dumps(trace_events(events))


def export(events, fmt: str) -> str:
    """The events (an EventTable or its DataFrame) in one of FORMATS."""
    return {"csv": to_csv, "json": to_json, "chrome-trace": to_chrome_trace}[fmt](events)
