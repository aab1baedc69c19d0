"""Cost breakdown: the symbolic terms with their numbers, time by category, communication, memory."""
import pandas as pd
import streamlit as st

from explorer.facade import CATEGORY_LABELS, COMM_LABELS, GIB, readable_comm_table
from explorer.facade import CATEGORIES
from explorer.facade import EQ3_FLOPS_CONVENTION, MEGATRON_FLOPS_CONVENTION
from explorer.facade import DENSE_ONLY_TEXTBOOK, TEXTBOOK_FORMULAS, glossary
from explorer.facade import BUBBLE_MEANING, IDLE_TO_IDEAL
from app_pages import compute as C
from app_pages import attention_curve
from app_pages import sensitivity_view
from app_pages import state as S
from app_pages.classroom import metric_bar
from app_pages.text import plain

# LaTeX longer than WIDE_FORMULA_CHARS may render wider than the formula column (measured in Chromium at
# 1280 px: 138 characters of T_dp-comm drew 914 px in a 675 px column; 292 of T_recompute, mostly
# fractions, fit in 600 px; T_compute of GPT-3 drew 17,000 px): below 1400 px 8 of 11 needed sideways
# scrolling (issue 30). Such a term shows its textbook form first, when it has one, and itself in an
# expander with SCROLL_HINT (display formulas also wrap at their + and = signs: app_pages/classroom.py).
# (A comment, not a string: Streamlit's magic writes a page script's bare strings onto the page.)
WIDE_FORMULA_CHARS = 120
SCROLL_HINT = "Long formula: where it runs past the edge, scroll it sideways (the bar under it) to read all of it."
HYPHEN = r"\text{-}"     # a hyphen inside \mathrm (maths mode draws "-" as a minus sign)

view, error = C.current()
r = view.result
st.title("Cost of one training iteration")
st.caption(f"{plain(view.model.name)} on {plain(view.cluster.name)} · {r.gpus} GPUs · {C.strategy_label(view.strategy)}")
bar = metric_bar()              # sticky: the totals and any refusal stay on screen beside the formulas below
C.show_errors(error, refusal_box=bar)

capacity = view.cluster.device.memory_bytes
peak = r.memory_bytes_per_device["total"]
cols = bar.columns(5)
cols[0].metric("Iteration time", f"{C.sig(r.iteration_time_s)} s")
cols[1].metric("MFU (Eq. 3)", f"{100 * r.mfu:.1f} %", help=EQ3_FLOPS_CONVENTION)
cols[2].metric("TFLOP/s per GPU (Eq. 3)", C.sig(r.tflops_per_gpu), help=EQ3_FLOPS_CONVENTION)   # 3 digits on a projector
cols[3].metric(f"Peak memory (of {capacity / GIB:.0f} GiB)", f"{peak / GIB:.1f} GiB",
               help=f"{100 * peak / capacity:.0f} % of the device's memory (stage {r.extra['peak_memory_stage']})")
cols[4].metric("Micro-batches m", f"{r.micro_batches}")
if r.megatron_mfu is not None:      # what Megatron-LM's and Megatron-Bridge's logs print (issue 26 item 4)
    tokens_per_gpu = view.strategy.global_batch * view.model.seq_len / (r.iteration_time_s * r.gpus)
    megatron = (f"In Megatron-LM's count (what its training log prints): {C.sig(r.megatron_tflops_per_gpu)} TFLOP/s "
                f"per GPU, MFU {100 * r.megatron_mfu:.1f} %; {C.sig(tokens_per_gpu)} tokens/s per GPU")
    # on a projector one line, the conventions on hover (a walk: at 1280x720 the paragraph pushed the chart off)
    conventions = (f"{MEGATRON_FLOPS_CONVENTION}. The figures above: {EQ3_FLOPS_CONVENTION}. Tokens/s per GPU: the "
                   "global batch's tokens over the iteration time and the GPUs, as Megatron-Bridge's performance "
                   "tables list them.")
    if S.classroom():
        st.caption(f"{megatron}.", help=conventions)
    else:
        st.caption(f"{megatron} -- {conventions}")
ev = C.evidence_of(view.model, view.strategy, view.cluster)      # how far the numbers can be trusted (issue 28)
(st.warning if C.weak_evidence(ev) else st.caption)(f"**Evidence:** {plain(C.band_text(ev))}.")
# the runs as a person reads them (model, GPUs, system, precision, publication); their ids in the tooltip
st.caption(f"Nearest validated runs: {plain('; '.join(row['label'] for row in ev['nearest_rows']))} "
           "(each with the model's error on it: + predicted faster than the run was, − slower; Validation page).",
           help="Their ids on the Validation page: " + ", ".join(row["id"] for row in ev["nearest_rows"]))
optimistic = C.mfu_warning(ev, r)   # above what every published run of the regime reached (issue 30 item 6)
if optimistic:
    st.warning(plain(optimistic))
for gap in ev["known_gaps"]:        # a cost the model does not price, with the validated runs that show it
    st.warning(plain(gap))
crowded = C.contention_warning(r)   # its own collectives on one level outlast its iteration (explorer.cost.contention)
if crowded:
    st.warning(plain(crowded))

figs = C.breakdown_figures(view.model, view.strategy, view.cluster)
st.plotly_chart(C.shown(figs["breakdown"]), key="cost_breakdown_chart")
sensitivity_view.show(view)     # the tornado chart: what the iteration time depends on (issue 28)

st.subheader("Symbolic cost, term by term")
sym = C.symbolic(view.model, view.strategy, view.cluster)
st.caption(f"Terms of the most loaded stage (stage {sym.stage}); every symbol is in the glossary below "
           "(g and L are seconds per byte and latency of each machine level).")
with st.expander("What the symbols mean", expanded=S.classroom()):
    st.markdown("\n".join(["| symbol | meaning |", "| --- | --- |"] +
                           [f"| ${tex}$ | {plain(meaning)} |" for tex, meaning in sym.legend]))
latex = sym.latex()
for category in CATEGORIES:
    seconds = r.breakdown_s[category]
    if not seconds and latex[category] == "0":
        continue
    left, right = st.columns([3, 10], vertical_alignment="center")
    left.metric(CATEGORY_LABELS[category], f"{C.sig(seconds)} s",
                help=BUBBLE_MEANING.capitalize() if category == "bubble" else None)
    # a hyphen, not a minus sign (in maths mode '-' is one, even braced: the walk read 'ep − comm')
    term = rf"T_{{\mathrm{{{category.replace('_', HYPHEN)}}}}} = {latex[category]}"
    textbook, source = TEXTBOOK_FORMULAS.get(category, ("", ""))
    if view.model.is_moe and category in DENSE_ONLY_TEXTBOOK:     # a dense layer's form: not an MoE layer's
        textbook = ""
    ratio = (f"; here the {IDLE_TO_IDEAL} (p − 1)/(v m) = "
             f"{(view.strategy.pp - 1) / (view.strategy.chunks * r.micro_batches):.3g} (the bubble's share of "
             f"the iteration: {100 * seconds / r.iteration_time_s:.3g} %)" if category == "bubble" else "")
    if len(latex[category]) > WIDE_FORMULA_CHARS:     # the textbook form first; the long term on demand
        if textbook:
            right.latex(textbook)
            right.caption(f"Textbook form ({source}){ratio}")
        with right.expander(f"The model's term for {CATEGORY_LABELS[category]} ({len(latex[category])} characters)"):
            st.latex(term)
            st.caption(SCROLL_HINT)
    else:
        right.latex(term)
        if textbook:
            right.caption(f"Textbook: ${textbook}$ ({source}){ratio}")
for symbol, definition in sym.definitions_latex().items():
    # only the parameter counts (Psi) are per-device parameters; the stage ends and syncs are seconds
    note = r" \quad \text{(parameters per device)}" if symbol.lstrip("\\").startswith("Psi") else ""
    st.latex(rf"\text{{where }} {symbol} = {definition}" + note)
with st.expander("Total: the whole formula"):
    st.latex(sym.total_latex() + rf" = {C.sig(r.iteration_time_s)}\,\mathrm{{s}}")
    st.caption(SCROLL_HINT)
glossary_box = C.lazy_expander("Glossary: the symbols", S.W_GLOSSARY_TABLE)
if glossary_box.open:
    glossary_box.dataframe(pd.DataFrame(glossary()).drop(columns="latex"), hide_index=True)
attention_curve.show(view)      # the attention kernel's efficiency curve, with its source

st.subheader("Communication by type")
st.plotly_chart(C.shown(figs["comm"]), key="cost_comm_chart")
comm_box = C.lazy_expander("Communication table", S.W_COMM_TABLE)
if comm_box.open:
    comm_box.dataframe(C.table(readable_comm_table(figs["comm_table"])), hide_index=True,
                       column_config={COMM_LABELS["bytes"]: st.column_config.NumberColumn(format="localized")})

st.subheader("Memory per device against capacity")
st.plotly_chart(C.shown(figs["memory"], memory=True), key="cost_memory_chart")
tables_box = C.lazy_expander("Tables: time by category, memory by stage", S.W_COST_TABLES)
if tables_box.open:
    tables_box.dataframe(C.table(figs["breakdown_table"]), hide_index=True)
    tables_box.dataframe(C.table(figs["memory_table"]), hide_index=True)
