"""Search: the fastest strategies for the current model and cluster, and the time/memory trade-off.

Selecting a point of the Pareto scatter (or a row of the table) loads that
strategy into the sidebar and the per-layer editor, so every page shows it.
"""
import pandas as pd
import streamlit as st

from explorer.facade import CONFIG_FRAMEWORKS, CONFIG_TITLES, MAX_DEVICES, ExplorerError
from explorer.facade import SUMMARY_LABELS, breakdown_bar, readable_columns
from explorer.facade import search_request, search_result_from_dict
from explorer.facade import pareto_figure
from explorer.facade import MEMORY_HEADROOM, holds_words, robustness
from explorer.facade import GIB, search_label as label, search_rows as rows
from explorer.facade import EQ3_FLOPS_CONVENTION, MEGATRON_FLOPS_CONVENTION, MEGATRON_MFU_COLUMN
from app_pages import jobs as J
from app_pages import state as S
from app_pages.text import plain
from app_pages.compute import contention_warning, evidence_of, mfu_warning, show_errors
from app_pages.compute import shown, table as shown_table     # classroom mode: palette, 3 significant digits
from app_pages.compute import pinned_names                       # the strategy column stays when scrolled sideways

SEARCH_SELECTED_STRATEGY = "search_selected_strategy"  # the Strategy last loaded from a search
SEARCH_RESULT = "search_result"          # dict(model, cluster, gpus, global_batch, result) of the last search
W_GPUS, W_BATCH, W_CAP, W_TOP = "w_search_gpus", "w_search_batch", "w_search_cap_gib", "w_search_top"
PROMPT = "Set the number of GPUs and the global batch, then press Search."
W_FRAMEWORK = "w_search_framework"       # ANY_FRAMEWORK, or a framework whose exporter must express the strategies
ANY_FRAMEWORK = "any"                     # a value, not None: a selectbox shows None as no choice at all
W_HEADROOM = "w_search_headroom_pct"     # per cent of the device's memory left free when no cap is given
SEARCH_ROBUSTNESS = "search_robustness"  # (the result it was computed for, explorer.validation.robust's dict)
PARETO_CHART, TOP_TABLE = "search_pareto_chart", "search_top_table"
SEARCH_JOB = "search"                    # the kind of this page's job in the worker pool (app_pages/jobs.py)

ss = st.session_state


def load(strategy) -> None:
    """Put a searched strategy into the editor (sidebar + per-layer state) and every page."""
    found = ss[SEARCH_RESULT]
    ss[S.MODEL], ss[S.CLUSTER] = found["model"], found["cluster"]
    S.apply_strategy(strategy)
    ss[SEARCH_SELECTED_STRATEGY] = strategy
    S.notify(f"Loaded from the search: {label(strategy)}.")


def _on_chart_select() -> None:
    points = ss[PARETO_CHART].selection.points
    if points:
        name, index = points[0]["customdata"]
        load(getattr(ss[SEARCH_RESULT]["result"], name)[int(index)].strategy)


def _on_table_select() -> None:
    picked = ss[TOP_TABLE].selection.rows
    if picked:
        load(ss[SEARCH_RESULT]["result"].top[picked[0]].strategy)


def _start(model, cluster) -> None:
    """Queue the search in the worker pool (it replaces this session's previous search)."""
    cap = ss[W_CAP] * GIB if ss[W_CAP] else None
    meta = dict(model=model, cluster=cluster, gpus=int(ss[W_GPUS]), global_batch=int(ss[W_BATCH]))
    framework = None if ss[W_FRAMEWORK] == ANY_FRAMEWORK else ss[W_FRAMEWORK]
    try:
        # the sidebar's options the search carries (FP8 recipe only where the dtype is FP8, the MoE ones for MoE)
        fields = {name: ss[key] for key, name in S.STRATEGY_WIDGETS.items() if key in ss}
        carried = {o.name for o in S.option_widgets().values() if o.search}
        options = {name: v for name, v in S.option_values(fields, model.is_moe).items() if name in carried}
        J.start(SEARCH_JOB, "search", search_request(model, cluster, int(ss[W_GPUS]), int(ss[W_BATCH]), cap,
                                                     int(ss[W_TOP]), framework, ss.get(S.W_DTYPE, "bf16"),
                                                     ss[W_HEADROOM] / 100, **options),
                meta=meta)
    except ExplorerError as err:
        st.error(plain(err))


def _collect() -> None:
    """A finished search: its result becomes the page's, or its message is shown (once)."""
    job = J.take(SEARCH_JOB)
    if job is None:
        return
    if job.state == "done":
        ss[SEARCH_RESULT] = dict(job.meta, result=search_result_from_dict(job.result))
    elif job.state == "cancelled":
        st.info("The search was cancelled.")
    else:
        st.error(plain(job.error))


model, cluster = ss[S.MODEL], ss[S.CLUSTER]
ss.setdefault(SEARCH_RESULT, None)
ss.setdefault(SEARCH_SELECTED_STRATEGY, None)
S.seed(W_GPUS, ss[S.W_DP] * ss[S.W_TP] * ss[S.W_PP] * ss[S.W_CP])
S.seed(W_BATCH, int(ss[S.W_BATCH]))
S.seed(W_CAP, 0.0)
S.seed(W_HEADROOM, 100 * MEMORY_HEADROOM)
ss.setdefault(SEARCH_ROBUSTNESS, None)
S.seed(W_TOP, 10)
S.seed(W_FRAMEWORK, ANY_FRAMEWORK)
show_errors(None, flag_memory=False)  # one-off notices (e.g. a lesson's example just loaded)
st.title("Search for a strategy")
st.caption(f"{plain(model.name)} on {plain(cluster.name)}: every global choice (d, t, p, b, schedule, ZeRO, recompute, "
           "sequence parallelism, overlap) evaluated in bulk; the fastest refined by dynamic programming "
           f"over per-layer splits and the layer→stage partition. Precision: {ss.get(S.W_DTYPE, 'bf16')} "
           "(the sidebar's).")
cols = st.columns(5)
cols[0].number_input("GPUs N", min_value=1, max_value=MAX_DEVICES, step=1, key=W_GPUS)
cols[1].number_input("Global batch B", min_value=1, max_value=10 ** 6, step=1, key=W_BATCH)
cols[2].number_input("Memory cap per device (GiB)", min_value=0.0, step=1.0, key=W_CAP,
                     help=f"0 = the device's {cluster.device.memory_bytes / GIB:.0f} GiB less the headroom")
cols[3].number_input("Headroom (%)", min_value=0.0, max_value=50.0, step=1.0, key=W_HEADROOM,
                     help="of the device's memory left free when no cap is given: the CUDA context, NCCL's buffers "
                          "and fragmentation, which the model does not count")
cols[4].number_input("Top k", min_value=1, max_value=100, step=1, key=W_TOP)
st.selectbox("Only strategies this framework can run", [ANY_FRAMEWORK] + list(CONFIG_FRAMEWORKS), key=W_FRAMEWORK,
             format_func=lambda f: "any (the cost model's whole space)" if f == ANY_FRAMEWORK else CONFIG_TITLES[f],
             help="its config exporter decides (Export page): e.g. DeepSpeed has no tensor parallelism")
if st.button("Search", type="primary"):
    _start(model, cluster)
_collect()
if J.running(SEARCH_JOB):     # in a worker process: this page (and every other session) stays responsive
    J.progress(SEARCH_JOB, "Searching")

found = ss[SEARCH_RESULT]
if found is None:
    if not J.running(SEARCH_JOB):    # while it runs, its progress bar above says so instead
        st.info(PROMPT)
    st.stop()
result = found["result"]
if (found["model"], found["cluster"]) != (model, cluster):
    st.warning(f"These results are for {plain(found['model'].name)} on {plain(found['cluster'].name)}; "
               "selecting one switches back to that model and cluster.")
st.success(f"{plain(found['model'].name)}, {found['gpus']} GPUs, B = {found['global_batch']}: "
           f"{result.total:,} raw choices, {result.evaluated:,} evaluated, {result.kept:,} within the "
           f"{result.memory_cap_bytes / GIB:.1f} GiB cap, {result.refined} refined, in {result.elapsed_s:.2f} s.")
if not result.top:
    st.warning("No strategy fits within the memory cap.")
    st.stop()
ev = evidence_of(found["model"], result.top[0].strategy, found["cluster"])    # cached across sessions
band = None if ev["extrapolating"] else ev["mean_abs_error"]
st.plotly_chart(shown(pareto_figure(result, band=band)), key=PARETO_CHART, on_select=_on_chart_select,
                selection_mode="points")
st.caption("Select a point to load its strategy into the editor and every page. "
           + (f"Error bars: ±{100 * band:.0f} %, the validated error of {plain(ev['regime'])}."
              if band else f"No error bars: extrapolating ({plain(ev['reason'])})."))
# strategies the model prices without a cost it knows it lacks (explorer.validation.evidence.KNOWN_GAPS): the
# ranking may favour them, so their ranks are named with the gap
gaps, busier, crowded = {}, [], []
for i, c in enumerate(result.top):
    if contention_warning(c.result):     # its own collectives on one level outlast its iteration
        crowded.append(f"#{i + 1}")
    ev_c = evidence_of(found["model"], c.strategy, found["cluster"])
    for gap in ev_c["known_gaps"]:
        gaps.setdefault(gap, []).append(f"#{i + 1}")
    if mfu_warning(ev_c, c.result):      # busier than every published run of its regime: as the Cost page warns
        busier.append(f"#{i + 1}")
for gap, ranks in gaps.items():
    st.warning(f"{', '.join(ranks)}: {plain(gap)}")
if crowded:
    st.warning(f"{', '.join(crowded)}: network oversubscribed. Each one's collectives on one machine level take "
               "longer than its whole iteration, exposed and hidden together: the model hides each under compute as "
               "if it had the link to itself, so these are faster here than they can run (the Cost page says by how "
               "much).")
if busier:
    st.warning(f"{', '.join(busier)}: optimistic? Each keeps the GPUs busier with FLOPs than any published run of "
               f"its regime reached ({plain(ev['regime'])}: at most {100 * (ev['published_hfu_max'] or 0):.0f} %, "
               "recomputation counted); the Cost page shows by how much.")
st.subheader(f"The {len(result.top)} fastest")
top_table = shown_table(readable_columns(pd.DataFrame(rows(result.top))))
st.dataframe(top_table, hide_index=True, key=TOP_TABLE, column_config=pinned_names(top_table),
             on_select=_on_table_select, selection_mode="single-row")
st.caption(f"{SUMMARY_LABELS['mfu_%']}: {EQ3_FLOPS_CONVENTION}. {SUMMARY_LABELS[MEGATRON_MFU_COLUMN]}: "
           f"{MEGATRON_FLOPS_CONVENTION} "
           "(what Megatron-LM's training log prints; empty for a model that is not a causal decoder).")
# Each bar named by its rank in the table above (a strategy's whole name, up to 100 characters, ran past the figure
# at 1280x720), the name in its hover.
st.plotly_chart(shown(breakdown_bar({f"#{i + 1}": c.result for i, c in enumerate(result.top)},
                                    names={f"#{i + 1}": f"#{i + 1} {label(c.strategy)}" for i, c in enumerate(result.top)})),
                key="search_breakdown_chart")
with st.expander("How sure is this ranking?"):
    st.caption("As the fitted efficiencies and latencies vary across the validated error, how often does each "
               "strategy stay faster than the next? (First-order, from each strategy's sensitivities; the "
               "Cost page shows them.)")
    done = ss[SEARCH_ROBUSTNESS]
    if done is None or done[0] is not result:
        if st.button("Compute (a sensitivity per listed strategy)", key="search_robustness_button"):
            try:
                ss[SEARCH_ROBUSTNESS] = done = (result, robustness(found["model"], found["cluster"], result.top))
            except ExplorerError as err:
                st.error(plain(err))
    if done is not None and done[0] is result:
        rob = done[1]
        if "unavailable" in rob:
            st.info(plain(rob["unavailable"]))
        else:
            st.dataframe(pd.DataFrame([{"faster": f"#{p['faster']}", "than": f"#{p['slower']}",
                                        "holds": holds_words(p["holds"])} for p in rob["pairs"]]), hide_index=True)
with st.expander("Pruned choices, by reason"):
    st.dataframe(pd.DataFrame([{"reason": r, "raw choices": n} for r, n in
                               sorted(result.pruned.items(), key=lambda kv: -kv[1])]), hide_index=True)
