"""The search's Pareto scatter (explorer/search/figure.py) laid out so a projector shows its points and readable
ticks: the y axis logarithmic only where the times span a decade, the x axis past the points where the memory cap
is far beyond them (tests/test_browser_projector.py checks the rendered Search page)."""
import pytest

from explorer import load_cluster, load_model
from explorer.hardware.units import GIB
from explorer.search import search
from explorer.io.projector import log_ticks
from explorer.search.figure import CAP_ROOM, LOG_SPAN, pareto_figure


@pytest.fixture(scope="module")
def tiny():
    """tiny-gpt on the classroom cluster: times of 0.3 to 2.4 ms, peak memory 0.01 to 0.04 GiB under a 61 GiB cap."""
    return search(load_model("tiny-gpt"), load_cluster("classroom"), gpus=8, global_batch=16, top=10)


def _points(result):
    return [*result.pareto, *result.top]


def test_times_within_a_decade_get_a_linear_axis(tiny):
    """Plotly labelled every digit of a log axis shorter than a decade (3, 4, ... 9, 0.001): at 1280x720 in
    classroom mode the labels overlapped."""
    times = [c.iteration_time_s for c in _points(tiny)]
    assert max(times) < LOG_SPAN * min(times)
    assert pareto_figure(tiny).layout.yaxis.type != "log"


def test_a_far_memory_cap_leaves_the_points_room(tiny):
    """All of tiny-gpt's points were drawn on the y axis, the x axis running to the 61 GiB cap."""
    fig = pareto_figure(tiny)
    most = max(c.peak_memory_bytes for c in _points(tiny)) / GIB
    assert most * CAP_ROOM < tiny.memory_cap_bytes / GIB
    assert fig.layout.xaxis.range[1] == pytest.approx(1.15 * most)
    assert not fig.layout.shapes and f"{tiny.memory_cap_bytes / GIB:.3g} GiB" in fig.layout.annotations[0].text


def test_a_near_cap_is_drawn_as_a_line():
    result = search(load_model("gpt-1.7b"), load_cluster("dgx-a100-80gb"), 16, 128, top=4)
    most = max(c.peak_memory_bytes for c in _points(result)) / GIB
    fig = pareto_figure(result)
    assert (most * CAP_ROOM >= result.memory_cap_bytes / GIB) == bool(fig.layout.shapes)


def test_log_ticks_are_one_two_five_within_the_range_and_few():
    assert log_ticks(3e-4, 0.05) == pytest.approx([5e-4, 1e-3, 2e-3, 5e-3, 0.01, 0.02, 0.05])
    wide = log_ticks(0.004, 150)            # the Validation page's parity plot: 0.005 s to 100 s, decades only
    assert wide == pytest.approx([10.0 ** k for k in range(-2, 3)])
    for low, high in ((1e-6, 1e6), (0.3, 0.5), (250, 550), (1e-3, 7e3)):
        ticks = log_ticks(low, high)
        assert len(ticks) <= 8 and all(low <= t <= high for t in ticks) and ticks == sorted(ticks)


def test_the_search_lesson_says_log_scale_only_when_the_axis_is_log(tiny):
    """Lesson 8's caption said "Log scale in time" over a linear axis (a lecturer's walk, 2026-12-07): it now says
    so exactly when pareto_figure draws a log axis; the far cap's note says where the cap is."""
    from explorer.lessons.search_lesson import LESSON, _run
    from explorer.search.figure import log_time_axis
    assert not log_time_axis(tiny) and pareto_figure(tiny).layout.yaxis.type != "log"
    for values in ({"gpus": 8, "global_batch": 16, "cap_gib": 64}, {"gpus": 4, "global_batch": 8, "cap_gib": 16}):
        logged = pareto_figure(_run(values)).layout.yaxis.type == "log"
        assert logged == log_time_axis(_run(values))
        assert ("Log scale in time" in LESSON.caption(None, values)) == logged
    assert "beyond the right edge" in pareto_figure(tiny).layout.annotations[0].text
