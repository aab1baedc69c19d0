"""What a person waits for in a real browser: first meaningful paint, then each control's update.

Debian's chromium driven by Playwright (never `playwright install`). For a warm server
(one visit first, as a lecturer opens the app before class):
* first meaningful paint of the default page in a new session: the page title and the first
  chart drawn (target <= 3 s);
* on every page, the time from a key press on the sidebar's d slider until the script has run
  and the browser has redrawn (no element stale, the status widget gone; target <= 1 s).
Prints figures; asserts nothing.

    python benchmarks/bench_browser.py [--url http://127.0.0.1:8501]
"""
from __future__ import annotations

import argparse
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run"]
PAGES = ("cost", "strategy", "model", "timeline", "compare", "export", "validation", "search")
# (the lessons' own controls are timed by benchmarks/bench_lessons.py)
SETTLED = """() => !document.querySelector('[data-stale="true"]') &&
                 !document.querySelector('[data-testid="stStatusWidget"]')"""


def start_server() -> tuple:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port),
                             "--server.address", "127.0.0.1"], cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    for _ in range(240):
        try:
            if urllib.request.urlopen(f"{url}/_stcore/health", timeout=1).read() == b"ok":
                break
        except OSError:
            time.sleep(0.25)
    return proc, url


def first_paint(browser, url: str, chart: bool) -> tuple:
    """(seconds to the page's title, seconds to its meaningful paint: the title, the first text
    block and, when the page has one, its first chart drawn) in a new session."""
    page = browser.new_context(viewport={"width": 1600, "height": 1000}).new_page()
    start = time.perf_counter()
    page.goto(url)
    page.get_by_test_id("stHeading").first.wait_for(timeout=120_000)
    title = time.perf_counter() - start
    page.get_by_test_id("stMarkdownContainer").first.wait_for(timeout=120_000)
    if chart:
        page.locator(".js-plotly-plot .main-svg").first.wait_for(timeout=120_000)
    painted = time.perf_counter() - start
    page.context.close()
    return title, painted


WATCH = """() => { window.__lastMutation = performance.now();
  if (!window.__observer) { window.__observer = new MutationObserver(() => { window.__lastMutation = performance.now(); });
    window.__observer.observe(document.body, {subtree: true, childList: true, attributes: true, characterData: true}); }
  return performance.now(); }"""
QUIET = """(ms) => performance.now() - window.__lastMutation > ms &&
          !document.querySelector('[data-stale="true"]') && !document.querySelector('[data-testid="stStatusWidget"]')"""


def control_update(page, quiet_ms: int = 400) -> float:
    """Seconds from a key press on the d slider until the last change the browser drew for it
    (the page then stays unchanged for `quiet_ms`, nothing stale, no script running)."""
    slider = page.get_by_test_id("stSidebar").get_by_role("slider").first
    slider.focus()
    page.wait_for_function(QUIET.replace("(ms)", "()").replace("> ms", f"> {quiet_ms}"), timeout=120_000) \
        if page.evaluate("() => window.__observer !== undefined") else None
    pressed = page.evaluate(WATCH)
    slider.press("ArrowRight")
    page.wait_for_function(QUIET.replace("(ms)", "()").replace("> ms", f"> {quiet_ms}"), timeout=120_000,
                           polling=20)
    return (page.evaluate("() => window.__lastMutation") - pressed) / 1000


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--url")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright
    proc, url = (None, args.url) if args.url else start_server()
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            first_paint(browser, url, False)                            # warm the server
            first_paint(browser, f"{url}/cost", True)
            for what, address, chart in (("default page (Start here)", url, False),
                                         ("Cost page (a shared link)", f"{url}/cost", True)):
                title, painted = first_paint(browser, address, chart)
                print(f"{f'{what}: title':<44}{title:7.2f} s")
                print(f"{f'{what}: first meaningful paint':<44}{painted:7.2f} s  (target <= 3 s)"
                      f"{'  ok' if painted <= 3 else '  OVER TARGET'}")
            page = browser.new_context(viewport={"width": 1600, "height": 1000}).new_page()
            for name in PAGES:
                page.goto(f"{url}/{name}")
                page.get_by_test_id("stSidebar").get_by_role("slider").first.wait_for(timeout=120_000)
                page.wait_for_function(SETTLED, timeout=120_000, polling=50)
                times = sorted(control_update(page) for _ in range(3))
                print(f"{f'{name}: change d (median of 3)':<44}{times[1]:7.2f} s  (target <= 1 s)"
                      f"{'  ok' if times[1] <= 1 else '  OVER TARGET'}")
            browser.close()
    finally:
        if proc:
            proc.terminate()


if __name__ == "__main__":
    main()
