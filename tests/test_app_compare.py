"""AppTest of the Compare page: pin strategies, see them side by side, load and unpin."""
from app_util import chart_specs, open_page


def _pin(at):
    next(b for b in at.button if b.label.startswith("Pin the current strategy")).click().run()
    assert not at.exception


def test_pin_two_strategies_and_compare_them():
    at = open_page("compare")
    _pin(at)
    at.sidebar.select_slider(key="w_tp").set_value(4).run()
    _pin(at)
    table = at.dataframe[0].value
    assert len(table) == 3 and table["iteration_s"].iloc[0] != table["iteration_s"].iloc[1]
    bars = next(s for s in chart_specs(at) if "by category" in s["layout"]["title"]["text"])
    assert len(bars["data"][0]["y"]) == 3
    gantts = [s for s in chart_specs(at) if s["layout"]["title"]["text"].startswith(("#", "current"))]
    assert len(gantts) == 3


def test_load_and_unpin():
    at = open_page("compare")
    _pin(at)
    at.sidebar.select_slider(key="w_pp").set_value(4).run()
    next(b for b in at.button if b.label == "Load").click().run()
    assert at.session_state["w_pp"] == 8
    next(b for b in at.button if b.label == "Unpin").click().run()
    assert at.session_state["pins"] == []


def test_at_most_four_pins():
    at = open_page("compare")
    for tp in (8, 4, 2, 1):
        at.sidebar.select_slider(key="w_tp").set_value(tp).run()
        _pin(at)
    pin = next(b for b in at.button if b.label.startswith("Pin the current strategy"))
    assert pin.disabled and len(at.session_state["pins"]) == 4
