"""The validated error by regime as a heatmap: accelerators down, precision x dense/MoE across, each cell the
held-out rows' mean |error| (explorer.validation.regimes), written in the cell with the worst row and the count."""
from __future__ import annotations

import plotly.graph_objects as go

COLUMN_ORDER = ("16-bit · dense", "fp8 · dense", "16-bit · MoE", "fp8 · MoE")


def residual_heatmap(regimes, title: str = "Validated error by regime (held-out rows)") -> go.Figure:
    """`regimes`: explorer.validation.regimes.Regime rows. Empty cells: no validated run (extrapolating there)."""
    accelerators = sorted({r.accelerator for r in regimes})
    present = {f"{r.precision} · {r.kind}" for r in regimes}
    columns = [c for c in COLUMN_ORDER if c in present] + sorted(present - set(COLUMN_ORDER))
    z = [[None] * len(columns) for _ in accelerators]
    text = [[""] * len(columns) for _ in accelerators]
    for r in regimes:
        i, j = accelerators.index(r.accelerator), columns.index(f"{r.precision} · {r.kind}")
        z[i][j] = 100 * r.mean_abs_error
        text[i][j] = f"±{100 * r.mean_abs_error:.0f} % typ.<br>±{100 * r.max_abs_error:.0f} % worst<br>{r.rows} runs"
    fig = go.Figure(go.Heatmap(
        z=z, x=columns, y=accelerators, text=text, texttemplate="%{text}", colorscale="Reds", zmin=0,
        colorbar=dict(title="mean |error| %"), hoverongaps=False,
        hovertemplate="%{y} · %{x}<br>mean |error| %{z:.1f} %<extra></extra>"))
    fig.update_layout(title=title, height=120 + 70 * len(accelerators), margin=dict(l=40, r=20, t=50, b=40),
                      xaxis=dict(side="bottom"), yaxis=dict(autorange="reversed"))
    return fig
