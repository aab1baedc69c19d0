"""AppTest of the Search page: run a small search, see the scatter and the table, select a point."""
import json

from streamlit.proto.WidgetStates_pb2 import WidgetStates

from app_util import chart_specs, errors, metric, open_page
from explorer import load_cluster, load_model

SELECTED = "search_selected_strategy"     # app_pages/search.py SEARCH_SELECTED_STRATEGY
CHART = "search_pareto_chart"


def searched():
    at = open_page()
    at.session_state["model"] = load_model("tiny-gpt")
    at.session_state["cluster"] = load_cluster("classroom")
    at.session_state["w_search_gpus"] = 8
    at.session_state["w_search_batch"] = 16
    at.switch_page("app_pages/search.py").run()
    assert not at.exception, at.exception
    at.button[0].click().run()
    assert not at.exception and not errors(at), (at.exception, errors(at))
    return at


def select_point(at, name: str, index: int):
    """What the browser sends when a point is clicked: the chart's selection as its widget value."""
    chart = next(c for c in at.get("plotly_chart") if c.proto.id.endswith(CHART))
    collect = at._tree.get_widget_states

    def with_selection() -> WidgetStates:
        states = collect()
        widget = states.widgets.add()
        widget.id = chart.proto.id
        widget.string_value = json.dumps({"selection": {
            "points": [{"customdata": [name, index], "point_index": index}],
            "point_indices": [index], "box": [], "lasso": []}})
        return states

    at._tree.get_widget_states = with_selection
    return at.run()


def test_search_shows_the_scatter_and_the_table():
    at = searched()
    titles = [spec["layout"]["title"]["text"] for spec in chart_specs(at)]
    assert any("peak memory" in t for t in titles)
    table = at.dataframe[0].value
    assert {"strategy", "iteration_time_s", "peak_memory_gib", "compute_s", "bubble_s"} <= set(table.columns)
    assert list(table["iteration_time_s"]) == sorted(table["iteration_time_s"])
    assert at.session_state["search_result"]["result"].top


def test_selecting_a_point_loads_the_strategy_everywhere():
    at = searched()
    result = at.session_state["search_result"]["result"]
    chosen = result.pareto[-1]
    wanted = chosen.strategy
    select_point(at, "pareto", len(result.pareto) - 1)
    assert not at.exception, at.exception
    assert at.session_state[SELECTED] == wanted
    assert (at.session_state["w_dp"], at.session_state["w_tp"], at.session_state["w_pp"]) == \
        (wanted.dp, wanted.tp, wanted.pp)
    assert at.session_state["layer_splits"] == wanted.layer_splits
    assert at.session_state["model"].name == "tiny-gpt"
    at.switch_page("app_pages/cost.py").run()
    assert not at.exception and not errors(at)
    assert metric(at, "Iteration time") == f"{chosen.iteration_time_s:.4g} s"


def test_a_framework_filter_on_the_page():
    """Only strategies DeepSpeed's config can express (no tensor parallelism) when it is chosen."""
    at = open_page()
    at.session_state["model"] = load_model("tiny-gpt")
    at.session_state["cluster"] = load_cluster("classroom")
    at.session_state["w_search_gpus"] = 8
    at.session_state["w_search_batch"] = 16
    at.switch_page("app_pages/search.py").run()
    at.selectbox(key="w_search_framework").set_value("deepspeed").run()
    at.button[0].click().run()
    assert not at.exception and not errors(at)
    result = at.session_state["search_result"]["result"]
    assert result.top and all(c.strategy.tp == 1 for c in result.top + result.pareto)
