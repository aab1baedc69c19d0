"""Breakdown figures: stacked time by category, communication by type, memory vs capacity.

Each builder takes tables from charts.tables (or a dict of Results) and returns
a plotly Figure; one trace per category/part, so the figures stay light.
"""
from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from explorer.cost.superstep import CATEGORIES
from explorer.charts.palette import CATEGORY_COLOURS, MEMORY_COLOURS     # one colour per category on every chart
from explorer.charts.tables import CATEGORY_LABELS, GIB, MEMORY_PARTS, breakdown_table

SCOPE_COLOURS = {("intra-node", "exposed"): "#F58518", ("intra-node", "hidden"): "#FFBF79",
                 ("inter-node", "exposed"): "#4C78A8", ("inter-node", "hidden"): "#9ECAE9"}


def _layout(fig: go.Figure, title: str, height: int, legend_below: bool = True) -> go.Figure:
    legend = dict(orientation="h", yanchor="top", y=-0.22, x=0) if legend_below else dict(traceorder="normal")
    fig.update_layout(title=title, height=height, margin=dict(l=10, r=10, t=60, b=10), legend=legend,
                      barmode="stack")
    fig.update_xaxes(automargin=True)
    fig.update_yaxes(automargin=True)
    return fig


def breakdown_bar(results: dict, title: str = "Iteration time by category (exposed)") -> go.Figure:
    """label -> Result: one horizontal stacked bar each, one trace per category."""
    labels = list(results)
    tables = {label: breakdown_table(r) for label, r in results.items()}
    fig = go.Figure()
    for i, category in enumerate(CATEGORIES):
        secs = [float(tables[label]["seconds"].iloc[i]) for label in labels]
        share = [float(tables[label]["share_%"].iloc[i]) for label in labels]
        fig.add_bar(y=labels, x=secs, orientation="h", name=CATEGORY_LABELS[category],
                    marker_color=CATEGORY_COLOURS[category], customdata=share,
                    hovertemplate="%{fullData.name}: %{x:.4g} s (%{customdata:.1f} %)<extra>%{y}</extra>")
    fig.update_xaxes(title="seconds per iteration")
    fig.update_yaxes(autorange="reversed")
    return _layout(fig, title, max(300, 150 + 45 * len(labels)), legend_below=False)


def comm_figure(table, title: str = "Communication per device by type") -> go.Figure:
    """charts.tables.comm_table: bytes (left) and seconds (right), intra vs inter node,
    exposed vs hidden."""
    fig = make_subplots(rows=1, cols=2, shared_yaxes=True, horizontal_spacing=0.04,
                        subplot_titles=("GB sent per device per iteration", "seconds per iteration"))
    types = list(dict.fromkeys(table["type"])) or ["(no communication)"]
    for scope in ("intra-node", "inter-node"):
        rows = table[table["scope"] == scope]
        part = rows.groupby("type")[["bytes", "exposed_s", "hidden_s"]].sum().reindex(types, fill_value=0)
        fig.add_bar(y=types, x=part["bytes"] / 1e9, orientation="h", name=f"{scope} bytes", row=1, col=1,
                    marker_color=SCOPE_COLOURS[(scope, "exposed")], legendgroup=scope, showlegend=False,
                    hovertemplate="%{y}: %{x:.4g} GB<extra>" + scope + "</extra>")
        for state in ("exposed", "hidden"):
            fig.add_bar(y=types, x=part[f"{state}_s"], orientation="h", name=f"{scope} {state}", row=1, col=2,
                        marker_color=SCOPE_COLOURS[(scope, state)], legendgroup=scope,
                        hovertemplate="%{y}: %{x:.4g} s<extra>" + f"{scope} {state}" + "</extra>")
    fig.update_yaxes(autorange="reversed")
    return _layout(fig, title, 260 + 30 * len(types))


def memory_figure(table, capacity_bytes: float, title: str = "Memory of the most loaded device per stage") -> go.Figure:
    """charts.tables.memory_table: stacked GiB per stage and the device capacity as a line."""
    fig = go.Figure()
    stages = [f"stage {s}" for s in table["stage"]]
    for part in MEMORY_PARTS:
        fig.add_bar(x=stages, y=table[f"{part}_GiB"], name=part, marker_color=MEMORY_COLOURS[part],
                    hovertemplate="%{x} " + part + ": %{y:.2f} GiB<extra></extra>")
    capacity = capacity_bytes / GIB
    fig.add_hline(y=capacity, line_dash="dash", line_color="#C0392B",
                  annotation_text=f"capacity {capacity:.0f} GiB", annotation_position="top left")
    top = max(capacity, float(table["total_GiB"].max()) if len(table) else 0.0)
    fig.update_yaxes(title="GiB", range=[0, top * 1.12])
    return _layout(fig, title, 400)
