"""Timelines of the double-level execution model as event tables.

* super-step: superstep_events(model, strategy, cluster, gpus, schedule) -- one
  iteration of every pipeline stage (GPipe, 1F1B, interleaved 1F1B, ZB-H1), a pandas
  DataFrame; superstep_table(...) the same events as numpy columns (EventTable), which
  the command line exports without importing pandas or sympy;
* micro-step: microstep_events(model, strategy, cluster, gpus, layer, op) -- one
  layer's (or operator's) forward and backward on its operator-parallel group;
* compare(events, result, schedule): timeline makespan vs the cost model;
* export(events, 'csv' | 'json' | 'chrome-trace').

Columns: events.COLUMNS. The micro-step names load on first use: they read the plan's
operators, built with sympy.

>>> from explorer import load_model, load_cluster, Strategy, evaluate
>>> s = Strategy(dp=1, tp=2, pp=2, micro_batch=1, global_batch=4, schedule="gpipe")
>>> m, c = load_model("tiny-gpt"), load_cluster("classroom")
>>> ev = superstep_events(m, s, c)
>>> abs(compare(ev, evaluate(m, s, c), "gpipe")["relative_difference"]) < 1e-9
True
"""
from explorer.timeline.agreement import compare, idle_fraction, pipeline_end, summary_lines
from explorer.timeline.costs import PassCosts
from explorer.timeline.events import COLUMNS, EventTable, busy_time, idle_time, makespan
from explorer.timeline.export import FORMATS, export, to_chrome_trace, to_csv, to_json, trace_events
from explorer.timeline.schedules import SCHEDULES, order_for
from explorer.timeline.superstep import pipeline_events, pipeline_table, superstep_events, superstep_table

MICROSTEP_NAMES = ("block_segments", "find_block", "microstep_events", "microstep_table")


def __getattr__(name: str):
    """The micro-step names, imported on first use (explorer.timeline.microstep imports sympy)."""
    if name in MICROSTEP_NAMES:
        from explorer.timeline import microstep
        return getattr(microstep, name)
    raise AttributeError(f"module 'explorer.timeline' has no attribute {name!r}")

__all__ = ["COLUMNS", "EventTable", "FORMATS", "PassCosts", "SCHEDULES", "block_segments", "busy_time", "compare",
           "export", "find_block", "idle_fraction", "idle_time", "makespan", "microstep_events", "microstep_table",
           "order_for", "pipeline_end", "pipeline_events", "pipeline_table", "summary_lines", "superstep_events",
           "superstep_table", "to_chrome_trace", "to_csv", "to_json", "trace_events"]
