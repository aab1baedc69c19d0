"""A timeline as the Timelines page shows it, and the same as plain data, so that a worker process can build it.

A *view* is a dict: the events (a pandas DataFrame, explorer/timeline/events.py COLUMNS), their Gantt figure (an
unbuilt SpecFigure, or None with "figure_refusal" saying why: more bars than one figure draws) and, for a super-step,
the agreement with the cost model (explorer/timeline/agreement.py `compare`). The Timelines page draws a new
strategy's two views on every first visit: under a class's load that was a fifth of the serving interpreter's time
(py-spy of `benchmarks/bench_load.py --diverse`, docs/benchmarks-classroom.md), so the page has them built by the
allowlisted "superstep" and "microstep" jobs (explorer/runtime/jobs.py) when a worker is free. A worker sends
plain data only (`view_to_plain`): each numeric column as its bytes, each text column as its distinct values and
one code per row, the figure in its wire form (explorer/charts/wire.py `portable_wire`, plotly's JSON as plain
data). `view_from_plain` rebuilds the same view: the same DataFrame, and a figure that is sent as it came
(its wire kept) and built from its specification only when a page edits it (classroom mode, a zoom).
"""
from __future__ import annotations

import numpy as np

from explorer.charts.gantt import microstep_figure, subpixel_note, superstep_figure
from explorer.charts.wire import figure_from_wire, portable_wire
from explorer.cost.checked import evaluate_checked
from explorer.errors import ExplorerError
from explorer.limits import spend
from explorer.timeline.agreement import compare
from explorer.timeline.events import COLUMNS, TYPES, EventTable
from explorer.timeline.microstep import microstep_events
from explorer.timeline.superstep import superstep_events

CODE_DTYPE = np.dtype("<i4")     # a text column's code per row (an index into its distinct values)
EXTRA_KEYS = ("figure_refusal", "agreement", "subpixel_note")   # a super-step's view beside its events, figure


def superstep_view(model, strategy, cluster, schedule: str) -> dict:
    """One iteration's events drawn as `schedule`, their Gantt ("figure", or None and "figure_refusal") and their
    agreement with the cost model; ExplorerError when the timeline is beyond explorer/limits.py MAX_TIMELINE_EVENTS."""
    result = evaluate_checked(model, strategy, cluster)
    events = superstep_events(model, strategy, cluster, schedule=schedule, result=result)
    spend("drawing the super-step timeline")      # a cancelled job stops here, not CANCEL_GRACE_S later
    try:
        figure, refusal = superstep_figure(events, f"Super-step: one iteration ({schedule})"), None
    except ExplorerError as err:            # more bars than one figure draws (MAX_GANTT_BARS)
        figure, refusal = None, str(err)
    return {"events": events, "figure": figure, "figure_refusal": refusal,
            "agreement": compare(events, result, schedule, strategy.schedule),
            "subpixel_note": subpixel_note(events)}       # once per view, not per page run (2.4 ms for 5,900 events)


def microstep_view(model, strategy, cluster, layer: int, op: str | None) -> dict:
    """Layer `layer`'s (or its operator `op`'s) forward and backward on its operator-parallel group: the events
    and their Gantt."""
    events = microstep_events(model, strategy, cluster, layer=layer, op=op)
    spend("drawing the micro-step timeline")
    what = f"layer {layer}" + (f", operator {op}" if op else "")
    return {"events": events, "figure": microstep_figure(events, f"Micro-steps: {what}, one micro-batch")}


def _column_to_plain(values: np.ndarray) -> dict:
    spend("sending the timeline")
    if values.dtype != object:
        return {"dtype": values.dtype.str, "bytes": np.ascontiguousarray(values).tobytes()}
    distinct, codes = np.unique(values.astype(str), return_inverse=True)
    return {"values": distinct.tolist(), "codes": codes.astype(CODE_DTYPE).tobytes()}


def _column_from_plain(name: str, data, rows: int) -> np.ndarray:
    if not isinstance(data, dict):
        raise ExplorerError(f"the timeline's column {name!r} came back malformed")
    if "bytes" in data:
        dtype = np.dtype(TYPES.get(name, object))
        if dtype == object or data.get("dtype") != dtype.str or not isinstance(data["bytes"], bytes) \
                or len(data["bytes"]) % dtype.itemsize:
            raise ExplorerError(f"the timeline's column {name!r} came back with the wrong type")
        values = np.frombuffer(data["bytes"], dtype=dtype).copy()
    else:
        distinct, codes = data.get("values"), data.get("codes")
        if not isinstance(distinct, list) or not isinstance(codes, bytes) or not all(isinstance(v, str)
                                                                                     for v in distinct):
            raise ExplorerError(f"the timeline's column {name!r} came back malformed")
        index = np.frombuffer(codes, dtype=CODE_DTYPE)
        if len(index) and (index.min() < 0 or index.max() >= len(distinct)):
            raise ExplorerError(f"the timeline's column {name!r} came back with codes out of range")
        values = np.asarray(distinct + [""], dtype=object)[index]      # + "": an object array even when empty
    if len(values) != rows:
        raise ExplorerError(f"the timeline's column {name!r} came back with {len(values)} rows, not {rows}")
    return values


def view_to_plain(view: dict) -> dict:
    """A view as plain data (what a worker sends back): see the module docstring."""
    events = view["events"]
    figure = view.get("figure")
    return {"rows": len(events),
            "columns": {name: _column_to_plain(events[name].to_numpy(dtype=TYPES.get(name, object)))
                        for name in COLUMNS},
            "wire": None if figure is None else portable_wire(figure),
            "extra": {key: view[key] for key in EXTRA_KEYS if key in view}}


def view_from_plain(data) -> dict:
    """The view `view_to_plain` made, here; ExplorerError when `data` is not one."""
    if not isinstance(data, dict) or not isinstance(data.get("rows"), int) or not isinstance(data.get("columns"),
                                                                                              dict):
        raise ExplorerError("the timeline came back malformed")
    columns = data["columns"]
    if set(columns) != set(COLUMNS):
        raise ExplorerError("the timeline came back without its columns")
    table = EventTable({name: _column_from_plain(name, columns[name], data["rows"]) for name in COLUMNS})
    extra = data.get("extra") or {}
    if not isinstance(extra, dict) or set(extra) not in (set(), set(EXTRA_KEYS)) \
            or not isinstance(extra.get("agreement", {}), dict) \
            or not isinstance(extra.get("figure_refusal"), (str, type(None))) \
            or not isinstance(extra.get("subpixel_note", ""), str):
        raise ExplorerError("the timeline came back malformed")
    try:
        figure = None if data.get("wire") is None else figure_from_wire(data["wire"])
    except ExplorerError:
        raise
    except (ValueError, TypeError) as err:      # bad base64, a shape that does not fit its numbers
        raise ExplorerError(f"the timeline's figure came back malformed ({type(err).__name__})") from None
    return {"events": table.to_frame(), "figure": figure, **extra}
