"""The Timelines page's views as a worker builds them (explorer/charts/timeline_views.py, issue 31 item 4): plain data
there, the same events, figure and agreement here; what came back malformed is refused with one line."""
import json
import pickle

import numpy as np
import plotly.io as pio
import plotly.tools
import pytest
from hypothesis import given, settings, strategies as hs

from explorer import Strategy, load_cluster, load_model
from explorer.charts.spec_figure import WIRED, SpecFigure
from explorer.charts.timeline_views import microstep_view, superstep_view, view_from_plain, view_to_plain
from explorer.charts.wire import figure_from_wire, portable_wire, wire_figure
from explorer.errors import ExplorerError
from explorer.runtime.jobs import microstep_job, plain, run_job, superstep_job, timeline_request

MODEL, CLUSTER = load_model("gpt-1.7b"), load_cluster("dgx-a100-80gb")
INTERLEAVED = Strategy(dp=2, tp=2, pp=4, micro_batch=1, global_batch=16, schedule="interleaved", chunks=2,
                       overlap_dp=True)
ONE_F_ONE_B = Strategy(dp=2, tp=2, pp=4, micro_batch=1, global_batch=16)


def travelled(view: dict) -> dict:
    """`view` as a worker sends it (plain data, pickled) and this process rebuilds it."""
    data = view_to_plain(view)
    assert plain(data) == data                       # nothing but plain data (no numpy array, no object)
    return view_from_plain(pickle.loads(pickle.dumps(data)))


def wired(fig) -> str:
    """What st.plotly_chart sends for the figure a page hands it (streamlit/elements/plotly_chart.py)."""
    return pio.to_json(plotly.tools.return_figure_from_figure_or_data(wire_figure(fig), validate_figure=True),
                       validate=False)


@pytest.mark.parametrize("view", [lambda: superstep_view(MODEL, INTERLEAVED, CLUSTER, "interleaved"),
                                  lambda: superstep_view(MODEL, ONE_F_ONE_B, CLUSTER, "zb-h1"),
                                  lambda: microstep_view(MODEL, INTERLEAVED, CLUSTER, 3, None),
                                  lambda: microstep_view(MODEL, INTERLEAVED, CLUSTER, 0, "fc1")],
                         ids=["superstep", "superstep drawn as zb-h1", "microstep", "microstep operator"])
def test_a_view_comes_back_the_same(view):
    here = view()
    back = travelled(here)
    assert isinstance(back["figure"], SpecFigure) and WIRED in back["figure"].__dict__   # sent as it came
    assert back["events"].equals(here["events"]) and list(back["events"].dtypes) == list(here["events"].dtypes)
    assert set(back) == set(here)
    assert {k: back[k] for k in here if k not in ("events", "figure")} == \
           {k: here[k] for k in here if k not in ("events", "figure")}
    sent = back["figure"].__dict__[WIRED]
    assert wired(back["figure"]) == wired(here["figure"])            # the JSON a locally built one sends
    assert wire_figure(back["figure"]) is sent                       # not wired again
    assert pio.to_json(back["figure"]) == pio.to_json(here["figure"])  # and the same figure once built


def test_the_figure_takes_this_processs_template_not_the_workers():
    """A worker's default template is plotly's, the server's Streamlit's: the wire leaves the default out."""
    fig = superstep_view(MODEL, INTERLEAVED, CLUSTER, "interleaved")["figure"]
    default = pio.templates.default
    try:
        pio.templates.default = "plotly"
        wire = portable_wire(fig)                    # "in the worker"
        assert "template" not in wire["layout"]
        pio.templates.default = "plotly_dark"        # "in the server"
        assert wired(figure_from_wire(wire)) == wired(superstep_view(MODEL, INTERLEAVED, CLUSTER,
                                                                      "interleaved")["figure"])
        assert json.loads(wired(figure_from_wire(wire)))["layout"]["template"] == \
            pio.templates["plotly_dark"].to_plotly_json()
    finally:
        pio.templates.default = default


def test_a_built_figure_does_not_travel():
    fig = superstep_view(MODEL, INTERLEAVED, CLUSTER, "interleaved")["figure"]
    fig.layout                                       # built: its template is this process's already
    with pytest.raises(ExplorerError, match="specification"):
        portable_wire(fig)


def test_the_jobs_give_the_views_and_a_timeline_beyond_the_limits_its_message():
    request = timeline_request(MODEL, INTERLEAVED, CLUSTER, schedule="interleaved")
    back = view_from_plain(superstep_job(**request))
    assert back["agreement"] == superstep_view(MODEL, INTERLEAVED, CLUSTER, "interleaved")["agreement"]
    micro = view_from_plain(microstep_job(**timeline_request(MODEL, INTERLEAVED, CLUSTER, layer=1, op=None)))
    assert micro["events"].equals(microstep_view(MODEL, INTERLEAVED, CLUSTER, 1, None)["events"])
    huge = Strategy(dp=1, tp=1, pp=8, micro_batch=1, global_batch=2 ** 16)      # 2 m p = 1.0 M passes
    state, message = run_job("superstep", timeline_request(MODEL, huge, CLUSTER, schedule="1f1b"))
    assert state == "failed" and "MAX_TIMELINE_EVENTS" in message      # one line, as the page would say it
    with pytest.raises(ExplorerError, match="MAX_TIMELINE_EVENTS"):
        superstep_view(MODEL, huge, CLUSTER, "1f1b")


def _json_texts(data: dict) -> list:
    return [v for trace in data["wire"]["data"] for v in trace.values() if isinstance(v, dict) and "json" in v]


def _typed(data: dict) -> list:
    return [v for trace in data["wire"]["data"] for v in trace.values() if isinstance(v, dict) and "bdata" in v]


@pytest.mark.parametrize("change, message", [
    (lambda d: d.pop("columns"), "malformed"),
    (lambda d: d["columns"].pop("kind"), "without its columns"),
    (lambda d: d["columns"]["start_s"].update(dtype="<i8"), "wrong type"),
    (lambda d: d["columns"]["stage"].update(bytes=b"\0" * 3), "wrong type"),
    (lambda d: d["columns"]["kind"].update(codes=np.full(d["rows"], 99, "<i4").tobytes()), "out of range"),
    (lambda d: d["columns"]["kind"].update(values=[1, 2]), "malformed"),
    (lambda d: d.update(rows=10 ** 6), "rows"),
    (lambda d: d.update(extra={"agreement": {}, "exec": "x"}), "malformed"),
    (lambda d: d["extra"].pop("agreement"), "malformed"),
    (lambda d: d["extra"].update(agreement="x"), "malformed"),
    (lambda d: d.update(wire={"data": "x", "layout": {}}), "malformed"),
    (lambda d: d["wire"]["data"].append("not a trace"), "malformed"),
    (lambda d: _typed(d)[0].update(bdata="not base64!"), "figure came back malformed"),
    (lambda d: _typed(d)[0].update(shape="3, 1000001"), "figure came back malformed"),
    (lambda d: _json_texts(d)[0].update(json=b'{"a": 1}'), "JSON text"),
    (lambda d: _json_texts(d)[0].update(json="[1]"), "JSON text"),
])
def test_a_view_that_came_back_malformed_is_refused_in_one_line(change, message):
    data = pickle.loads(pickle.dumps(view_to_plain(superstep_view(MODEL, INTERLEAVED, CLUSTER, "interleaved"))))
    assert _json_texts(data) and _typed(data)
    change(data)
    with pytest.raises(ExplorerError, match=message):
        view_from_plain(data)


REAL = view_to_plain(superstep_view(MODEL, INTERLEAVED, CLUSTER, "interleaved"))
PLAIN_VALUES = hs.recursive(hs.none() | hs.booleans() | hs.integers() | hs.floats() | hs.text(max_size=5)
                            | hs.binary(max_size=8),
                            lambda inner: hs.lists(inner, max_size=4) | hs.dictionaries(hs.text(max_size=8), inner,
                                                                                         max_size=4), max_leaves=20)


def _slots(value, path=()):
    """Every (path) inside a view's plain data where a value sits."""
    yield path
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _slots(v, path + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value[:3]):
            yield from _slots(v, path + (i,))


SLOTS = list(_slots(REAL))[1:]


@settings(max_examples=150, deadline=None)
@given(hs.sampled_from(SLOTS), PLAIN_VALUES)
def test_a_view_with_any_one_value_replaced_is_refused_in_one_line_or_read(path, value):
    """Any one value of a real view replaced by any plain value: view_from_plain refuses it with an ExplorerError
    or returns a view; never another exception (a traceback on the page)."""
    data = pickle.loads(pickle.dumps(REAL))
    holder = data
    for key in path[:-1]:
        holder = holder[key]
    holder[path[-1]] = value
    try:
        view_from_plain(data)
    except ExplorerError:
        pass


@settings(max_examples=60, deadline=None)
@given(PLAIN_VALUES)
def test_anything_else_is_refused_as_malformed_never_a_traceback(data):
    try:
        view_from_plain(data)
    except ExplorerError:
        pass


def test_a_worker_figure_is_sent_as_its_json_and_parsed_only_when_edited():
    """Its long lists travel as JSON text: sent as they came (orjson Fragments), parsed only when a page copies or
    builds the figure (classroom mode, a zoom, the Compare page); its specification wires to the same JSON too."""
    from explorer.charts.spec_figure import JSONText, figure_copy
    from explorer.charts.wire import JSON_KEY, wire_spec
    here = superstep_view(MODEL, INTERLEAVED, CLUSTER, "interleaved")["figure"]
    wire = portable_wire(here)
    assert any(set(v) == {JSON_KEY} for trace in wire["data"] for v in trace.values() if isinstance(v, dict))
    back = figure_from_wire(pickle.loads(pickle.dumps(wire)))
    assert any(isinstance(v, JSONText) for trace in back.unvalidated_spec()["data"] for v in trace.values())
    expected = wired(here)
    assert pio.to_json(wire_spec(back), validate=False) == \
        pio.to_json(plotly.tools.return_figure_from_figure_or_data(wire_figure(here), True), validate=False)
    assert pio.to_json(figure_copy(back)) == pio.to_json(figure_copy(here))
    assert back.unvalidated_spec() is not None and wired(back) == expected       # the copy left it unbuilt
