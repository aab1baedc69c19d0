"""A figure given by its whole specification, validated by plotly only when something reads it as a figure.

Building a `go.Figure` validates and deep-copies every value (`BaseFigure.__init__`): for the Gantt of a new strategy
and the Cost page's three bar charts that was an eighth of the serving interpreter's time under a class's load
(py-spy of `benchmarks/bench_load.py --diverse`, docs/benchmarks-classroom.md), although a page only sends the
figure's JSON. A `SpecFigure` keeps the specification it was given; `explorer/charts/wire.py` sends it as plotly
would have (tests/test_wire_figure.py), and the first read of anything else -- `fig.data`, `fig.layout`,
`update_layout`, a copy, a pickle -- builds the figure with plotly's own initialiser once, after which it is an
ordinary `go.Figure`. The specification is written as plotly's JSON is (nested dicts, not `marker_color`), and it is
never changed: plotly's initialiser edits the dictionaries it is given (it takes each trace's "type" out and puts it
back), so it gets a copy of the containers.

Figures in a cache shared by every session can be read by two page runs at once. The figure is built aside, under a
lock, and handed over in one `dict.update` of the instance's attributes (atomic under the GIL: no Python code runs
between its keys), so another page run sees either the specification alone (and waits for the lock, or wires the
specification) or the whole figure, never half of one.
"""
from __future__ import annotations

import threading

import orjson
import plotly.graph_objects as go

_SPEC, _LOCK = "_spec", "_spec_lock"
WIRED = "_wired"        # the wire form made of the specification (explorer/charts/wire.py), dropped when it is built


class JSONText(bytes):
    """A value of a specification kept as its JSON text (a worker's figure: explorer/charts/wire.py
    figure_from_wire): sent as it is, parsed only when the figure is built or copied."""


def _containers(value):
    """`value` with fresh dicts and lists all the way down (arrays and other values shared; JSONText parsed)."""
    if isinstance(value, dict):
        return {k: _containers(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_containers(v) for v in value]
    if isinstance(value, JSONText):
        return orjson.loads(bytes(value))
    return value


class SpecFigure(go.Figure):
    """`go.Figure(spec)`, built when first read as a figure."""

    def __init__(self, spec: dict):                 # noqa: the base initialiser runs when the figure is first read
        self.__dict__.update({_SPEC: spec, _LOCK: threading.Lock()})

    def __getattr__(self, name: str):
        """Only reached for what the instance does not have: before the figure is built, everything plotly keeps
        on it. Build it (once), then read it as a go.Figure."""
        state = self.__dict__
        if _SPEC not in state:
            raise AttributeError(name)              # built already: plotly has no such attribute
        with state[_LOCK]:
            if _SPEC in state:                      # not built by another page run meanwhile
                built = go.Figure(_containers(state[_SPEC]))
                own = dict(built.__dict__)
                for trace in own["_data_objs"]:         # what BaseFigure.__init__ points at the figure it builds
                    trace._parent = self
                own["_layout_obj"]._parent = self
                own["_data_validator"].set_uid = self._set_trace_uid
                state.update(own)
                del state[_SPEC]
                state.pop(WIRED, None)
        return getattr(self, name)

    def unvalidated_spec(self) -> dict | None:
        """The specification while the figure is not built (else None: read the figure). Never changed."""
        return self.__dict__.get(_SPEC)


def figure_copy(fig) -> go.Figure:
    """A go.Figure copy of `fig` (a figure or a SpecFigure) to edit; an unbuilt SpecFigure stays unbuilt (the copy is
    built from its specification), so that a figure in a cache every session shares keeps its wire form
    (explorer/charts/wire.py WIRED) when one session zooms, animates or projects it."""
    spec = fig.unvalidated_spec() if isinstance(fig, SpecFigure) else None
    return go.Figure(_containers(spec)) if spec is not None else go.Figure(fig)
