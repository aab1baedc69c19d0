"""Gantt figures (explorer.charts.gantt): one horizontal-bar trace per category on a numeric axis."""
import numpy as np
import pytest

from explorer import Strategy, load_cluster, load_model
from explorer.charts import CATEGORY_COLORS, gantt_figure, microstep_figure, superstep_figure, time_unit
from explorer.charts.classroom import FONT_PX, classroom_figure
from explorer.charts.gantt import IDLE_NAME
from explorer.charts.palette import translucent
from explorer.charts.tables import TRACE_LABELS
from explorer.io.projector import LINE_FONTS, ROW_FONTS
from explorer.timeline import PassCosts, microstep_events, pipeline_events, superstep_events
from tests.work import measure

GPT3, A100 = load_model("gpt3-175b"), load_cluster("dgx-a100-80gb")


def test_one_trace_per_category_with_numeric_bars():
    s = Strategy(dp=2, tp=8, pp=4, micro_batch=1, global_batch=16, overlap_dp=True)
    ev = superstep_events(GPT3, s, A100, schedule="zb-h1")
    fig = superstep_figure(ev)
    assert len(fig.data) == ev.category.nunique()
    assert {t.meta for t in fig.data} == set(ev.category)       # each trace's category (meta)
    assert {t.name for t in fig.data} == {TRACE_LABELS[c] for c in set(ev.category) - {"bubble"}} | {IDLE_NAME}
    assert {t.meta for t in fig.data} == set(ev.category)     # idle on any stage; names as every chart (not dp_comm)
    assert sum(len(t.x) for t in fig.data) == len(ev)
    unit, factor = time_unit(ev.end_s.max())
    for trace in fig.data:
        assert trace.type == "bar" and trace.orientation == "h"
        # the category's colour, its alpha just under 1 so that plotly.js keeps sub-pixel bars sub-pixel (GANTT_ALPHA)
        assert trace.marker.color == translucent(CATEGORY_COLORS[trace.meta]) and translucent('#4C78A8') == \
            'rgba(76, 120, 168, 0.999)'
        sel = ev[ev.category == trace.meta]
        assert np.allclose(np.asarray(trace.base), sel.start_s * factor)
        assert np.allclose(np.asarray(trace.x), sel.duration_s * factor)
        assert "customdata[1]" in trace.hovertemplate and unit in trace.hovertemplate
    assert fig.layout.barmode == "overlay"
    assert list(fig.layout.yaxis.categoryarray)[:2] == ["stage 0", "stage 0 · dp"]
    texts = {x for t in fig.data for x in t.text}
    assert {"F0", "B0", "W0"} <= texts


def test_micro_figure_labels_operators_and_collectives():
    ev = microstep_events(GPT3, Strategy(dp=1, tp=8, pp=8, micro_batch=1, global_batch=8), A100, layer=0)
    fig = microstep_figure(ev)
    assert len(fig.data) == ev.category.nunique()
    texts = {x for t in fig.data for x in t.text}
    assert {"qkv", "fc2", "all-reduce"} <= texts and "barrier" not in texts and "all_reduce" not in texts
    assert "µs" in fig.layout.xaxis.title.text or "ms" in fig.layout.xaxis.title.text


def test_ten_thousand_events_build_with_work_linear_in_events():
    """One trace per category, its columns passed whole: ~65 calls an event (plotly validates and copies
    each value), not a trace or a Python loop body per bar. benchmarks/bench_timeline.py times the figure."""
    p, m = 16, 320
    ev = pipeline_events(PassCosts.simple([1.0] * p, [2.0] * p), m, "1f1b")
    assert len(ev) >= 10_000
    work = measure(gantt_figure, ev)
    fig = work.value
    assert len(fig.data) == 2
    assert work.calls <= 120 * len(ev), work          # 667,000-741,000 calls for 10,390 events


def test_empty_events_give_an_empty_figure():
    ev = pipeline_events(PassCosts.simple([1.0], [1.0]), 1, "gpipe").iloc[0:0]
    assert len(gantt_figure(ev).data) == 0


@pytest.mark.parametrize("seconds,unit", [(20.0, "s"), (0.5, "ms"), (0.001, "µs")])
def test_time_unit(seconds, unit):
    assert time_unit(seconds)[0] == unit


def test_large_timelines_leave_bar_labels_out():
    """Past MAX_LABELLED_BARS bars are narrower than their labels: no text is sent to the browser."""
    import pandas as pd
    from explorer.charts import gantt as gmod
    n = gmod.MAX_LABELLED_BARS + 1
    events = pd.DataFrame({"row": ["stage 0"] * n, "stage": 0, "device": "0", "start_s": range(n),
                           "end_s": [i + 1.0 for i in range(n)], "duration_s": 1.0, "kind": "forward",
                           "phase": "fwd", "category": "compute", "micro_batch": range(n), "chunk": 0,
                           "operator": "layer0", "level": "", "bytes": 0.0, "hidden": False})
    fig = gmod.gantt_figure(events, label="micro_batch")
    assert all(not t for trace in fig.data for t in trace.text)
    small = gmod.gantt_figure(events.head(10), label="micro_batch")
    assert list(small.data[0].text)[:2] == ["F0", "F1"]


@pytest.mark.parametrize("pp", [2, 8, 16])
def test_a_classroom_gantt_gives_each_stage_a_readable_row(pp):
    """Issue 30: in classroom mode (18 px type, title above and legend below the plot) the default Gantt's 8
    stages got about 50 px of its 300 px. projector.rows_height: ROW_FONTS font sizes per stage once the title,
    the axis and the legend rows have theirs; the plain figure keeps its own height."""
    s = Strategy(dp=2, tp=8, pp=pp, micro_batch=1, global_batch=16)
    fig = superstep_figure(superstep_events(GPT3, s, A100), "Super-step: one iteration (1f1b)")
    shown = classroom_figure(fig)
    legend_rows = 2 + len(shown.data) // 2                  # at least: two entries a row, the title's
    chrome = LINE_FONTS * FONT_PX * (1 + 2 + legend_rows)      # title, the axis's ticks and title, the legend
    assert shown.layout.height >= pp * ROW_FONTS * FONT_PX + chrome
    assert fig.layout.height == max(300, 28 * pp + 160)       # the explorer's own figure: 28 px a row at 12 px type
    small = classroom_figure(fig.update_layout(showlegend=False))     # Compare's small Gantts: no legend to fit
    assert pp * ROW_FONTS * FONT_PX < small.layout.height <= shown.layout.height


def test_micro_figure_names_the_hosts_bars_in_words():
    """The walk read 'host_issue' on gpt-oss-120b's host row and 'all_to_all' on its dispatch (1280x720)."""
    model, b200 = load_model("gpt-oss-120b"), load_cluster("dgx-b200")
    strategy = Strategy(dp=16, tp=1, pp=2, ep=8, micro_batch=1, global_batch=256, zero=1, recompute="selective")
    texts = {x for t in microstep_figure(microstep_events(model, strategy, b200, layer=0)).data for x in t.text}
    assert {"issuing kernels", "all-to-all"} <= texts and not {"host_issue", "all_to_all"} & texts


def test_the_default_gantt_draws_every_bar_and_only_far_larger_ones_leave_thin_bars_out(monkeypatch):
    """A lecturer's walk: the default Gantt (gpt3-175b, 5,900 events) left out its bars narrower than 1/4000 of the
    iteration -- all 768 recomputation passes, the point-to-point sends and short idle spans -- and their time showed
    as white gaps that zooming in kept white. It now draws them all; only past DECIMATE_ABOVE are thin bars left out,
    and the title says how many."""
    from explorer.charts import gantt as gmod
    from explorer.io.presets import DEFAULT_STRATEGY
    events = superstep_events(GPT3, DEFAULT_STRATEGY, A100)
    fig = superstep_figure(events)
    drawn = {t.meta: sum(t.x) for t in fig.data}
    assert sum(len(t.x) for t in fig.data) == len(events) and "not drawn" not in fig.layout.title.text
    assert "(s)" in fig.layout.xaxis.title.text
    assert drawn["recompute"] == pytest.approx(events.loc[events.category == "recompute", "duration_s"].sum())
    monkeypatch.setattr(gmod, "DECIMATE_ABOVE", 1000)
    thin = int((events.duration_s < events.end_s.max() / gmod.SCREEN_PIXELS).sum())
    cut = superstep_figure(events)
    assert sum(len(t.x) for t in cut.data) == len(events) - thin > 0
    assert f"{thin:,} bars narrower than 1/{gmod.SCREEN_PIXELS} of the iteration not drawn" in cut.layout.title.text


def test_a_category_thinner_than_a_pixel_at_full_width_is_named_with_its_share():
    """The walk counted no orange in the default Gantt at full width although TP communication is 12-13 % of the
    time: its bars are 0.7 px wide there. The page names such categories, their bar length and share."""
    from explorer.charts.gantt import subpixel_note
    from explorer.io.presets import DEFAULT_STRATEGY
    events = superstep_events(GPT3, DEFAULT_STRATEGY, A100)
    note = subpixel_note(events)
    busy = events[events.category != "bubble"]
    share = busy.loc[busy.category == "op_comm", "duration_s"].sum() / busy.duration_s.sum()
    assert f"{TRACE_LABELS['op_comm']} (13 ms each, {100 * share:.0f} % of the busy time)" in note
    assert f" and {TRACE_LABELS['recompute']} (4.9 ms each" in note and f"of {TRACE_LABELS['compute']} (" not in note
    small = superstep_events(GPT3, Strategy(dp=2, tp=8, pp=4, micro_batch=1, global_batch=8), A100)
    assert subpixel_note(small, width_px=100_000) == "" and subpixel_note(small.iloc[:0]) == ""
