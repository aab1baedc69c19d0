"""AppTest of the Timelines page: super-step and micro-step Gantt charts follow the strategy."""
from app_util import chart_specs, metric, open_page


def _gantt(at, word):
    return next(s for s in chart_specs(at) if word in s["layout"]["title"]["text"])


def test_superstep_agrees_with_the_cost_model_and_follows_the_strategy():
    at = open_page("timeline")
    assert metric(at, "Timeline makespan") == metric(at, "Cost model")
    rows = set(_gantt(at, "Super-step")["data"][0]["y"])
    assert rows == {f"stage {i}" for i in range(8)}
    at.sidebar.select_slider(key="w_pp").set_value(4).run()
    assert not at.exception
    rows = set(_gantt(at, "Super-step")["data"][0]["y"])
    assert rows == {f"stage {i}" for i in range(4)}


def test_zero_bubble_schedule_and_microstep_of_one_operator():
    at = open_page("timeline")
    at.radio(key="w_timeline_schedule").set_value("zb-h1").run()
    assert "zb-h1" in _gantt(at, "Super-step")["layout"]["title"]["text"]
    at.selectbox(key="w_micro_layer").set_value(3).run()
    at.selectbox(key="w_micro_op_gpt").set_value("fc1").run()
    assert not at.exception
    spec = _gantt(at, "Micro-steps")
    assert "layer 3, operator fc1" in spec["layout"]["title"]["text"]
    rows = {y for trace in spec["data"] for y in trace["y"]}
    assert len(rows) == 8, "one row per device of the t=8 group"


def test_a_cancelled_timeline_is_not_shown_as_a_refusal(monkeypatch):
    """WorkCancelled is an ExplorerError: the Timelines page lets it through (app.py stops the run) instead of
    showing "No super-step timeline: ... was cancelled" and going on."""
    import pytest
    from app_pages import compute
    from explorer.limits import WorkCancelled

    def cancelled(*args):
        raise WorkCancelled("this page was cancelled while waiting for the super-step timeline")
    monkeypatch.setattr(compute, "superstep", cancelled)
    with pytest.raises(WorkCancelled):
        compute.superstep_or_refusal(None, None, None, "1f1b")
