"""Small figures the lessons need beyond the explorer's charts: memory bars side by side.

>>> from explorer import load_model, load_cluster, Strategy, evaluate
>>> r = evaluate(load_model("tiny-gpt"), Strategy(dp=2, global_batch=8), load_cluster("classroom"))
>>> [t.name for t in memory_bars({"a": r, "b": r}, 64 * 2 ** 30).data][:4]
['params', 'grads', 'optimizer', 'activations']
"""
from __future__ import annotations

import plotly.graph_objects as go

from explorer.charts.breakdown import MEMORY_COLOURS
from explorer.charts.tables import GIB, MEMORY_PARTS


def memory_bars(results: dict, capacity_bytes: float, title: str = "Memory per GPU (most loaded device)",
                current: str | None = None) -> go.Figure:
    """label -> Result: one stacked bar of GiB per part each, the capacity as a dashed line and
    the current setting's bar outlined."""
    labels = list(results)
    fig = go.Figure()
    for part in MEMORY_PARTS:
        fig.add_bar(x=labels, y=[results[k].memory_bytes_per_device[part] / GIB for k in labels], name=part,
                    marker_color=MEMORY_COLOURS[part],
                    marker_line_width=[4 if k == current else 0 for k in labels], marker_line_color="#000000",
                    hovertemplate="%{x} " + part + ": %{y:.3g} GiB<extra></extra>")
    totals = [results[k].memory_bytes_per_device["total"] / GIB for k in labels]
    fig.add_scatter(x=labels, y=totals, mode="text", text=[f"{t:.3g} GiB" for t in totals],
                    textposition="top center", showlegend=False, hoverinfo="skip")
    capacity = capacity_bytes / GIB
    fig.add_hline(y=capacity, line_dash="dash", line_color="#C0392B",
                  annotation_text=f"GPU memory {capacity:.0f} GiB", annotation_position="top right")
    fig.update_layout(title=title, barmode="stack", height=420, margin=dict(l=10, r=10, t=60, b=10),
                      legend=dict(orientation="h", yanchor="bottom", y=1.0, x=1.0, xanchor="right"))
    fig.update_yaxes(title="GiB per GPU", range=[0, max([capacity] + totals) * 1.18])
    return fig
