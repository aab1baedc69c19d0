"""AppTest of the Start page and the eight lesson pages: change the controls, the reveal equals the
library's answer for that setting, and "Open in the explorer" reproduces the lesson's state."""
import pytest

from app_util import errors, open_page
from explorer.charts.palette import opaque
from explorer.lessons import LESSONS

# a non-default setting per lesson (control -> value), set through the page's widgets
CHANGES = {
    "double-level": {"op": "fc2", "tp": 2, "micro_batch": 2},
    "data-parallel": {"dp": 8, "overlap_dp": True},
    "tensor-parallel": {"tp": 8, "sequence_parallel": True},
    "pipeline": {"schedule": "gpipe", "pp": 2, "micro_batches": 16},
    "zero": {"zero": 2, "dp": 4, "model": "classroom-gpt"},
    "activations": {"recompute": "selective", "sequence_parallel": True, "tp": 2},
    "hybrid": {"first": "batch", "second": "replicated", "pp": 2},
    "search": {"gpus": 4, "global_batch": 8, "cap_gib": 8},
}
TITLES = {"cost": "Cost of one training iteration", "timeline": "Timelines", "strategy": "Strategy",
          "search": "Search for a strategy"}


def page_file(lesson) -> str:
    return f"learn_{lesson.number}_{lesson.slug.replace('-', '_')}"


def metric_value(at, label: str) -> str:
    return next(m.value for m in at.metric if m.label == label)


def test_the_default_page_is_start_here_with_links_to_every_lesson():
    at = open_page()
    assert at.title[0].value == "Bridging DL Explorer"
    assert not at.sidebar.select_slider, "the explorer's controls are not in the way on Start here"
    links = [link.proto.page for link in at.get("page_link")]
    for lesson in LESSONS:
        assert f"learn-{lesson.slug}" in links, lesson.slug
    assert "cost" in links and "search" in links


def test_a_shared_configuration_without_a_page_still_opens_on_cost():
    at = open_page(query={"model": "tiny-gpt", "cluster": "classroom", "dp": "2", "tp": "1", "pp": "1",
                          "B": "8"})
    assert at.title[0].value == "Cost of one training iteration"


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda lesson: lesson.slug)
def test_lesson_controls_reveal_and_open_in_the_explorer(lesson):
    at = open_page(page_file(lesson))
    assert at.title[0].value.startswith(f"Lesson {lesson.number}:")
    assert len(at.latex) == 1 and not errors(at)
    assert metric_value(at, "Answer") == lesson.reveal().answer_text
    values = {}
    for name, value in CHANGES[lesson.slug].items():
        at.radio(key=f"w_lesson_{lesson.slug}_{name}").set_value(value).run()
        assert not at.exception, at.exception
        values[name] = value
        assert metric_value(at, "Answer") == lesson.reveal(values).answer_text, (name, value)
    reveal = lesson.reveal(values)
    assert any(m.value == f"**{reveal.question}**" for m in at.markdown), "the question of this setting"
    setup = lesson.setup(values)
    assert at.get("plotly_chart"), "the lesson's picture"
    here, link = at.code[0].value, at.code[1].value
    assert all(f"l_{name}=" in here for name in values), here       # this lesson at this setting
    assert f"/{setup.page}?" in link and f"model={setup.model.name}" in link

    at.button(key=f"lesson_open_{lesson.slug}").click().run()
    assert not at.exception, at.exception
    ss = at.session_state
    assert ss["model"] == setup.model and ss["cluster"] == setup.cluster
    if setup.search:
        assert (ss["w_search_gpus"], ss["w_search_batch"], ss["w_search_cap_gib"]) == setup.search
    assert at.title[0].value == TITLES[setup.page]
    assert any(f"Lesson {lesson.number}'s example" in i.value for i in at.info)
    for key, name in (("w_dp", "dp"), ("w_tp", "tp"), ("w_pp", "pp"), ("w_zero", "zero"),
                      ("w_schedule", "schedule"), ("w_sequence_parallel", "sequence_parallel")):
        assert ss[key] == getattr(setup.strategy, name), key
    assert tuple(ss["layer_splits"]) == setup.strategy.layer_splits


def test_zero_bubble_lesson_opens_the_timeline_drawing_zb_h1():
    at = open_page("learn_4_pipeline")
    at.radio(key="w_lesson_pipeline_schedule").set_value("zb-h1").run()
    at.button(key="lesson_open_pipeline").click().run()
    assert at.title[0].value == "Timelines"
    assert at.radio(key="w_timeline_schedule").value == "zb-h1"


def test_impossible_lesson_setting_names_the_problem_and_the_page_survives():
    at = open_page("learn_4_pipeline")
    at.radio(key="w_lesson_pipeline_schedule").set_value("interleaved").run()
    at.radio(key="w_lesson_pipeline_pp").set_value(8).run()
    assert not at.exception
    assert any("p·v ≤ 8 layers" in e for e in errors(at))
    # the picture and the question of the latest setting that ran stay (a walk: the page emptied below the box)
    assert any("Below, the latest setting that runs" in c.value and "p = 4" in c.value for c in at.caption)
    assert at.get("plotly_chart") and any(b.label == "Open in the explorer" for b in at.button)
    at.radio(key="w_lesson_pipeline_pp").set_value(4).run()
    assert not errors(at) and not any("Below, the latest" in c.value for c in at.caption)


def test_the_explorer_strategy_survives_a_visit_to_the_lessons():
    at = open_page("cost")
    at.sidebar.select_slider(key="w_tp").set_value(4).run()
    at.switch_page("app_pages/learn_1_double_level.py").run()
    at.switch_page("app_pages/cost.py").run()
    assert at.sidebar.select_slider(key="w_tp").value == 4


def test_animation_toggle_gives_frames():
    at = open_page("learn_4_pipeline")
    at.toggle(key="w_lesson_animate_pipeline").set_value(True).run()
    import json
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert len(spec["frames"]) >= 10 and spec["layout"]["updatemenus"]


def test_classroom_parameter_moves_the_lesson_controls_to_the_sidebar_and_restyles_the_picture():
    import json
    at = open_page("learn_4_pipeline", query={"classroom": "1"})
    assert at.sidebar.toggle(key="w_classroom").value is True
    assert {r.key for r in at.sidebar.radio} == {"w_lesson_pipeline_schedule", "w_lesson_pipeline_pp",
                                                 "w_lesson_pipeline_micro_batches"}
    assert not at.sidebar.select_slider, "only the lesson's controls in the sidebar"
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert spec["layout"]["font"]["size"] >= 18
    colours = {t["name"]: t["marker"]["color"] for t in spec["data"]}
    assert opaque(colours["compute"]) == "#0072B2", "Okabe–Ito"
    assert any("font-size: 20px" in h.proto.body for h in at.get("html"))
    at.sidebar.toggle(key="w_classroom").set_value(False).run()
    assert {r.key for r in at.radio} >= {"w_lesson_pipeline_pp"} and not at.sidebar.radio


def test_classroom_timeline_shows_at_most_32_micro_batches():
    import json
    at = open_page("timeline", query={"classroom": "1"})          # the default GPT-3 run: m = 96
    assert at.session_state["last_valid"].result.micro_batches == 96
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert "first 32 micro-batches" in spec["layout"]["title"]["text"]
    shown_until = spec["layout"]["xaxis"]["range"][1]
    assert spec["layout"]["xaxis"]["title"]["text"] == "time (s)"
    assert shown_until < 0.6 * at.session_state["last_valid"].result.iteration_time_s


def test_timeline_page_plays_a_small_pipeline_and_its_micro_step():
    import json
    at = open_page("learn_4_pipeline")
    at.button(key="lesson_open_pipeline").click().run()
    at.switch_page("app_pages/timeline.py").run()        # AppTest reruns its own page, not the one switched to
    at.toggle(key="w_timeline_play").set_value(True).run()
    assert not at.exception
    specs = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    assert len(specs[0]["frames"]) >= 10 and len(specs[1]["frames"]) >= 10


def test_a_strategy_over_memory_is_flagged_on_every_explorer_page():
    at = open_page("learn_5_zero")                     # gpt-3.6b, d = 2, no ZeRO: 78 GiB > 64 GiB
    at.button(key="lesson_open_zero").click().run()
    for page in ("cost", "strategy", "timeline", "compare", "export", "model"):
        at.switch_page(f"app_pages/{page}.py").run()
        assert not at.exception, (page, at.exception)
        assert any("Does not fit in memory" in w.value for w in at.warning), page


@pytest.mark.parametrize("classroom", [False, True])
def test_the_caption_names_the_colours_the_picture_is_drawn_in(classroom):
    """Issue 30: lesson 6's caption said 'red' for the pink bars of classroom mode, lesson 2's 'green'."""
    import json
    from explorer.charts.lesson_figures import colour_word
    for page, trace, phrase in (("learn_6_activations", "activations", "{W}: activations"),
                                ("learn_2_data_parallel", "DP gradient sync", "the {w} part")):
        at = open_page(page, query={"classroom": "1"} if classroom else None)
        spec = json.loads(at.get("plotly_chart")[0].proto.spec)
        word = colour_word(next(t["marker"]["color"] for t in spec["data"] if t.get("name") == trace))
        expected = phrase.format(W=word.capitalize(), w=word)
        assert any(expected in c.value for c in at.caption), (page, expected, [c.value for c in at.caption])


def test_the_offline_deck_names_the_classroom_colours():
    from app_pages.lesson_view import classroom_deck
    from explorer.charts.classroom import classroom_figure
    from explorer.charts.lesson_figures import colour_word
    lesson = next(lesson for lesson in LESSONS if lesson.slug == "activations")
    fig = classroom_figure(lesson.figure(), memory=True)
    deck = classroom_deck(lesson, lesson.values(), fig, lesson.reveal(), "")
    shown = colour_word(next(t.marker.color for t in fig.data if t.name == "activations"))
    assert shown == "pink" and "Pink: activations" in deck and "Red: activations" not in deck


def test_a_lesson_address_carries_its_setting_and_names_a_tampered_value():
    """?l_pp=8&l_micro_batches=4 on the pipeline lesson (explorer/lessons/links.py): the controls open at that
    setting and the answer is the library's for it; a value that is no option is named and the default kept; the
    address bar follows a control that moves."""
    lesson = next(x for x in LESSONS if x.slug == "pipeline")
    at = open_page(page_file(lesson), query={"l_pp": "8", "l_micro_batches": "4", "l_schedule": "1f1b; rm -rf /"})
    assert at.radio(key="w_lesson_pipeline_pp").value == 8
    assert at.radio(key="w_lesson_pipeline_micro_batches").value == 4
    assert at.radio(key="w_lesson_pipeline_schedule").value == "1f1b"             # the default, kept
    assert metric_value(at, "Answer") == lesson.reveal({"pp": 8, "micro_batches": 4}).answer_text
    shown = " ".join(str(x.value) for x in list(at.warning) + list(at.info) + list(at.toast))
    assert "schedule" in shown and "is not one of gpipe, 1f1b" in shown and "kept 1f1b" in shown, shown
    at.radio(key="w_lesson_pipeline_pp").set_value(2).run()
    assert at.query_params["l_pp"] in ("2", ["2"]) and at.query_params["l_schedule"] in ("1f1b", ["1f1b"])


def test_a_lesson_keeps_its_setting_while_the_class_visits_other_pages():
    """Streamlit drops a radio's key on a run that does not draw it: the setting is kept in session state
    (LESSON_SETTINGS) and the controls are seeded from it, so lesson 4 at m = 16 is still at m = 16 after lesson 5
    and the Cost page (a lecturer's walk, 2026-12-07: it came back at the defaults)."""
    at = open_page("learn_4_pipeline")
    at.radio(key="w_lesson_pipeline_micro_batches").set_value(16).run()
    at.switch_page("app_pages/learn_5_zero.py").run()
    at.switch_page("app_pages/cost.py").run()
    at.switch_page("app_pages/learn_4_pipeline.py").run()
    assert not at.exception, at.exception
    assert at.radio(key="w_lesson_pipeline_micro_batches").value == 16
    assert at.query_params["l_micro_batches"] in ("16", ["16"])


def test_a_parameter_given_twice_leaves_one_value_in_the_address():
    """?l_pp=2&l_pp=8 applied 8 and left both in the address bar (a walk): the address now holds the one applied."""
    lesson = next(x for x in LESSONS if x.slug == "pipeline")
    at = open_page(page_file(lesson), query={"l_pp": ["2", "8"]})
    assert not at.exception
    applied = at.radio(key="w_lesson_pipeline_pp").value
    assert applied in (2, 8) and at.query_params["l_pp"] in (str(applied), [str(applied)])


def test_a_link_to_a_setting_that_cannot_run_shows_the_lessons_own():
    """Opened from an address whose setting cannot run, with no setting run before in the session: the lesson's own
    setting is shown under the error, not an empty page."""
    lesson = next(x for x in LESSONS if x.slug == "pipeline")
    at = open_page(page_file(lesson), query={"l_schedule": "interleaved", "l_pp": "8"})
    assert not at.exception and any("p·v ≤ 8 layers" in e for e in errors(at))
    defaults = {c.name: c.default for c in lesson.controls}
    assert metric_value(at, "Answer") == lesson.reveal(defaults).answer_text
    assert any("Below, the lesson's own setting" in c.value for c in at.caption)
