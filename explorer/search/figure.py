"""The search's Pareto scatter: peak memory per device vs iteration time.

Every point carries customdata (list name, index) -- ("pareto", i) or ("top", i) --
so a selection on the chart names the candidate it picked.
"""
from __future__ import annotations

import plotly.graph_objects as go

from explorer.search.report import GIB, label


def _trace(candidates, name: str, mode: str, symbol: str, colour: str, band: float | None = None) -> go.Scatter:
    errors = None if not band else dict(type="data", array=[band * c.iteration_time_s for c in candidates],
                                        color=colour, thickness=1, width=4)
    return go.Scatter(
        x=[c.peak_memory_bytes / GIB for c in candidates], y=[c.iteration_time_s for c in candidates],
        mode=mode, name=name, marker=dict(size=11, symbol=symbol, color=colour), error_y=errors,
        customdata=[[name, i] for i in range(len(candidates))], text=[label(c.strategy) for c in candidates],
        hovertemplate="%{text}<br>%{y:.4g} s, %{x:.3g} GiB<extra>" + name + "</extra>")


def pareto_figure(result, title: str = "Iteration time vs peak memory per device", band: float | None = None) -> go.Figure:
    """`band`: a fraction drawn as error bars on the times, ± band x T (the regime's validated error,
    explorer.validation.evidence); None: no error bars."""
    fig = go.Figure()
    fig.add_trace(_trace(result.pareto, "pareto", "lines+markers", "circle", "#4C78A8", band))
    fig.add_trace(_trace(result.top, "top", "markers", "diamond-open", "#E45756", band))
    fig.add_vline(x=result.memory_cap_bytes / GIB, line_dash="dot", line_color="#888",
                  annotation_text="memory cap", annotation_position="top left")
    fig.update_layout(title=title, height=460, margin=dict(l=10, r=10, t=60, b=10), clickmode="event+select",
                      legend=dict(orientation="h", yanchor="bottom", y=1.0, x=1.0, xanchor="right"))
    fig.update_xaxes(title="peak memory per device (GiB)", rangemode="tozero")
    fig.update_yaxes(title="iteration time (s)", type="log")
    return fig
