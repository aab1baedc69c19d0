"""A figure as it goes to the browser: the same JSON as plotly's own `to_dict`, built without its deep copies.

Streamlit's `st.plotly_chart` turns a figure into its specification with `Figure.to_dict()`
(`plotly.tools.return_figure_from_figure_or_data`) and then into JSON with `plotly.io.to_json`. For a
Gantt of a few thousand bars that was the largest share of a page run in the serving interpreter
(py-spy of `benchmarks/bench_load.py --diverse`, docs/benchmarks-classroom.md): `to_dict` deep-copies every
array, and plotly keeps text columns as numpy object arrays, which orjson refuses, so plotly's encoder then
walks every value in Python (`clean_to_json_compatible`). `wire_figure` builds the dictionary in one walk,
numeric arrays as plotly's base64 typed arrays and object arrays as lists (numpy's `tolist`), and hands Streamlit
a figure whose `to_dict` returns it: plotly's JSON encoder then takes it in one orjson call.

A `SpecFigure` (explorer/charts/spec_figure.py) that plotly has not validated yet goes from its specification
directly, with what validation would add: the default template (Streamlit's theme, as `BaseFigure.__init__` applies
`plotly.io.templates.default`), arrays of text as lists, pandas columns as numpy arrays.
The numeric arrays become plotly's base64 typed arrays as `to_dict` makes them (`to_typed_array_spec`).

The JSON is plotly's own (tests/test_wire_figure.py compares it with `plotly.io.to_json` for every chart a page
draws, with plotly's typed arrays read as the numbers they stand for).
"""
from __future__ import annotations

import base64

import numpy as np
import orjson
import pandas as pd
import plotly.graph_objects as go
import plotly.io as pio
from _plotly_utils.utils import is_skipped_key, to_typed_array_spec

from explorer.charts.spec_figure import WIRED, JSONText, SpecFigure
from explorer.errors import ExplorerError

NUMERIC_KINDS, TEXT_KINDS = "biuf", "OUS"
"""numpy dtype kinds plotly sends as base64 typed arrays, and those it sends as lists; an array of any other kind
(dates, durations) is left as it is, for plotly's own encoder to clean as it always did."""


def _leaf(value, typed: bool):
    """An array as plotly's `to_dict` leaves it for its encoder: a typed array where `typed` (a dict's value that
    `convert_to_base64` reaches), text as a list; a pandas column as its numpy array."""
    if isinstance(value, (pd.Series, pd.Index)):
        value = value.to_numpy()
    if isinstance(value, JSONText):            # already JSON (a worker's figure): orjson writes it as it is
        return orjson.Fragment(bytes(value))
    if isinstance(value, np.ndarray):
        if value.dtype.kind in TEXT_KINDS:
            return value.tolist()
        if value.dtype.kind in NUMERIC_KINDS and typed:
            return to_typed_array_spec(value)
    return value


def _plain(value, typed: bool = True):
    """`value` with fresh dicts and lists (a figure's own containers and a specification stay untouched), its
    arrays as `_leaf` makes them: convert_to_base64's walk done at once (it types the arrays that are a dict's
    values, not those in lists nor under its skipped keys, e.g. an axis range), without walking again into the
    lists made of text arrays (half of the wire's time with plotly's walk). A dict's None values, and the dicts left
    empty, are left out, as plotly's validation leaves out what sets nothing."""
    if isinstance(value, dict):
        plain = ((k, _plain(v, typed and not is_skipped_key(k))) for k, v in value.items() if v is not None)
        return {k: v for k, v in plain if not (isinstance(v, dict) and not v)}
    if isinstance(value, (list, tuple)):
        return [_plain(v, typed) if isinstance(v, (dict, list, tuple)) else _leaf(v, False) for v in value]
    return _leaf(value, typed)


MAX_NAMED_TEMPLATES = 16
_NAMED: dict = {}
"""A named template's JSON, made once per registered Template object ((name, id) -> dict; a few names at most):
plotly's to_plotly_json deep-copies the whole theme, 2.8 ms for Streamlit's, on every figure sent. A wire is
never changed (WireFigure), so its figures may share the one dict."""


def _template(given) -> dict | None:
    """What validation puts in layout.template: the given template (a name or a Template), else
    plotly.io.templates.default (Streamlit sets its theme there)."""
    template = pio.templates.default if given is None else given
    if template is None or isinstance(template, dict):
        return template
    if isinstance(template, go.layout.Template):
        return template.to_plotly_json()
    registered = pio.templates[template]
    key = (template, id(registered))
    made = _NAMED.get(key)
    if made is None:
        if len(_NAMED) >= MAX_NAMED_TEMPLATES:      # templates made again and again ("a+b" merges): start afresh
            _NAMED.clear()
        made = _NAMED[key] = registered.to_plotly_json()
    return made


def wire_spec(fig: go.Figure | dict, default_template: bool = True) -> dict:
    """`fig.to_dict()`, the same figure (plotly's typed arrays where `to_dict` has them or where validation would
    have kept a column of numbers as objects), without deep-copying arrays (nor validating a SpecFigure or a
    figure's dictionary: what `st.plotly_chart` would validate first). `default_template` False: a specification
    that names no template gets none (portable_wire)."""
    given = fig if isinstance(fig, dict) else fig.unvalidated_spec() if isinstance(fig, SpecFigure) else None
    if given is not None:
        layout = dict(given.get("layout") or {})
        named = layout.pop("template", None)
        template = _template(named) if named is not None or default_template else None
        spec = {"data": _plain(list(given.get("data") or ())), "layout": _plain(layout)}
        if template is not None:
            spec["layout"]["template"] = template           # plain values only: nothing in it to convert
        frames = _plain(list(given.get("frames") or ()))
    else:
        spec = {"data": _plain(fig._data), "layout": _plain(fig._layout)}
        frames = [_plain(frame._props) for frame in fig._frame_objs]
    if frames:
        spec["frames"] = frames
    return spec


class WireFigure(go.Figure):
    """A drawn figure's specification in the one form `st.plotly_chart` reads (`to_dict`); it is not a
    figure to edit: `plotly.basedatatypes.BaseFigure.__init__` is not run, so nothing but `to_dict` works."""

    def __init__(self, spec: dict):         # noqa: the base initialiser (validation of every value) is skipped
        self.__dict__["_wire"] = spec

    def __getattr__(self, name: str):
        raise AttributeError(f"{name}: a WireFigure is a figure's JSON for st.plotly_chart, not a figure to read "
                             "(explorer/charts/wire.py); read the figure it was made of")

    def to_dict(self) -> dict:
        return self._wire

    to_plotly_json = to_dict


# WIRED (explorer/charts/spec_figure.py) is where an unbuilt SpecFigure keeps its wire specification: the figures of
# the caches every session shares are sent again on each rerun of each page that shows them (with thirty sessions, a
# tenth of the serving interpreter's time when nothing new was computed: docs/benchmarks-classroom.md). Its
# specification never changes and the template default is the process's (Streamlit's theme), so the wire made once
# stands; a figure built since (read as a figure, perhaps edited) drops it and is wired afresh.


def wire_figure(fig: go.Figure | dict) -> WireFigure:
    """`fig` (a figure or its dictionary) ready for `st.plotly_chart` (the same figure in plotly's JSON); a
    SpecFigure's is made once (WIRED)."""
    if isinstance(fig, WireFigure):
        return fig
    if isinstance(fig, SpecFigure) and fig.unvalidated_spec() is not None:
        wired = fig.__dict__.get(WIRED)
        if wired is None:
            wired = fig.__dict__[WIRED] = WireFigure(wire_spec(fig))
        return wired
    return WireFigure(wire_spec(fig))


# A figure built in another process (a worker's timeline: explorer/charts/timeline_views.py) travels as its wire
# specification, which is plain data, less the template plotly fills in by default: pio.templates.default is
# Streamlit's theme in the server and plotly's own in a worker.
TYPED_ARRAY_KEYS = ({"dtype", "bdata"}, {"dtype", "bdata", "shape"})
TYPED_DTYPES = {"i1": "int8", "u1": "uint8", "i2": "int16", "u2": "uint16", "i4": "int32", "u4": "uint32",
                "f4": "float32", "f8": "float64"}
"""plotly's typed array codes (_plotly_utils.utils plotlyjsShortTypes) and the numpy dtypes they stand for."""


JSON_KEY = "json"           # {JSON_KEY: bytes}: a value of a portable wire sent as its JSON text
JSON_AT_LEAST = 32          # lists at least this long travel as JSON text (a Gantt's labels and hover data)


def portable_wire(fig: SpecFigure) -> dict:
    """An unbuilt SpecFigure's wire specification as plain data another process can draw (figure_from_wire): the
    template it names, none where it names none; each trace's long lists (text, hover data) as their JSON text,
    {JSON_KEY: bytes}, which the other process sends as they are (a 5,900-bar Gantt: ~70,000 strings and numbers
    it would otherwise unpickle and encode again). ExplorerError for a built figure (its template is this process's
    default already)."""
    if not isinstance(fig, SpecFigure) or fig.unvalidated_spec() is None:
        raise ExplorerError("only a figure given by its specification travels to another process")
    wire = wire_spec(fig, default_template=False)
    wire["data"] = [{k: {JSON_KEY: orjson.dumps(v)} if isinstance(v, list) and len(v) >= JSON_AT_LEAST else v
                     for k, v in trace.items()} for trace in wire["data"]]
    return wire


def _decoded(value, wired: bool):
    """A portable wire's dicts afresh: its JSON texts as orjson Fragments (`wired`: what is sent) or as JSONText
    (the specification: parsed when the figure is built), its typed arrays kept (`wired`) or as numpy arrays (plotly
    validates typed arrays as opaque dicts, and a page that edits the figure reads its numbers)."""
    if isinstance(value, dict):
        if set(value) == {JSON_KEY}:
            text = value[JSON_KEY]
            if not isinstance(text, bytes) or text[:1] != b"[" or text[-1:] != b"]":   # portable_wire's lists only
                raise ExplorerError("a figure's specification came back malformed (a value's JSON text)")
            return orjson.Fragment(text) if wired else JSONText(text)
        if set(value) in TYPED_ARRAY_KEYS and value["dtype"] in TYPED_DTYPES and isinstance(value["bdata"], str):
            if wired:
                return value
            array = np.frombuffer(base64.b64decode(value["bdata"]), dtype=TYPED_DTYPES[value["dtype"]])
            if "shape" in value:
                array = array.reshape([int(n) for n in str(value["shape"]).split(",")])
            return array
        return {k: _decoded(v, wired) for k, v in value.items()}
    if isinstance(value, list) and value and isinstance(value[0], dict):     # traces, annotations, shapes
        return [_decoded(v, wired) for v in value]
    return value            # a list of values (text, hover data): no typed array is inside one; shared, never changed


def figure_from_wire(wire: dict) -> SpecFigure:
    """The figure a portable_wire specification stands for, unbuilt, with this process's default template; it is
    sent as it came (WIRED), and built from the decoded specification only when something reads it as a figure."""
    if not isinstance(wire, dict) or not isinstance(wire.get("data"), list) \
            or not all(isinstance(trace, dict) for trace in wire["data"]) or not isinstance(wire.get("layout"), dict):
        raise ExplorerError("a figure's specification came back malformed")
    fig = SpecFigure(_decoded(wire, wired=False))
    sent = _decoded(wire, wired=True)
    if "template" not in sent["layout"]:
        template = _template(None)
        if template is not None:
            sent["layout"]["template"] = template
    fig.__dict__[WIRED] = WireFigure(sent)
    return fig
