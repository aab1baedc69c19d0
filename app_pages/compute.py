"""The one place pages get numbers from: the current view and bounded caches of library calls.

`current()` builds the strategy from the sidebar and the per-layer state,
evaluates it and remembers it as the last valid view; when the strategy cannot
run it returns the last valid view and the library's message instead.
"""
from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

from explorer.facade import Cluster, ExplorerError, ModelSpec, Strategy, WorkCancelled, evaluate
from explorer.facade import breakdown_bar, comm_figure, memory_figure
from explorer.facade import breakdown_table, comm_table, memory_table
from explorer.facade import attention_curve_figure, graph_figure
from explorer.facade import explanation, symbol_values
from explorer.facade import fallback_strategy, presets_in, timeline_in
from explorer.facade import plan_of, schedule_is_chunked
from explorer.facade import band_text, contention_warning, evidence, mfu_warning, weak_evidence  # noqa: F401  (pages read them here)
from explorer.facade import sensitivity_or_reason
from explorer.facade import MAX_MICRO_BATCHES, classroom_figure, figure_copy, time_unit, wire_figure, zoom_micro_batches
from explorer.facade import SIGNIFICANT, significant_table

from app_pages import jobs, state as S
from app_pages.state import candidate, ensure_fits  # noqa: F401  (pages read them here too)
from app_pages.text import plain, plain_html


@dataclass(frozen=True)
class View:
    """One evaluated configuration: what every page draws."""

    model: object
    cluster: object
    strategy: Strategy
    result: object
    label: str = ""


def sync_layer_state() -> None:
    """Drop a layer->stage map made for another number of stages or layers (saying so)."""
    ss = st.session_state
    stage_map = ss[S.STAGE_MAP]
    if stage_map and (max(stage_map) + 1 != ss[S.W_PP] or len(stage_map) != ss[S.MODEL].layers):
        ss[S.STAGE_MAP] = ()
        S.notify("The custom layer→stage map was reset to an even split: the number of stages changed.")


def current() -> tuple:
    """(View, error message or None); the View is the last valid one when there is an error."""
    ss = st.session_state
    sync_layer_state()
    try:
        with jobs.compile_waits_shown(st.empty()):      # a first compile in the pool says so meanwhile
            strategy = candidate()
            result = ensure_fits(strategy)
    except ExplorerError as err:
        if ss[S.LAST_VALID] is None:        # nothing valid yet this session: show the fallback
            fallback = fallback_strategy(ss[S.MODEL], ss[S.CLUSTER])
            ss[S.LAST_VALID] = View(ss[S.MODEL], ss[S.CLUSTER], fallback, ensure_fits(fallback))
        return ss[S.LAST_VALID], str(err)
    view = View(ss[S.MODEL], ss[S.CLUSTER], strategy, result)
    ss[S.LAST_VALID] = view
    return view, None


def show_errors(error, flag_memory: bool = True, refusal_box=None) -> None:
    """The refusal, inline, above the last valid result (in `refusal_box`, e.g. the sticky metric bar,
    when given); then one-off notices."""
    for message in st.session_state[S.NOTICES]:
        st.info(plain(message))
    st.session_state[S.NOTICES] = []
    if error:
        box = refusal_box or st
        said = str(error).rstrip()
        said += "" if said.endswith((".", "!", "?", ")")) else "."    # a sentence of its own before what follows
        box.error(f"**This combination cannot run:** {plain(said)}  \nShowing the last valid strategy below; "
                 "your settings are kept, change one to continue.")
    view = st.session_state[S.LAST_VALID] if flag_memory else None
    over = memory_problem(view.result, view.cluster) if view is not None else ""
    if over:
        st.warning(f"**Does not fit in memory:** {over}")


# ---- bounded caches of library calls (no widgets inside) -------------------------------

BY_REPR = {ModelSpec: repr, Cluster: repr, Strategy: repr}
# How the caches below key a model, cluster or strategy: by its repr (a frozen dataclass of plain fields, each in its
# repr, floats exactly: the disk cache's key text too, explorer/cost/cold.py), 0.2 ms for the three, where Streamlit's
# own hashing walks every nested field: 3.7 ms for each call of a cached function, a fifth of a page run's CPU when
# 30 sessions each evaluate their own model (issue 31).

SMALL_ENTRIES = 128
# Entries of the caches whose entries are small (an evaluation ~40 KiB, the Cost page's tables and figures, the
# presets; not a layer's micro-steps: ~40 events per tensor-parallel device, up to ~24 MiB at t = 1,024): a class of
# thirty, each on its own model and strategy, visits ~4 strategies each within minutes, and a page opened again
# (Cost, then Timelines, then Cost) should find them. With 16-32 entries every revisit was computed again: 30 sessions
# repeating what they did took 138 ms of serving CPU per action, now 84 ms (benchmarks/bench_load.py --diverse, twice
# on one server; docs/benchmarks-classroom.md).
SMALL_TIMELINE_PASSES = 4_096
# A super-step timeline of at most this many passes (2 m v p) is small: 3.5-4 events per pass (ZB-H1 and DualPipeV
# add weight-gradient passes), ~350 bytes per event with its Gantt and ~120 more for its wire form (gpt3-175b d8 t8
# p8, B = 1536: 3,072 passes, 10,604 events, 3.7 MiB; at 4,096 passes 6.9-7.7 MiB with the wire).
TINY_TIMELINE_PASSES = 1_024
# ... and of at most this many, tiny (~1.9 MiB at most with the wire, at the same bytes per pass): what a student's
# own small model and batch lays out. With 48 entries for every small one, 30 diverse sessions (two timelines each)
# evicted each other's: their second visit laid out a fifth of them again (py-spy, 2026-12-07).
TINY_TIMELINES, SMALL_TIMELINES, LARGE_TIMELINES = 128, 48, 8
# Entries of the tiny, small and large timeline caches: at most 128 x 1.9 MiB = 240 MiB of tiny ones, ~48 x 7.7 MiB =
# 370 MiB of small ones; a large one is up to MAX_TIMELINE_EVENTS events (~200 MiB), so few of them: ~2.2 GiB at
# worst, where 16 entries of any size were ~3 GiB.
TINY_MICROSTEP_DEVICES = 64
# A layer's micro-steps on at most this many tensor-parallel devices are tiny (~40 events each: ~1.5 MiB at 64, 0.7
# MiB pickled) and kept in TINY_MICROSTEPS entries; wider ones (up to ~24 MiB at t = 1,024) in MICROSTEPS: at most
# 128 x 1.5 + 32 x 24 MiB = 0.94 GiB of micro-steps (0.75 GiB with 32 entries of any width before).
TINY_MICROSTEPS, MICROSTEPS = 128, 32

SPINNER = {"symbolic": "Building the formulas of this strategy (the first view of a new structure takes a few seconds)…", "graph": "Drawing the operator graph…", "breakdown_figures": "Computing the cost breakdown…",
           "superstep": "Laying out the super-step timeline…",
           "microstep": "Laying out the micro-steps (the first view of a new layer compiles its operators)…"}
# What the heavy caches say while they compute: Streamlit shows a cached function's spinner only after half a second
# (streamlit/elements/spinner.py DELAY_SECS), so a warm call shows nothing and a first view of a new structure (its
# formulas, compiled functions) says what the page waits for, inside the cache's replay where no other element may be
# drawn (app_pages/jobs.py: compile_waits_shown covers the sidebar strategy's own evaluation).

@st.cache_resource(hash_funcs=BY_REPR, max_entries=32, show_spinner=SPINNER["symbolic"])
def symbolic(model, strategy, cluster):
    """The printed explain() of a strategy (explorer.facade.explanation: its LaTeX and legend), built in the worker
    pool when it is new (app_pages/jobs.py compiles_in_pool; 0.03-1 s of sympy), cached by strategy."""
    return explanation(model, strategy, cluster)


@st.cache_resource(hash_funcs=BY_REPR, max_entries=16, show_spinner=SPINNER["graph"])
def graph(model, strategy, cluster, expanded, colour_by: str):
    the_plan = plan_of(model, strategy, cluster)
    fig = graph_figure(the_plan, symbol_values(model, strategy, cluster), expanded, colour_by)
    return fig.update_layout(title_text=plain_html(fig.layout.title.text or "", limit=400))   # names the model


@st.cache_resource(hash_funcs=BY_REPR, max_entries=SMALL_ENTRIES, show_spinner=False)
def breakdown_chart(model, strategy, cluster):
    """The stacked bar of time by category alone: what the Strategy page draws of breakdown_figures (a drag
    there builds no communication or memory figure, issue 31)."""
    return breakdown_bar({strategy_label(strategy): result_of(model, strategy, cluster)})


@st.cache_resource(hash_funcs=BY_REPR, max_entries=SMALL_ENTRIES, show_spinner=SPINNER["breakdown_figures"])
def breakdown_figures(model, strategy, cluster) -> dict:
    """Tables and figures of the Cost page for one strategy."""
    result = result_of(model, strategy, cluster)
    capacity = cluster.device.memory_bytes
    comm = comm_table(result, cluster.levels[0].name)
    memory = memory_table(result, capacity)
    return {"breakdown_table": breakdown_table(result), "comm_table": comm, "memory_table": memory,
            "breakdown": breakdown_chart(model, strategy, cluster),
            "comm": comm_figure(comm), "memory": memory_figure(memory, capacity)}


@st.cache_resource(hash_funcs=BY_REPR, max_entries=SMALL_ENTRIES, show_spinner=False)
def presets(model, cluster, gpus: int, global_batch: int, micro_batch: int) -> dict:
    """explorer.facade.strategy_presets, built in the worker pool when a worker is free (presets_in: the presets of a
    new model, or of a new number of GPUs, are a dozen or more evaluations with their first compiles), else here."""
    return presets_in(jobs.pool_or_none(), model, cluster, gpus, global_batch, micro_batch)


def strategy_label(s: Strategy) -> str:
    """A short name: 'd16 t8 p8 b1 B1536 1f1b' plus what differs from the defaults."""
    parts = [f"d{s.dp} t{s.tp} p{s.pp} b{s.micro_batch} B{s.global_batch} {s.schedule}"]
    if schedule_is_chunked(s.schedule):
        parts.append(f"v{s.chunks}")
    if s.zero:
        parts.append(f"ZeRO-{s.zero}")
    if s.recompute != "none":
        parts.append(f"rc:{s.recompute}")
    if s.sequence_parallel:
        parts.append("SP")
    if s.cp > 1:
        parts.append(f"cp{s.cp}" + (" ulysses" if s.cp_algo == "ulysses" else ""))
    if s.ep > 1:                    # expert parallelism (MoE): the same d t p with another e is another strategy
        parts.append(f"e{s.ep}")
    if s.layer_splits or s.stage_map:
        parts.append("per-layer")
    return " ".join(parts)


def superstep(model, strategy, cluster, schedule: str) -> dict:
    """Super-step events, their Gantt figure and the agreement with the cost model: from the cache of tiny
    timelines (at most TINY_TIMELINE_PASSES passes, 2 m v p), of small ones (SMALL_TIMELINE_PASSES) or of large
    ones."""
    passes = 2 * strategy.micro_batches * strategy.chunks * strategy.pp
    cache = _tiny_superstep if passes <= TINY_TIMELINE_PASSES else \
        _small_superstep if passes <= SMALL_TIMELINE_PASSES else _large_superstep
    return cache(model, strategy, cluster, schedule)


@st.cache_resource(hash_funcs=BY_REPR, max_entries=TINY_TIMELINES, show_spinner=SPINNER["superstep"])
def _tiny_superstep(model, strategy, cluster, schedule: str) -> dict:
    return _superstep(model, strategy, cluster, schedule)


@st.cache_resource(hash_funcs=BY_REPR, max_entries=SMALL_TIMELINES, show_spinner=SPINNER["superstep"])
def _small_superstep(model, strategy, cluster, schedule: str) -> dict:
    return _superstep(model, strategy, cluster, schedule)


@st.cache_resource(hash_funcs=BY_REPR, max_entries=LARGE_TIMELINES, show_spinner=SPINNER["superstep"])
def _large_superstep(model, strategy, cluster, schedule: str) -> dict:
    return _superstep(model, strategy, cluster, schedule)


def _superstep(model, strategy, cluster, schedule: str) -> dict:
    """explorer.facade.superstep_view, built in the worker pool when a worker is free (timeline_in), else here."""
    return timeline_in(jobs.pool_or_none(), "superstep", model, strategy, cluster, schedule=schedule)


def superstep_or_refusal(model, strategy, cluster, schedule: str) -> tuple:
    """(superstep(...), None), or (None, the library's message) when the timeline is beyond
    explorer/limits.py MAX_TIMELINE_EVENTS (the cost model still answers). superstep()["figure"] is None
    (and "figure_refusal" says why) when the events are more than one Gantt draws (MAX_GANTT_BARS)."""
    try:
        return superstep(model, strategy, cluster, schedule), None
    except WorkCancelled:
        raise                               # the session left or reran: nothing to say (app.py stops the run)
    except ExplorerError as err:
        return None, str(err)


def microstep(model, strategy, cluster, layer: int, op) -> dict:
    """explorer.facade.microstep_view, built in the worker pool when a worker is free (timeline_in), else here;
    from the cache of tiny ones (t <= TINY_MICROSTEP_DEVICES) or of the others."""
    cache = _tiny_microstep if strategy.tp <= TINY_MICROSTEP_DEVICES else _wide_microstep   # a layer's t divides it
    return cache(model, strategy, cluster, layer, op)


@st.cache_resource(hash_funcs=BY_REPR, max_entries=TINY_MICROSTEPS, show_spinner=SPINNER["microstep"])
def _tiny_microstep(model, strategy, cluster, layer: int, op) -> dict:
    return _microstep(model, strategy, cluster, layer, op)


@st.cache_resource(hash_funcs=BY_REPR, max_entries=MICROSTEPS, show_spinner=SPINNER["microstep"])  # t x ~40 events
def _wide_microstep(model, strategy, cluster, layer: int, op) -> dict:
    return _microstep(model, strategy, cluster, layer, op)


def _microstep(model, strategy, cluster, layer: int, op) -> dict:
    return timeline_in(jobs.pool_or_none(), "microstep", model, strategy, cluster, layer=layer, op=op)


@st.cache_resource(hash_funcs=BY_REPR, max_entries=16, show_spinner=False)
def small_superstep(model, strategy, cluster, label: str, legend: bool, x_max_s: float | None = None):
    """The super-step Gantt re-titled and shorter, for side-by-side views (Compare page); with
    x_max_s, its time axis runs from 0 to x_max_s seconds (in the figure's own unit). None when
    the timeline has more bars than one figure draws."""
    sup = superstep(model, strategy, cluster, strategy.schedule)
    fig = sup["figure"]
    if fig is None:
        return None
    small = figure_copy(fig).to_dict()              # the shared figure stays unbuilt (its wire form kept)
    small["layout"].update(title={"text": plain_html(label)}, height=min(small["layout"].get("height") or 300, 420),
                           showlegend=legend)
    if x_max_s:
        _, factor = time_unit(float(sup["events"]["end_s"].max()))
        small["layout"].setdefault("xaxis", {})["range"] = [0, x_max_s * factor]
    return small


SMALL_TABLE_ROWS = 20_000   # larger event tables are written on demand (deferred download), not on every run


@st.cache_resource(hash_funcs=BY_REPR, max_entries=8, show_spinner=False)
def export_csv(model, strategy, cluster) -> dict:
    """CSV bytes of the Export page's tables, built once per strategy. Downloads get bytes, not
    callables: a deferred callable gets a new id on every rerun, and a click that still holds the
    old id fails ("Deferred file ... not found")."""
    from explorer.facade import export as X, layer_choices as lc
    figs = breakdown_figures(model, strategy, cluster)
    tables = {"time_by_category": figs["breakdown_table"], "communication": figs["comm_table"],
              "memory_by_stage": figs["memory_table"],
              "layers": lc.layer_table(strategy.stages(model.layers),
                                       lc.layer_splits(strategy.layer_splits, strategy.tp, model.layers)),
              "microstep_events_layer0": microstep(model, strategy, cluster, 0, None)["events"]}
    sup, _ = superstep_or_refusal(model, strategy, cluster, strategy.schedule)
    if sup is not None and len(sup["events"]) <= SMALL_TABLE_ROWS:
        tables["superstep_events"] = sup["events"]
    return {label: X.table_csv(table) for label, table in tables.items()}


def lazy_expander(label: str, key: str):
    """An expander whose contents a page builds only while it is open (`.open`; Streamlit's lazy expander: a key and
    on_change="rerun", so opening it reruns the page): a closed expander's tables were converted to Arrow and sent on
    every run (the Timelines page's two event tables of up to 500 rows, the Cost page's four), for nobody to see."""
    return st.expander(label, key=key, on_change="rerun")


def shown(fig, memory: bool = False, events=None):
    """The figure as `st.plotly_chart` draws it: as classroom mode shows it (large type, Okabe–Ito colours, at
    most MAX_MICRO_BATCHES micro-batches of a Gantt given its events), else unchanged; in its wire form
    (explorer/charts/wire.py: plotly's JSON without plotly's deep copies)."""
    if S.classroom():
        if events is not None:
            fig = zoom_micro_batches(fig, events, MAX_MICRO_BATCHES)
        fig = classroom_figure(fig, memory=memory)
    return wire_figure(fig)


def digits() -> int:
    """Significant digits of a number on a page: SIGNIFICANT (3) in classroom mode, else 4."""
    return SIGNIFICANT if S.classroom() else 4


def sig(value: float) -> str:
    """A number as pages show it: digits() significant digits, in plain decimals up to 1e6 (no 1.7e+02); below
    1e-12 (seconds, bytes, shares alike) the rounding noise of a difference, e.g. the bubble at p = 1: 0."""
    value = 0.0 if abs(value) < 1e-12 else value
    text = f"{value:.{digits()}g}"
    return f"{float(text):,.{max(0, digits() - len(str(int(abs(float(text))))))}f}" \
        if "e+" in text and abs(value) < 1e6 else text


def table(frame):
    """A table as pages show it: in classroom mode its floats rounded to SIGNIFICANT digits."""
    return significant_table(frame) if S.classroom() else frame


# The columns that name a table's rows (SUMMARY_LABELS of rank and strategy): pinned to the left, so a wide table
# scrolled sideways (the Search and Compare tables at 1280x720 in classroom mode) still says whose numbers they are.
NAME_COLUMNS = ("#", "strategy")
NAME_WIDTHS = {"#": "small", "strategy": "medium"}   # st.column_config widths of the pinned columns


def pinned_names(frame) -> dict:
    """st.dataframe's column_config pinning the NAME_COLUMNS `frame` has, at a bounded width: pinned at its natural
    width a long strategy label took ~620 of 680 px of a 1280x720 classroom table (the full label shows on hover)."""
    return {name: st.column_config.Column(pinned=True, width=NAME_WIDTHS[name])
            for name in NAME_COLUMNS if name in frame.columns}


def memory_problem(result, cluster) -> str:
    """'' when the most loaded device fits in its memory, else one line saying by how much it does not."""
    need, have = result.memory_bytes_per_device["total"], cluster.device.memory_bytes
    if need <= have:
        return ""
    return (f"the most loaded device needs {need / 2 ** 30:.1f} GiB, more than the {have / 2 ** 30:.0f} GiB it has "
            f"(stage {result.extra['peak_memory_stage']}).")


@st.cache_resource(hash_funcs=BY_REPR, max_entries=SMALL_ENTRIES, show_spinner=False)
def result_of(model, strategy, cluster):
    return evaluate(model, strategy, cluster)


@st.cache_resource(hash_funcs=BY_REPR, max_entries=SMALL_ENTRIES, show_spinner=False)
def attention_curve_of(model, strategy, cluster) -> tuple:
    """(figure, caption) of the attention kernel's efficiency curve (app_pages/attention_curve.py), built once per
    strategy, not on every run of the Cost page."""
    return attention_curve_figure(model, strategy, cluster)


@st.cache_resource(hash_funcs=BY_REPR, max_entries=256, show_spinner=False)
def evidence_of(model, strategy, cluster) -> dict:
    """The validated runs nearest to this configuration and their errors (explorer.validation.evidence)."""
    return evidence(model, strategy, cluster)


@st.cache_resource(hash_funcs=BY_REPR, max_entries=64, show_spinner=False)
def sensitivity_of(model, strategy, cluster) -> dict:
    """The iteration time's elasticity to each constant of the cluster file (explorer.validation.sensitivity)."""
    return sensitivity_or_reason(model, strategy, cluster, result_of(model, strategy, cluster))
