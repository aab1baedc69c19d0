"""The app's page files live in app_pages/; there must be no pages/ directory next to app.py.

With a pages/ directory Streamlit runs the first script run of a server process, and every
AppTest run, in its old (v1) multipage mode: a page URL such as /strategy runs that file
without app.py (no state, no sidebar), and widget ids computed in that run differ from the
next run's, so the first drag or click of the first visitor is lost.
"""
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_no_pages_directory_next_to_app_py():
    assert not (ROOT / "pages").exists(), \
        "move page files to app_pages/ and route them from app.py (see this test's docstring)"


def test_every_page_app_py_routes_exists():
    text = (ROOT / "app.py").read_text()
    for page in ("model", "strategy", "cost", "timeline", "compare", "export"):
        assert f'"app_pages/{page}.py"' in text and (ROOT / "app_pages" / f"{page}.py").exists()
