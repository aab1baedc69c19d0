"""Names and messages from links and uploads are shown as literal text, never as markdown/HTML
(links, images, tags): app_pages/text.py plain() at every markdown element that shows them."""
import base64
import json
import re

from explorer.io.models import load_model
from tests.app_util import open_page

MARKDOWN_ELEMENTS = ("title", "header", "subheader", "caption", "markdown", "info", "error", "warning", "success",
                     "latex")
UNESCAPED = re.compile(r"(?<!\\)\]\(|(?<!\\)<[a-zA-Z/!]|https?://|(?<!\\)!(?<!\\)\[")


def markdown_bodies(at) -> list:
    bodies = []
    for kind in MARKDOWN_ELEMENTS:
        bodies += [str(e.value) for e in at.get(kind)]
    bodies += [str(m.label) for m in at.get("metric")]
    bodies += [str(e.label) for e in at.expander]
    return bodies


def assert_inert(at, needle: str) -> list:
    assert not at.exception, at.exception
    bodies = markdown_bodies(at)
    found = [b for b in bodies if needle in b]
    assert found, f"expected {needle!r} (escaped) somewhere on the page"
    for body in bodies:
        assert not UNESCAPED.search(body), body
    return found


def spec(d: dict) -> str:
    return base64.urlsafe_b64encode(json.dumps(d).encode()).decode().rstrip("=")


def test_link_naming_no_preset_shows_the_name_escaped():
    at = open_page(query={"model": "[Log in](http://evil/)"})
    found = assert_inert(at, "names no preset")
    assert any(r"\[Log in\]\(http:\/\/evil/\)" in body for body in found)


def test_model_spec_named_like_an_image_is_inert_on_every_page_that_names_it():
    model = load_model("tiny-gpt").to_dict() | {"name": "![t](http://evil/x.png)", "source": "<img src=x>"}
    query = {"model_spec": spec(model), "cluster": "classroom", "dp": "1", "tp": "1", "pp": "1", "b": "1", "B": "1"}
    at = open_page(query=query)
    assert at.session_state["model"].name == "![t](http://evil/x.png)"
    assert_inert(at, r"\!\[t\]")
    for page in ("model", "timeline", "strategy"):
        at.switch_page(f"app_pages/{page}.py").run()
        assert_inert(at, r"\!\[t\]")


# ---- every page, with a hostile model name and cluster name (issue 31) --------------------------------------

HOSTILE = ('[Log in again](http://evil/) ![t](http://evil/t.png) <img src="http://evil/i.png"> '
           '<a href="http://evil/">x</a> www.evil.com :red[red] $x$\n\n[r]: http://evil/r\u2028<IMG SRC=x> '
           '<javascript:a> x@evil.com')
LIVE = re.compile(r"(?i)http://evil|www\.evil|(?<!\\)<(?:img|a|javascript)\b|(?<!\\)\]\((?:http|www)|(?<!\\)!(?<!\\)\[t"
                  r"|(?<!\\)@evil|^\s*\[r\]:")
"""What the hostile text would leave live in markdown if printed raw: a link or an autolink, an image, a tag.
plain() writes http:\\/\\/evil, www\\.evil, \\<img, \\[Log in again\\]\\(, \\!\\[t\\]."""
HTML_LIVE = re.compile(r"<(?:img|a)\b")     # what plotly draws as a tag in a title, legend or hover


def _strings(value) -> list:
    """Every string inside a JSON value (a plotly figure's spec)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def _labels(at) -> list:
    """Widget labels and help texts, metric help: Streamlit renders them as markdown too."""
    texts = []
    for kind in ("button", "selectbox", "radio", "toggle", "number_input", "text_input", "select_slider",
                 "multiselect", "checkbox", "metric"):
        for element in at.get(kind):
            proto = getattr(element, "proto", None)
            texts += [str(getattr(proto, name, "")) for name in ("label", "help") if getattr(proto, name, "")]
    return texts


def assert_no_live_markup(at, page: str) -> None:
    """The page ran, shows the hostile name (escaped) somewhere, and nothing of it is live: no link, image
    or tag in any markdown element, label or help text, and no tag in any plotly figure."""
    assert not at.exception, (page, at.exception)
    shown = markdown_bodies(at) + _labels(at)
    assert any(r"\[Log in again\]" in text for text in shown), f"{page}: the hostile name is not on the page"
    for text in shown:
        assert not LIVE.search(text), (page, text[:300])
    for spec in (json.loads(chart.proto.spec) for chart in at.get("plotly_chart")):
        for text in _strings(spec):
            assert not HTML_LIVE.search(text), (page, text[:300])


def _lesson_pages() -> list:
    from explorer.lessons import LESSONS
    return [f"learn_{lesson.number}_{lesson.slug.replace('-', '_')}" for lesson in LESSONS]


EXPLORER_PAGES = ("model", "strategy", "cost", "timeline", "compare", "export", "validation", "search")


def test_every_page_shows_a_hostile_model_and_cluster_name_as_text():
    from explorer.io.clusters import cluster_to_dict, load_cluster
    model = load_model("tiny-gpt").to_dict() | {"name": HOSTILE, "source": HOSTILE}
    cluster = cluster_to_dict(load_cluster("classroom")) | {"name": HOSTILE, "source": HOSTILE}
    cluster["device"] = cluster["device"] | {"name": HOSTILE}
    query = {"model_spec": spec(model), "cluster_spec": spec(cluster), "dp": "1", "tp": "1", "pp": "1",
             "b": "1", "B": "1"}
    at = open_page(query=query)
    assert at.session_state["model"].name == HOSTILE and at.session_state["cluster"].name == HOSTILE
    assert_no_live_markup(at, "cost (the link's landing page)")
    for page in ("start", *_lesson_pages(), *EXPLORER_PAGES):
        at.switch_page(f"app_pages/{page}.py").run()
        assert_no_live_markup(at, page)
    at.switch_page("app_pages/compare.py").run()          # a pin labelled with markup
    at.text_input(key="w_pin_label").set_value(HOSTILE[:40])
    next(b for b in at.button if b.label.startswith("Pin the current")).click().run()
    assert_no_live_markup(at, "compare, pinned")
    assert any(r"\[Log in again\]\(http:\/\/evil/\)" in text for text in markdown_bodies(at))


def test_a_saved_run_with_hostile_names_shows_them_as_text():
    from tests.test_app_measured import SAVED
    run = json.loads(SAVED.read_text())
    run["model"] = run["model_spec"]["name"] = HOSTILE
    run["cluster_file"] = run["cluster_file"] | {"name": HOSTILE, "source": HOSTILE}
    run["unmodelled_calls"][0] = run["unmodelled_calls"][0] | {"op": HOSTILE, "note": HOSTILE}
    at = open_page("measured")
    at.file_uploader(key="w_run_file").upload("run.json", json.dumps(run).encode(), "application/json").run()
    assert not [e.value for e in at.error], [e.value for e in at.error]
    assert_no_live_markup(at, "measured")
