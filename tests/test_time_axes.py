"""Every axis of times says its unit on each tick (explorer/io/projector.py time_axis): a lecturer read plotly's bare
SI prefixes, '100μ' and '2m' on an axis of seconds, as minutes. And two side-by-side plots keep their tick labels
apart on a projector (spread_subplots): the Cost page's communication chart at 1280x720 in classroom mode had 28 px
between its halves. tests/test_browser_projector.py checks the labels plotly.js draws."""
import pytest

from explorer import Strategy, evaluate, load_cluster, load_model, timeline
from explorer.charts.breakdown import breakdown_bar, comm_figure
from explorer.charts.classroom import FONT_PX, classroom_figure
from explorer.charts.gantt import microstep_figure, superstep_figure, time_unit
from explorer.charts.tables import comm_table
from explorer.io.projector import PLOT_WIDTH_PX, SUBPLOT_GAP_FONTS, time_axis, time_text
from explorer.search import search
from explorer.search.figure import pareto_figure

TINY, CLASSROOM = load_model("tiny-gpt"), load_cluster("classroom")
STRATEGY = Strategy(dp=2, tp=2, pp=2, micro_batch=1, global_batch=16)


@pytest.fixture(scope="module")
def tiny():
    """tiny-gpt on 8 GPUs: an iteration of milliseconds, its communication of microseconds."""
    result = evaluate(TINY, STRATEGY, CLASSROOM)
    assert result.iteration_time_s < 0.01
    return result


@pytest.mark.parametrize("seconds, text", [(0, "0s"), (2.5e-8, "25ns"), (1e-4, "100µs"), (2e-3, "2ms"),
                                           (0.25, "250ms"), (1.5, "1.5s"), (90, "90s"), (1500, "1,500s")])
def test_a_time_tick_reads_with_its_unit_from_nanoseconds_to_minutes(seconds, text):
    assert time_text(seconds) == text


def _seconds_axis(axis) -> bool:
    """An axis of seconds plotly labels with a unit: SI prefixes from the range with an 's' after each (minexponent 0:
    no bare '0.002'), plain seconds where ticks are PLAIN_TICKS_FROM_S apart."""
    return (axis.exponentformat == "SI" and axis.minexponent == 0 and axis.ticksuffix == "s"
            and axis.tickformatstops[0].value == ",~r")


def test_the_cost_pages_seconds_axes_carry_their_unit(tiny):
    bar, comm = breakdown_bar({"tiny": tiny}), comm_figure(comm_table(tiny, CLASSROOM.levels[0].name))
    assert _seconds_axis(bar.layout.xaxis) and _seconds_axis(comm.layout.xaxis2)
    assert comm.layout.xaxis.ticksuffix is None, "the left plot is bytes (GB), not time"
    for fig in (bar, comm):                                   # classroom mode keeps them
        shown = classroom_figure(fig)
        assert _seconds_axis(shown.layout.xaxis if fig is bar else shown.layout.xaxis2)


def test_a_gantt_labels_its_ticks_in_its_own_unit(tiny):
    events = timeline.superstep_events(TINY, STRATEGY, CLASSROOM, result=tiny)
    unit, _ = time_unit(float(events["end_s"].max()))
    assert unit == "µs", "an iteration under 10 ms"
    for fig in (superstep_figure(events), classroom_figure(superstep_figure(events))):
        axis = fig.layout.xaxis
        assert (axis.ticksuffix, axis.exponentformat, axis.separatethousands) == ("µs", "none", True), \
            "'2,000µs', never '2k'"
    gpt3, a100 = load_model("gpt3-175b"), load_cluster("dgx-a100-80gb")
    micro = timeline.microstep_events(gpt3, Strategy(dp=16, tp=8, pp=8, micro_batch=1, global_batch=1536), a100,
                                      layer=0)
    unit, _ = time_unit(float(micro["end_s"].max()))
    assert microstep_figure(micro).layout.xaxis.ticksuffix == unit == "ms"


def test_the_search_pages_time_axis_carries_its_unit():
    result = search(TINY, CLASSROOM, gpus=8, global_batch=16, top=10)
    assert _seconds_axis(pareto_figure(result).layout.yaxis)         # times within a decade: a linear axis
    ticks = [1e-4, 1e-3, 1e-2]
    assert time_axis(tickvals=ticks)["ticktext"] == ["100µs", "1ms", "10ms"]    # a log axis's fixed ticks


def test_the_communication_charts_halves_keep_two_font_sizes_apart_on_a_projector(tiny):
    """make_subplots' 0.04 of the width between the plots, 28 px of a 700 px figure, less the half labels."""
    fig = classroom_figure(comm_figure(comm_table(tiny, CLASSROOM.levels[0].name)))
    left, right = fig.layout.xaxis.domain, fig.layout.xaxis2.domain
    assert (right[0] - left[1]) * PLOT_WIDTH_PX == pytest.approx(SUBPLOT_GAP_FONTS * FONT_PX)
    titles = sorted(a.x for a in fig.layout.annotations)
    assert titles == pytest.approx([(left[0] + left[1]) / 2, (right[0] + right[1]) / 2]), "above their plots"
    plain = comm_figure(comm_table(tiny, CLASSROOM.levels[0].name))
    assert plain.layout.xaxis.domain == (0.0, 0.48), "outside classroom mode the figure is left as it was"
