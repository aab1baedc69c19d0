"""Bridging DL Explorer: the Streamlit entry script (state, sidebar, share link, page routing)."""
import streamlit as st

from app_pages import share_link, sidebar
from app_pages import state as S

st.set_page_config(page_title="Bridging DL Explorer", layout="wide")
# long formulas scroll sideways instead of being cut off
st.html("<style>.katex-display {overflow-x: auto; overflow-y: hidden; padding: 4px 0;}</style>")
S.init()
share_link.read_once()          # a shared link sets the widgets before they are drawn
sidebar.draw()

EXPLORE = [
    st.Page("app_pages/model.py", title="Model & cluster", url_path="model"),
    st.Page("app_pages/strategy.py", title="Strategy", url_path="strategy"),
    st.Page("app_pages/cost.py", title="Cost breakdown", url_path="cost", default=True),
    st.Page("app_pages/timeline.py", title="Timelines", url_path="timeline"),
    st.Page("app_pages/compare.py", title="Compare", url_path="compare"),
    st.Page("app_pages/export.py", title="Export & share", url_path="export"),
]
# Pages live in app_pages/, not pages/: a directory named pages/ next to app.py makes Streamlit
# run a process's first script run (and every AppTest run) in its old multipage mode, where a
# page URL runs the page file without app.py and widget ids change on the next run.
CHECK = [
    st.Page("app_pages/validation.py", title="Validation", url_path="validation"),
    st.Page("app_pages/search.py", title="Search", url_path="search"),
]

page = st.navigation({"Explore": EXPLORE, "Check": CHECK})
# Explore pages evaluate the sidebar's strategy and show it or the last valid one (LAST_VALID, written
# after the page ran). Check pages evaluate nothing: their address bar names the sidebar's configuration,
# written before the page runs (the Search page may st.stop(); its loads happen in callbacks, before).
checking = page.url_path in {p.url_path for p in CHECK}
if checking:
    share_link.write(st.session_state[S.LAST_VALID], evaluated=False)
page.run()
if not checking:
    share_link.write(st.session_state[S.LAST_VALID])
