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
