"""Classroom mode: the toggle, the ?classroom=1 parameter and the CSS (large type, wrapping numbers)."""
from __future__ import annotations

import streamlit as st

from app_pages import state as S

# Always: metric values and long formulas wrap or scroll instead of being cut off at 1280x720 (a display
# formula wraps between KaTeX's .base boxes, at its + and = signs; one longer than a line scrolls sideways);
# the metric bar (METRIC_BAR) sticks under the header while the page scrolls (its wrapper, Streamlit's
# stLayoutWrapper, is the element as tall as the bar: sticky moves within its parent, the page's block);
# page links', the sidebar menu's and buttons' labels wrap onto a second line instead of ending in an ellipsis (Streamlit sets them
# nowrap with text-overflow: ellipsis: at 1280x720 in classroom mode the Start page's links and the Compare
# page's pin button were cut; tests/test_browser_projector.py checks every page it visits); a select box's value (an
# <input>, which cannot wrap) gets the 8 px its right padding kept beside the box's arrow button: 'interleaved' was
# cut by 4 px in a half-width sidebar column at 1920x1080 (classroom mode stacks those columns: sidebar._pair).
BASE_CSS = """<style>
.katex-display {overflow-x: auto; overflow-y: hidden; padding: 4px 0 10px 0;
                scrollbar-width: thin; scrollbar-color: #8a8a8a transparent;}
.katex-display::-webkit-scrollbar {height: 8px;}
.katex-display::-webkit-scrollbar-thumb {background: #8a8a8a; border-radius: 4px;}
[data-testid="stMetricValue"] > div {white-space: normal; overflow-wrap: anywhere; text-overflow: clip;}
[data-testid="stMetricLabel"] p {white-space: normal;}
.katex-display > .katex, .katex-display > .katex > .katex-html {white-space: normal;}
.katex-display > .katex > .katex-html > .base {margin: 0.15em 0;}
[data-testid="stLayoutWrapper"]:has(> .st-key-metric_bar) {position: sticky; top: 3.75rem; z-index: 990;}
.st-key-metric_bar {background-color: rgb(255, 255, 255); border-bottom: 1px solid #ddd; padding-bottom: 0.25rem;}
.st-key-metric_bar [data-testid="stMetricValue"] {font-size: 1.5rem;}
[data-testid="stPageLink-NavLink"], [data-testid="stSidebarNavLink"] {height: auto;}
[data-testid="stPageLink-NavLink"] > span, [data-testid="stPageLink-NavLink"] [data-testid="stMarkdownContainer"],
[data-testid="stPageLink-NavLink"] p, [data-testid^="stBaseButton"] [data-testid="stMarkdownContainer"],
[data-testid^="stBaseButton"] p, [data-testid="stSidebarNavLink"] span, [data-testid="stSidebarNavLink"] p,
[data-testid="stSidebarNavLink"] [data-testid="stMarkdownContainer"]
  {white-space: normal; overflow: visible; text-overflow: clip; height: auto; min-width: 0;}
input[role="combobox"] {padding-right: 0;}
</style>"""
# Classroom mode: Streamlit sizes type in rem, so a larger root size enlarges everything at once;
# 20 px body text is readable from the back of a room on a 1280x720 projector.
CLASSROOM_CSS = """<style>
html {font-size: 20px;}
h1 {font-size: 1.8rem !important; padding-top: 0 !important;}
.block-container {padding-top: 3.5rem !important;}
.stMarkdown p, .stMarkdown li {font-size: 1.1rem; line-height: 1.45;}
[data-testid="stMetricValue"] {font-size: 1.9rem;}
.katex {font-size: 1.25em;}
</style>"""
PARAM = "classroom"
METRIC_BAR = "metric_bar"      # the key of the sticky metric bar (Streamlit gives it the class st-key-metric_bar)


def metric_bar():
    """A container that stays at the top of the screen while the page scrolls (the Strategy page's drag
    areas, the Cost page's formulas): the iteration time, memory, MFU and any refusal, beside the hands."""
    return st.container(key=METRIC_BAR)


def read_param_once() -> None:
    """?classroom=1 switches classroom mode on for the session (before the toggle is drawn)."""
    ss = st.session_state
    if ss.get(S.CLASSROOM_READ):
        return
    ss[S.CLASSROOM_READ] = True
    if st.query_params.get(PARAM) == "1":
        ss[S.CLASSROOM] = True


def _toggled() -> None:
    st.session_state[S.CLASSROOM] = bool(st.session_state[S.W_CLASSROOM])


def draw_toggle() -> None:
    """The toggle shows the session's mode (written before it is drawn, on every page) and sets it."""
    st.session_state[S.W_CLASSROOM] = S.classroom()
    st.sidebar.toggle("Classroom mode", key=S.W_CLASSROOM, on_change=_toggled,
                      help="Large type, colour-blind-safe colours, fewer decimals, at most 32 micro-batches per "
                           "Gantt, and only the lesson's controls in the sidebar. Also ?classroom=1 in the address.")


def inject_css() -> None:
    st.html(BASE_CSS + (CLASSROOM_CSS if S.classroom() else ""))


def param() -> dict:
    """The query parameter to keep in the address bar."""
    return {PARAM: "1"} if S.classroom() else {}


def sync_param() -> None:
    """On pages that do not write a share link: keep ?classroom=1 in step with the toggle."""
    if S.classroom() and st.query_params.get(PARAM) != "1":
        st.query_params[PARAM] = "1"
    elif not S.classroom() and PARAM in st.query_params:
        del st.query_params[PARAM]
