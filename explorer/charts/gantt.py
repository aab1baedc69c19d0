"""Gantt figures of timeline events (explorer.timeline): rows = stages or devices, colour = category.

One horizontal-bar trace per category (not per bar), positioned with base=start
and x=duration on a numeric time axis, so tens of thousands of events stay
responsive (px.timeline needs datetimes and draws nothing for seconds).
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from explorer.charts.palette import CATEGORY_COLOURS as CATEGORY_COLORS     # one palette for every chart (palette.py)
UNITS = (("s", 1.0), ("ms", 1e3), ("µs", 1e6))
HOVER = ("%{customdata[0]} · %{customdata[1]}<br>start %{base:.4g} {u}<br>duration %{x:.4g} {u}"
         "<br>micro-batch %{customdata[2]} chunk %{customdata[3]}<br>%{customdata[4]:,.0f} bytes %{customdata[5]}"
         "<extra>%{fullData.name}</extra>")


def time_unit(seconds: float) -> tuple:
    """(name, factor) that shows `seconds` with a few digits: s, ms or µs."""
    if seconds >= 10:
        return UNITS[0]
    return UNITS[1] if seconds >= 0.01 else UNITS[2]


PASS_LETTER = {"forward": "F", "backward": "B", "weight": "W"}
MAX_LABELLED_BARS = 5000


def _labels(events: pd.DataFrame, label: str | None) -> np.ndarray:
    """Bar text: 'F3' / 'B3' / 'W3' (pass and micro-batch, '.c' for chunk c of the interleaved
    schedule) on computation bars; for micro-steps the operator on computation, the collective
    on communication; nothing on small parts (they would not fit anyway)."""
    label = label or ("micro_batch" if events["micro_batch"].nunique() > 1 else "operator")
    kind = events["kind"].to_numpy(dtype=object)
    computing = events["category"].isin(["compute", "recompute"]).to_numpy()
    text = np.full(len(events), "", dtype=object)
    if label == "micro_batch":
        letter = events["kind"].map(PASS_LETTER).fillna("").to_numpy(dtype=object)
        mb, chunk = events["micro_batch"].to_numpy(), events["chunk"].to_numpy()
        named = letter + mb.astype(str).astype(object)
        if chunk.max(initial=0) > 0:
            named = named + "." + chunk.astype(str).astype(object)
        keep = computing & (mb >= 0) & (letter != "")
        text[keep] = named[keep]
    elif label == "operator":
        ops = events["operator"].to_numpy(dtype=object)
        text[computing] = ops[computing]
        comm = ~computing & (kind != "barrier") & (kind != "idle")
        text[comm] = kind[comm]
    else:
        text = events[label].astype(str).to_numpy(dtype=object)
    return text


def gantt_figure(events: pd.DataFrame, title: str = "", label: str | None = None) -> go.Figure:
    """Gantt chart of `events`; bars carry `label` (default: micro-batch, or operator for micro-steps)."""
    end = float(events["end_s"].max()) if len(events) else 0.0
    unit, factor = time_unit(end)
    # Beyond a few thousand bars each is narrower than its label, which plotly would hide
    # anyway (uniformtext): leave the text out and keep the figure small.
    text = _labels(events, label) if len(events) <= MAX_LABELLED_BARS else np.full(len(events), "", dtype=object)
    rows = list(dict.fromkeys(events.sort_values(["stage", "row"], kind="stable")["row"]))
    fig = go.Figure()
    cats = events["category"].to_numpy()
    custom = np.column_stack([events[c].to_numpy(dtype=object) for c in
                              ("kind", "operator", "micro_batch", "chunk", "bytes", "level")]) \
        if len(events) else np.zeros((0, 6), dtype=object)
    start, dur, row = events["start_s"].to_numpy() * factor, events["duration_s"].to_numpy() * factor, \
        events["row"].to_numpy(dtype=object)
    order = [c for c in CATEGORY_COLORS if c in set(cats)] + sorted(set(cats) - set(CATEGORY_COLORS))
    for cat in order:
        sel = cats == cat
        fig.add_trace(go.Bar(
            name=cat, orientation="h", base=start[sel], x=dur[sel], y=row[sel], text=text[sel],
            customdata=custom[sel], marker_color=CATEGORY_COLORS.get(cat, "#888888"), marker_line_width=0,
            textposition="inside", insidetextanchor="middle", textangle=0, hovertemplate=HOVER.replace("{u}", unit)))
    fig.update_layout(title=title, barmode="overlay", bargap=0.15, legend_title_text="category",
                      uniformtext=dict(minsize=8, mode="hide"), xaxis_title=f"time ({unit})",
                      yaxis=dict(categoryorder="array", categoryarray=rows, autorange="reversed"),
                      height=max(300, 40 + 28 * len(rows)))
    return fig


def superstep_figure(events: pd.DataFrame, title: str = "Super-step") -> go.Figure:
    """One iteration: a row per stage, micro-batch numbers on the bars."""
    return gantt_figure(events, title, label="micro_batch")


def microstep_figure(events: pd.DataFrame, title: str = "Micro-steps") -> go.Figure:
    """One layer or operator on its operator-parallel group: a row per device, operator names on the bars."""
    return gantt_figure(events, title, label="operator")
