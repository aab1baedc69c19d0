"""Bridging DL Explorer: the Streamlit entry script (state, sidebar, share link, page routing)."""
import streamlit as st

from explorer.facade import lessons, lesson_page_path
from explorer.facade import ExplorerError, WorkCancelled, work_budget
from app_pages import budget, classroom, jobs, share_link, sidebar
from app_pages import state as S
from app_pages.text import plain


def make_pages() -> dict:
    """The app's pages by menu group, made once per session (S.PAGES): each st.Page resolves and checks its file,
    a twentieth of a rerun's CPU when nothing new is computed (docs/benchmarks-classroom.md). Not shared between
    sessions: st.navigation marks the page it returns as the one this run may call."""
    # A first-time visitor lands on Start here; a shared configuration without a page (older links) on Cost
    # (switched to below: every page keeps its own address, so a link to /cost always finds it).
    start = [st.Page("app_pages/start.py", title="Start here", url_path="start-here", default=True)]
    # Streamlit serves the default page at "/" only (streamlit/navigation/page.py: a default Page's url_path is "",
    # and runtime/pages_manager.py finds a typed address by url_path), so /start showed "Page not found" first.
    # start_address, hidden from the menu, is that address: it opens the Start page ("start-here" above only
    # keeps the default page's reserved name off "start").
    start_address = st.Page(lambda: None, title="Start here", url_path="start", visibility="hidden")
    learn = [st.Page(f"app_pages/learn_{lesson.number}_{lesson.slug.replace('-', '_')}.py",
                     title=f"{lesson.number}. {lesson.title.split(':')[0]}", url_path=lesson_page_path(lesson))
             for lesson in lessons.LESSONS]
    explore = [
        st.Page("app_pages/model.py", title="Model & cluster", url_path="model"),
        st.Page("app_pages/strategy.py", title="Strategy", url_path="strategy"),
        st.Page("app_pages/cost.py", title="Cost breakdown", url_path="cost"),
        st.Page("app_pages/timeline.py", title="Timelines", url_path="timeline"),
        st.Page("app_pages/compare.py", title="Compare", url_path="compare"),
        st.Page("app_pages/export.py", title="Export & share", url_path="export"),
    ]
    # Pages live in app_pages/, not pages/: a directory named pages/ next to app.py makes Streamlit
    # run a process's first script run (and every AppTest run) in its old multipage mode, where a
    # page URL runs the page file without app.py and widget ids change on the next run.
    check = [
        st.Page("app_pages/validation.py", title="Validation", url_path="validation"),
        st.Page("app_pages/search.py", title="Search", url_path="search"),
        st.Page("app_pages/measured.py", title="Measured", url_path="measured"),
    ]
    return {"Start": start + [start_address], "Learn": learn, "Explore": explore, "Check": check}


def run(run_budget) -> None:
    """One run of the app: share link, menu, sidebar, the page, the address bar (under app.py's work budget)."""
    classroom.read_param_once()     # ?classroom=1
    share_link.read_once()          # a shared link sets the widgets before they are drawn
    classroom.inject_css()

    if S.PAGES not in st.session_state:
        st.session_state[S.PAGES] = make_pages()
    groups = st.session_state[S.PAGES]
    (start_page, start_address), explore, check = groups["Start"], groups["Explore"], groups["Check"]
    teaching_pages = groups["Start"][:1] + groups["Learn"]

    # classroom mode: the menu goes to the top bar, so the sidebar holds only the lesson's controls
    page = st.navigation(groups, position="top" if S.classroom() else "sidebar")
    opened_link = st.session_state.pop(S.OPENED_LINK, False)
    if page is start_address or (opened_link and page is start_page):
        st.switch_page(explore[2] if opened_link else start_page)   # a shared configuration at the root: its cost
    teaching = any(page is p for p in teaching_pages)
    # Explore pages evaluate the sidebar's strategy and show it or the last valid one (LAST_VALID, written
    # after the page ran). Check pages evaluate nothing: their address bar names the sidebar's configuration,
    # written before the page runs (the Search page may st.stop(); its loads happen in callbacks, before).
    checking = page.url_path in {p.url_path for p in check}
    classroom.draw_toggle()
    if teaching:                    # lessons bring their own example; the explorer's strategy is kept
        S.keep_strategy_widgets()
        if not S.classroom():
            sidebar.draw_summary()
    else:
        sidebar.draw()
    if checking:
        share_link.write(st.session_state[S.LAST_VALID], evaluated=False)
    run_budget.what = f"the {page.title} page"
    try:
        page.run()
    except WorkCancelled:
        st.stop()                   # nobody is waiting for this run: Streamlit handles the pending request
    except ExplorerError as err:    # a page that did not catch a refusal: the message, never a traceback
        st.error(plain(str(err)))
    if teaching:
        classroom.sync_param()
    elif not checking:
        share_link.write(st.session_state[S.LAST_VALID])


st.set_page_config(page_title="Bridging DL Explorer", layout="wide")
S.init()
# The whole run's library work under a budget (explorer.limits.work_budget): a session that leaves, or asks for
# a newer run, stops its work within one loop step (a link's first evaluation included); an action that needs
# more than the budget says so. The first compile of a new model structure runs in the worker pool
# (app_pages/jobs.py: compiles_in_pool).
with work_budget("this page", should_stop=budget.stop_requested) as run_budget, jobs.compiles_in_pool():
    try:
        run(run_budget)
    except WorkCancelled:
        st.stop()                   # nobody is waiting for this run (a link's first evaluation included)
