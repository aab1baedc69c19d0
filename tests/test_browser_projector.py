"""Projector-safe pictures (issue 30 item 2), in a real browser: every lesson and each of its reveals, each
lesson's slide and each page of its HTML deck, at a projector's 1280x720 in classroom mode and at 1920x1080.
No two text boxes of a rendered figure overlap, no tick label runs past its figure's edge, no title is
shown twice, no metric value or formula is cut, no exception box; the same on the Strategy, Cost,
Timelines and Compare pages, whose metric bar (Strategy, Cost) stays on screen while the page scrolls (item 4).

The boxes are read from the SVG plotly drew (tests/svg_layout.py). One browser and one `streamlit run`
server for the module. Screenshots go to $PROJECTOR_SHOTS, else projector-screenshots/ at the repository's
root (git-ignored), for a person to look at. Heavy: run it on its own
(`python -m pytest -x -q tests/test_browser_projector.py`).
"""
from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from explorer import Strategy, evaluate, load_cluster, load_model, timeline
from explorer.charts.breakdown import breakdown_bar, comm_figure, memory_figure
from explorer.charts.classroom import classroom_figure
from explorer.charts.gantt import superstep_figure
from explorer.charts.tables import comm_table, memory_table
from explorer.io.slides import SLIDE_H, SLIDE_W, lesson_deck, slide_figure
from explorer.lessons import LESSONS
from svg_layout import clipped_controls, cut_texts, gantt_rows, layout_problems
from test_browser import ARGS, CHROMIUM, ROOT, server  # noqa: F401  (the module-scoped streamlit server)

pytestmark = pytest.mark.skipif(not os.path.exists(CHROMIUM),
                                reason="needs Debian's chromium at /usr/bin/chromium (.ci/install installs it)")
SHOTS = Path(os.environ.get("PROJECTOR_SHOTS") or ROOT / "projector-screenshots")
SCREENS = {"1280x720-classroom": ({"width": 1280, "height": 720}, True),
           "1920x1080": ({"width": 1920, "height": 1080}, False)}
MEMORY_LESSONS = ("zero", "activations")
PLOTLY_PAGE = ("<!DOCTYPE html><html><head><meta charset='utf-8'><style>body {{margin: 0}}</style></head>"
               "<body>{}</body></html>")


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright
    SHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield chromium
        chromium.close()


def _settle(page, selector: str = ".js-plotly-plot .main-svg") -> None:
    page.locator(selector).first.wait_for(timeout=90_000)
    page.wait_for_timeout(700)


def _clean(page, where: str, shot: str) -> None:
    page.screenshot(path=str(SHOTS / f"{shot}.png"))
    assert page.get_by_test_id("stException").count() == 0, f"{where}: an exception box"
    assert layout_problems(page) == [], where
    assert cut_texts(page) == [], f"{where}: a number or formula is cut"
    assert clipped_controls(page) == [], f"{where}: a button's, link's or label's text is cut"


@pytest.mark.parametrize("screen", SCREENS)
def test_every_lesson_and_its_reveal_fits_the_screen(server, browser, screen):  # noqa: F811
    viewport, classroom = SCREENS[screen]
    page = browser.new_page(viewport=viewport)
    for lesson in LESSONS:
        page.goto(f"{server}/learn-{lesson.slug}" + ("?classroom=1" if classroom else ""))
        _settle(page)
        where = f"lesson {lesson.number} at {screen}"
        _clean(page, where, f"lesson{lesson.number}_{screen}")
        page.get_by_text("Reveal the model's answer").click()
        answer = page.get_by_test_id("stMetric").filter(has_text="Answer").first
        answer.wait_for(timeout=30_000)
        answer.scroll_into_view_if_needed()
        page.wait_for_timeout(400)
        _clean(page, f"{where}, revealed", f"lesson{lesson.number}_{screen}_reveal")
        box = answer.bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= viewport["width"], f"{where}: the answer is off screen"
    page.close()


def _render(page, html: str, path: Path) -> None:
    path.write_text(html)
    page.goto(path.as_uri())


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda lesson: lesson.slug)
def test_each_slide_and_deck_page_fits(browser, lesson, tmp_path):
    fig = classroom_figure(lesson.figure(), memory=lesson.slug in MEMORY_LESSONS)
    slide = slide_figure(fig, f"Lesson {lesson.number} · {lesson.title}")
    page = browser.new_page(viewport={"width": SLIDE_W, "height": SLIDE_H})
    _render(page, PLOTLY_PAGE.format(slide.to_html(include_plotlyjs=True, full_html=False)), tmp_path / "slide.html")
    _settle(page)
    _clean(page, f"lesson {lesson.number}'s slide", f"slide{lesson.number}_{lesson.slug}")
    page.close()
    deck = lesson_deck(lesson, lesson.values(), fig, lesson.reveal(), "setting")
    for screen, (viewport, _) in SCREENS.items():
        page = browser.new_page(viewport=viewport)
        _render(page, deck, tmp_path / "deck.html")
        for number in range(deck.count("<section>")):
            where = f"lesson {lesson.number}'s deck, page {number + 1} at {screen}"
            if "js-plotly-plot" in page.locator("section.on").inner_html():
                _settle(page, "section.on .main-svg")
            if number == deck.count("<section>") - 1:
                page.locator("section.on summary").click()        # the reveal
            _clean(page, where, f"deck{lesson.number}_{lesson.slug}_page{number + 1}_{screen}")
            overflow = page.evaluate("(() => { const s = document.querySelector('section.on');"
                                     " return [s.scrollHeight - s.clientHeight, s.scrollWidth - s.clientWidth]; })()")
            assert max(overflow) <= 1, f"{where}: runs past the screen by {overflow} px"
            page.keyboard.press("ArrowRight")
        page.close()


def _export_charts() -> dict:
    """The Export page's charts of the default model's run, as its "Slide PNG" button takes them."""
    model, cluster = load_model("gpt3-175b"), load_cluster("dgx-a100-80gb")
    strategy = Strategy(dp=16, tp=8, pp=8, micro_batch=1, global_batch=1536, recompute="selective",
                        sequence_parallel=True)
    result = evaluate(model, strategy, cluster)
    events = timeline.superstep_events(model, strategy, cluster, result=result)
    return {"time by category": breakdown_bar({"d16 t8 p8": result}),
            "communication by type": comm_figure(comm_table(result, cluster.levels[0].name)),
            "memory vs capacity": memory_figure(memory_table(result, cluster.device.memory_bytes),
                                                cluster.device.memory_bytes),
            "super-step Gantt": superstep_figure(events, "Super-step: one iteration (1f1b)")}


def test_the_export_pages_slides_fit(browser, tmp_path):
    """The Export slide printed its legend over its title (issue 30)."""
    page = browser.new_page(viewport={"width": SLIDE_W, "height": SLIDE_H})
    for label, fig in _export_charts().items():
        slide = slide_figure(classroom_figure(fig, memory=label.startswith("memory")), "gpt3-175b on dgx-a100-80gb")
        _render(page, PLOTLY_PAGE.format(slide.to_html(include_plotlyjs=True, full_html=False)), tmp_path / "s.html")
        _settle(page)
        _clean(page, f"the Export slide of {label}", f"export_slide_{label.replace(' ', '_')}")
    page.close()


@pytest.mark.parametrize("where", [("strategy", "Operator splits: drag layers between split columns"),
                                   ("cost", "Communication by type")], ids=["strategy", "cost"])
def test_the_metric_bar_stays_on_screen_beside_the_drag_areas_and_formulas(server, browser, where):  # noqa: F811
    """Issue 30 item 4: while dragging on Strategy the metrics were off-screen and the refusal box at
    y = -497 px; the metric bar sticks under the header."""
    path, heading = where
    page = browser.new_page(viewport={"width": 1280, "height": 720})
    page.goto(f"{server}/{path}?classroom=1")
    page.get_by_test_id("stMetric").first.wait_for(timeout=90_000)
    page.get_by_text(heading, exact=True).first.scroll_into_view_if_needed()
    page.wait_for_timeout(800)
    bar = page.locator(".st-key-metric_bar").first.bounding_box()
    assert bar is not None and 0 <= bar["y"] and bar["y"] + bar["height"] <= 720 / 2, bar
    metric = page.locator(".st-key-metric_bar [data-testid='stMetric']").filter(has_text="Iteration time").first
    box = metric.bounding_box()
    assert box and 0 <= box["y"] < 720, "the iteration time is on screen"
    page.screenshot(path=str(SHOTS / f"metric_bar_{path}.png"))
    page.close()


@pytest.mark.parametrize("screen", SCREENS)
def test_the_explore_pages_figures_fit(server, browser, screen):  # noqa: F811
    """Compare and Timelines included: Timelines' title overlapped its legend in classroom mode. The Start page too
    (no figure): its page links' labels were cut at 1280x720 in classroom mode, as Compare's pin button. Each
    Gantt's stage rows are all labelled and at least a line of type tall: in classroom mode the 8 stages of the
    Timelines page's Gantt were about 50 px together, and plotly drew only 'stage 0'."""
    viewport, classroom = SCREENS[screen]
    page = browser.new_page(viewport=viewport)
    for path in ("", "strategy", "cost", "timeline", "compare"):
        page.goto(f"{server}/{path}" + ("?classroom=1" if classroom else ""))
        if path:
            _settle(page)
            page.wait_for_timeout(1500)         # every chart of the page drawn
        else:
            page.get_by_test_id("stPageLink-NavLink").first.wait_for(timeout=90_000)
            page.wait_for_timeout(700)
        _clean(page, f"the {path or 'start'} page at {screen}", f"{path or 'start'}_{screen}")
        if path == "timeline":
            page.locator(".js-plotly-plot").first.scroll_into_view_if_needed()
            page.wait_for_timeout(500)
            superstep = [g for g in gantt_rows(page) if g["title"].startswith("Super-step")]
            assert superstep, "the super-step Gantt is drawn"
            stages = 8                          # the default strategy's p
            font_px = 18 if classroom else 12   # classroom mode's type (charts/classroom.py FONT_PX), plotly's
            for gantt in superstep:
                assert gantt["rows"] == stages, gantt
                assert gantt["plot_px"] >= stages * 1.5 * font_px, gantt
    page.close()


LONG_VALUES = ("model=gpt3-175b&cluster=dgx-h100&dp=16&tp=8&pp=8&b=1&B=1536&v=2&zero=1&sched=interleaved&rc=selective"
               "&dtype=fp8&sp=1&ov=0&sg=1&fw=megatron-bridge&f8r=tensorwise&mom=bf16&gd=fp32")
"""A link whose sidebar select boxes hold their longest values (interleaved, selective, tensorwise, Megatron-Bridge)."""


@pytest.mark.parametrize("screen", SCREENS)
def test_the_sidebars_select_values_are_not_cut(server, browser, screen):  # noqa: F811
    """The browser walk read 'delaye' for 'delayed' in the sidebar at 1280x720 in classroom mode: a select box's
    value is an <input>, which cannot wrap. Classroom mode stacks the sidebar's paired controls; the value keeps the
    box's right padding (both sizes); clipped_controls checks every select box's value (tests/svg_layout.py)."""
    viewport, classroom = SCREENS[screen]
    page = browser.new_page(viewport=viewport)
    for query in ("", LONG_VALUES):
        page.goto(f"{server}/strategy?{query}" + ("&classroom=1" if classroom else ""))
        _settle(page)
        values = page.evaluate("() => [...document.querySelectorAll('[data-testid=\"stSidebar\"] "
                               "input[role=\"combobox\"]')].map(i => i.value)")
        assert len(values) >= 8 and (not query or {"interleaved", "tensorwise"} <= set(values)), values
        shot = f"sidebar_{'long' if query else 'default'}_{screen}"
        page.screenshot(path=str(SHOTS / f"{shot}.png"))
        assert clipped_controls(page) == [], f"the strategy page's sidebar at {screen}"
    page.close()


TINY_SEARCH = "model=tiny-gpt&cluster=classroom&dp=8&tp=1&pp=1&b=1&B=16"
"""A search that finishes in seconds: times of 0.3 to 2.4 ms (under a decade), 0.04 GiB at most under a 61 GiB cap."""


def _every_chart_clean(page, what: str, stem: str, screen: str, wait_ms: int) -> None:
    """Each plotly chart of the page scrolled into view and checked (_clean); `stem` has a {} for its number."""
    for number in range(page.locator(".js-plotly-plot").count()):
        page.locator(".js-plotly-plot").nth(number).scroll_into_view_if_needed()
        page.wait_for_timeout(wait_ms)
        _clean(page, f"{what} chart {number + 1} at {screen}", stem.format(number + 1))


@pytest.mark.parametrize("screen", SCREENS)
def test_the_search_pages_charts_fit_after_a_search(server, browser, screen):  # noqa: F811
    """The browser walk of this session: at 1280x720 in classroom mode the Pareto scatter's log axis labelled every
    digit (7, 8, 9, 0.001 overlapping) with every point on the y axis (the x axis ran to the 61 GiB cap), and the
    bars below were squeezed to a sliver by their 100-character strategy names, which ran past the figure."""
    viewport, classroom = SCREENS[screen]
    page = browser.new_page(viewport=viewport)
    page.goto(f"{server}/search?{TINY_SEARCH}" + ("&classroom=1" if classroom else ""))
    page.get_by_role("button", name="Search", exact=True).click(timeout=90_000)
    _settle(page)
    page.wait_for_timeout(1500)
    _every_chart_clean(page, "the Search page's", f"search_{{}}_{screen}", screen, 500)
    bars = page.locator(".js-plotly-plot").filter(has_text="Iteration time by category").first
    figure, plot = bars.locator(".main-svg").first.bounding_box(), bars.locator(".nsewdrag").first.bounding_box()
    assert plot["width"] >= 0.6 * figure["width"], (plot, figure)
    page.close()


LONG_LABEL = ("model=gpt3-175b&cluster=dgx-a100-80gb&dp=16&tp=8&pp=8&b=1&B=1536&v=2&zero=1&sched=interleaved"
              "&rc=selective&dtype=bf16&sp=1&ov=0&sg=1")
"""The Strategy page's bar named 'd16 t8 p8 b1 B1536 interleaved v2 ZeRO-1 rc:selective SP'."""
DEFAULT_DRAWN = {"compute", "recompute", "TP / operator comm", "PP point-to-point", "bubble", "DP gradient sync",
                 "optimizer"}
"""The categories the default strategy's bar draws (no EP, CP, ZeRO or redistribution)."""


@pytest.mark.parametrize("screen", SCREENS)
def test_the_strategy_pages_bar_keeps_its_width_and_lists_what_it_draws(server, browser, screen):  # noqa: F811
    """At 1280x720 in classroom mode the strategy's name on one line took half of the figure; at 1920x1080 the
    legend listed all 11 categories in a column with a scroll bar."""
    viewport, classroom = SCREENS[screen]
    page = browser.new_page(viewport=viewport)
    for query in ("", LONG_LABEL):
        page.goto(f"{server}/strategy?{query}" + ("&classroom=1" if classroom else ""))
        _settle(page)
        bars = page.locator(".js-plotly-plot").first
        figure, plot = bars.locator(".main-svg").first.bounding_box(), bars.locator(".nsewdrag").first.bounding_box()
        page.screenshot(path=str(SHOTS / f"strategy_bar_{'long' if query else 'default'}_{screen}.png"))
        assert plot["width"] >= 0.6 * figure["width"], (query, plot, figure)
        if not query:
            legend = set(bars.locator(".legendtext").evaluate_all("els => els.map(e => e.textContent)"))
            assert legend == DEFAULT_DRAWN, legend
        _clean(page, f"the strategy page ({query or 'default'}) at {screen}", f"strategy_bar_{screen}")
    page.close()


@pytest.mark.parametrize("screen", SCREENS)
def test_the_model_and_validation_pages_fit(server, browser, screen):  # noqa: F811
    """The walk read 'Expand every layer' cut at 1280x720 in classroom mode, kv_heads, ffn_hidden and seq_len as the
    Model page's labels, the Validation page's parity plot's 2 and 5 over its 10 and 100, and its groups by their
    ids (megatron_table1, megatron_bridge_moe_b200)."""
    viewport, classroom = SCREENS[screen]
    page = browser.new_page(viewport=viewport)
    for path in ("model", "validation"):
        page.goto(f"{server}/{path}" + ("?classroom=1" if classroom else ""))
        page.locator(".js-plotly-plot .main-svg").first.wait_for(timeout=300_000)   # Validation predicts every run
        _settle(page)
        page.wait_for_timeout(1500)
        _every_chart_clean(page, f"the {path} page's", f"{path}_{{}}_{screen}", screen, 400)
        text = page.get_by_test_id("stMain").inner_text()
        for raw in ("kv_heads", "ffn_hidden", "seq_len", "megatron_table1", "korthikanti_table4", "megatron_bridge_"):
            assert raw not in text, f"the {path} page shows '{raw}' at {screen}"
    page.close()


TIME_AXES = {"Cost": {"Iteration time by category": ".xtick", "Communication per device": ".x2tick"},
             "Timelines": {"Super-step": ".xtick", "Micro-steps": ".xtick"}}
"""Each page's charts (by the start of their title) and the tick group of their axis of times."""
TIME_TICK = r"^(0|[\d.,]+(n|µ|μ|m)?s)$"
"""A time tick label with its unit: '0', '100µs', '2ms', '1.5s', '1,500s', '200ms' (plotly writes μ, Greek mu)."""
TICKS_JS = """(groups) => Object.fromEntries(Object.entries(groups).map(([title, ticks]) => {
  const plot = [...document.querySelectorAll('.js-plotly-plot')].find(p =>
    ((p.querySelector('.gtitle') || {}).textContent || '').startsWith(title));
  const boxes = (s) => plot ? [...plot.querySelectorAll(s + ' text')].filter(t => t.getBoundingClientRect().width) : [];
  return [title, {ticks: boxes(ticks).map(t => t.textContent),
                  leftEnd: Math.max(...boxes('.xtick').map(t => t.getBoundingClientRect().right)),
                  rightStart: Math.min(...boxes('.x2tick').map(t => t.getBoundingClientRect().left))}];
}))"""


def test_time_axes_say_their_unit_and_the_communication_charts_halves_stay_apart(server, browser):  # noqa: F811
    """The walk of 2026-12-06 read '100μ' and '2m' (plotly's bare SI prefixes) on the Timelines Gantt charts and the
    Cost page's charts, at 1280x720 in classroom mode: '2m' reads as minutes. Each tick now ends in its unit. The
    communication chart's two plots had 28 px between their tick labels (about 1.5 of classroom mode's 18 px type);
    they keep at least two font sizes (explorer/io/projector.py spread_subplots)."""
    page = browser.new_page(viewport={"width": 1280, "height": 720})
    for name, path in (("Cost", "cost"), ("Timelines", "timeline")):
        page.goto(f"{server}/{path}?classroom=1")
        _settle(page)
        page.wait_for_timeout(1500)
        for number in range(page.locator(".js-plotly-plot").count()):       # drawn once scrolled into view
            page.locator(".js-plotly-plot").nth(number).scroll_into_view_if_needed()
            page.wait_for_timeout(300)
        found = page.evaluate(TICKS_JS, TIME_AXES[name])
        for title, axis in found.items():
            assert len(axis["ticks"]) >= 3, f"the {name} page's {title} chart draws its time axis: {axis}"
            bare = [t for t in axis["ticks"] if not re.match(TIME_TICK, t)]
            assert not bare, f"the {name} page's {title} chart: ticks without a unit {bare}"
        if name == "Cost":
            comm = found["Communication per device"]
            page.locator(".js-plotly-plot").filter(has_text="Communication per device").first.scroll_into_view_if_needed()
            page.screenshot(path=str(SHOTS / "cost_comm_1280x720-classroom.png"))
            assert comm["rightStart"] - comm["leftEnd"] >= 2 * 18, comm
    page.close()


@pytest.mark.parametrize("query", ["", "?classroom=1"])
def test_start_is_an_address_of_the_start_page(server, browser, query):  # noqa: F811
    """A lecturer typed /start (the Start page's name) and got Streamlit's "Page not found" over the main page:
    Streamlit 1.67 serves the default page at / only. /start opens the Start page; classroom mode stays on."""
    page = browser.new_page(viewport={"width": 1280, "height": 720})
    page.goto(f"{server}/start{query}")
    page.get_by_role("heading", name="Bridging DL Explorer").wait_for(timeout=90_000)
    page.wait_for_timeout(1500)                 # the dialog came with the first run
    assert page.get_by_text("Page not found").count() == 0
    assert page.get_by_text("does not seem to exist").count() == 0
    page.screenshot(path=str(SHOTS / f"start_address{'_classroom' if query else ''}.png"))
    if query:
        assert "classroom=1" in page.url, page.url
    page.close()
