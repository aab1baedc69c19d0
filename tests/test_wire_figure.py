"""The figure a page hands `st.plotly_chart` (explorer/charts/wire.py) is plotly's own JSON, built without plotly's
deep copies and in one orjson call: for every kind of chart the pages draw, the JSON Streamlit sends is the one it
sent before, and the figure it came from is left as it was."""
import base64
import copy
import json
import pickle
import sys
import threading

import numpy as np
import orjson
import plotly.graph_objects as go
import plotly.io as pio
import plotly.tools
import pytest

from explorer import Strategy, evaluate, load_cluster, load_model, timeline
from explorer.charts.animation import animated_gantt
from explorer.charts.attention_curve import attention_curve_figure
from explorer.charts.breakdown import breakdown_bar, comm_figure, memory_figure
from explorer.charts.classroom import classroom_figure
from explorer.charts.gantt import microstep_figure, superstep_figure
from explorer.charts.tables import comm_table, memory_table
from explorer.charts.spec_figure import SpecFigure
from explorer.charts.wire import WireFigure, wire_figure, wire_spec
from explorer.search import search
from explorer.search.figure import pareto_figure

TINY, CLASSROOM = load_model("tiny-gpt"), load_cluster("classroom")
STRATEGY = Strategy(dp=2, tp=2, pp=2, micro_batch=1, global_batch=16)


RESULT = evaluate(TINY, STRATEGY, CLASSROOM)
EVENTS = timeline.superstep_events(TINY, STRATEGY, CLASSROOM, schedule="1f1b", result=RESULT)
CAPACITY = CLASSROOM.device.memory_bytes
SEARCHED = search(TINY, CLASSROOM, 8, 16, top=5)
FIGURES = {   # each chart a page draws, built afresh (a SpecFigure read once is validated from then on)
    "super-step Gantt": lambda: superstep_figure(EVENTS),
    "micro-step Gantt": lambda: microstep_figure(timeline.microstep_events(TINY, STRATEGY, CLASSROOM, layer=0)),
    "played Gantt (frames)": lambda: animated_gantt(superstep_figure(EVENTS), steps=4),
    "classroom Gantt": lambda: classroom_figure(superstep_figure(EVENTS)),
    "breakdown": lambda: breakdown_bar({"a": RESULT}),
    "communication": lambda: comm_figure(comm_table(RESULT, CLASSROOM.levels[0].name)),
    "memory": lambda: memory_figure(memory_table(RESULT, CAPACITY), CAPACITY),
    "attention curve": lambda: attention_curve_figure(TINY, STRATEGY, CLASSROOM)[0],
    "search": lambda: pareto_figure(SEARCHED),
    "a figure's dictionary (Compare page)": lambda: superstep_figure(EVENTS).to_dict()}
SPEC_BUILT = ("super-step Gantt", "micro-step Gantt", "breakdown", "communication", "memory", "attention curve")


def _streamlit_json(fig) -> str:
    """What st.plotly_chart sends for `fig` (streamlit/elements/plotly_chart.py)."""
    return pio.to_json(plotly.tools.return_figure_from_figure_or_data(fig, validate_figure=True), validate=False)


def _values(value):
    """A figure's JSON with plotly's base64 typed arrays ({"dtype", "bdata", "shape"}, which plotly.js decodes) as
    the lists they stand for: plotly sends a numeric column either way (validation keeps the Gantt's `base`
    column as an object array, so plotly sends it as a list; from the specification it goes as float64 bytes)."""
    if isinstance(value, dict) and set(value) - {"shape"} == {"dtype", "bdata"}:
        array = np.frombuffer(base64.b64decode(value["bdata"]), dtype=value["dtype"])
        shape = value.get("shape")
        return (array.reshape([int(n) for n in str(shape).split(",")]) if shape else array).tolist()
    if isinstance(value, dict):
        return {k: _values(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_values(v) for v in value]
    return value


def _sent(fig) -> dict:
    return _values(json.loads(_streamlit_json(fig)))


@pytest.mark.parametrize("name", list(FIGURES))
def test_the_wire_form_sends_the_json_plotly_sends(name):
    fig = FIGURES[name]()
    assert isinstance(fig, SpecFigure) == (name in SPEC_BUILT)
    if name in SPEC_BUILT:
        assert fig.unvalidated_spec() is not None       # nothing has read it yet: the wire goes from its spec
    assert _sent(wire_figure(fig)) == _sent(FIGURES[name]()) == _values(json.loads(pio.to_json(fig)))
    assert pio.to_json(fig) == pio.to_json(FIGURES[name]())      # nothing of `fig` changed


@pytest.mark.parametrize("name", list(FIGURES))
def test_the_wire_form_needs_no_value_by_value_cleaning(name):
    """orjson takes the specification as it is: plotly's encoder tries that first and only cleans (walking every
    value in Python) when orjson refuses, as it refuses the object arrays plotly keeps text columns in."""
    orjson.dumps(wire_spec(FIGURES[name]()), option=orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY)
    if name.endswith("Gantt"):
        with pytest.raises(TypeError):
            orjson.dumps(FIGURES[name]().to_dict(), option=orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY)


def test_a_wire_figure_is_wired_once():
    wired = wire_figure(FIGURES["breakdown"]())
    assert isinstance(wired, WireFigure) and wire_figure(wired) is wired


def test_a_spec_figure_is_a_figure_once_read():
    """Read as a figure (a property, a method, a copy, a pickle, go.Figure of it), a SpecFigure is go.Figure(spec)."""
    plain = go.Figure(FIGURES["breakdown"]().unvalidated_spec())
    assert FIGURES["breakdown"]().layout.title.text == plain.layout.title.text
    assert [t.name for t in FIGURES["breakdown"]().data] == [t.name for t in plain.data]
    edited = FIGURES["breakdown"]().update_layout(height=123)
    assert edited.layout.height == 123 and edited.unvalidated_spec() is None
    for copied in (copy.deepcopy(FIGURES["breakdown"]()), pickle.loads(pickle.dumps(FIGURES["breakdown"]())),
                   go.Figure(FIGURES["breakdown"]())):
        assert copied.to_dict() == plain.to_dict()
    with pytest.raises(AttributeError):
        FIGURES["breakdown"]().no_such_property


def test_page_runs_reading_one_cached_spec_figure_at_once_see_one_figure():
    """A figure in a cache shared by every session can be read by two page runs at once: validated once."""
    fig, seen = FIGURES["super-step Gantt"](), []
    threads = [threading.Thread(target=lambda: seen.append(len(fig.data))) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen == [len(go.Figure(FIGURES["super-step Gantt"]().unvalidated_spec()).data)] * 8


def test_a_page_run_wiring_a_spec_figure_while_another_builds_it_sends_every_trace_whole():
    """plotly's initialiser edits the dictionaries it is given (a trace's "type" out and back in): the figure is
    built from a copy, so a page run wiring the shared specification meanwhile never sends a trace without its
    type (plotly.js would draw it as a scatter)."""
    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    try:
        broken = walks = 0
        for _ in range(5):
            fig, stop, seen = FIGURES["super-step Gantt"](), threading.Event(), []

            def wire():
                while not stop.is_set():
                    seen.append(all("type" in trace for trace in wire_spec(fig)["data"]))
            reader = threading.Thread(target=wire)
            reader.start()
            assert fig.layout.title is not None          # builds the figure in this thread
            stop.set()
            reader.join()
            walks, broken = walks + len(seen), broken + seen.count(False)
    finally:
        sys.setswitchinterval(switch)
    assert walks and broken == 0


@pytest.mark.parametrize("spec", [
    dict(data=[dict(type="bar", x=np.array([1.0, 2.0]), y=["a", "b"], customdata=[np.array([1, 2]), np.array([3, 4])],
                    name=None)], layout=dict(template="plotly_white", xaxis=dict(range=np.array([0.0, 3.0])))),
    dict(data=[dict(type="scatter", x=np.array(["2026-01-01", "2026-01-02"], dtype="datetime64[ns]"), y=[1, 2])],
         layout=dict(title=dict(text=None))),
], ids=["arrays in lists, None, a template's name, a range", "dates"])
def test_a_specification_goes_as_plotly_sends_it(spec):
    assert _sent(wire_figure(SpecFigure(spec))) == _sent(go.Figure(spec))


def test_a_wire_figure_says_what_it_is_when_read_as_a_figure():
    with pytest.raises(AttributeError, match="not a figure to read"):
        wire_figure(FIGURES["breakdown"]()).layout


def test_a_spec_figure_is_wired_once_until_it_is_built():
    """A figure from a cache every session shares is sent on each rerun: its wire is made once (WIRED); once the
    figure is built (read, perhaps edited), it is wired afresh from what it is now."""
    fig = FIGURES["breakdown"]()
    wired = wire_figure(fig)
    assert wire_figure(fig) is wired
    fig.update_layout(height=123)
    again = wire_figure(fig)
    assert again is not wired and again.to_dict()["layout"]["height"] == 123
    assert "_wired" not in fig.__dict__                 # the built figure does not keep the old wire
    assert wired.to_dict()["layout"]["height"] != 123


@pytest.mark.parametrize("reader", ["classroom", "zoom", "animation"])
def test_a_session_projecting_a_shared_figure_leaves_it_unbuilt(reader):
    """Classroom mode, its zoom and the animation edit copies: the shared figure is not built (so every other
    session keeps sending its wire form) and the copy is the figure they copied before."""
    from explorer.charts.classroom import zoom_micro_batches
    fig = FIGURES["super-step Gantt"]()
    copy_of = {"classroom": lambda f: classroom_figure(f), "zoom": lambda f: zoom_micro_batches(f, EVENTS, 2),
               "animation": lambda f: animated_gantt(f, steps=3)}[reader]
    wired = wire_figure(fig)
    made = copy_of(fig)
    assert fig.unvalidated_spec() is not None and wire_figure(fig) is wired
    before = copy_of(go.Figure(FIGURES["super-step Gantt"]().unvalidated_spec()))   # as a built figure was copied
    assert json.loads(made.to_json()) == json.loads(before.to_json())
