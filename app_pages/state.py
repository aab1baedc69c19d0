"""Session-state keys (named constants) and the few helpers that write them.

Canonical, non-widget state: MODEL, CLUSTER, LAYER_SPLITS, STAGE_MAP, LAST_VALID,
PINS. Widget keys start with W_. Writing a widget's key is only allowed before
the widget is drawn in a run, so everything that sets a whole strategy runs in
a callback (on_click / on_change) or before the sidebar is drawn.
"""
from __future__ import annotations

import streamlit as st

from explorer.facade import ExplorerError, Strategy, evaluate, load_cluster, load_model, schedule_is_chunked
from explorer.facade import schedule_chunks, schedule_overlaps_sends
from explorer.facade import DEFAULT_CLUSTER, DEFAULT_MODEL, DEFAULT_STRATEGY
from explorer.facade import GRAD_FROM_FRAMEWORK, default_grad_dtype
from explorer.facade import STRATEGY_OPTIONS

MODEL = "model"                  # ModelSpec in use
CLUSTER = "cluster"              # Cluster in use
LAYER_SPLITS = "layer_splits"    # tuple of LayerSplit, () = Megatron over all tp devices
STAGE_MAP = "stage_map"          # tuple of stages per layer, () = even split
PIPELINE_LAYOUT = "pipeline_layout"  # Megatron-LM layout string of the applied strategy, "" = none (read only)
PIPELINE_LAYOUT_TYPED = "pipeline_layout_typed"  # (text as typed, its Megatron-LM layout): the box shows the text back
LAST_VALID = "last_valid"        # compute.View of the last strategy that evaluated
NOTICES = "notices"              # messages to show once at the top of the next page run
CHOICE_MESSAGE = "choice_message"  # why the last per-layer edit was refused (stays until the next edit)
MODEL_MESSAGE = "model_message"  # why the last model/cluster upload or edit was refused
PINS = "pins"                    # list of compute.View pinned on the Compare page (at most MAX_PINS)
SHARE_READ = "share_read"        # True once the URL's share parameters were read this session
DRAG_VERSION = "drag_version"    # kind -> int, bumped to remount a sortables / table widget
DRAG_SHOWN = "drag_shown"        # kind -> the columns the widget is known to show
DRAG_KEYS = "drag_keys"          # kind -> the widget key in use ("stage", "split", "table")
PAGES = "pages"                 # app.py make_pages(): this session's st.Page objects by menu group
WORKER_JOBS = "worker_jobs"     # kind -> explorer.facade.Job: this session's job of that kind in the worker pool
MAX_PINS = 4

# sidebar widgets: the global strategy
W_DP, W_TP, W_PP = "w_dp", "w_tp", "w_pp"
W_MICRO, W_BATCH = "w_micro_batch", "w_global_batch"
W_SCHEDULE, W_CHUNKS, W_ZERO = "w_schedule", "w_chunks", "w_zero"
W_RECOMPUTE, W_SP, W_OVERLAP = "w_recompute", "w_sequence_parallel", "w_overlap_dp"
W_OVERLAP_TP = "w_overlap_tp"   # tensor-parallel communication under the GEMMs (Megatron --tp-comm-overlap)
W_OVERLAP_P2P = "w_overlap_p2p"  # pipeline sends under computation (Megatron --overlap-p2p-communication)
W_OVERLAP_PG = "w_overlap_param_gather"  # ZeRO-1/2's parameter all-gather under the next forward (--overlap-param-gather)
W_ZERO_PREFETCH = "w_zero_prefetch"      # ZeRO-3's gathers under the previous layer's compute
W_DTYPE, W_GRAD_DTYPE = "w_dtype", "w_grad_dtype"   # training dtype (fp8 = TE-style), gradient dtype (E7)
W_FRAMEWORK = "w_framework"      # the framework targeted (its default gradient dtype when W_GRAD_DTYPE says so)
W_CP, W_CP_ALGO = "w_cp", "w_cp_algo"   # context parallelism: degree and algorithm (ring / ulysses)
W_KEEP_GPUS = "w_keep_gpus"      # when t or p moves, d follows so that d·t·p stays the same
W_EP = "w_ep"                    # expert-parallel degree e (drawn for MoE models only; 1 otherwise)
W_WHOLE_EXPERTS = "w_whole_experts"  # True: expert_tp = 1 (experts not split over t; MoE models, t > 1)
# the option table's controls (explorer/strategy/options.py): key "w_" + the option's name (Option.widget_key)
W_CUDA_GRAPHS = "w_cuda_graphs"  # CUDA graph scope (explorer/model/kernels.py): every model's host side
W_MOE_DISPATCHER = "w_moe_dispatcher"  # MoE token dispatcher (drawn for MoE models only; alltoall otherwise)
W_OVERLAP_EP = "w_overlap_ep"    # MoE all-to-alls under the partner pass (MoE models only; off otherwise)
W_FP8_RECIPE = "w_fp8_recipe"    # what Transformer Engine keeps in FP8 (dtype fp8; explorer/hardware/precision.py)
W_ADAM_MOMENTS = "w_adam_moments"  # Adam's moments fp32 or bf16 (Megatron's precision-aware optimizer)
W_RECOMPUTE_MODULES = "w_recompute_modules"  # a list: the modules selective recomputation redoes ([] = core_attn)
GPUS_SHOWN = "gpus_shown"        # d·t·p when the sidebar was last drawn (what "keep" keeps)
GPUS_KEPT = "gpus_kept"          # (GPUs, d) the count "keep" still holds after a t·cp·p that did not divide it left d
STRATEGY_WIDGETS = {W_DP: "dp", W_TP: "tp", W_PP: "pp", W_MICRO: "micro_batch", W_BATCH: "global_batch",
                    W_SCHEDULE: "schedule", W_CHUNKS: "chunks", W_ZERO: "zero", W_RECOMPUTE: "recompute",
                    W_SP: "sequence_parallel", W_OVERLAP: "overlap_dp", W_OVERLAP_TP: "overlap_tp",
                    W_DTYPE: "dtype", W_GRAD_DTYPE: "grad_dtype", W_FRAMEWORK: "framework", W_CP: "cp", W_CP_ALGO: "cp_algo",
                    W_OVERLAP_P2P: "overlap_p2p", W_OVERLAP_PG: "overlap_param_gather",
                    W_ZERO_PREFETCH: "zero_prefetch"}   # the fields outside the option table (option_widgets: the table's)


def option_widgets(moe_only: bool | None = None) -> dict:
    """Session key -> option of the option table's sidebar controls, read from the table when called (a test may
    append a record); `moe_only` True / False: only the options drawn for MoE models only / the others."""
    return {o.widget_key: o for o in STRATEGY_OPTIONS if moe_only is None or o.moe_only == moe_only}


def _widget_value(option, value):
    """A Strategy value as its control holds it (a multi-select holds a list)."""
    return list(value) if option.kind == "modules" else value


def option_values(fields: dict, moe: bool) -> dict:
    """The options' Strategy values as the sidebar's controls hold them, for a strategy of `fields` (the other
    controls' values): an MoE-only option at its default for a dense model, an option that does not apply at its
    default where its record resets it (FP8 recipe without FP8: the control keeps its state for when it is back)."""
    ss = st.session_state
    out = {}
    for key, o in option_widgets().items():
        value = ss.get(key, o.default)
        if (o.moe_only and not moe) or (o.reset_off and not o.applies(fields)):
            value = o.default
        out[o.name] = tuple(value) if o.kind == "modules" else value
    chosen = {**fields, **out}
    for o in option_widgets().values():       # not offered with these choices (EP overlap with 1F1B at p > 1):
        if out[o.name] != o.default and o.blocked(chosen, ss[MODEL]):   # the default; the control keeps its state
            out[o.name] = o.default
    return out
# Model & cluster page
W_MODEL_PRESET, W_MODEL_FILE = "w_model_preset", "w_model_file"
PENDING_MODEL = "pending_model"  # (file name, bytes, longest sequence) of a HuggingFace config awaiting its s
W_UPLOAD_SEQ_LEN = "w_upload_seq_len"   # the training sequence length asked for a HuggingFace config
W_CLUSTER_PRESET, W_CLUSTER_FILE = "w_cluster_preset", "w_cluster_file"
W_DIM_PREFIX = "w_dim_"
W_ATTENTION = W_DIM_PREFIX + "attention"   # standard or flash (re-seeded with the dimensions)
W_GRAPH_COLOUR, W_GRAPH_ALL, W_GRAPH_LAYERS = "w_graph_colour", "w_graph_all", "w_graph_layers"
# Strategy page
W_PRESET = "w_preset"
W_PIPELINE_LAYOUT = "w_pipeline_layout"   # layer counts per virtual stage, or a Megatron-LM layout string
# Timeline page
W_TIMELINE_SCHEDULE = "w_timeline_schedule"
W_TIMELINE_PLAY = "w_timeline_play"
W_MICRO_LAYER, W_MICRO_OP = "w_micro_layer", "w_micro_op"   # W_MICRO_OP + "_" + model family
W_EVENT_TABLES = "w_event_tables"       # the Timelines page's event tables expander is open
# Cost page: its table expanders are open (built only then: app_pages/compute.py lazy_expander)
W_GLOSSARY_TABLE, W_COMM_TABLE, W_COST_TABLES = "w_glossary_table", "w_comm_table", "w_cost_tables"
# Compare page
W_PIN_LABEL = "w_pin_label"
# Export page
W_EXPORT_FIGURE, W_STRATEGY_FILE = "w_export_figure", "w_strategy_file"
W_EXPORT_FRAMEWORK = "w_export_framework"


def init() -> None:
    """Set every canonical key once per session (setdefault)."""
    ss = st.session_state
    if MODEL not in ss:             # not setdefault: its argument would read the preset file on every run
        ss[MODEL] = load_model(DEFAULT_MODEL)
    if CLUSTER not in ss:
        ss[CLUSTER] = load_cluster(DEFAULT_CLUSTER)
    ss.setdefault(LAYER_SPLITS, ())
    ss.setdefault(STAGE_MAP, ())
    ss.setdefault(PIPELINE_LAYOUT, "")
    ss.setdefault(LAST_VALID, None)
    ss.setdefault(NOTICES, [])
    ss.setdefault(CHOICE_MESSAGE, "")
    ss.setdefault(MODEL_MESSAGE, "")
    ss.setdefault(PINS, [])
    ss.setdefault(SHARE_READ, False)
    ss.setdefault(LESSON_LINKS_READ, set())
    ss.setdefault(LESSON_SETTINGS, {})
    ss.setdefault(LESSON_LAST_RUN, {})
    ss.setdefault(DRAG_VERSION, {"stage": 0, "split": 0, "table": 0})
    ss.setdefault(DRAG_SHOWN, {})
    ss.setdefault(DRAG_KEYS, {})
    ss.setdefault(W_GRAD_DTYPE, grad_widget(DEFAULT_STRATEGY))
    for key, name in STRATEGY_WIDGETS.items():
        ss.setdefault(key, getattr(DEFAULT_STRATEGY, name))
    ss.setdefault(W_KEEP_GPUS, True)
    ss.setdefault(W_EP, 1)
    ss.setdefault(W_WHOLE_EXPERTS, False)
    for key, o in option_widgets().items():
        ss.setdefault(key, _widget_value(o, getattr(DEFAULT_STRATEGY, o.name)))


def seed(key: str, value) -> None:
    """Give a widget its value from canonical state when the widget's own key was cleared
    (Streamlit drops the keys of widgets a page did not draw)."""
    if key not in st.session_state:
        st.session_state[key] = value


def notify(message: str) -> None:
    st.session_state[NOTICES].append(message)


WIDGET_MAX = {W_BATCH: 10 ** 7, W_CHUNKS: 1024}     # number_input limits of the sidebar


def grad_widget(strategy) -> str:
    """The Gradients widget's value for a strategy: "framework" where its gradient dtype is its framework's
    default (so that it follows the Framework and Precision widgets), else the dtype chosen."""
    default = default_grad_dtype(strategy.framework, strategy.dtype, strategy.zero)
    return GRAD_FROM_FRAMEWORK if strategy.grad_dtype == default else strategy.grad_dtype


def apply_strategy(strategy) -> None:
    """Put a whole strategy into the sidebar widgets and the per-layer state (callbacks only);
    ExplorerError if a value is beyond what the sidebar's inputs accept."""
    ss = st.session_state
    for key, top in WIDGET_MAX.items():
        value = getattr(strategy, STRATEGY_WIDGETS[key])
        if value > top:
            raise ExplorerError(f"{STRATEGY_WIDGETS[key]} = {value} is more than the app accepts ({top})")
    for key, name in STRATEGY_WIDGETS.items():
        ss[key] = getattr(strategy, name)
    ss[W_GRAD_DTYPE] = grad_widget(strategy)
    ss[W_EP] = strategy.ep
    ss[W_WHOLE_EXPERTS] = strategy.etp != strategy.tp
    for key, o in option_widgets().items():
        ss[key] = _widget_value(o, getattr(strategy, o.name))
    ss[LAYER_SPLITS] = tuple(strategy.layer_splits)
    ss[STAGE_MAP] = tuple(strategy.stage_map)
    ss[PIPELINE_LAYOUT] = strategy.pipeline_layout
    ss[CHOICE_MESSAGE] = ""


def candidate() -> Strategy:
    """The strategy the widgets describe (ExplorerError if it is not a valid Strategy)."""
    ss = st.session_state
    fields = {name: ss[key] for key, name in STRATEGY_WIDGETS.items()}
    fields["global_batch"] = int(fields["global_batch"])
    if not schedule_is_chunked(fields["schedule"]):
        fields["chunks"] = 1
    fields["chunks"] = schedule_chunks(fields["schedule"]) or fields["chunks"]    # DualPipeV: always 2
    if not schedule_overlaps_sends(fields["schedule"]):
        fields["overlap_p2p"] = False          # interleaved only: the toggle keeps its state for when it is back
    moe = ss[MODEL].is_moe                                     # expert parallelism: MoE models only
    fields["ep"] = ss.get(W_EP, 1) if moe else 1
    fields["expert_tp"] = 1 if moe and fields["tp"] > 1 and ss.get(W_WHOLE_EXPERTS, False) else 0
    fields.update(option_values(fields, moe))  # the option table's (the MoE-only ones: their defaults if dense)
    # an applied layout (a share link, a strategy file, an import) holds while p x v still matches its stages
    layout = "" if ss[STAGE_MAP] else ss.get(PIPELINE_LAYOUT, "")
    if layout:
        try:
            return Strategy(**fields, layer_splits=ss[LAYER_SPLITS], pipeline_layout=layout)
        except ExplorerError:
            pass                    # p or v changed since: the even split (or the default uneven layout)
    return Strategy(**fields, layer_splits=ss[LAYER_SPLITS], stage_map=ss[STAGE_MAP])


def ensure_fits(strategy: Strategy):
    ss = st.session_state
    return evaluate(ss[MODEL], strategy, ss[CLUSTER])


def set_model(model, cluster=None, *, fit_memory: bool = False) -> None:
    """Use another model (and cluster); keep the strategy if it still runs, else the fallback; with `fit_memory`
    (another model picked or uploaded, not a dimension edited), also the fallback where the strategy runs out of
    memory and the fallback does not."""
    ss = st.session_state
    ss[MODEL] = model
    if cluster is not None:
        ss[CLUSTER] = cluster
    ss[MODEL_MESSAGE] = ""
    for key in [k for k in ss if str(k).startswith(W_DIM_PREFIX)]:
        del ss[key]                  # re-seeded from the new model on the Model page
    if ss[LAYER_SPLITS] and len(ss[LAYER_SPLITS]) != model.layers or \
            ss[STAGE_MAP] and len(ss[STAGE_MAP]) != model.layers:
        ss[LAYER_SPLITS], ss[STAGE_MAP] = (), ()
        notify(f"Per-layer choices were reset: {model.name} has {model.layers} layers.")
    from explorer.facade import fallback_strategy
    gpus = ss[W_DP] * ss[W_TP] * ss[W_PP] * ss[W_CP]
    try:
        kept = ensure_fits(candidate())
    except ExplorerError as err:
        apply_strategy(fallback_strategy(model, ss[CLUSTER], gpus))
        notify(f"The strategy cannot run {model.name} on {ss[CLUSTER].name} ({err}); "
               "switched to a preset strategy that can.")
        return
    # one that runs but does not fit the device's memory gives way to the model's preset when that one fits (a
    # lecturer's walk: deepseek-v3 kept GPT-3's d 16 t 8 p 8, 187 GiB, where qwen3-30b-a3b, whose heads t 8 does not
    # divide, switched to its expert-parallel preset)
    need, have = kept.memory_bytes_per_device["total"], ss[CLUSTER].device.memory_bytes
    if fit_memory and need > have:
        try:
            preset = fallback_strategy(model, ss[CLUSTER], gpus)
            fits = ensure_fits(preset).memory_bytes_per_device["total"] <= have
        except ExplorerError:
            return
        if fits:
            apply_strategy(preset)
            notify(f"The strategy needs {need / 2 ** 30:.1f} GiB a device for {model.name}, more than "
                   f"{ss[CLUSTER].device.name}'s {have / 2 ** 30:.0f} GiB; switched to a preset strategy that fits.")


# ---- lessons and classroom mode ----------------------------------------------------------
W_CLASSROOM = "w_classroom"          # classroom mode toggle (also ?classroom=1); mirrors CLASSROOM
CLASSROOM = "classroom"              # True: classroom mode, a property of the session (not of a page's widget)
CLASSROOM_READ = "classroom_read"    # True once the URL's classroom parameter was read this session
W_LESSON_PREFIX = "w_lesson_"        # + slug + "_" + control name: a lesson's control
LESSON_LINKS_READ = "lesson_links_read"   # slugs of the lessons whose address setting (?l_pp=8) this session read
LESSON_SETTINGS = "lesson_settings"       # slug -> {control: value}: each lesson's setting, kept while its page is away
LESSON_LAST_RUN = "lesson_last_run"       # slug -> the items of its latest setting that ran (shown when one cannot)
W_LESSON_ANIMATE = "w_lesson_animate"  # + "_" + slug: play the lesson's Gantt step by step
OPENED_LINK = "opened_link"          # True right after a shared configuration was read: it lands on Cost
W_SEARCH_INPUTS = ("w_search_gpus", "w_search_batch", "w_search_cap_gib")   # the Search page's inputs
LESSON_TARGET = "lesson_target"      # explorer page to open after "Open in the explorer" (its callback sets it)


def lesson_key(slug: str, control: str) -> str:
    return f"{W_LESSON_PREFIX}{slug}_{control}"


def classroom() -> bool:
    """Classroom mode: kept in CLASSROOM, which no page switch drops (a widget's key is dropped when a run
    switches pages before drawing it, e.g. after "Open in the explorer")."""
    return bool(st.session_state.get(CLASSROOM, False))


def keep_strategy_widgets() -> None:
    """On a page that does not draw the sidebar's strategy widgets, keep their values: Streamlit
    drops the state of widgets a run did not draw unless it is written in that run."""
    ss = st.session_state
    for key in (*STRATEGY_WIDGETS, W_KEEP_GPUS, W_EP, W_WHOLE_EXPERTS, *option_widgets()):
        if key in ss:
            ss[key] = ss[key]


def load_setup(model, cluster, strategy) -> None:
    """Open a lesson's example in the explorer (callbacks only): model, cluster and strategy."""
    apply_strategy(strategy)
    set_model(model, cluster)


def load_defaults() -> None:
    """The explorer's defaults (GPT-3 175B on 1024 A100s, Narayanan et al.'s strategy) in every page
    (callbacks only): the Start page's "Cost breakdown of GPT-3 175B" whatever the session held before."""
    load_setup(load_model(DEFAULT_MODEL), load_cluster(DEFAULT_CLUSTER), DEFAULT_STRATEGY)
    st.session_state[LESSON_TARGET] = "cost"
# Measured page (issue 13): a reference run on torch.distributed next to the model
MEASURED_RUN = "measured_run"        # dict: the last run made or opened on the Measured page
MEASURED_MESSAGE = "measured_message"  # why the last run or opened file was refused
W_RUN_MODEL, W_RUN_DP, W_RUN_TP, W_RUN_PP = "w_run_model", "w_run_dp", "w_run_tp", "w_run_pp"
W_RUN_MICRO, W_RUN_BATCH, W_RUN_SCHEDULE = "w_run_micro_batch", "w_run_global_batch", "w_run_schedule"
W_RUN_ITERATIONS, W_RUN_CLUSTER, W_RUN_FILE = "w_run_iterations", "w_run_cluster", "w_run_file"
W_RUN_LAYER = "w_run_layer"          # the layer whose micro-step the Measured page draws
W_RUN_NORMALISE = "w_run_normalise"  # Gantt times as % of each side's own iteration
RUN_THIS_MACHINE = "this machine (calibrate now)"   # the W_RUN_CLUSTER choice that calibrates before the run
