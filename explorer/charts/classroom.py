"""Classroom mode for any figure: large text, the colour-blind-safe palette, the projector's layout
(explorer/io/projector.py: legend below the plot, only the categories drawn), 3 significant digits in
hovers; and a Gantt zoomed to its first micro-batches.

>>> import plotly.graph_objects as go
>>> fig = classroom_figure(go.Figure(go.Bar(name="compute", x=[1], y=["a"], hovertemplate="%{x:.4g} s")))
>>> fig.layout.font.size, fig.data[0].marker.color, fig.data[0].hovertemplate
(18, '#0072B2', '%{x:.3r} s')
"""
from __future__ import annotations

import re

import numpy as np
import plotly.graph_objects as go

from explorer.charts.palette import recolour
from explorer.charts.spec_figure import figure_copy
from explorer.io.projector import projector_layout, rows_height
from explorer.charts.tables import TRACE_LABELS

FONT_PX = 18            # readable from the back of a room at 1280x720 (about 2.5 % of the height)
MAX_MICRO_BATCHES = 32  # a Gantt shows at most this many micro-batches at once in classroom mode
SIGNIFICANT = 3         # classroom mode rounds numbers to this many significant digits
_DIGITS = re.compile(r":(,?)\.(\d)([gfr])")


def fewer_digits(template: str | None) -> str | None:
    """A hover template's numbers to SIGNIFICANT digits in plain decimals (d3's 'r': 170, never 1.7e+2)
    and fixed decimals to at most 2."""
    if not template:
        return template
    return _DIGITS.sub(lambda m: f":{m.group(1)}.{SIGNIFICANT}r" if m.group(3) != "f"
                       else f":{m.group(1)}.{min(int(m.group(2)), 2)}f", template)


def significant_table(table, digits: int = SIGNIFICANT):
    """A copy of a DataFrame with its float columns rounded to `digits` significant digits (classroom
    mode's tables: 43.8 rather than 43.8005).

    >>> import pandas as pd
    >>> significant_table(pd.DataFrame({"s": [43.8005, 0.0256071, 0.0], "n": [1, 2, 3]})).to_dict("list")
    {'s': [43.8, 0.0256, 0.0], 'n': [1, 2, 3]}
    """
    out = table.copy()
    for column in out.columns:
        if out[column].dtype.kind == "f":
            out[column] = [float(f"{v:.{digits}g}") if np.isfinite(v) else v
                           for v in out[column].to_numpy(dtype=float)]
    return out


def classroom_figure(fig, palette: str = "okabe-ito", font_px: int = FONT_PX, memory: bool = False) -> go.Figure:
    """A copy of `fig` for a projector (the original is left alone): the palette, friendly category
    names, hover numbers to 3 significant digits, large type, projector_layout, and a Gantt as tall as its
    rows need at that type (projector.rows_height)."""
    out = figure_copy(fig)
    recolour(out, palette, memory=memory)
    for trace in out.data:
        if getattr(trace, "hovertemplate", None):
            trace.hovertemplate = fewer_digits(trace.hovertemplate)
        if trace.name in TRACE_LABELS and not memory:      # 'op_comm' -> 'TP / operator comm'
            trace.name = TRACE_LABELS[trace.name]
    out.update_layout(font=dict(size=font_px), uniformtext=dict(minsize=12, mode="hide"),
                      hoverlabel=dict(font_size=font_px))
    out.update_annotations(font_size=font_px)
    projector_layout(out, font_px)
    return out.update_layout(height=rows_height(out, font_px))      # a Gantt: each stage a readable row


def micro_batches_end(events, limit: int = MAX_MICRO_BATCHES) -> float:
    """Seconds until the last pass of the first `limit` micro-batches ends (the whole timeline when
    it has no more than `limit`)."""
    mb = events["micro_batch"].to_numpy()
    if mb.max(initial=-1) < limit:
        return float(events["end_s"].max())
    return float(events.loc[(mb >= 0) & (mb < limit), "end_s"].max())


def zoom_micro_batches(fig, events, limit: int = MAX_MICRO_BATCHES) -> go.Figure:
    """Show the time of the first `limit` micro-batches only (the rest by panning): the x range ends
    when the last of their passes ends. Unchanged when there are not more than `limit`."""
    mb = events["micro_batch"].to_numpy()
    if mb.max(initial=-1) < limit:
        return fig
    end = float(events.loc[(mb >= 0) & (mb < limit), "end_s"].max())
    out = figure_copy(fig)
    scale = float(np.nanmax([np.max(np.asarray(t.base, float) + np.asarray(t.x, float)) for t in out.data
                             if t.base is not None and len(t.x)])) / float(events["end_s"].max())
    out.update_xaxes(range=[0, end * scale])
    first, *rest = (out.layout.title.text or "").split("<br>", 1)      # on the title's first line, not its note's
    out.update_layout(title_text="<br>".join([f"{first} (first {limit} micro-batches; pan for more)", *rest]))
    return out
