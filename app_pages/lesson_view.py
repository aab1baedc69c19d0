"""One lesson page, drawn from explorer.lessons: text and formula, at most three controls, one live
picture, a "predict, then reveal" question, and "Open in the explorer". Page files name their lesson."""
from __future__ import annotations

from dataclasses import replace

import streamlit as st

from explorer.facade import ExplorerError, animated_gantt, classroom_figure, lessons, wire_figure
from explorer.facade import lesson_deck, slide_request
from explorer.facade import LESSON_PARAM_PREFIX, decode_lesson_link, encode_lesson_link
from app_pages import compute as C
from app_pages import jobs as J
from app_pages import share_link
from app_pages import state as S
from app_pages.text import plain

GANTT_LESSONS = ("double-level", "pipeline")      # their picture is a Gantt: it can be played
MEMORY_LESSONS = ("zero", "activations")          # their picture's 'optimizer' is the optimizer state
CLASSROOM_PALETTE = "okabe-ito"                   # classroom_figure's palette: the captions name its colours


def palette() -> str:
    """The palette the lesson's picture is drawn in, which its caption's colour words follow."""
    return CLASSROOM_PALETTE if S.classroom() else "default"


@st.cache_resource(max_entries=64, show_spinner=False)
def computed(slug: str, items: tuple) -> tuple:
    """(Setup, figure, Reveal) of a lesson for one setting (ExplorerError if it cannot run)."""
    lesson, values = lessons.by_slug(slug), dict(items)
    setup = lesson.setup(values)
    return setup, lesson.picture(setup, values), lesson.question(values)


@st.cache_resource(max_entries=64, show_spinner=False)
def caption_of(slug: str, items: tuple, palette_name: str) -> str:
    """The caption of a lesson's picture for one setting, its colours named in `palette_name`."""
    lesson = lessons.by_slug(slug)
    return lesson.caption(computed(slug, items)[0], dict(items), palette_name)


@st.cache_resource(max_entries=16, show_spinner=False)
def shown_figure(slug: str, items: tuple, classroom: bool, animated: bool):
    """The lesson's picture as `st.plotly_chart` draws it (in its wire form, explorer/charts/wire.py)."""
    fig = computed(slug, items)[1]
    if animated:
        fig = animated_gantt(fig)
    return wire_figure(classroom_figure(fig, memory=slug in MEMORY_LESSONS) if classroom else fig)


def setting_text(lesson, values: dict) -> str:
    """'Schedule = 1F1B · p = 4 · m = 8': the lesson's setting in words."""
    return " · ".join(f"{c.label.split(' — ')[0]} = {c.text(values[c.name])}" for c in lesson.controls)


def _slides(lesson, values: dict, setup, reveal, items: tuple) -> None:
    """One click each: the picture as a 1920x1080 slide (PNG, SVG) and the lesson as an offline HTML deck. The
    classroom figure is made on the click (plotly validates and copies it: a page run need not)."""
    picture = computed(lesson.slug, items)[1]

    def fig():
        return classroom_figure(picture, memory=lesson.slug in MEMORY_LESSONS)

    setting = setting_text(lesson, values)
    caption = f"Lesson {lesson.number} · {setting}"
    stem = f"lesson{lesson.number}_{lesson.slug}"
    cols = st.columns(3)
    png, svg = (J.deferred("slide", lambda fmt=fmt: slide_request(fig(), caption, fmt), f"slide_{fmt}")
                for fmt in ("png", "svg"))
    cols[0].download_button("Slide PNG (1920×1080)", png, f"{stem}.png",
                            "image/png", key=f"lesson_png_{lesson.slug}",
                            help="rendered by kaleido with the system Chromium (a few seconds)")
    cols[1].download_button("Slide SVG", svg, f"{stem}.svg", "image/svg+xml",
                            key=f"lesson_svg_{lesson.slug}")
    cols[2].download_button("HTML deck (offline)", lambda: classroom_deck(lesson, values, fig(), reveal, setting),
                            f"{stem}_deck.html", "text/html", key=f"lesson_deck_{lesson.slug}",
                            help="title, idea, formula, the live figure and the question; opens without a network")


def classroom_deck(lesson, values: dict, fig, reveal, setting: str) -> str:
    """The lesson's offline deck around its classroom figure, the caption naming that figure's colours."""
    deck_lesson = replace(lesson, caption=lambda setup_, values_, palette_=CLASSROOM_PALETTE:
                          lesson.caption(setup_, values_, palette_))
    return lesson_deck(deck_lesson, values, fig, reveal, setting)


def _controls(lesson) -> dict:
    """The lesson's controls: in the sidebar in classroom mode (nothing else is there), else in a row."""
    boxes = [st.sidebar] * len(lesson.controls) if S.classroom() else st.columns(len(lesson.controls))
    if S.classroom():
        st.sidebar.markdown(f"**Lesson {lesson.number}**")
    values = {}
    kept = st.session_state[S.LESSON_SETTINGS].setdefault(lesson.slug, {})
    for box, control in zip(boxes, lesson.controls):
        key = S.lesson_key(lesson.slug, control.name)
        S.seed(key, kept.get(control.name, control.default))    # Streamlit drops a radio's key while its page is away
        values[control.name] = box.radio(control.label, control.options, key=key, format_func=control.text,
                                         horizontal=True, help=control.help or None)
    kept.update(values)
    return values


def _read_link(lesson) -> None:
    """Once per lesson and session, before its controls are drawn: the setting the address gives them
    (?l_pp=8&l_micro_batches=4, explorer/lessons/links.py); a value that is not an option is named and the default
    kept."""
    ss = st.session_state
    if lesson.slug in ss[S.LESSON_LINKS_READ]:
        return
    ss[S.LESSON_LINKS_READ].add(lesson.slug)
    values, messages = decode_lesson_link(lesson, st.query_params.to_dict())
    for name, value in values.items():
        ss[S.lesson_key(lesson.slug, name)] = value
    for message in messages:
        S.notify(f"Share link: {message}")


def _write_link(lesson, values: dict) -> None:
    """Keep the address bar this lesson at this setting (what a lecturer sends the class)."""
    wanted = encode_lesson_link(lesson, values)
    for key in [k for k in st.query_params if k.startswith(LESSON_PARAM_PREFIX) and k not in wanted]:
        del st.query_params[key]
    for key, text in wanted.items():
        if st.query_params.get_all(key) != [text]:      # ?l_tp=8&l_tp=2 too: one value left, the one applied
            st.query_params[key] = text


def _page_title(url_path: str) -> str:
    """The menu's name of the page at `url_path` (app.py's st.Page objects, S.PAGES): 'timeline' -> 'Timelines'."""
    pages = [page for group in st.session_state.get(S.PAGES, {}).values() for page in group]
    return next((page.title for page in pages if page.url_path == url_path), url_path)


def _open(slug: str, items: tuple) -> None:
    """Callback of "Open in the explorer": the lesson's model, cluster and strategy everywhere."""
    lesson = lessons.by_slug(slug)
    setup = lesson.setup(dict(items))
    S.load_setup(setup.model, setup.cluster, setup.strategy)
    if setup.schedule_drawn == "zb-h1":
        st.session_state[S.W_TIMELINE_SCHEDULE] = "zb-h1"
    if setup.search:
        gpus, batch, cap_gib = setup.search
        for key, value in zip(S.W_SEARCH_INPUTS, (gpus, batch, float(cap_gib))):   # the cap input is a float
            st.session_state[key] = value
    st.session_state[S.LESSON_TARGET] = setup.page
    S.notify(f"Lesson {lesson.number}'s example: {setup.model.name} on {setup.cluster.name}, "
             f"{C.strategy_label(setup.strategy)}.")


def render(slug: str) -> None:
    lesson = lessons.by_slug(slug)
    target = st.session_state.pop(S.LESSON_TARGET, None)
    if target:                  # "Open in the explorer" was clicked: go before the notices are shown here
        st.switch_page(f"app_pages/{target}.py")
    _read_link(lesson)                          # ?l_pp=8: before the notices are shown and the controls drawn
    C.show_errors(None, flag_memory=False)      # the explorer's strategy is not on this page
    st.title(f"Lesson {lesson.number}: {lesson.title}")
    if S.classroom():           # the picture first, within the projector's first screen; the text on demand
        st.latex(lesson.formula_latex)
        with st.expander("The idea, in words"):
            st.markdown(lesson.text)
            st.caption(f"Source: {lesson.source}")
    else:
        st.markdown(lesson.text)
        st.latex(lesson.formula_latex)
        st.caption(f"Source: {lesson.source}")

    values = _controls(lesson)
    _write_link(lesson, values)
    items = tuple(values.items())
    chosen = True               # what is shown below is the setting of the controls (and of the address bar)
    try:
        with st.spinner("Computing this setting…"):    # shows only when not cached (lesson 8's search: ~1 s)
            setup, _, reveal = computed(slug, items)
        st.session_state[S.LESSON_LAST_RUN][slug] = items
    except ExplorerError as err:
        chosen = False
        st.error(f"**This setting cannot run:** {plain(err)}")
        # keep the picture of the latest setting that ran, or the lesson's own (a walk: interleaved with p = 8
        # emptied the page); everything below is that setting's, the address keeps the one chosen
        last = st.session_state[S.LESSON_LAST_RUN].get(slug)
        items = last or tuple((c.name, c.default) for c in lesson.controls)
        values = dict(items)
        try:
            setup, _, reveal = computed(slug, items)
        except ExplorerError:
            return
        shown = "the latest setting that runs" if last else "the lesson's own setting"
        st.caption(f"Below, {shown}: {setting_text(lesson, values)} (the picture, the question, the links and "
                   "\"Open in the explorer\" are of it; the address keeps the setting chosen above).")
    notes = st.container()      # above the picture; in classroom mode below it (the picture first)
    animated = False
    if slug in GANTT_LESSONS:
        animated = st.toggle("Play it step by step", key=f"{S.W_LESSON_ANIMATE}_{slug}",
                             help="▶ plays the schedule; the slider goes to any moment.")
    st.plotly_chart(shown_figure(slug, items, S.classroom(), animated), key=f"lesson_{slug}_chart")
    st.caption(caption_of(slug, items, palette()))
    with st.container() if S.classroom() else notes:
        if setup.note:
            st.info(setup.note)
        over = C.memory_problem(C.result_of(setup.model, setup.strategy, setup.cluster), setup.cluster)
        if over:
            st.warning(f"**This example does not fit in memory:** {over}")

    ask, act = st.columns([3, 2])
    ask.markdown(f"**{reveal.question}**")
    with ask.expander("Reveal the model's answer"):
        left, right = st.columns(2)
        left.metric("Answer", reveal.answer_text)
        if reveal.now_text:
            right.metric(reveal.now_label.capitalize(), reveal.now_text)
        st.caption(reveal.explanation)
    act.button("Open in the explorer", key=f"lesson_open_{slug}", on_click=_open, args=(slug, items),
               type="primary", help=f"loads this example into every page and opens the {_page_title(setup.page)} page")
    with st.expander("Slides: this picture at 1920×1080, the lesson as an offline deck"):
        _slides(lesson, values, setup, reveal, items)
    with act.expander("Share links: this lesson, this example"):  # closed: lesson 8's example is its answer
        st.caption("This lesson at this setting (the address bar holds it too):" if chosen else
                   "This lesson at the setting shown (the address bar holds the one chosen):")                # (the search's winner)
        st.code(share_link.here(encode_lesson_link(lesson, values)), language=None, wrap_lines=True)
        st.caption(f"The example on the explorer's {_page_title(setup.page)} page:")
        st.code(share_link.link_to(setup.page, setup.model, setup.cluster, setup.strategy), language=None,
                wrap_lines=True)
