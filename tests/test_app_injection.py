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
