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
    table = at.dataframe[0].value      # the current strategy equals pin #2: shown once (issue 12)
    assert len(table) == 2 and table["iteration (s)"].iloc[0] != table["iteration (s)"].iloc[1]
    assert "MFU (%)" in table.columns and "bubble (s)" in table.columns    # readable names (issue 12)
    bars = next(s for s in chart_specs(at) if "by category" in s["layout"]["title"]["text"])
    assert len(bars["data"][0]["y"]) == 2
    gantts = [s for s in chart_specs(at) if s["layout"]["title"]["text"].startswith(("#", "current"))]
    assert len(gantts) == 2
    at.sidebar.select_slider(key="w_tp").set_value(2).run()    # a strategy not pinned: shown beside the pins
    assert len(at.dataframe[0].value) == 3


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


def test_pins_travel_in_the_share_link_and_the_gantts_share_one_time_axis():
    at = open_page("compare")
    _pin(at)
    at.sidebar.select_slider(key="w_pp").set_value(4).run()
    _pin(at)
    params = dict(at.query_params)
    assert "pins" in params
    labels = [p.label for p in at.session_state["pins"]]
    ranges = [s["layout"]["xaxis"]["range"][1] for s in chart_specs(at)
              if s["layout"]["title"]["text"].startswith("#")]
    assert len(ranges) == 2 and ranges[0] == ranges[1], "same axis for both pins (both in seconds)"
    assert not any(s["layout"]["title"]["text"].startswith("current") for s in chart_specs(at)), \
        "the current strategy equals the last pin: drawn once"
    opened = open_page("compare", query={k: (v[0] if isinstance(v, list) else v) for k, v in params.items()})
    assert [p.label for p in opened.session_state["pins"]] == labels
    assert [p.strategy for p in opened.session_state["pins"]] == [p.strategy for p in at.session_state["pins"]]


def test_a_tampered_pins_parameter_is_refused_in_one_line():
    at = open_page(query={"pins": "%%%not-base64"})          # the message shows on the page opened first
    assert not at.exception and at.session_state["pins"] == []
    assert any("link parameter 'pins' is not valid base64 JSON" in i.value for i in at.info)


def test_classroom_mode_draws_at_most_32_micro_batches_on_one_axis():
    """Issue 12: in classroom mode the Compare Gantts show the first 32 micro-batches (m = 96 by
    default) on one shared time axis."""
    at = open_page("compare", query={"classroom": "1"})
    assert any("first 32 micro-batches" in c.value for c in at.caption)
    ranges = [spec["layout"]["xaxis"]["range"] for spec in chart_specs(at) if "range" in spec["layout"].get("xaxis", {})]
    assert ranges and all(r == ranges[0] for r in ranges)


def test_the_strategy_column_is_pinned_for_sideways_scrolling():
    """A wide comparison scrolled sideways in classroom mode hid which strategy a row is (the browser walk): the
    strategy column is pinned (st.column_config pinned), in both modes."""
    import json
    from app_util import open_page as _open
    for classroom in (False, True):
        at = _open("compare")
        if classroom:
            at.session_state["classroom"] = True          # app_pages/state.py CLASSROOM
            at.run()
        config = json.loads(at.dataframe[0].proto.columns)
        assert config["strategy"]["pinned"] is True, config
        # bounded: pinned at its natural width a long label took ~620 of 680 px of a classroom table
        assert config["strategy"]["width"] == "medium", config


def test_pins_of_different_global_batches_are_told_apart_and_hidden_communication_has_a_column():
    """A lecturer's walk: a pinned ZeRO-3 preset read 20.75 s against the default's 20.89 s with nothing saying that
    the preset had moved B from 1,536 to 2,048, and its 7.3 s of hidden ZeRO traffic appeared nowhere."""
    at = open_page("compare")
    _pin(at)
    at.sidebar.number_input(key="w_global_batch").set_value(2048).run()
    _pin(at)
    table = at.dataframe[0].value
    assert list(table["B (sequences)"]) == [1536, 2048]
    assert "hidden communication (s)" in table.columns and (table["hidden communication (s)"] >= 0).all()
    assert any("different global batches (B = 1,536, 2,048" in c.value for c in at.caption)
    bars = next(s for s in chart_specs(at) if "by category" in s["layout"]["title"]["text"])
    assert "(exposed" in bars["layout"]["title"]["text"]
