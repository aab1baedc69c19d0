"""Classroom mode: the toggle, the ?classroom=1 parameter and the CSS (large type, wrapping numbers)."""
from __future__ import annotations

import streamlit as st

from app_pages import state as S

# Always: metric values and long formulas wrap or scroll instead of being cut off at 1280x720.
BASE_CSS = """<style>
.katex-display {overflow-x: auto; overflow-y: hidden; padding: 4px 0 10px 0;
                scrollbar-width: thin; scrollbar-color: #8a8a8a transparent;}
.katex-display::-webkit-scrollbar {height: 8px;}
.katex-display::-webkit-scrollbar-thumb {background: #8a8a8a; border-radius: 4px;}
[data-testid="stMetricValue"] > div {white-space: normal; overflow-wrap: anywhere; text-overflow: clip;}
[data-testid="stMetricLabel"] p {white-space: normal;}
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


def read_param_once() -> None:
    """?classroom=1 switches classroom mode on for the session (before the toggle is drawn)."""
    ss = st.session_state
    if ss.get(S.CLASSROOM_READ):
        return
    ss[S.CLASSROOM_READ] = True
    if st.query_params.get(PARAM) == "1":
        ss[S.W_CLASSROOM] = True


def draw_toggle() -> None:
    st.sidebar.toggle("Classroom mode", key=S.W_CLASSROOM,
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
