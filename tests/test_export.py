"""Exports (explorer.export): images through kaleido and the system Chromium, HTML, CSV, JSON, LaTeX."""
import json
import os

import pandas as pd
import plotly.graph_objects as go
import pytest

from explorer import evaluate, load_cluster, load_model
from explorer.cost.explain import explain
from explorer.io.export import figure_html, figure_image, formulas_latex, strategy_json, table_csv
from explorer.io.presets import DEFAULT_STRATEGY
from explorer.io.strategies import strategy_from_dict

FIG = go.Figure(go.Bar(x=["a", "b"], y=[1, 2]))


@pytest.mark.skipif(not os.path.exists("/usr/bin/chromium"), reason="needs Debian's chromium at /usr/bin/chromium")
def test_png_and_svg_through_the_system_chromium():
    png = figure_image(FIG, "png", scale=1)
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    svg = figure_image(FIG, "svg")
    assert b"<svg" in svg[:200]
    with pytest.raises(ValueError, match="image format"):
        figure_image(FIG, "gif")


@pytest.mark.skipif(not os.path.exists("/usr/bin/chromium"), reason="needs Debian's chromium at /usr/bin/chromium")
def test_a_long_legend_keeps_every_entry_in_the_png():
    """Eleven categories (the time-by-category chart) in a 300 px chart: the PNG grows to hold the
    legend (a browser walk found the last entry cut off); a short legend keeps the chart's height."""
    from explorer.io.export import legend_height
    tall = go.Figure([go.Bar(x=["t"], y=[i], name=f"category {i}") for i in range(11)], layout=dict(height=300))
    png = figure_image(tall, "png", scale=1)
    height = int.from_bytes(png[20:24], "big")          # the IHDR chunk: width, then height
    assert height == legend_height(tall) > 11 * 20 + 100
    short = go.Figure([go.Bar(x=["t"], y=[i], name=f"c{i}") for i in range(2)], layout=dict(height=300))
    assert int.from_bytes(figure_image(short, "png", scale=1)[20:24], "big") == 300
    assert legend_height(tall.update_layout(legend_orientation="h")) == 0


def test_html_works_offline():
    html = figure_html(FIG)
    assert 'src="https://cdn.plot.ly' not in html, "plotly.js is inlined, not fetched"
    assert "<script" in html and len(html) > 1_000_000


def test_csv_json_and_latex():
    assert table_csv(pd.DataFrame({"a": [1], "b": [2.5]})) == b"a,b\n1,2.5\n"
    assert strategy_from_dict(json.loads(strategy_json(DEFAULT_STRATEGY))) == DEFAULT_STRATEGY
    model, cluster = load_model("tiny-gpt"), load_cluster("classroom")
    strategy = DEFAULT_STRATEGY.__class__(dp=2, tp=2, pp=2, global_batch=8)
    result = evaluate(model, strategy, cluster)
    tex = formulas_latex(explain(model, strategy, cluster, result=result), result.breakdown_s, "tiny_gpt & co")
    assert tex.startswith(r"\documentclass") and tex.rstrip().endswith(r"\end{document}")
    assert r"T_{\mathrm{op\_comm}}" in tex and r"tiny\_gpt \& co" in tex and "T_{iter}" in tex
