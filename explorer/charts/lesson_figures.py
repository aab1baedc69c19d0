"""Small figures the lessons need beyond the explorer's charts (memory bars side by side), and the
words a caption uses for the colours of a palette.

A caption names a colour through `colour_word(palette_colour(key, palette))`, so the word follows the
palette the figure is drawn in (explorer.charts.palette: the default one, or Okabe-Ito in classroom
mode) instead of being written by hand.

>>> from explorer import load_model, load_cluster, Strategy, evaluate
>>> r = evaluate(load_model("tiny-gpt"), Strategy(dp=2, global_batch=8), load_cluster("classroom"))
>>> [t.name for t in memory_bars({"a": r, "b": r}, 64 * 2 ** 30).data][:4]
['params', 'grads', 'optimizer', 'activations']
>>> colour_word(palette_colour("dp_comm", "okabe-ito")), colour_word(palette_colour("activations"))
('pink', 'red')
"""
from __future__ import annotations

import colorsys

import plotly.graph_objects as go

from explorer.charts.palette import MEMORY_COLOURS, SCOPES, colours, opaque
from explorer.charts.tables import GIB, MEMORY_PARTS

COLOUR_NAMES = {
    # the default palette (Tableau 10 and its light variants)
    "#4C78A8": "blue", "#9ECAE9": "light blue", "#F58518": "orange", "#E45756": "red", "#17BECF": "cyan",
    "#54A24B": "green", "#B279A2": "purple", "#FF9DA6": "pink", "#9D755D": "brown", "#DDDDDD": "light grey",
    "#72B7B2": "teal", "#EECA3B": "yellow", "#FFBF79": "light orange",
    # Okabe-Ito (vermillion and reddish purple in its own words; what a class calls them)
    "#0072B2": "blue", "#56B4E9": "sky blue", "#E69F00": "orange", "#D55E00": "red-orange", "#999999": "grey",
    "#009E73": "green", "#CC79A7": "pink", "#F0E442": "yellow", "#000000": "black", "#D9D9D9": "light grey",
}
"""The word for each colour the palettes use (tests/test_lesson_claims.py checks that every one is named)."""

_HUES = ((15, "red"), (45, "orange"), (70, "yellow"), (165, "green"), (200, "teal"), (255, "blue"),
         (290, "purple"), (345, "pink"), (360, "red"))
CAPACITY_IN_VIEW = 1.5
"""memory_bars draws the GPU's capacity as a line when it is at most this many times the tallest bar;
above, the axis fits the bars and a note gives the capacity (a 64 GiB line over 3 GiB bars hides them)."""


def colour_word(colour: str) -> str:
    """A plain word for a '#RRGGBB' colour: the palettes' colours by name (COLOUR_NAMES), any other by
    its hue and lightness."""
    key = opaque(colour).upper()       # a Gantt bar's colour is rgba, alpha just under 1 (palette.GANTT_ALPHA)
    if key in COLOUR_NAMES:
        return COLOUR_NAMES[key]
    r, g, b = (int(key[i:i + 2], 16) / 255 for i in (1, 3, 5))
    hue, light, sat = colorsys.rgb_to_hls(r, g, b)
    if sat < 0.15 or light < 0.08 or light > 0.95:
        return "black" if light < 0.15 else "white" if light > 0.95 else "light grey" if light > 0.75 else "grey"
    word = next(name for limit, name in _HUES if hue * 360 < limit)
    if word == "orange" and light < 0.45:
        return "brown"
    return f"light {word}" if light > 0.75 else word


def palette_colour(key: str, palette: str = "default") -> str:
    """The colour `palette` gives a cost category, a memory part ('optimizer_state' for the optimizer
    state) or a communication scope ('intra-node', 'inter-node hidden', ...)."""
    if key in SCOPES[palette]:
        return SCOPES[palette][key]
    return colours(palette)[key]


def colour_of_part(key: str, palette: str = "default") -> str:
    """The word for the colour of `key` (palette_colour) in `palette`."""
    return colour_word(palette_colour(key, palette))


def capacity_in_view(capacity_bytes: float, totals_bytes) -> bool:
    """Does memory_bars draw the capacity line (within CAPACITY_IN_VIEW times the tallest bar)?"""
    return capacity_bytes <= CAPACITY_IN_VIEW * max(totals_bytes)


def memory_bars(results: dict, capacity_bytes: float, title: str = "Memory per GPU (most loaded device)",
                current: str | None = None) -> go.Figure:
    """label -> Result: one stacked bar of GiB per part each, the current setting's bar outlined.
    The axis fits the bars: the capacity is a dashed line when it is within CAPACITY_IN_VIEW times the
    tallest bar, else a note in the corner."""
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
    capacity, tallest = capacity_bytes / GIB, max(totals)
    if capacity_in_view(capacity, totals):
        fig.add_hline(y=capacity, line_dash="dash", line_color="#C0392B",
                      annotation_text=f"GPU memory {capacity:.0f} GiB", annotation_position="top right")
        top = max(capacity, tallest) * 1.18
    else:
        fig.add_annotation(text=f"GPU memory: {capacity:.0f} GiB, above this scale", xref="paper", yref="paper",
                           x=1.0, y=1.0, xanchor="right", yanchor="top", showarrow=False)
        top = tallest * 1.25
    fig.update_layout(title=title, barmode="stack", height=420, margin=dict(l=10, r=10, t=60, b=10),
                      legend=dict(orientation="h", yanchor="bottom", y=1.0, x=1.0, xanchor="right"))
    fig.update_yaxes(title="GiB per GPU", range=[0, top])
    return fig
