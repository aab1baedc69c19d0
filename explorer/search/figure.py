"""The search's Pareto scatter: peak memory per device vs iteration time.

Every point carries customdata (list name, index) -- ("pareto", i) or ("top", i) --
so a selection on the chart names the candidate it picked.
"""
from __future__ import annotations

import plotly.graph_objects as go

from explorer.io.projector import log_ticks, time_axis

from explorer.search.report import GIB, label


def _trace(candidates, name: str, mode: str, symbol: str, colour: str, band: float | None = None) -> go.Scatter:
    errors = None if not band else dict(type="data", array=[band * c.iteration_time_s for c in candidates],
                                        color=colour, thickness=1, width=4)
    return go.Scatter(
        x=[c.peak_memory_bytes / GIB for c in candidates], y=[c.iteration_time_s for c in candidates],
        mode=mode, name=name, marker=dict(size=11, symbol=symbol, color=colour), error_y=errors,
        customdata=[[name, i] for i in range(len(candidates))], text=[label(c.strategy) for c in candidates],
        hovertemplate="%{text}<br>%{y:.4g} s, %{x:.3g} GiB<extra>" + name + "</extra>")


LOG_SPAN = 10.0
"""The y axis (iteration time) is logarithmic only where the times span at least this factor: below it plotly
labels every digit of the decade (2, 3, ... 9, 0.001), whose labels overlapped at 1280x720 in classroom mode."""
CAP_ROOM = 3.0
"""The x axis reaches the memory cap while the largest peak memory is at least 1/CAP_ROOM of it; else it ends past
the points and the cap is named in the corner (tiny-gpt's points, 0.02 GiB under a 61 GiB cap, were all on the y
axis)."""


ORIGIN_ROOM = 0.03
"""The x axis starts this fraction of its width left of 0 GiB, so that its '0' is not under the y axis's lowest
label in the corner (a linear time axis put '0.15' on '0' in lesson 8's slide); less than a tick step, so no
negative tick is drawn."""


def log_time_axis(result) -> bool:
    """Whether pareto_figure draws the times on a log axis (they span LOG_SPAN or more); a caption says so only then."""
    times = [c.iteration_time_s for c in (*result.pareto, *result.top) if c.iteration_time_s > 0]
    return bool(times) and max(times) >= LOG_SPAN * min(times)


def pareto_figure(result, title: str = "Iteration time vs peak memory per device", band: float | None = None) -> go.Figure:
    """`band`: a fraction drawn as error bars on the times, ± band x T (the regime's validated error,
    explorer.validation.evidence); None: no error bars."""
    fig = go.Figure()
    fig.add_trace(_trace(result.pareto, "pareto", "lines+markers", "circle", "#4C78A8", band))
    fig.add_trace(_trace(result.top, "top", "markers", "diamond-open", "#E45756", band))
    cap = result.memory_cap_bytes / GIB
    memory = [c.peak_memory_bytes / GIB for c in (*result.pareto, *result.top)]
    times = [c.iteration_time_s for c in (*result.pareto, *result.top) if c.iteration_time_s > 0]
    if not memory or max(memory) * CAP_ROOM >= cap:
        fig.add_vline(x=cap, line_dash="dot", line_color="#888",
                      annotation_text="memory cap", annotation_position="top left")
        right = max([cap, *memory]) * 1.05
    else:
        right = max(memory) * 1.15
        fig.add_annotation(text=f"memory cap {cap:.3g} GiB: beyond the right edge", x=1, xref="paper", xanchor="right",
                           y=1, yref="paper", yanchor="top", showarrow=False, font=dict(color="#888"))
    fig.update_layout(title=title, height=460, margin=dict(l=10, r=10, t=60, b=10), clickmode="event+select",
                      legend=dict(orientation="h", yanchor="bottom", y=1.0, x=1.0, xanchor="right"))
    fig.update_xaxes(title="peak memory per device (GiB)", range=[-ORIGIN_ROOM * right, right])
    if log_time_axis(result):
        ticks = log_ticks(min(times) * (1 - (band or 0)), max(times) * (1 + (band or 0)))
        fig.update_yaxes(title="iteration time", type="log", **time_axis(tickvals=ticks))
    else:
        fig.update_yaxes(title="iteration time", **time_axis())
    return fig
