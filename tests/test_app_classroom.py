"""AppTest of classroom mode as a property of the session (issue 30 item 3): kept across every navigation,
"Open in the explorer" and share links included, and applied on every page (palette, 3 significant
digits, friendly names); the bubble's one name (item 5) and the Strategy page's metric bar (item 4)."""
import json
import re

import pytest

from app_util import chart_specs, errors, open_page
from explorer.charts.palette import OKABE_ITO
from explorer.io.glossary import STAGES_IDLE

CLASSROOM = {"classroom": "1"}
RAW_CATEGORIES = ("op_comm", "dp_comm", "pp_comm", "zero_comm", "ep_comm", "cp_comm")


def significant_digits(text: str) -> int:
    """The most significant digits of any number in `text` ('43.8005' -> 6)."""
    numbers = [n.replace(",", "") for n in re.findall(r"\d[\d,]*\.?\d*", text)]
    numbers = [n.rstrip("0").rstrip(".") if "." in n else n for n in numbers]     # 158.0 has 3
    return max((len(n.replace(".", "").lstrip("0")) for n in numbers), default=0)


def classroom_css(at) -> bool:
    return any("font-size: 20px" in h.proto.body for h in at.get("html"))


def test_classroom_mode_survives_open_in_the_explorer_and_every_page():
    """It was lost on the first view after "Open in the explorer": 16 px, the menu in the sidebar, raw
    names like op_comm, no classroom=1 in the address while the toggle showed ON."""
    at = open_page("learn_4_pipeline", query=CLASSROOM)
    assert "classroom=1" in at.code[0].value, "the lesson's share link keeps classroom mode"
    at.button(key="lesson_open_pipeline").click().run()
    assert not at.exception and at.title[0].value == "Timelines"
    for page in (None, "cost", "strategy", "compare", "export", "model", "search", "validation", "measured"):
        if page:
            at.switch_page(f"app_pages/{page}.py").run()
            assert not at.exception, (page, at.exception)
        assert at.sidebar.toggle(key="w_classroom").value is True, page
        assert classroom_css(at), page
        assert at.query_params.get("classroom") == ["1"] or at.query_params.get("classroom") == "1", page
        for spec in chart_specs(at):
            names = {trace.get("name") for trace in spec["data"]}
            assert not names & set(RAW_CATEGORIES), (page, names)
    at.sidebar.toggle(key="w_classroom").set_value(False).run()
    assert not classroom_css(at) and "classroom" not in at.query_params
    at.switch_page("app_pages/cost.py").run()
    assert at.sidebar.toggle(key="w_classroom").value is False


def test_compare_in_classroom_mode_has_the_palette_and_three_digits():
    """Compare showed 43.8005 and no classroom palette."""
    at = open_page("compare", query=CLASSROOM)
    table = at.dataframe[0].value
    assert all(significant_digits(str(v)) <= 3 for v in table.select_dtypes("float").to_numpy().ravel())
    bars = next(spec for spec in chart_specs(at) if spec["layout"]["title"]["text"].startswith("Iteration time by category"))
    colours = {trace["name"]: trace["marker"]["color"] for trace in bars["data"]}
    assert colours["compute"] == OKABE_ITO["compute"] and colours["DP gradient sync"] == OKABE_ITO["dp_comm"]
    assert bars["layout"]["legend"]["yanchor"] == "bottom" and bars["layout"]["legend"]["yref"] == "container"
    assert significant_digits("43.8005") == 6 and significant_digits("158.0 and 0.0256") == 3


def test_timelines_in_classroom_mode_round_and_name_the_idle_share_apart_from_the_bubble():
    """20.8857 s was shown in classroom mode; the bubble was 36.5 % 'idle' here and 19 % elsewhere."""
    at = open_page("timeline", query=CLASSROOM)
    values = {m.label: m.value for m in at.metric}
    assert significant_digits(values["Timeline makespan"]) <= 3
    assert STAGES_IDLE.capitalize() in values and not any("bubble" in label.lower() for label in values)
    idle = next(m for m in at.metric if m.label == STAGES_IDLE.capitalize())
    assert "not the bubble" in idle.help
    gantt = chart_specs(at)[0]
    assert gantt["layout"]["legend"]["yanchor"] == "bottom", "the legend below the plot, away from the title"
    assert "<br>" not in gantt["layout"]["title"]["text"]


@pytest.mark.parametrize("classroom", [False, True])
def test_the_bubble_has_one_meaning_on_strategy_cost_and_the_lesson(classroom):
    at = open_page("strategy", query=CLASSROOM if classroom else None)
    bubble = next(m for m in at.metric if m.label == "Bubble")
    assert "critical stage's idle time" in bubble.help
    labels = [m.label for m in at.metric]
    assert labels[:3] == ["Iteration time", "Peak memory (of 80 GiB)", "MFU"], "the metric bar: time, memory, MFU"
    if classroom:
        assert significant_digits(bubble.value) <= 3
    at.switch_page("app_pages/cost.py").run()
    captions = " ".join(c.value for c in at.caption)
    assert "idle-to-ideal ratio (p − 1)/(v m)" in captions and "the bubble's share of the iteration" in captions


def test_the_strategy_pages_refusal_sits_in_the_metric_bar():
    """The refusal box appeared at y = -497 px while dragging: it now sits in the sticky bar."""
    at = open_page("strategy")
    at.sidebar.number_input(key="w_global_batch").set_value(1000).run()
    bar = next(block for block in _blocks(at.main) if getattr(block, "key", None) == "metric_bar")
    assert any("cannot run" in e.value for e in _elements(bar, "error"))
    assert errors(at)


def _blocks(node):
    for child in getattr(node, "children", {}).values():
        yield child
        yield from _blocks(child)


def _elements(node, kind: str) -> list:
    return [child for child in _blocks(node) if getattr(child, "type", None) == kind]


def test_a_shared_link_in_classroom_mode_opens_in_classroom_mode():
    at = open_page("export", query=CLASSROOM)
    link = at.code[0].value
    assert "classroom=1" in link
    query = dict(pair.split("=", 1) for pair in link.split("?", 1)[1].split("&"))
    opened = open_page(query=query)
    assert opened.sidebar.toggle(key="w_classroom").value is True and classroom_css(opened)
    assert json.dumps(dict(opened.query_params)).count("classroom") == 1


def test_the_pickers_offer_no_schedule_that_cannot_apply():
    """The pickers offered ZB-H1 with p = 1 (issue 30 item 5): the registry's rules decide what is offered."""
    at = open_page("timeline")
    assert "zb-h1" in at.sidebar.selectbox(key="w_schedule").options
    assert "zb-h1" in at.radio(key="w_timeline_schedule").options, "drawn as ZB-H1 with p = 8"
    at.sidebar.toggle(key="w_keep_gpus").set_value(False).run()
    at.sidebar.select_slider(key="w_pp").set_value(1).run()
    assert not at.exception and not errors(at)
    assert at.sidebar.selectbox(key="w_schedule").options == ["1f1b", "gpipe"]
    assert at.radio(key="w_timeline_schedule").options == ["1f1b"], "no ZB-H1 what-if without a pipeline"
