"""Export & share: charts as PNG/SVG/HTML, tables as CSV, strategy JSON, formulas LaTeX, a share link."""
import streamlit as st

from explorer.facade import ExplorerError
from explorer.facade import export as X
from explorer.facade import CONFIG_FRAMEWORKS, CONFIG_LANGUAGE, CONFIG_SUFFIX, CONFIG_TITLES, framework_config
from explorer.facade import framework_notes, strategy_from_framework_config
from explorer.facade import classroom_figure, image_request, slide_request, strategy_from_upload
from app_pages import compute as C
from app_pages import jobs as J
from app_pages import share_link
from app_pages import state as S
from app_pages.text import plain

ss = st.session_state
W_CONFIG_FILE = "w_framework_config_file"


def _import_strategy():
    upload = ss.get(S.W_STRATEGY_FILE)
    if upload is None:
        return
    try:
        strategy = strategy_from_upload(upload.name, upload.getvalue())
        C.ensure_fits(strategy)
        S.apply_strategy(strategy)
    except ExplorerError as err:
        ss[S.MODEL_MESSAGE] = f"Strategy file refused: {err}"
        return
    ss[S.MODEL_MESSAGE] = ""
    S.notify(f"Loaded the strategy from {upload.name}.")


def _import_framework_config():
    """A Megatron-LM, Megatron-Bridge, DeepSpeed or torchtitan config back into the strategy (parsed, never run)."""
    upload = ss.get(W_CONFIG_FILE)
    if upload is None:
        return
    try:
        imported = strategy_from_framework_config(upload.getvalue(), name=upload.name)
        C.ensure_fits(imported.strategy)
        S.apply_strategy(imported.strategy)
    except ExplorerError as err:
        ss[S.MODEL_MESSAGE] = f"Framework config refused: {err}"
        return
    ss[S.MODEL_MESSAGE] = ""
    S.notify(f"Loaded the strategy of the {imported.framework} config {upload.name} (the model is kept).")


view, error = C.current()
C.show_errors(error)
m, s, c, r = view.model, view.strategy, view.cluster, view.result
st.title("Export & share")
name = f"{m.name}_d{s.dp}t{s.tp}p{s.pp}"

st.subheader("Share link")
st.caption("Opens this model, cluster and strategy (the address bar holds the same link).")
st.code(share_link.link(view), language=None, wrap_lines=True)

figs = C.breakdown_figures(m, s, c)
sup, refusal = C.superstep_or_refusal(m, s, c, s.schedule)
micro = C.microstep(m, s, c, 0, None)
charts = {"time by category": figs["breakdown"], "communication by type": figs["comm"],
          "memory vs capacity": figs["memory"], "operator graph": C.graph(m, s, c, (), "stage"),
          "super-step Gantt": sup["figure"] if sup else None, "micro-step Gantt (layer 0)": micro["figure"]}
if sup is None:
    st.caption(f"No super-step Gantt or events to export: {plain(refusal)}")
elif sup["figure"] is None:
    st.caption(f"No super-step Gantt to export: {plain(sup['figure_refusal'])}")
charts = {label: fig for label, fig in charts.items() if fig is not None}
st.subheader("Charts")
chart = st.selectbox("Chart", list(charts), key=S.W_EXPORT_FIGURE)
fig, stem = charts[chart], f"{name}_{chart.split(' (')[0].replace(' ', '_')}"
cols = st.columns(3)
# Downloads never rerun the page (on_click="ignore"): a rerun gives every deferred (callable) download
# a new id, and a second click that still holds the old id fails. Images stay deferred (kaleido takes
# seconds, in a worker process: app_pages/jobs.py); everything small is passed as bytes.
png, svg = (J.deferred("image", lambda fmt=fmt: image_request(fig, fmt), fmt) for fmt in ("png", "svg"))
cols[0].download_button("PNG", png, f"{stem}.png", "image/png",
                        help="rendered by kaleido with the system Chromium (a few seconds)", on_click="ignore",
                        key="export_png")
cols[1].download_button("SVG", svg, f"{stem}.svg", "image/svg+xml",
                        on_click="ignore", key="export_svg")
cols[2].download_button("HTML (works offline)", lambda: X.figure_html(fig), f"{stem}.html", "text/html",
                        on_click="ignore", key="export_html")
slide_caption = f"{m.name} on {c.name} · {C.strategy_label(s)}"
st.download_button("Slide PNG (1920×1080, caption, classroom colours)",
                   J.deferred("slide", lambda: slide_request(classroom_figure(fig, memory=chart.startswith("memory")),
                                                      slide_caption, "png")),
                   f"{stem}_slide.png", "image/png", key="export_slide_png", on_click="ignore",
                   help="16:9 at slide resolution, text ≥ 24 px (a few seconds)")

st.subheader("Tables (CSV)")
cols = st.columns(3)
tables = C.export_csv(m, s, c)
if sup is not None and "superstep_events" not in tables:     # a large table: written when clicked
    tables["superstep_events"] = lambda events=sup["events"]: X.table_csv(events)
for i, (label, data) in enumerate(tables.items()):
    cols[i % 3].download_button(f"{label}.csv", data, f"{name}_{label}.csv", "text/csv",
                                key=f"export_csv_{label}", on_click="ignore")

st.subheader("Strategy and formulas")
cols = st.columns(3)
cols[0].download_button("Strategy (JSON)", X.strategy_json(s), f"{name}_strategy.json", "application/json",
                        on_click="ignore", key="export_strategy_json")
cols[1].download_button("Formulas (LaTeX)", X.formulas_latex(C.symbolic(m, s, c), r.breakdown_s,
                                                             f"{m.name} on {c.name}: {C.strategy_label(s)}"),
                        f"{name}_formulas.tex", "application/x-tex", on_click="ignore", key="export_latex")
cols[2].file_uploader("Load a strategy JSON", type=["json", "yaml", "yml"], key=S.W_STRATEGY_FILE,
                      on_change=_import_strategy)
if ss[S.MODEL_MESSAGE]:
    st.error(plain(ss[S.MODEL_MESSAGE]))

st.subheader("Framework config")
st.caption("The configuration a training framework reads for this model and strategy; a framework that "
           "cannot express the strategy says why.")
targeted = "megatron" if s.framework == "megatron-lm" else s.framework    # the strategy's framework opens first
framework = st.selectbox("Framework", CONFIG_FRAMEWORKS, format_func=CONFIG_TITLES.get, key=S.W_EXPORT_FRAMEWORK,
                         index=CONFIG_FRAMEWORKS.index(targeted) if targeted in CONFIG_FRAMEWORKS else 0)
try:
    config = framework_config(framework, m, s, c)
except ExplorerError as err:
    st.warning(plain(str(err)))
else:
    st.code(config, language=CONFIG_LANGUAGE[framework])
    st.download_button(f"{CONFIG_TITLES[framework].split(' (')[0]} config ({CONFIG_SUFFIX[framework]})", config.encode(),
                       f"{name}_{framework}{CONFIG_SUFFIX[framework]}", "text/plain", on_click="ignore",
                       key="export_framework_config")      # named as the select box names it, not 'megatron-bridge'
    notes = framework_notes(framework, m, s)       # from the exporter itself
    st.markdown(f"**What it expresses:** {plain(notes['expresses'])}")
    st.markdown("**What the framework would do on its own, and how the file pins it to what was costed:**\n"
                + "\n".join(f"- {plain(note)}" for note in notes["differences"]))
st.file_uploader("Load a framework config (Megatron-LM .sh, Megatron-Bridge .py, DeepSpeed .json, torchtitan "
                 ".toml): its strategy replaces this one", type=["sh", "txt", "py", "json", "toml"],
                 key=W_CONFIG_FILE, on_change=_import_framework_config)
