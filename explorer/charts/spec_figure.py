"""A figure given by its whole specification, validated by plotly only when something reads it as a figure.

Building a `go.Figure` validates and deep-copies every value (`BaseFigure.__init__`): for the Gantt of a new strategy
and the Cost page's three bar charts that was an eighth of the serving interpreter's time under a class's load
(py-spy of `benchmarks/bench_load.py --diverse`, docs/benchmarks-classroom.md), although a page only sends the
figure's JSON. A `SpecFigure` keeps the specification it was given; `explorer/charts/wire.py` sends it as plotly
would have (the same JSON, tests/test_wire_figure.py), and the first read of anything else -- `fig.data`,
`fig.layout`, `update_layout`, a copy, a pickle -- runs plotly's own initialiser on it once, after which it is an
ordinary `go.Figure`. The specification is written as plotly's JSON is (nested dicts, not `marker_color`).
"""
from __future__ import annotations

import threading

import plotly.graph_objects as go

_SPEC, _LOCK, _VALIDATING = "_spec", "_spec_lock", "_spec_validating"


class SpecFigure(go.Figure):
    """`go.Figure(spec)`, validated when first read (thread-safe: a figure cached for every session may be read
    by two page runs at once)."""

    def __init__(self, spec: dict):                 # noqa: the base initialiser runs when the figure is first read
        self.__dict__.update({_SPEC: spec, _LOCK: threading.Lock()})

    def __getattr__(self, name: str):
        """Only reached for what is not set yet: validate (once), then read it as a go.Figure."""
        state = self.__dict__
        if _SPEC not in state or state.get(_VALIDATING) == threading.get_ident():
            raise AttributeError(name)          # validated already (it is missing), or plotly's initialiser asking
        with state[_LOCK]:
            if _SPEC in state:                      # not validated by another page run meanwhile
                state[_VALIDATING] = threading.get_ident()
                try:
                    go.Figure.__init__(self, state[_SPEC])
                finally:
                    del state[_VALIDATING]
                del state[_SPEC]
        return getattr(self, name)

    def unvalidated_spec(self) -> dict | None:
        """The specification while plotly has not read it (else None: read the figure)."""
        return self.__dict__.get(_SPEC)
