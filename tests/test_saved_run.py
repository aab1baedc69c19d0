"""A saved reference run is read like an upload (issue 31): budgets, types, finite numbers, nesting.

Every refusal is one ExplorerError naming the problem; a file that is accepted draws every table and
chart of the Measured page without an exception other than ExplorerError (which the page shows).
"""
from __future__ import annotations

import copy
import json

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from explorer.errors import ExplorerError
from explorer.facade import run_bytes_table, run_gantt, run_loss_table, run_microstep, run_time_table
from explorer.runtime.saved import MAX_RUN_BYTES, load_run
from tests.test_app_measured import SAVED

BASE = json.loads(SAVED.read_text())


def mutated(path: tuple, value) -> bytes:
    """The saved run with the value at `path` (keys and list indices) replaced, as JSON bytes (NaN kept)."""
    run = copy.deepcopy(BASE)
    target = run
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return json.dumps(run).encode()


def nested(depth: int):
    value = 1
    for _ in range(depth):
        value = [value]
    return value


ISSUE = {  # the issue's four files, and their neighbours -> what the message names
    "deep nesting": (b"[" * 100_000 + b"]" * 100_000, "nested more than 32"),
    "deep nesting inside a field": (mutated(("model_spec", "source"), nested(40)), "nested more than 32"),
    "strategy 5": (mutated(("strategy",), 5), "'strategy' must be a mapping"),
    "measured time 'x'": (mutated(("iteration_time_s",), {"measured": "x"}), "'measured' must be"),
    "NaN loss": (mutated(("loss_parallel", 0), float("nan")), "loss_parallel[0]"),
    "infinite loss": (mutated(("loss_single", 1), float("inf")), "loss_single[1]"),
    "losses of different lengths": (mutated(("loss_single",), [1.0]), "one loss per iteration"),
    "infinite event time": (mutated(("events", 5, "end_s"), float("inf")), "events[5]"),
    "event of an unknown rank": (mutated(("events", 5, "rank"), 9), "outside 0..3"),
    "event row not its rank": (mutated(("events", 5, "row"), "rank x"), "'row' must read"),
    "markup drawn in a chart": (mutated(("events", 5, "operator"), "<a href='http://e/'>x</a>"), "'operator'"),
    "span without a start": (mutated(("operator_spans", 0), {"rank": 0}), "operator_spans[0]"),
    "bytes as text": (mutated(("measured_bytes_per_device", "op_comm"), "many"), "op_comm"),
    "procs not the strategy's devices": (mutated(("procs",), 3), "dp x tp x pp"),
    "procs a boolean": (mutated(("procs",), True), "'procs'"),
    "model spec a list": (mutated(("model_spec",), []), "'model_spec' must be a mapping"),
    "model spec not a model": (mutated(("model_spec", "layers"), "two"), "layers"),
    "model too big to have run": (mutated(("model_spec", "hidden"), 2 ** 16), "parameters"),
    "cluster file a string": (mutated(("cluster_file",), "dgx"), "'cluster_file' must be a mapping"),
    "breakdown of text": (mutated(("predicted_breakdown_s", "compute"), "x"), "predicted_breakdown_s"),
    "call of numbers": (mutated(("unmodelled_calls", 0, "note"), 5), "unmodelled_calls[0]"),
    "not an object": (b"[1, 2]", "one JSON object"),
    "not JSON": (b"{oops", "malformed JSON"),
    "not UTF-8": (b"\xff\xfe{}", "UTF-8"),
    "too large": (b" " * (MAX_RUN_BYTES + 1), "larger than"),
    "missing fields": (b'{"model": "m"}', "lacks"),
}


@pytest.mark.parametrize("name", ISSUE)
def test_a_bad_run_file_is_one_error_naming_the_problem(name):
    data, named = ISSUE[name]
    with pytest.raises(ExplorerError, match=None) as refused:
        load_run(data)
    message = str(refused.value)
    assert named in message and "\n" not in message and len(message) < 600, message


def test_the_saved_run_itself_is_read_and_normalised():
    run = load_run(SAVED.read_bytes())
    assert run["model"] == "micro-gpt" and run["procs"] == 4
    assert {"dp", "tp", "pp", "micro_batch", "global_batch", "schedule"} <= set(run["strategy"])
    assert run["model_spec"]["layers"] == 2
    assert load_run(run) == run            # a dict (a run just made) goes through the same checks


def _paths(value, path=()) -> list:
    """Every path into the run (lists: their first entries only: the rest repeat the same fields)."""
    out = [path] if path else []
    if isinstance(value, dict):
        for key, child in value.items():
            out += _paths(child, path + (key,))
    elif isinstance(value, list):
        for i, child in enumerate(value[:3]):
            out += _paths(child, path + (i,))
    return out


PATHS = _paths(BASE)
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-2 ** 70, 2 ** 70) | st.floats() | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=6)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
@given(st.sampled_from(PATHS), JSON_VALUES)
def test_any_field_replaced_by_any_value_is_refused_cleanly_or_drawn(path, value):
    try:
        run = load_run(mutated(path, value))
    except ExplorerError as err:
        assert str(err) and "\n" not in str(err)
        return
    for table in (run_bytes_table, run_loss_table, run_time_table):       # drawn outside the page's try
        table(run)
    try:                                                                  # the page shows an ExplorerError
        run_gantt(run)
        run_microstep(run, 0)
    except ExplorerError:
        pass
