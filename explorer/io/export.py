"""Exports: figures as PNG/SVG (kaleido + the system Chromium) and offline HTML,
tables as CSV, the strategy as JSON, the formulas as a LaTeX document.

Image export starts a headless Chromium, which takes seconds; callers should
produce images on demand (the app passes these functions as deferred download
data), never on every rerun.

>>> import plotly.graph_objects as go
>>> "plotly" in figure_html(go.Figure(go.Bar(x=[1], y=[2])))[:20000].lower()
True
"""
from __future__ import annotations

import os

import pandas as pd

from explorer.io import latex_lines
from explorer.io.quoting import latex_text
from explorer.io.strategies import strategy_json  # noqa: F401 (re-exported: the pages' strategy download)

CHROMIUM = "/usr/bin/chromium"
IMAGE_FORMATS = ("png", "svg")


def _use_system_chromium() -> None:
    """kaleido 1.x finds its browser through BROWSER_PATH; Debian's chromium lives here."""
    if "BROWSER_PATH" not in os.environ and os.path.exists(CHROMIUM):
        os.environ["BROWSER_PATH"] = CHROMIUM


def figure_image(fig, fmt: str = "png", scale: float = 2.0) -> bytes:
    """The figure as PNG or SVG bytes (kaleido)."""
    if fmt not in IMAGE_FORMATS:
        raise ValueError(f"image format {fmt!r} is not one of {', '.join(IMAGE_FORMATS)}")
    _use_system_chromium()
    width = fig.layout.width or 1100
    height = max(fig.layout.height or 500, legend_height(fig))
    return fig.to_image(format=fmt, width=width, height=height, scale=scale if fmt == "png" else 1)


LEGEND_ROW_PX = 24      # one legend entry of plotly's default 12 px font, with its gap
LEGEND_MARGIN_PX = 140  # title, margins and the axis labels around the plotting area


def legend_height(fig) -> int:
    """Height a static image needs to show every entry of a vertical legend: on screen a long legend
    scrolls, in a PNG its last entries were cut off (11 categories in a 600 px chart lost the last)."""
    legend = fig.layout.legend
    if fig.layout.showlegend is False or legend.orientation == "h":
        return 0
    entries = sum(1 for trace in fig.data if trace.showlegend is not False and trace.name)
    return LEGEND_MARGIN_PX + LEGEND_ROW_PX * entries if entries > 1 else 0


def figure_html(fig) -> str:
    """A standalone HTML page with plotly.js inlined: it opens offline."""
    return fig.to_html(include_plotlyjs=True, full_html=True)


def table_csv(table: pd.DataFrame) -> bytes:
    return table.to_csv(index=False).encode("utf-8")


def _display(lhs: str, rhs: str, value: str = "") -> list:
    """One formula as an align* of lines a page holds (explorer/io/latex_lines.py), its value on the last."""
    body = latex_lines.lines(rhs) or ["{}"]
    rows = [rf"{lhs} = {{}} & {body[0]}"] + [rf"& \quad {line}" for line in body[1:]]
    if value:
        rows.append(rf"& = {value}")
    return [r"\begin{align*}", " \\\\\n".join(rows), r"\end{align*}"]


def formulas_latex(symbolic, seconds: dict, title: str = "") -> str:
    """A compilable LaTeX document: each category's formula and its value, then the total; long formulas cut into
    lines at their outermost sums (explorer/io/latex_lines.py: pdflatex refused a ZeRO-3 strategy's 35,000-character
    term, "Dimension too large", and set the default's 9,000 pt past the page)."""
    lines = [r"\documentclass{article}", r"\usepackage{amsmath}", r"\allowdisplaybreaks",
             r"\usepackage[margin=1.5cm,landscape]{geometry}", r"\begin{document}"]
    if title:
        lines.append(rf"\section*{{{latex_text(title)}}}")   # a name from a link: no TeX command gets through
    for category, latex in symbolic.latex().items():
        name = category.replace("_", r"\_")
        lines += _display(rf"T_{{\mathrm{{{name}}}}}", latex, rf"{seconds.get(category, 0.0):.6g}\,\mathrm{{s}}")
    for symbol, definition in symbolic.definitions_latex().items():
        lines += _display(rf"\text{{where }} {symbol}", definition)
    total = sum(seconds.values())
    lhs, _, rhs = symbolic.total_latex().partition(" = ")
    lines += _display(lhs, rhs, rf"{total:.6g}\,\mathrm{{s}}") + [r"\end{document}", ""]
    return "\n".join(lines)
