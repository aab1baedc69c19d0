"""A saved reference run (`explorer run --out FILE`): read it back, and the model's side of its Gantt.

Needs no torch: the file holds the measured records; the modelled events are
recomputed from the model, strategy and cluster saved with it.

A run file is untrusted like any upload (issue 31: deep nesting, `"strategy": 5`,
`"iteration_time_s": {"measured": "x"}` and a NaN loss each raised an exception
box). `load_run` parses it with the budgeted loader of uploads (safe_load.parse_text:
size, nesting depth, number of values) and checks every field the Measured view and
its charts read: types, finite numbers, ranges, and the model, strategy and cluster
through their own loaders, as a run `explorer run` could have made
(measure.check_runnable). The first problem is one ExplorerError naming the field.

>>> load_run('{"model": "m"}')
Traceback (most recent call last):
...
explorer.errors.ExplorerError: the run file lacks model_spec, procs, strategy, measured_bytes_per_device, model_bytes_per_device, unmodelled_bytes_per_device, loss_parallel, loss_single, iteration_time_s, cluster_file, events (write it with `explorer run --out FILE`)
>>> load_run('[' * 100 + ']' * 100)
Traceback (most recent call last):
...
explorer.errors.ExplorerError: the run file: nested more than 32 levels deep
"""
from __future__ import annotations

import re

from explorer.errors import ExplorerError
from explorer.io.clusters import cluster_from_dict
from explorer.io.models import field, model_from_dict
from explorer.io.safe_load import json_depth_ok, parse_text, short_repr
from explorer.io.strategies import strategy_from_dict, strategy_to_dict
from explorer.limits import MAX_GANTT_BARS, MAX_NAME_CHARS

RUN_KEYS = ("model", "model_spec", "procs", "strategy", "measured_bytes_per_device", "model_bytes_per_device",
            "unmodelled_bytes_per_device", "loss_parallel", "loss_single", "iteration_time_s", "cluster_file",
            "events")
COMM = ("op_comm", "redistribution", "pp_comm", "dp_comm", "zero_comm")   # = measure.COMM_CATEGORIES
MAX_RUN_BYTES = 20 * 2 ** 20      # a run of 16 ranks x 64 micro-batches is a few MB
MAX_RUN_VALUES = 2_000_000        # JSON values: ~13 per event, ~7 per operator span
MAX_RUN_ROWS = MAX_GANTT_BARS     # events (and operator spans): each is a bar of the Measured page's Gantt
MAX_BREAKDOWN_KEYS = 64           # entries of predicted/measured_breakdown_s: the nine cost categories and a rank
WHERE = "the run file"
TOKEN = re.compile(r"[\w .,:+()#/-]{0,200}")   # texts a chart draws (labels, legend, hover): no markup characters
EVENT_FIELDS = {"row": "text", "rank": "int", "stage": "int", "kind": "text", "category": "text",
                "operator": "text", "phase": "text", "micro_batch": "int", "start_s": "non-negative",
                "end_s": "non-negative"}
SPAN_FIELDS = {"rank": "int", "stage": "int", "operator": "text", "micro_batch": "int",
               "start_s": "non-negative", "end_s": "non-negative"}
DRAWN_FIELDS = ("kind", "category", "operator", "phase")
CALL_FIELDS = {"op": "text", "kind": "text", "category": "text", "note": "text"}
BY_RANK_FIELDS = {"rank": "int", "dp": "int"}


def load_run(data) -> dict:
    """A run dict from JSON text/bytes (or a dict), checked as the module docstring says; the model
    spec and the strategy come back in their full, normalised form (every field present)."""
    data = _parsed(data)
    if not isinstance(data, dict):
        raise ExplorerError("a run file holds one JSON object (written by `explorer run --out FILE`)")
    missing = [k for k in RUN_KEYS if k not in data]
    if missing:
        raise ExplorerError(f"the run file lacks {', '.join(missing)} (write it with `explorer run --out FILE`)")
    run = dict(data)
    model, strategy, _ = _inputs(run)
    procs = _field(run, "procs", "count")
    _check_losses(run)
    from explorer.runtime.measure import check_runnable       # (imports the cost model: only when read)
    _prefixed("the run file does not describe a reference run: ", check_runnable, model, strategy, procs,
              len(run["loss_parallel"]))
    _check_bytes(run)
    _check_times(run)
    _check_rows(run, procs, strategy.pp)
    run["model_spec"], run["strategy"] = model.to_dict(), strategy_to_dict(strategy)
    return run


def _parsed(data):
    """JSON text or bytes parsed within the budgets of uploads; a dict given in code walked for depth."""
    if isinstance(data, (bytes, bytearray)):
        if len(data) > MAX_RUN_BYTES:
            raise ExplorerError(f"the run file is larger than {MAX_RUN_BYTES // 2 ** 20} MiB")
        try:
            data = bytes(data).decode("utf-8")
        except UnicodeDecodeError:
            raise ExplorerError("the run file is not UTF-8 text") from None
    if isinstance(data, str):
        return parse_text(data, ".json", WHERE, max_chars=MAX_RUN_BYTES, max_values=MAX_RUN_VALUES)
    json_depth_ok(data, WHERE, MAX_RUN_VALUES)
    return data


def _prefixed(prefix: str, build, *args):
    """build(*args), its ExplorerError prefixed (which part of the run file it is about)."""
    try:
        return build(*args)
    except ExplorerError as err:
        raise ExplorerError(f"{prefix}{err}") from None


def _field(d: dict, key: str, kind: str, where: str = "", default=...):
    """models.field with the run file named: the value of d[key], checked to be of `kind`."""
    prefix = f"{WHERE}: {where}"
    return field(d, key, kind, prefix) if default is ... else field(d, key, kind, prefix, default)


def _inputs(run: dict) -> tuple:
    """(ModelSpec, Strategy, Cluster) of the run, each through its own loader (types, limits)."""
    name = _field(run, "model", "text")
    if len(name) > MAX_NAME_CHARS:
        raise ExplorerError(f"{WHERE}: the model name has {len(name):,} characters, more than {MAX_NAME_CHARS}")
    model = _prefixed(f"{WHERE}: model_spec: ", model_from_dict, _field(run, "model_spec", "mapping"))
    strategy = _prefixed(f"{WHERE}: ", strategy_from_dict, _field(run, "strategy", "mapping"))   # says "strategy: "
    cluster = _prefixed(f"{WHERE}: cluster_file: ", cluster_from_dict, _field(run, "cluster_file", "mapping"))
    return model, strategy, cluster


def _numbers(run: dict, key: str, kind: str = "non-negative", default=...) -> list:
    """A list of numbers of `kind` (finite: NaN and infinity are refused)."""
    values = _field(run, key, "list", default=default)
    for i, value in enumerate(values):
        _field({f"{key}[{i}]": value}, f"{key}[{i}]", kind)
    return values


def _check_losses(run: dict) -> None:
    parallel, single = _numbers(run, "loss_parallel"), _numbers(run, "loss_single")
    if not parallel or len(parallel) != len(single):
        raise ExplorerError(f"{WHERE}: loss_parallel and loss_single must list one loss per iteration each "
                            f"(got {len(parallel)} and {len(single)})")
    _field(run, "loss_max_relative_difference", "non-negative", default=0.0)


def _check_bytes(run: dict) -> None:
    """The three byte tables: a non-negative number for every communication category."""
    for key in ("measured_bytes_per_device", "model_bytes_per_device", "unmodelled_bytes_per_device"):
        table = _field(run, key, "mapping")
        for category in COMM:
            _field(table, category, "non-negative", f"{key}: ")


def _check_times(run: dict) -> None:
    """iteration_time_s (measured, predicted, per iteration) and the two breakdowns by category."""
    times = _field(run, "iteration_time_s", "mapping")
    for key in ("measured", "predicted"):
        _field(times, key, "non-negative", "iteration_time_s: ")
    _numbers(times, "measured_per_iteration", default=[])
    for key in ("predicted_breakdown_s", "measured_breakdown_s"):
        table = _field(run, key, "mapping", default={})
        if len(table) > MAX_BREAKDOWN_KEYS:
            raise ExplorerError(f"{WHERE}: {key} has {len(table):,} entries, more than {MAX_BREAKDOWN_KEYS}")
        for category in table:
            _field(table, category, "int" if category == "rank" else "non-negative", f"{key}: ")


def _check_rows(run: dict, procs: int, stages: int) -> None:
    """events, operator_spans, unmodelled_calls and bytes_by_rank: lists of objects with typed fields,
    ranks within the run's processes and stages within its pipeline; the texts the charts draw (events and
    spans) made of TOKEN characters (the calls are shown as literal text by the page)."""
    for key, fields, default in (("events", EVENT_FIELDS, ...), ("operator_spans", SPAN_FIELDS, []),
                                 ("unmodelled_calls", CALL_FIELDS, []), ("bytes_by_rank", BY_RANK_FIELDS, [])):
        rows = _field(run, key, "list", default=default)
        if len(rows) > MAX_RUN_ROWS:
            raise ExplorerError(f"{WHERE}: {key} has {len(rows):,} entries, more than the {MAX_RUN_ROWS:,} "
                                "a Gantt draws")
        drawn = () if fields is CALL_FIELDS else DRAWN_FIELDS
        for i, row in enumerate(rows):
            _check_row(row, f"{key}[{i}]: ", fields, procs, stages)
            _check_drawn(row, f"{key}[{i}]: ", [k for k in drawn if k in fields])


def _check_row(row, where: str, fields: dict, procs: int, stages: int) -> None:
    if not isinstance(row, dict):
        raise ExplorerError(f"{WHERE}: {where}must be an object, got {short_repr(row)}")
    for key, kind in fields.items():
        _field(row, key, kind, where)
    if "bytes" in row:
        _field(row, "bytes", "non-negative", where)
    for key, top in (("rank", procs), ("stage", stages), ("dp", procs)):     # (micro_batch -1: the step)
        if key in fields and not 0 <= row[key] < top:
            raise ExplorerError(f"{WHERE}: {where}field '{key}' is {row[key]}, outside 0..{top - 1}")
    if "row" in fields and row["row"] != f"rank {row['rank']} (stage {row['stage']})":   # the Gantt sorts by N
        raise ExplorerError(f"{WHERE}: {where}field 'row' must read 'rank {row['rank']} (stage {row['stage']})', "
                            f"got {short_repr(row['row'])}")


def _check_drawn(row: dict, where: str, keys: list) -> None:
    for key in keys:
        if not TOKEN.fullmatch(row[key]):
            raise ExplorerError(f"{WHERE}: {where}field '{key}' must be at most 200 letters, digits, spaces and "
                                f"._,:+()#/- (the charts draw it), got {short_repr(row[key])}")


def model_events(run: dict):
    """The model's super-step events for the run's model, strategy and cluster (a DataFrame)."""
    from explorer.timeline import superstep_events
    model, strategy, cluster = _inputs(run)
    return superstep_events(model, strategy, cluster, run["procs"])


def model_microstep(run: dict, layer: int):
    """The model's micro-step events of one layer (forward and backward) for the run's inputs."""
    from explorer.timeline import microstep_events
    model, strategy, cluster = _inputs(run)
    if not isinstance(layer, int) or not 0 <= layer < model.layers:
        raise ExplorerError(f"layer must be between 0 and {model.layers - 1}, got {layer!r}")
    return microstep_events(model, strategy, cluster, run["procs"], layer)
