"""Classroom mode in a real browser at a projector's 1280x720: every lesson, an animation played to
its end, screenshots; and the HTML deck opened with the network off.

`streamlit run app.py` driven by Playwright with Debian's chromium (never `playwright install`).
Heavy: run it on its own (`python -m pytest -q tests/test_browser_classroom.py`). With
SCREENSHOTS_DIR=assets/screenshots it also writes the README's classroom screenshots there.
"""
from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

from explorer.lessons import LESSONS, by_slug
from explorer.io.slides import lesson_deck
from test_browser import ARGS, CHROMIUM, server  # noqa: F401  (the module-scoped streamlit server)

pytestmark = pytest.mark.skipif(not os.path.exists(CHROMIUM),
                                reason="needs Debian's chromium at /usr/bin/chromium (.ci/install installs it)")
VIEWPORT = {"width": 1280, "height": 720}
README_SHOTS = {"pipeline": "lesson_pipeline_classroom.png", "zero": "lesson_zero_classroom.png"}


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright
    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield chromium
        chromium.close()


def _wait_for_chart(page):
    page.locator(".js-plotly-plot .main-svg").first.wait_for(timeout=60_000)
    page.wait_for_timeout(800)


def test_every_lesson_in_classroom_mode_at_1280x720(server, browser, tmp_path):  # noqa: F811
    page = browser.new_page(viewport=VIEWPORT)
    for lesson in LESSONS:
        page.goto(f"{server}/learn-{lesson.slug}?classroom=1")
        _wait_for_chart(page)
        assert page.get_by_test_id("stException").count() == 0, lesson.slug
        title = page.locator("h1").first
        assert title.inner_text().startswith(f"Lesson {lesson.number}")
        # classroom mode: large type, the lesson's controls alone in the sidebar, the picture on the first screen
        assert float(page.evaluate("getComputedStyle(document.documentElement).fontSize")[:-2]) >= 20
        sidebar = page.get_by_test_id("stSidebar")
        assert sidebar.get_by_role("radiogroup").count() == len(lesson.controls)
        assert sidebar.get_by_role("slider").count() == 0
        chart = page.locator(".js-plotly-plot").first.bounding_box()
        assert chart["y"] < VIEWPORT["height"], f"{lesson.slug}: the picture starts below the first screen"
        shot = tmp_path / f"lesson{lesson.number}_{lesson.slug}.png"
        page.screenshot(path=str(shot))
        assert shot.stat().st_size > 20_000
        if os.environ.get("SCREENSHOTS_DIR") and lesson.slug in README_SHOTS:
            shutil.copy(shot, Path(os.environ["SCREENSHOTS_DIR"]) / README_SHOTS[lesson.slug])
    page.close()


def test_pipeline_animation_plays_to_its_end(server, browser, tmp_path):  # noqa: F811
    page = browser.new_page(viewport=VIEWPORT)
    page.goto(f"{server}/learn-pipeline?classroom=1")
    _wait_for_chart(page)
    page.get_by_text("Play it step by step").click()
    play = page.locator(".updatemenu-button").filter(has_text="play").first
    play.wait_for(timeout=30_000)
    page.wait_for_timeout(500)
    play.click()
    page.wait_for_timeout(2000)
    playing = page.get_by_text(re.compile(r"^time step \d+$")).first.text_content()
    assert playing != "time step 40", "it started again from the beginning"
    page.screenshot(path=str(tmp_path / "pipeline_playing.png"))
    page.get_by_text("time step 40", exact=True).wait_for(timeout=60_000)     # 40 frames of 250 ms: the end
    page.screenshot(path=str(tmp_path / "pipeline_played.png"))
    page.close()


def test_html_deck_opens_with_the_network_off(browser, tmp_path):
    lesson = by_slug("pipeline")
    deck = tmp_path / "deck.html"
    deck.write_text(lesson_deck(lesson, lesson.values(), lesson.figure(), lesson.reveal(), "1F1B, p = 4, m = 8"))
    context = browser.new_context(viewport=VIEWPORT, offline=True)
    page = context.new_page()
    requested = []
    page.on("request", lambda request: requested.append(request.url))
    page.goto(deck.as_uri())
    assert page.locator("section.on h1").inner_text().startswith("Lesson 4")
    for _ in range(3):
        page.keyboard.press("ArrowRight")
    page.locator("section.on .main-svg").first.wait_for(timeout=20_000)   # plotly drew the figure offline
    assert page.locator("section.on .js-plotly-plot .bars, section.on .js-plotly-plot .trace").count() > 0
    page.screenshot(path=str(tmp_path / "deck_figure.png"))
    assert [url for url in requested if not url.startswith(("file:", "data:", "blob:"))] == []
    context.close()
