"""The search's Pareto scatter: peak memory per device vs iteration time.

Every point carries customdata (list name, index) -- ("pareto", i) or ("top", i) --
so a selection on the chart names the candidate it picked.
"""
from __future__ import annotations

import plotly.graph_objects as go

from explorer.search.report import GIB, label


def _trace(candidates, name: str, mode: str, symbol: str, colour: str) -> go.Scatter:
    return go.Scatter(
        x=[c.peak_memory_bytes / GIB for c in candidates], y=[c.iteration_time_s for c in candidates],
        mode=mode, name=name, marker=dict(size=11, symbol=symbol, color=colour),
        customdata=[[name, i] for i in range(len(candidates))], text=[label(c.strategy) for c in candidates],
        hovertemplate="%{text}<br>%{y:.4g} s, %{x:.3g} GiB<extra>" + name + "</extra>")


def pareto_figure(result, title: str = "Iteration time vs peak memory per device") -> go.Figure:
    fig = go.Figure()
    fig.add_trace(_trace(result.pareto, "pareto", "lines+markers", "circle", "#4C78A8"))
    fig.add_trace(_trace(result.top, "top", "markers", "diamond-open", "#E45756"))
    fig.add_vline(x=result.memory_cap_bytes / GIB, line_dash="dot", line_color="#888",
                  annotation_text="memory cap", annotation_position="top left")
    fig.update_layout(title=title, height=460, margin=dict(l=10, r=10, t=60, b=10), clickmode="event+select",
                      legend=dict(orientation="h", yanchor="bottom", y=1.0, x=1.0, xanchor="right"))
    fig.update_xaxes(title="peak memory per device (GiB)", rangemode="tozero")
    fig.update_yaxes(title="iteration time (s)", type="log")
    return fig
