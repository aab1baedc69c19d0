"""AppTest of the Timelines page: super-step and micro-step Gantt charts follow the strategy."""
from app_util import chart_specs, metric, open_page


def _gantt(at, word):
    return next(s for s in chart_specs(at) if word in s["layout"]["title"]["text"])


def test_superstep_agrees_with_the_cost_model_and_follows_the_strategy():
    at = open_page("timeline")
    assert metric(at, "Timeline makespan") == metric(at, "Cost model")
    # the default's TP bars are thinner than a pixel at full width: the page says so (a lecturer's walk saw none)
    assert any("narrower than a pixel" in c.value and "TP / operator comm" in c.value for c in at.caption)
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


def test_tiny_timelines_and_micro_steps_have_caches_of_their_own(monkeypatch):
    """A student's small model lays out a tiny timeline (<= TINY_TIMELINE_PASSES passes) and tiny micro-steps
    (t <= TINY_MICROSTEP_DEVICES): they go to caches of 128 entries, so 30 sessions' timelines do not evict each
    other; larger ones to the bounded caches of their size (app_pages/compute.py)."""
    from app_pages import compute
    from explorer import Strategy, load_cluster, load_model
    taken = []
    for name in ("_tiny_superstep", "_small_superstep", "_large_superstep", "_tiny_microstep", "_wide_microstep"):
        monkeypatch.setattr(compute, name, lambda *args, _name=name: taken.append(_name))
    model, cluster = load_model("gpt3-175b"), load_cluster("dgx-a100-80gb")
    for batch in (64, 512, 1536, 8192):         # 2 m p (p 8, d 16): 64, 512, 1,536 and 8,192 passes
        compute.superstep(model, Strategy(dp=16, tp=8, pp=8, global_batch=batch), cluster, "1f1b")
    for tp in (8, 128):
        compute.microstep(model, Strategy(dp=1, tp=tp, global_batch=8), cluster, 0, None)
    assert taken == ["_tiny_superstep", "_tiny_superstep", "_small_superstep", "_large_superstep",
                     "_tiny_microstep", "_wide_microstep"]
    assert compute.TINY_TIMELINES > compute.SMALL_TIMELINES > compute.LARGE_TIMELINES
    assert compute.TINY_MICROSTEPS > compute.MICROSTEPS


def test_the_event_tables_read_in_the_gantt_unit_and_in_words():
    """A lecturer's walk read the micro-step table's seconds at Streamlit's four decimals (0.0001, 0.0000) under
    clipped headers; the tables now give each time in its Gantt's unit (explorer/charts/event_table.py)."""
    from app_pages import state as S
    at = open_page("timeline")
    at.session_state[S.W_EVENT_TABLES] = True
    at.run()
    assert not at.exception
    superstep, micro = (df.value for df in at.dataframe[-2:])
    assert "start (s)" in superstep.columns and "duration (s)" in superstep.columns
    assert "start (µs)" in micro.columns or "start (ms)" in micro.columns
    unit = "µs" if "start (µs)" in micro.columns else "ms"
    durations = micro[f"duration ({unit})"]
    assert durations.max() >= 1 and (durations[durations > 0] >= 1e-3).all()   # readable at four decimals
    assert "TP / operator comm" in set(micro["category"]) and "op_comm" not in set(micro["category"])
