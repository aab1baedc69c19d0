"""A Gantt figure played step by step: plotly frames that grow every bar up to a moving time,
with a cursor line, a play button and a time slider. Works on any figure of gantt.py (the
super-step and the micro-step alike), so the class sees the micro-batches flow through the
stages and the bubble appear.

>>> from explorer.timeline import PassCosts, pipeline_events
>>> from explorer.charts.gantt import superstep_figure
>>> fig = animated_gantt(superstep_figure(pipeline_events(PassCosts.simple([1.0] * 2, [2.0] * 2), 4, "1f1b")), 10)
>>> len(fig.frames), [float(x) for x in fig.frames[0].data[0].x][:2]
(10, [1.0, 0.5])
"""
from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from explorer.charts.spec_figure import figure_copy

FRAME_MS = 250


def frame_times(end: float, steps: int) -> np.ndarray:
    """`steps` equally spaced times in (0, end]."""
    return np.linspace(0.0, end, steps + 1)[1:]


def _extent(fig) -> float:
    return max((float(np.max(np.asarray(t.base, float) + np.asarray(t.x, float))) for t in fig.data
                if t.type == "bar" and t.base is not None and len(t.x)), default=0.0)


def animated_gantt(fig, steps: int = 40) -> go.Figure:
    """A copy of the Gantt `fig` with `steps` frames; at frame k each bar is drawn up to time t_k."""
    out = figure_copy(fig)
    end = _extent(out)
    bars = [i for i, t in enumerate(out.data) if t.type == "bar" and t.base is not None]
    starts = {i: np.asarray(out.data[i].base, float) for i in bars}
    lengths = {i: np.asarray(out.data[i].x, float) for i in bars}
    texts = {i: np.asarray(out.data[i].text if out.data[i].text is not None else [""] * len(lengths[i]), dtype=object)
             for i in bars}
    frames = []
    for k, t in enumerate(frame_times(end, steps)):
        data = []
        for i in bars:
            shown = np.clip(t - starts[i], 0.0, lengths[i])
            # the labels as a list: plotly keeps an object array, which orjson cannot write (explorer/charts/gantt.py)
            data.append(go.Bar(x=shown, text=np.where(shown >= lengths[i], texts[i], "").tolist()))
        cursor = dict(type="line", x0=t, x1=t, y0=0, y1=1, yref="paper", line=dict(color="#000000", width=2))
        frames.append(go.Frame(data=data, traces=bars, name=str(k), layout=dict(shapes=[cursor])))
    out.frames = frames
    play = dict(frame=dict(duration=FRAME_MS, redraw=True), fromcurrent=False, transition=dict(duration=0))
    height = (out.layout.height or 300) + 120        # room for the buttons and the slider below the bars
    out.update_layout(
        height=height, xaxis=dict(range=[0, end * 1.01]),
        updatemenus=[dict(type="buttons", showactive=False, x=0, y=0, xanchor="left", yanchor="top",
                          pad=dict(t=70), direction="left",
                          buttons=[dict(label="▶ play", method="animate", args=[None, play]),
                                   dict(label="❚❚ pause", method="animate",
                                        args=[[None], dict(frame=dict(duration=0, redraw=False), mode="immediate")])])],
        sliders=[dict(active=len(frames) - 1, x=0.22, len=0.78, y=0, yanchor="top", pad=dict(t=50),
                      currentvalue=dict(prefix="time step ", xanchor="right"),
                      steps=[dict(label=str(k + 1), method="animate",
                                  args=[[str(k)], dict(frame=dict(duration=0, redraw=True), mode="immediate")])
                             for k in range(len(frames))])])
    return out
