"""A figure laid out for a projector or a slide, in one place (classroom mode, slides, the HTML deck).

The title once, at the top left; the legend below the plot, at the bottom of the figure, listing only
the categories the figure draws (a bar trace of zeros leaves it: no EP or CP entries in a
data-parallel lesson); axes that make room for their tick labels (automargin), so nothing is clipped
at 1280x720 or 1920x1080. tests/test_browser_projector.py checks the rendered SVG's text boxes.

>>> import plotly.graph_objects as go
>>> fig = projector_layout(go.Figure([go.Bar(name="a", x=[1], y=["r"], orientation="h"),
...                                   go.Bar(name="b", x=[0], y=["r"], orientation="h")]), 18)
>>> [t.showlegend for t in fig.data], fig.layout.legend.yref, fig.layout.legend.yanchor
([None, False], 'container', 'bottom')
"""
from __future__ import annotations

import math
import re

import numpy as np
import plotly.graph_objects as go


def all_zero(trace) -> bool:
    """A bar trace with nothing to draw (every value zero or missing)."""
    if trace.type != "bar":
        return False
    if trace.orientation:
        values = trace.x if trace.orientation == "h" else trace.y
    else:                       # plotly's own guess: vertical, unless only x holds numbers
        values = trace.x if _numbers(trace.x) is not None and _numbers(trace.y) is None else trace.y
    numbers = _numbers(values)
    return values is None or (numbers is not None and not np.any(np.nan_to_num(numbers)))


def _numbers(values):
    """The values as floats, None when they are not numbers (category names)."""
    if values is None:
        return None
    try:
        return np.asarray(values, dtype=float)
    except (TypeError, ValueError):
        return None


def subplot_titles_above(fig: go.Figure) -> bool:
    """Annotations placed on top of the plot area (make_subplots' titles): the title needs room above them."""
    return any(a.yref in (None, "paper") and a.y is not None and a.y >= 1 and a.yanchor != "top"
               for a in fig.layout.annotations)


def projector_layout(fig: go.Figure, font_px: int, title_px: int | None = None, legend_y: float = 0.0) -> go.Figure:
    """Lay `fig` out for a projector (in place; returns it). `legend_y`: where the legend's bottom sits,
    as a fraction of the figure's height from its bottom (room for a caption under it)."""
    for trace in fig.data:
        if all_zero(trace):
            trace.showlegend = False
    first, _, note = (fig.layout.title.text or "").partition("<br>")
    if note:                    # a second line as plotly's subtitle: a two-line title overruns the figure's top
        fig.update_layout(title=dict(text=first, subtitle=dict(text=re.sub(r"</?sup>", "", note),
                                                               font=dict(size=max(12, font_px - 4)))))
    gap = int(1.6 * font_px) if subplot_titles_above(fig) else 8
    fig.update_layout(title=dict(x=0, xanchor="left", yref="container", y=1, yanchor="top",
                                 pad=dict(t=8, l=4, b=gap), automargin=True,
                                 font=dict(size=title_px or font_px + 4)),
                      legend=dict(orientation="h", yref="container", y=legend_y, yanchor="bottom", x=0,
                                  xanchor="left", font=dict(size=font_px), title=dict(side="left")),
                      margin=dict(t=30, b=30, l=10, r=20))
    for axes in (fig.update_xaxes, fig.update_yaxes):      # sized here: a page's theme would shrink them
        axes(automargin=True, tickfont=dict(size=font_px), title_font=dict(size=font_px))
    return spread_subplots(fig, font_px)


PLOT_WIDTH_PX = 700
"""The narrowest a projected figure is drawn: the main column of a page at 1280x720 in classroom mode with the
sidebar open is 760 px wide (tests/test_browser_projector.py's screenshots), less the figure's margins."""
ROW_FONTS = 2.0        # a Gantt row's height, in font sizes: its bar and the bar's label (F3, B3.1) inside it
LINE_FONTS = 1.6       # a line of text (title, tick labels, axis title, a row of the legend), in font sizes
CHAR_FONTS = 0.5       # a character's width, in font sizes (Source Sans, Streamlit's font: "TP / operator comm" is 145 px at 18 px)


def rows_height(fig: go.Figure, font_px: int, width_px: int = PLOT_WIDTH_PX):
    """The height a figure with one row per category of its y axis (a Gantt: a row per stage or device; a bar
    chart's bars, their labels wrapped) needs so that each row is ROW_FONTS font sizes tall (a label of n lines:
    n LINE_FONTS) after the title, the x axis and the legend below the plot took
    theirs; the figure's own height when that is more, or when it has no such rows. Classroom mode's 18 px type
    left the 8 stages of the default Gantt about 50 px in a 300 px figure (issue 30)."""
    rows = fig.layout.yaxis.categoryarray
    if not rows or fig.layout.height is None:
        return fig.layout.height
    title = fig.layout.title
    title_px = LINE_FONTS * (font_px + 4) + (LINE_FONTS * font_px if title.subtitle.text else 0) + 16
    axis_px = 2 * LINE_FONTS * font_px             # tick labels and the axis title
    names = [t.name for t in fig.data if t.showlegend is not False and t.name] \
        if fig.layout.showlegend is not False else []
    legend_px = 0.0
    if names:        # plotly wraps a horizontal legend into columns as wide as its widest entry
        entry_px = CHAR_FONTS * font_px * max(len(n) for n in names) + 45     # the symbol and the gaps
        title_w = CHAR_FONTS * font_px * len(fig.layout.legend.title.text or "") + 10
        per_row = max(1, int((width_px - title_w) // entry_px))
        legend_px = LINE_FONTS * font_px * math.ceil(len(names) / per_row) + 10
    margins = (fig.layout.margin.t or 0) + (fig.layout.margin.b or 0)
    lines = max(str(row).count("<br>") + 1 for row in rows)       # a wrapped bar label (breakdown.wrap_label)
    row_px = max(ROW_FONTS, LINE_FONTS * lines) * font_px          # two lines at 18 px overlapped in 36 px (lesson 7)
    needed = len(rows) * row_px + title_px + axis_px + legend_px + margins
    return max(fig.layout.height, math.ceil(needed))


LOG_TICK_STEPS = ((1, 2, 5), (1, 3), (1,))
"""Tick values a decade of a log axis may carry, the finest first. 1, 2, 3, 5 put 2000 on 3000 on the Validation
page's MoE plot at 1280x720 (two decades), every digit 600 on 700 ... on 1000 on the Megatron-Bridge plot: the top
of a decade is narrow on a log axis."""
NARROW_STEPS = ((1, 2, 3, 4, 5, 6, 7, 8, 9), (1, 2, 3, 5))
"""For a range with fewer than three 1-2-5 ticks: every digit within a factor 3, else 1, 2, 3, 5."""


def _ticks(low: float, high: float, steps: tuple) -> list:
    first, last = math.floor(math.log10(low)), math.ceil(math.log10(high))
    return [float(f"{m * 10.0 ** k:.12g}") for k in range(first, last + 1) for m in steps
            if low <= m * 10.0 ** k <= high]


def log_ticks(low: float, high: float, most: int = 8) -> list:
    """Tick values of a log axis from `low` to `high`: 1, 2, 5 x 10^k, or 1, 3 x 10^k, or every decade's 1, the
    finest with at most `most` ticks (every second or third decade past that); a range too short for three 1-2-5
    ticks gets NARROW_STEPS. Plotly labels a log axis's in-between digits (2, 5 under 10 and 100) in small type
    that overlapped the decades' labels at 1280x720 in classroom mode (the Validation page's parity plot, the
    Search page's Pareto scatter).

    >>> log_ticks(3e-4, 0.05)
    [0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05]
    >>> log_ticks(250, 550), log_ticks(250, 1100)
    ([300.0, 400.0, 500.0], [300.0, 500.0, 1000.0])
    >>> log_ticks(0.004, 150)
    [0.01, 0.1, 1.0, 10.0, 100.0]
    >>> log_ticks(1e-6, 1e6)
    [1e-06, 0.0001, 0.01, 1.0, 100.0, 10000.0, 1000000.0]
    """
    if len(_ticks(low, high, LOG_TICK_STEPS[0])) < 3:
        return _ticks(low, high, NARROW_STEPS[0] if high < 3 * low else NARROW_STEPS[1])
    for steps in LOG_TICK_STEPS:
        ticks = _ticks(low, high, steps)
        if len(ticks) <= most:
            return ticks
    return ticks[::math.ceil(len(ticks) / most)]


SUBPLOT_GAP_FONTS = 5.0
"""The room between two side-by-side plots, in font sizes: half of each plot's outer tick label hangs past its plot
(the left's '300' and the right's '500ms', 3 and 5 characters at CHAR_FONTS), and two font sizes of space between
them. The Cost page's communication chart at 1280x720 in classroom mode had 0.04 of the width (28 px at 18 px type):
its two plots' tick labels nearly touched."""


def spread_subplots(fig: go.Figure, font_px: int, width_px: int | None = None) -> go.Figure:
    """Side-by-side plots (an x axis and an x2 axis, each with its domain) moved apart so that SUBPLOT_GAP_FONTS
    font sizes separate them in a figure `width_px` wide (default: the figure's width, a slide's 1920 px, else
    PLOT_WIDTH_PX), their titles above the middle of each (in place; returns it). Unchanged when the figure has
    one plot or its plots are already that far apart.

    >>> fig = go.Figure(layout=dict(xaxis=dict(domain=[0, 0.48]), xaxis2=dict(domain=[0.52, 1]),
    ...                             annotations=[dict(text="GB", x=0.24, xref="paper", y=1),
    ...                                          dict(text="time", x=0.76, xref="paper", y=1)]))
    >>> spread_subplots(fig, 18).layout.xaxis.domain, fig.layout.xaxis2.domain, fig.layout.annotations[1].x
    ((0, 0.4357142857142857), (0.5642857142857143, 1), 0.7821428571428571)
    """
    axes = fig.layout.to_plotly_json()
    left, right = (axes.get(name, {}).get("domain") for name in ("xaxis", "xaxis2"))
    if left is None or right is None or right[0] < left[1]:
        return fig
    gap = min(0.3, SUBPLOT_GAP_FONTS * font_px / (width_px or fig.layout.width or PLOT_WIDTH_PX))
    if right[0] - left[1] >= gap:
        return fig
    middle = (left[1] + right[0]) / 2
    centres = {(left[0] + left[1]) / 2: (left[0] + middle - gap / 2) / 2,
               (right[0] + right[1]) / 2: (middle + gap / 2 + right[1]) / 2}
    fig.update_layout(xaxis_domain=[left[0], middle - gap / 2], xaxis2_domain=[middle + gap / 2, right[1]])
    for note in fig.layout.annotations:           # make_subplots' titles: above the middle of their plot
        if note.xref == "paper" and note.x is not None:
            note.x = next((new for old, new in centres.items() if abs(note.x - old) < 1e-9), note.x)
    return fig


SI_PREFIXES = {-9: "n", -6: "µ", -3: "m", 0: ""}
"""Prefixes of a time tick below a second (a time axis never shows k: 1500 s, not 1.5 ks)."""
PLAIN_TICKS_FROM_S = 100.0
"""Ticks this far apart or more are plain seconds with thousands separators ("1,500s"): plotly's SI format would
write 1.5 ks for an iteration of 25 minutes."""


def time_text(value: float, unit: str = "s") -> str:
    """One tick label of a time axis as time_axis labels them: an SI prefix below a second when `unit` is s.

    >>> [time_text(v) for v in (0, 5e-5, 0.002, 0.25, 1.5, 120, 1500)]
    ['0s', '50µs', '2ms', '250ms', '1.5s', '120s', '1,500s']
    >>> time_text(1500, "ms")
    '1,500ms'
    >>> [time_text(v) for v in (0.9999999, 2e6)]          # rounded before the prefix is chosen; no exponent
    ['1s', '2,000,000s']
    """
    value = float(f"{value:.6g}")
    if unit != "s" or value == 0 or abs(value) >= 1:
        return f"{value:,.6g}{unit}" if abs(value) < 1e6 else f"{value:,.0f}{unit}"
    power = max(-9, 3 * math.floor(math.log10(abs(value)) / 3 + 1e-9))
    return f"{value / 10.0 ** power:.6g}{SI_PREFIXES[power]}s"


def time_axis(unit: str = "s", tickvals=None) -> dict:
    """The properties of an axis of times whose every tick label carries its unit: '100µs', '2ms', '1.5s' (a
    lecturer read plotly's bare SI prefixes, '2m' on an axis of seconds, as minutes). `unit`: what the values are
    in; s: plotly picks one prefix for the axis from the range it shows (minexponent 0: '200ms' rather than
    '0.2s'), so a zoomed Gantt relabels itself; ticks PLAIN_TICKS_FROM_S apart or more are plain seconds. A figure
    scaled to one unit (ms, µs: explorer/charts/gantt.py time_unit) gets that unit after each number. `tickvals`:
    fixed ticks (a log axis, log_ticks), labelled by time_text.

    >>> time_axis("ms")
    {'exponentformat': 'none', 'separatethousands': True, 'ticksuffix': 'ms'}
    >>> time_axis(tickvals=[0.001, 0.01])
    {'tickvals': [0.001, 0.01], 'ticktext': ['1ms', '10ms']}
    """
    if tickvals is not None:
        return dict(tickvals=list(tickvals), ticktext=[time_text(v, unit) for v in tickvals])
    if unit != "s":
        return dict(exponentformat="none", separatethousands=True, ticksuffix=unit)
    return dict(exponentformat="SI", minexponent=0, ticksuffix="s",
                tickformatstops=[dict(dtickrange=[PLAIN_TICKS_FROM_S, None], value=",~r")])
