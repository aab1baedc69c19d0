"""Cost breakdown: the symbolic terms with their numbers, time by category, communication, memory."""
import pandas as pd
import streamlit as st

from explorer.facade import CATEGORY_LABELS, GIB
from explorer.facade import CATEGORIES
from explorer.facade import TEXTBOOK_FORMULAS, glossary, symbol_legend
from app_pages import compute as C
from app_pages import attention_curve
from app_pages import sensitivity_view
from app_pages import state as S
from app_pages.text import plain

# LaTeX longer than WIDE_FORMULA_CHARS may render wider than the formula column (measured in Chromium at
# 1280 px: 138 characters of T_dp-comm drew 914 px in a 675 px column; 292 of T_recompute, mostly
# fractions, fit in 600 px): such a formula gets SCROLL_HINT, worded to hold either way. (A comment, not
# a string: Streamlit's magic writes a page script's bare strings onto the page.)
WIDE_FORMULA_CHARS = 120
SCROLL_HINT = "Long formula: where it runs past the edge, scroll it sideways (the bar under it) to read all of it."

view, error = C.current()
C.show_errors(error)
r = view.result
st.title("Cost of one training iteration")
st.caption(f"{plain(view.model.name)} on {plain(view.cluster.name)} · {r.gpus} GPUs · {C.strategy_label(view.strategy)}")

capacity = view.cluster.device.memory_bytes
peak = r.memory_bytes_per_device["total"]
cols = st.columns(5)
digits = 3 if S.classroom() else 4          # classroom mode: fewer decimals
cols[0].metric("Iteration time", f"{r.iteration_time_s:.{digits}g} s")
cols[1].metric("MFU", f"{100 * r.mfu:.1f} %")
cols[2].metric("TFLOP/s per GPU", f"{r.tflops_per_gpu:.1f}")
cols[3].metric(f"Peak memory (of {capacity / GIB:.0f} GiB)", f"{peak / GIB:.1f} GiB",
               help=f"{100 * peak / capacity:.0f} % of the device's memory (stage {r.extra['peak_memory_stage']})")
cols[4].metric("Micro-batches m", f"{r.micro_batches}")
ev = C.evidence_of(view.model, view.strategy, view.cluster)      # how far the numbers can be trusted (issue 28)
near = ", ".join(f"{row['id']} ({100 * row['error']:+.0f} %)" for row in ev["nearest_rows"])
(st.warning if ev["extrapolating"] else st.caption)(
    f"**Evidence:** {plain(C.band_text(ev))}. Nearest validated runs: {plain(near)} (Validation page).")
optimistic = C.mfu_warning(ev, r)   # above what every published run of the regime reached (issue 30 item 6)
if optimistic:
    st.warning(plain(optimistic))

figs = C.breakdown_figures(view.model, view.strategy, view.cluster)
st.plotly_chart(C.shown(figs["breakdown"]), key="cost_breakdown_chart")
sensitivity_view.show(view)     # the tornado chart: what the iteration time depends on (issue 28)

st.subheader("Symbolic cost, term by term")
sym = C.symbolic(view.model, view.strategy, view.cluster)
st.caption(f"Terms of the most loaded stage (stage {sym.stage}); every symbol is in the glossary below "
           "(g and L are seconds per byte and latency of each machine level).")
with st.expander("What the symbols mean", expanded=S.classroom()):
    st.markdown("\n".join(["| symbol | meaning |", "| --- | --- |"] +
                           [f"| ${tex}$ | {plain(meaning)} |" for tex, meaning in symbol_legend(sym)]))
latex = sym.latex()
for category in CATEGORIES:
    seconds = r.breakdown_s[category]
    if not seconds and latex[category] == "0":
        continue
    left, right = st.columns([1, 5], vertical_alignment="center")
    left.metric(CATEGORY_LABELS[category], f"{seconds:.{digits}g} s")
    right.latex(rf"T_{{\mathrm{{{category.replace('_', '{-}')}}}}} = {latex[category]}")
    if len(latex[category]) > WIDE_FORMULA_CHARS:
        right.caption(SCROLL_HINT)
    if category in TEXTBOOK_FORMULAS:
        textbook, source = TEXTBOOK_FORMULAS[category]
        right.caption(f"Textbook: ${textbook}$ ({source})" + (
            f"; here (p − 1)/(v m) = {(view.strategy.pp - 1) / (view.strategy.chunks * r.micro_batches):.3g}"
            if category == "bubble" else ""))
for symbol, definition in sym.definitions_latex().items():
    st.latex(rf"\text{{where }} {symbol} = {definition} \quad \text{{(parameters per device)}}")
with st.expander("Total: the whole formula"):
    st.latex(sym.total_latex() + rf" = {r.iteration_time_s:.6g}\,\mathrm{{s}}")
    st.caption(SCROLL_HINT)
with st.expander("Glossary: the symbols"):
    st.dataframe(pd.DataFrame(glossary()).drop(columns="latex"), hide_index=True)
attention_curve.show(view)      # the attention kernel's efficiency curve, with its source

st.subheader("Communication by type")
st.plotly_chart(C.shown(figs["comm"]), key="cost_comm_chart")
with st.expander("Communication table"):
    st.dataframe(figs["comm_table"], hide_index=True)

st.subheader("Memory per device against capacity")
st.plotly_chart(C.shown(figs["memory"], memory=True), key="cost_memory_chart")
with st.expander("Tables: time by category, memory by stage"):
    st.dataframe(figs["breakdown_table"], hide_index=True)
    st.dataframe(figs["memory_table"], hide_index=True)
