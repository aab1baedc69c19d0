"""Parity plot: predicted against published, one point per validation case."""
from __future__ import annotations

import plotly.graph_objects as go

from explorer.io.projector import log_ticks, time_axis


def band_of(rows) -> float | None:
    """The rows' validated band: the mean |relative error| of those no constant was fitted on (all of them
    when every row was fitted), as explorer.validation.evidence bands a prediction; None without rows."""
    held = [r for r in rows if r.subset != "fitted"] or list(rows)
    return sum(abs(r.relative_error) for r in held) / len(held) if held else None


def parity_figure(rows, band: float | None = None, names: dict | None = None) -> go.Figure:
    """rows: explorer.validation.ValidationRow; axes in the rows' own units (log scale, ticks from
    projector.log_ticks). `band`: a fraction drawn as the shaded band predicted = published x (1 ± band) (the
    rows' validated error, band_of); None: the ±10 % guides. `names`: group -> the name its legend entry shows
    (explorer.validation.run_labels.group_name), else the group's id."""
    fig = go.Figure()
    groups = sorted({r.group for r in rows})
    for group in groups:
        pts = [r for r in rows if r.group == group]
        fig.add_trace(go.Scatter(
            x=[r.expected for r in pts], y=[r.predicted for r in pts], mode="markers", name=(names or {}).get(group, group),
            text=[r.id for r in pts],
            customdata=[100 * r.relative_error for r in pts],
            hovertemplate="%{text}<br>published %{x:.4g}<br>predicted %{y:.4g}<br>error %{customdata:.1f}%<extra></extra>"))
    values = [v for r in rows for v in (r.expected, r.predicted)]
    low, high = min(values) / 1.3, max(values) * 1.3
    fig.add_trace(go.Scatter(x=[low, high], y=[low, high], mode="lines", name="predicted = published",
                             line=dict(dash="dash", color="gray")))
    if band is None:
        for factor, label in ((1.1, "+10%"), (0.9, "-10%")):
            fig.add_trace(go.Scatter(x=[low, high], y=[low * factor, high * factor], mode="lines", name=label,
                                     line=dict(dash="dot", color="lightgray"), showlegend=False))
    else:           # the validated band: lower edge, then the upper edge filled down to it
        lower = max(1e-3, 1 - band)
        fig.add_trace(go.Scatter(x=[low, high], y=[low * lower, high * lower], mode="lines", showlegend=False,
                                 line=dict(width=0), hoverinfo="skip", name="band low"))
        fig.add_trace(go.Scatter(x=[low, high], y=[low * (1 + band), high * (1 + band)], mode="lines",
                                 fill="tonexty", fillcolor="rgba(128,128,128,0.15)", line=dict(width=0),
                                 hoverinfo="skip", name=f"±{100 * band:.0f} % (mean |error| of the held-out rows)"))
    units = {"model_tflops_per_gpu": "model TFLOP/s per GPU", "tokens_per_sec_per_gpu": "tokens/s per GPU"}
    metrics = {r.metric for r in rows}
    unit = units.get(next(iter(metrics)), "s") if len(metrics) == 1 else "s"
    ticks = log_ticks(low, high)
    axis = dict(type="log", **(time_axis(tickvals=ticks) if unit == "s" and len(metrics) == 1 else
                               dict(tickvals=ticks, ticktext=[f"{t:g}" for t in ticks])))
    fig.update_layout(xaxis=dict(axis, title=f"published ({unit})"), yaxis=dict(axis, title=f"predicted ({unit})"),
                      height=520, margin=dict(l=40, r=20, t=30, b=40))
    return fig
