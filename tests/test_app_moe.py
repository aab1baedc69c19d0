"""The sidebar's expert-parallel control (issue 11): drawn for a model with experts only, and the
Cost page prices its all-to-alls."""
from app_util import open_page

from app_pages import state as S
from explorer.facade import load_model

EP_LABEL = "e — expert parallel (of d)"


def _labels(at) -> list:
    return [w.label for w in at.sidebar.select_slider]


def test_ep_control_only_for_moe_models_and_the_cost_page_shows_the_all_to_all():
    at = open_page("cost")
    assert EP_LABEL not in _labels(at)                      # a dense model: no expert parallelism
    at.session_state[S.MODEL] = load_model("qwen3-30b-a3b")
    at.run()
    assert not at.exception and EP_LABEL in _labels(at)
    slider = next(w for w in at.sidebar.select_slider if w.label == EP_LABEL)
    d = at.session_state[S.W_DP]
    options = [int(e) for e in slider.options]
    assert options == [e for e in range(1, d + 1) if d % e == 0 and 128 % e == 0]
    target = max(options)
    assert target > 1
    slider.set_value(target).run()
    assert not at.exception
    assert at.session_state[S.W_EP] == target
    shown = " ".join(str(df.value.to_dict()) for df in at.dataframe)
    assert "EP all-to-all" in shown


def test_timeline_page_draws_the_all_to_all():
    import json
    at = open_page("cost")
    at.session_state[S.MODEL] = load_model("qwen3-30b-a3b")
    at.run()
    slider = next(w for w in at.sidebar.select_slider if w.key == S.W_EP)
    slider.set_value(max(int(e) for e in slider.options)).run()
    at.switch_page("app_pages/timeline.py").run()
    assert not at.exception
    names = {trace.get("name") for chart in at.get("plotly_chart") for trace in json.loads(chart.proto.spec)["data"]}
    assert "ep_comm" in names
