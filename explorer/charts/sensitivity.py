"""The tornado chart of a prediction's sensitivities: what the iteration time depends on.

One row per constant of the cluster file (the largest elasticities first, explorer.validation.sensitivity):
a bar for the constant raised by 1 % and one for it lowered by 1 %, each as the per cent by which the
iteration time changes (the elasticity d ln T / d ln c, linear to first order), with the categories whose
terms carry the change in the hover text.
"""
from __future__ import annotations

import plotly.graph_objects as go

from explorer.charts.palette import DEFAULT
from explorer.charts.tables import CATEGORY_LABELS

SLOWER, FASTER = DEFAULT["redistribution"], DEFAULT["compute"]


def tornado_figure(sens: dict, top: int = 10, title: str = "What this number depends on") -> go.Figure:
    """sens: explorer.validation.sensitivity.sensitivity(...). The `top` constants by elasticity size."""
    rows = [(name, x) for name, x in sens["elasticities"].items() if x][:top]
    names = [name for name, _ in rows]
    hover = [_parts(sens, name) for name in names]
    fig = go.Figure()
    for label, sign in (("constant +1 %", 1), ("constant −1 %", -1)):
        values = [sign * x for _, x in rows]
        fig.add_bar(y=names, x=values, orientation="h", name=label, customdata=hover,
                    marker_color=[SLOWER if v > 0 else FASTER for v in values],
                    hovertemplate="%{y} " + label + ": iteration time %{x:+.3f} %<br>%{customdata}<extra></extra>")
    fig.update_layout(title=title, barmode="overlay", showlegend=False, height=max(260, 110 + 32 * len(rows)),
                      margin=dict(l=10, r=10, t=60, b=10))
    fig.update_xaxes(title="change of the iteration time, % (red: slower, blue: faster)", zeroline=True,
                     zerolinewidth=2, automargin=True)
    fig.update_yaxes(autorange="reversed", automargin=True)
    return fig


def _parts(sens: dict, name: str) -> str:
    """The categories carrying a constant's elasticity, largest first (hover text)."""
    parts = sorted(((c, row[name]) for c, row in sens["by_category"].items() if row.get(name)),
                   key=lambda item: -abs(item[1]))
    return "<br>".join(f"{CATEGORY_LABELS.get(c, c)}: {x:+.3f}" for c, x in parts[:4])


__all__ = ["tornado_figure"]
