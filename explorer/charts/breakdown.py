"""Breakdown figures: stacked time by category, communication by type, memory vs capacity.

Each builder takes tables from charts.tables (or a dict of Results) and returns
a plotly Figure; one trace per category/part, so the figures stay light.
"""
from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from explorer.charts.spec_figure import SpecFigure
from explorer.cost.superstep import CATEGORIES
from explorer.io.projector import time_axis
from explorer.charts.palette import CATEGORY_COLOURS, MEMORY_COLOURS     # one colour per category on every chart
from explorer.charts.tables import CATEGORY_LABELS, GIB, MEMORY_PARTS, breakdown_table

SCOPE_COLOURS = {("intra-node", "exposed"): "#F58518", ("intra-node", "hidden"): "#FFBF79",
                 ("inter-node", "exposed"): "#4C78A8", ("inter-node", "hidden"): "#9ECAE9"}


def _layout(title: str, height: int, legend_below: bool = True, **axes) -> dict:
    """The layout every breakdown figure shares; `axes`: its axes (each gets automargin)."""
    legend = dict(orientation="h", yanchor="top", y=-0.22, x=0) if legend_below else dict(traceorder="normal")
    for axis in axes.values():
        axis["automargin"] = True
    return dict(title=dict(text=title), height=height, margin=dict(l=10, r=10, t=60, b=10), legend=legend,
                barmode="stack", **axes)


def _figure(data: list, layout: dict) -> go.Figure:
    """One Figure from its whole spec, validated once and only when read as a figure (a page sends its JSON
    without: explorer/charts/spec_figure.py): plotly's incremental calls (add_bar, update_layout, make_subplots,
    add_hline) re-walk the figure on each call and cost 20-70 ms a figure; this, 1-3 ms when validated
    (issue 31: the figures of a new strategy were a fifth of the serving interpreter's CPU)."""
    return SpecFigure(dict(data=data, layout=layout))


LABEL_CHARS = 24
"""A bar's label wraps into lines of at most this many characters (at spaces): a strategy's name of 40 to 100
characters on one line took half of the Strategy page's chart at 1280x720 in classroom mode, and ran past the
Search page's figure."""
ROW_PX, LINE_PX = 45, 24    # a bar's height in the figure, and a label line's (classroom mode: projector.rows_height)


def wrap_label(label: str, width: int = LABEL_CHARS) -> str:
    """`label` in lines of at most `width` characters, broken at spaces (plotly's line break is <br>); a word
    longer than `width` keeps its own line.

    >>> wrap_label("d16 t8 p8 b1 B1536 1f1b rc:selective SP")
    'd16 t8 p8 b1 B1536 1f1b<br>rc:selective SP'
    """
    lines: list = []
    for word in label.split():
        if lines and len(lines[-1]) + 1 + len(word) <= width:
            lines[-1] += " " + word
        else:
            lines.append(word)
    return "<br>".join(lines) or label


def breakdown_bar(results: dict, title: str = "Iteration time by category (exposed)",
                  names: dict | None = None) -> go.Figure:
    """label -> Result: one horizontal stacked bar each, one trace per category, its label wrapped (wrap_label).
    `names`: label -> the longer name a hover shows (the Search page's bars are '#1', '#2', ... as its table).
    The legend, below the plot, lists only the categories drawn (a category of zeros everywhere leaves it: the
    Strategy page listed all 11 at 1920x1080, EP, CP and ZeRO of a dense model without ZeRO included)."""
    labels = list(results)
    shown = [wrap_label(label) for label in labels]
    hover = [(names or {}).get(label, label) for label in labels]
    columns = {label: (t["seconds"].tolist(), t["share_%"].tolist())      # plain lists: .iloc per cell was
               for label, t in ((label, breakdown_table(r)) for label, r in results.items())}   # 2 % of a page run
    data = []
    for i, category in enumerate(CATEGORIES):
        secs = [float(columns[label][0][i]) for label in labels]
        share = [float(columns[label][1][i]) for label in labels]
        data.append(dict(type="bar", y=shown, x=secs, orientation="h", name=CATEGORY_LABELS[category],
                         marker=dict(color=CATEGORY_COLOURS[category]), customdata=list(zip(share, hover)),
                         showlegend=any(secs),
                         hovertemplate="%{fullData.name}: %{x:.4g} s (%{customdata[0]:.1f} %)"
                                       "<extra>%{customdata[1]}</extra>"))
    lines = max([label.count("<br>") + 1 for label in shown] or [1])
    layout = _layout(title, max(300, 190 + max(ROW_PX, LINE_PX * lines) * len(labels)),
                     xaxis=dict(time_axis(), title=dict(text="time per iteration")),
                     yaxis=dict(autorange="reversed", type="category",    # '#1' is a name, not the number 1
                                categoryorder="array", categoryarray=shown))   # rows: projector.rows_height
    layout["legend"] = dict(orientation="h", yref="container", y=0, yanchor="bottom", x=0, xanchor="left",
                            traceorder="normal")
    return _figure(data, layout)


SUBPLOT_TITLE = dict(font=dict(size=16), showarrow=False, xanchor="center", xref="paper", y=1.0, yanchor="bottom",
                     yref="paper")
"""A subplot's title as plotly.subplots.make_subplots places it (above the middle of its x domain)."""


def comm_figure(table, title: str = "Communication per device by type") -> go.Figure:
    """charts.tables.comm_table: bytes (left) and seconds (right), intra vs inter node,
    exposed vs hidden. Two subplots sharing the y axis, laid out as make_subplots(rows=1, cols=2,
    shared_yaxes=True, horizontal_spacing=0.04) does."""
    types = list(dict.fromkeys(table["type"])) or ["(no communication)"]
    sums = {}       # (scope, column) -> type -> sum: the table's few rows in plain Python (a groupby was 13 ms)
    values = {column: table[column].tolist() for column in ("bytes", "exposed_s", "hidden_s")}
    for i, (kind, scope) in enumerate(zip(table["type"].tolist(), table["scope"].tolist())):
        for column in ("bytes", "exposed_s", "hidden_s"):
            per_type = sums.setdefault((scope, column), dict.fromkeys(types, 0.0))
            per_type[kind] += values[column][i]
    data = []
    for scope in ("intra-node", "inter-node"):
        part = {column: np.array(list(sums.get((scope, column), dict.fromkeys(types, 0.0)).values()))
                for column in ("bytes", "exposed_s", "hidden_s")}
        data.append(dict(type="bar", y=types, x=part["bytes"] / 1e9, orientation="h",
                         name=f"{scope} bytes",
                         xaxis="x", yaxis="y", marker=dict(color=SCOPE_COLOURS[(scope, "exposed")]),
                         legendgroup=scope, showlegend=False,
                         hovertemplate="%{y}: %{x:.4g} GB<extra>" + scope + "</extra>"))
        for state in ("exposed", "hidden"):
            data.append(dict(type="bar", y=types, x=part[f"{state}_s"], orientation="h", name=f"{scope} {state}",
                             xaxis="x2", yaxis="y2", marker=dict(color=SCOPE_COLOURS[(scope, state)]),
                             legendgroup=scope,
                             hovertemplate="%{y}: %{x:.4g} s<extra>" + f"{scope} {state}" + "</extra>"))
    layout = _layout(title, 260 + 30 * len(types),
                     xaxis=dict(anchor="y", domain=[0.0, 0.48]), xaxis2=dict(time_axis(), anchor="y2", domain=[0.52, 1.0]),
                     yaxis=dict(anchor="x", domain=[0.0, 1.0], autorange="reversed"),
                     yaxis2=dict(anchor="x2", domain=[0.0, 1.0], matches="y", showticklabels=False,
                                 autorange="reversed"))
    layout["annotations"] = [dict(SUBPLOT_TITLE, text="GB sent per device per iteration", x=0.24),
                             dict(SUBPLOT_TITLE, text="time per iteration", x=0.76)]
    return _figure(data, layout)


def memory_figure(table, capacity_bytes: float, title: str = "Memory of the most loaded device per stage") -> go.Figure:
    """charts.tables.memory_table: stacked GiB per stage and the device capacity as a line (a dashed line across
    the plot with its label above its left end, as plotly's add_hline draws it)."""
    stages = [f"stage {s}" for s in table["stage"]]
    data = [dict(type="bar", x=stages, y=table[f"{part}_GiB"], name=part, marker=dict(color=MEMORY_COLOURS[part]),
                 hovertemplate="%{x} " + part + ": %{y:.2f} GiB<extra></extra>") for part in MEMORY_PARTS]
    capacity = capacity_bytes / GIB
    top = max(capacity, float(table["total_GiB"].max()) if len(table) else 0.0)
    layout = _layout(title, 400, xaxis=dict(), yaxis=dict(title=dict(text="GiB"), range=[0, top * 1.12]))
    layout["shapes"] = [dict(type="line", x0=0, x1=1, xref="x domain", y0=capacity, y1=capacity, yref="y",
                             line=dict(color="#C0392B", dash="dash"))]
    layout["annotations"] = [dict(showarrow=False, text=f"capacity {capacity:.0f} GiB", x=0, xanchor="left",
                                  xref="x domain", y=capacity, yanchor="bottom", yref="y")]
    return _figure(data, layout)
