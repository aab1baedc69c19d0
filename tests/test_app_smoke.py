"""Every page draws without an exception for each model family (after choosing it on the Model page)."""
import pytest

from app_util import open_page

PAGES = ("strategy", "cost", "timeline", "compare", "export", "validation")


@pytest.mark.parametrize("model", ["tiny-gpt", "tiny-mlp", "resnet-50", "bert-large", "llama2-70b"])
def test_every_page_for_each_family(model):
    at = open_page("model")
    at.selectbox(key="w_model_preset").set_value(model).run()
    assert not at.exception, at.exception
    assert at.session_state["model"].name == model
    for page in PAGES:
        at.switch_page(f"app_pages/{page}.py").run()
        assert not at.exception, (page, at.exception)
        assert at.title, page


def test_a_session_makes_its_pages_once():
    """app.py make_pages: the st.Page objects are made on a session's first run and reused (each st.Page resolves
    its file), and every page is still reached through them."""
    from app_pages import state as S
    at = open_page("cost")
    pages = at.session_state[S.PAGES]
    for page in ("timeline", "strategy", "start"):
        at.switch_page(f"app_pages/{page}.py").run()
        assert not at.exception, (page, at.exception)
        assert at.session_state[S.PAGES] is pages
    assert [p.url_path for p in pages["Explore"]] == ["model", "strategy", "cost", "timeline", "compare", "export"]
