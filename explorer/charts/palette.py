"""The colours of every chart, in one place: the default palette and a colour-blind-safe one.

The Okabe–Ito palette (Okabe & Ito, "Color Universal Design", 2008; recommended by Wong,
"Points of view: Color blindness", Nature Methods 8:441, 2011) stays distinct under the
common forms of colour blindness and on a projector. `recolour(fig, name)` repaints a
figure's traces by their names, so the builders keep one default and classroom mode
switches without rebuilding.

>>> colours("okabe-ito")["compute"]
'#0072B2'
"""
from __future__ import annotations

import plotly.graph_objects as go

from explorer.charts.tables import TRACE_LABELS

DEFAULT = {
    # DESIGN.md categories; idle time is the bubble, drawn light
    "compute": "#4C78A8", "recompute": "#9ECAE9", "op_comm": "#F58518", "redistribution": "#E45756",
    "ep_comm": "#17BECF",   # MoE all-to-all: Tableau's cyan, apart from the others
    "pp_comm": "#54A24B", "dp_comm": "#B279A2", "zero_comm": "#FF9DA6", "optimizer": "#9D755D",
    "bubble": "#DDDDDD", "cp_comm": "#72B7B2",
    # the micro-step Gantt's host row (explorer.timeline.microstep.HOST_CATEGORY): Tableau's yellow, which no
    # cost category uses (only the optimizer state's bar in the memory charts, never on a Gantt)
    "host": "#EECA3B",
    # memory parts
    "params": "#4C78A8", "grads": "#72B7B2", "optimizer_state": "#EECA3B", "activations": "#E45756",
}
OKABE_ITO = {
    "compute": "#0072B2", "recompute": "#56B4E9", "op_comm": "#E69F00", "redistribution": "#D55E00",
    "ep_comm": "#999999",   # MoE all-to-all: the grey often added as Okabe-Ito's ninth colour
    "pp_comm": "#009E73", "dp_comm": "#CC79A7", "zero_comm": "#F0E442", "optimizer": "#000000",
    "bubble": "#D9D9D9", "cp_comm": "#999999",   # Okabe-Ito's grey (the eight hues are taken)
    "host": "#F0E442",   # the yellow of zero_comm, which never shares a Gantt with the host row (a super-step's ZeRO
                         # gathers vs a micro-step's host row)
    "params": "#0072B2", "grads": "#56B4E9", "optimizer_state": "#E69F00", "activations": "#CC79A7",
}
SCOPES = {"default": {"intra-node hidden": "#FFBF79", "inter-node hidden": "#9ECAE9",
                      "intra-node": "#F58518", "inter-node": "#4C78A8"},
          "okabe-ito": {"intra-node hidden": "#F0E442", "inter-node hidden": "#56B4E9",
                        "intra-node": "#E69F00", "inter-node": "#0072B2"}}
PALETTES = {"default": DEFAULT, "okabe-ito": OKABE_ITO}
GANTT_ORDER = ("compute", "host", "recompute", "op_comm", "ep_comm", "cp_comm", "redistribution", "pp_comm",
               "dp_comm", "zero_comm", "optimizer", "bubble")
CATEGORY_COLOURS = {c: DEFAULT[c] for c in GANTT_ORDER}       # the default colour of each Gantt category
MEMORY_COLOURS = {"params": DEFAULT["params"], "grads": DEFAULT["grads"], "optimizer": DEFAULT["optimizer_state"],
                  "activations": DEFAULT["activations"]}


def colours(name: str = "default") -> dict:
    if name not in PALETTES:
        raise ValueError(f"palette {name!r} is unknown; use one of {', '.join(PALETTES)}")
    return PALETTES[name]


def colour_of(trace_name: str, name: str = "default") -> str | None:
    """The palette's colour for a trace named by a category ('op_comm'), its label ('TP / operator
    comm'), a memory part ('optimizer' in a memory chart is the optimizer state) or a scope."""
    palette = colours(name)
    if trace_name in palette:
        return palette[trace_name]
    by_label = {label: palette[cat] for cat, label in TRACE_LABELS.items()}
    if trace_name in by_label:
        return by_label[trace_name]
    for scope, colour in SCOPES[name].items():
        if trace_name.startswith(scope):
            return colour
    return None


GANTT_ALPHA = 0.999
"""A Gantt bar's colour alpha, just under 1: plotly.js widens a bar whose colour is fully opaque and which has no
outline to at least a whole pixel (bar/plot.js: 'if the bars ARE fully opaque and have no line, expand to a full
pixel to make sure we can see them', expandToVisible; the test is Color.opacity of the marker's colour, not
marker.opacity). A super-step of thousands of sub-pixel passes showed each pass's 0.4-pixel TP communication a
pixel wide: on gpt3-175b (12 % of the time) about half of every row was orange (a lecturer's walk, 2026-12-07).
Below 1 the bars keep their true widths, anti-aliased."""


def translucent(colour: str, alpha: float = GANTT_ALPHA) -> str:
    """'#RRGGBB' as 'rgba(r, g, b, alpha)'; another colour string unchanged."""
    if isinstance(colour, str) and len(colour) == 7 and colour.startswith("#"):
        r, g, b = (int(colour[i:i + 2], 16) for i in (1, 3, 5))
        return f"rgba({r}, {g}, {b}, {alpha})"
    return colour


def opaque(colour: str) -> str:
    """'rgba(r, g, b, a)' as '#RRGGBB' (translucent's inverse); another colour string unchanged."""
    if isinstance(colour, str) and colour.startswith("rgba(") and colour.endswith(")"):
        r, g, b = (int(float(x)) for x in colour[5:-1].split(",")[:3])
        return f"#{r:02X}{g:02X}{b:02X}"
    return colour


def recolour(fig: go.Figure, name: str = "okabe-ito", memory: bool = False) -> go.Figure:
    """Repaint the traces whose names the palette knows (in place; returns the figure); a Gantt bar keeps its
    colour's alpha (GANTT_ALPHA)."""
    for trace in fig.data:
        name_ = trace.meta if isinstance(trace.meta, str) and trace.meta else trace.name   # a Gantt trace's category
        key = "optimizer_state" if memory and name_ == "optimizer" else name_
        colour = colour_of(key or "", name)
        if colour is not None and hasattr(trace, "marker") and trace.type in ("bar", "scatter"):
            was = trace.marker.color
            trace.marker.color = translucent(colour) if isinstance(was, str) and was.startswith("rgba(") else colour
    return fig
