"""The sidebar: the global strategy controls, drawn on every page (so they keep their state)."""
from __future__ import annotations

import streamlit as st

from explorer.facade import FRAMEWORK_TITLES, GENERIC_FRAMEWORK, GRAD_FROM_FRAMEWORK, STRATEGY_FRAMEWORKS
from explorer.facade import (CP_ALGOS, DTYPES, GRAD_DTYPES, RECOMPUTE, schedule_is_chunked, schedule_names_for,
                             schedule_overlaps_sends)

from app_pages import state as S
from app_pages.row import side_by_side
from app_pages.text import plain

DEGREES = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024, 2048, 4096)
TP_DEGREES = (1, 2, 4, 8, 16, 32, 64)
PP_DEGREES = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128)
MICRO_BATCHES = (1, 2, 4, 8, 16, 32, 64)
CP_DEGREES = (1, 2, 4, 8, 16, 32)


def _options(base: tuple, key: str) -> list:
    """The usual choices plus the current value (a preset or a link may use another)."""
    return sorted(set(base) | {st.session_state[key]})


def _sp_moved() -> None:
    """Sequence parallelism switched (callback): TP overlap needs it, so it goes off with it."""
    if not st.session_state[S.W_SP]:
        st.session_state[S.W_OVERLAP_TP] = False


def _degree_moved() -> None:
    """t or p moved (callback): d follows so that d·t·p stays the GPU count shown, when asked and
    possible; sequence parallelism goes off at t = 1 (it splits along t)."""
    ss = st.session_state
    t, p = ss[S.W_TP], ss[S.W_PP] * ss[S.W_CP]      # cp multiplies the device count like p
    if t == 1 and ss[S.W_SP]:
        ss[S.W_SP] = ss[S.W_OVERLAP_TP] = False
        S.notify("Sequence parallelism needs t > 1: switched off (switch it on again with t > 1).")
    kept = ss.get(S.GPUS_KEPT)      # a count a move that did not divide it left behind, while d is where it left it
    gpus = kept[0] if kept and kept[1] == ss[S.W_DP] else ss.get(S.GPUS_SHOWN)
    if not ss[S.W_KEEP_GPUS] or not gpus:
        return
    if gpus % (t * p):
        ss[S.GPUS_KEPT] = (gpus, ss[S.W_DP])
        S.notify(f"{gpus} GPUs cannot be split with t·cp·p = {t * p}: d stays {ss[S.W_DP]} for now "
                 f"({ss[S.W_DP] * t * p} GPUs); the count goes back to {gpus} when t·cp·p divides it.")
        return
    ss[S.GPUS_KEPT] = None
    ss[S.W_DP] = gpus // (t * p)


def _ep_control(bar, experts: int, dp: int, tp: int) -> None:
    """e: the experts spread over e of the d data-parallel ranks (e divides d and the experts), or of
    the t·d ranks when the experts are kept whole (expert t = 1, with t > 1)."""
    S.seed(S.W_EP, 1)
    S.seed(S.W_WHOLE_EXPERTS, False)
    whole = tp > 1 and st.session_state[S.W_WHOLE_EXPERTS]
    ranks = tp * dp if whole else dp
    choices = [e for e in range(1, ranks + 1) if ranks % e == 0 and experts % e == 0]
    bar.select_slider("e — expert parallel (of d)", _options(tuple(choices), S.W_EP), key=S.W_EP,
                      help=f"the model's {experts} experts are spread over e devices; their tokens travel by "
                           f"all-to-all (EP all-to-all in the cost); e divides {'t·d' if whole else 'd'} and "
                           "the experts")
    if tp > 1:
        bar.toggle("Whole experts (expert t = 1)", key=S.W_WHOLE_EXPERTS,
                   help="the experts are not split over t (Megatron-Bridge's MoE recipes); e may then take the "
                        "t ranks too; needs sequence parallelism")


# options the sidebar draws in a place of their own (beside the MoE-only ones, drawn with e); every other option of
# the table is drawn after them, in the table's order
PLACED = ("cuda_graphs", "fp8_recipe", "adam_moments", "recompute_modules")


def _fields() -> dict:
    """The strategy fields the controls hold now, as an option's `when` and `blocker` read them."""
    ss = st.session_state
    return {**{name: ss[key] for key, name in S.STRATEGY_WIDGETS.items() if key in ss}, "ep": ss.get(S.W_EP, 1),
            **{o.name: ss[key] for key, o in S.option_widgets().items() if key in ss}}


def draw_option(container, option, fields: dict | None = None) -> None:
    """An option's control from its record (explorer/strategy/options.py): a select box, a toggle or a
    multi-select under its session key, greyed out where the option does not apply (its `when`) or cannot be
    switched on with the other choices (its `blocker`, named in the help); a multi-select offers only the modules
    the model has (its `absent`), a chosen one the model lacks dropped with a notice. `fields`: _fields() read once
    for the whole sidebar (S.init sets every key it reads at the start of each run; a dropped module is written back
    into it here): read for each of the ~10 options it was a twentieth of a page run's Python calls (issue 31)."""
    ss, key = st.session_state, option.widget_key
    S.seed(key, list(option.default) if option.kind == "modules" else option.default)
    fields = _fields() if fields is None else fields
    reason = option.blocked(fields, ss[S.MODEL])
    disabled = not option.applies(fields) or reason is not None
    help_text = option.widget_help + (f". Not available now: {reason}" if reason else "")
    if option.kind == "choice":
        container.selectbox(option.label, option.choices, key=key, disabled=disabled, help=help_text)
    elif option.kind == "bool":
        container.toggle(option.label, key=key, disabled=disabled, help=help_text)
    else:
        offered = option.offered(ss[S.MODEL])
        dropped = [m for m in ss[key] if m not in offered]
        if dropped:
            ss[key] = fields[option.name] = [m for m in ss[key] if m in offered]
            S.notify(f"{option.label} {', '.join(dropped)} dropped: {ss[S.MODEL].name} has no such module.")
        container.multiselect(option.label, offered, key=key, disabled=disabled, help=help_text)


def _moe_host_controls(bar, fields: dict) -> None:
    """The MoE layer's dispatcher and expert-parallel overlap (explorer/cost/moe_terms.py, explorer/model/kernels.py):
    the options drawn for MoE models only."""
    for option in S.option_widgets(moe_only=True).values():
        draw_option(bar, option, fields)


def _pair(bar) -> tuple:
    """Two controls side by side (one block: app_pages/row.py), or, in classroom mode, one under the other: at
    1280x720 its 20 px type left a half-width select box about 63 px, which cut 'delayed', 'selective' and
    'framework' (a select's value is an <input>, which cannot wrap; tests/svg_layout.py clipped_controls checks the
    values)."""
    return (bar, bar) if S.classroom() else side_by_side(bar, 2)


def _framework_title(name: str) -> str:
    """A framework's name as the select box shows it: the generic target shortly (its meaning is in the help)."""
    return "generic" if name == GENERIC_FRAMEWORK else FRAMEWORK_TITLES[name]


def draw() -> None:
    ss = st.session_state
    bar = st.sidebar
    ss[S.GPUS_SHOWN] = ss[S.W_DP] * ss[S.W_TP] * ss[S.W_PP] * ss[S.W_CP]
    formula = "d·t·cp·p" if ss[S.W_CP] > 1 else "d·t·p"
    bar.markdown(f"**{plain(ss[S.MODEL].name)}** on **{plain(ss[S.CLUSTER].name)}**  \n"
                 f"GPUs = {formula} = **{ss[S.GPUS_SHOWN]}**")
    bar.select_slider("d — data parallel", _options(DEGREES, S.W_DP), key=S.W_DP)
    bar.select_slider("t — operator (tensor) parallel", _options(TP_DEGREES, S.W_TP), key=S.W_TP,
                      on_change=_degree_moved)
    bar.select_slider("p — pipeline stages", _options(PP_DEGREES, S.W_PP), key=S.W_PP, on_change=_degree_moved)
    left, right = _pair(bar)
    left.select_slider("cp — context parallel", _options(CP_DEGREES, S.W_CP), key=S.W_CP, on_change=_degree_moved,
                       help="the sequence split over cp devices (long context; 2·cp must divide the sequence)")
    right.selectbox("CP algorithm", CP_ALGOS, key=S.W_CP_ALGO, disabled=ss[S.W_CP] == 1,
                    help="ring: K/V passed around the cp ring, hidden under attention (Megatron-LM CP); "
                         "ulysses: all-to-all on heads (DeepSpeed-Ulysses)")
    fields = None
    if ss[S.MODEL].is_moe:     # expert parallelism: only a model with experts has it
        _ep_control(bar, ss[S.MODEL].experts, ss[S.W_DP], ss[S.W_TP])
        fields = _fields()
        _moe_host_controls(bar, fields)
    bar.toggle("Keep the GPU count fixed", key=S.W_KEEP_GPUS,
               help="when t or p moves, d follows so that d·t·p stays the same (when it divides)")
    bar.select_slider("b — micro-batch (sequences)", _options(MICRO_BATCHES, S.W_MICRO), key=S.W_MICRO)
    bar.number_input("B — global batch (sequences)", min_value=1, max_value=S.WIDGET_MAX[S.W_BATCH], step=1,
                     key=S.W_BATCH)
    left, right = _pair(bar)
    offered = schedule_names_for(ss[S.W_PP])        # those the pipeline's p admits (the registry's rules)
    left.selectbox("Schedule", offered + ((ss[S.W_SCHEDULE],) if ss[S.W_SCHEDULE] not in offered else ()),
                   key=S.W_SCHEDULE, help="the schedules that apply to p stages (ZB-H1, interleaved and "
                                          "DualPipeV need p ≥ 2)")
    right.number_input("v — chunks", min_value=1, max_value=S.WIDGET_MAX[S.W_CHUNKS], step=1, key=S.W_CHUNKS,
                       disabled=not schedule_is_chunked(ss[S.W_SCHEDULE]),
                       help="model chunks per stage (interleaved schedule only)")
    if schedule_is_chunked(ss[S.W_SCHEDULE]) and ss[S.W_CHUNKS] == 1:   # what a lecturer's walk missed (2026-12-07)
        bar.caption("v = 1: one chunk per stage takes 1F1B's time and more memory (the interleaved warm-up keeps more "
                    "micro-batches in flight); v ≥ 2 shrinks the bubble.")
    left, right = _pair(bar)
    left.selectbox("ZeRO stage", (0, 1, 2, 3), key=S.W_ZERO)
    right.selectbox("Recompute", RECOMPUTE, key=S.W_RECOMPUTE)
    bar.toggle("Sequence parallelism", key=S.W_SP, on_change=_sp_moved)
    bar.toggle("Overlap DP sync with backward", key=S.W_OVERLAP,
               help="Megatron-LM --overlap-grad-reduce: the gradient synchronisation runs under the last "
                    "backward (interleaved: each model chunk's sync from its own last backward)")
    bar.toggle("Overlap param gather", key=S.W_OVERLAP_PG, disabled=ss[S.W_ZERO] not in (1, 2),
               help="ZeRO-1/2 (Megatron-LM --overlap-param-gather): the updated parameters' all-gather runs under "
                    "the next iteration's forward instead of after the optimizer step")
    bar.toggle("ZeRO-3 prefetch", key=S.W_ZERO_PREFETCH, disabled=ss[S.W_ZERO] != 3,
               help="ZeRO-3: each layer's parameter all-gather runs under the previous layer's compute (DeepSpeed's "
                    "and FSDP's prefetch, on by default); off, every gather waits in front of its layer")
    bar.toggle("Overlap TP comm with GEMMs", key=S.W_OVERLAP_TP, disabled=not ss[S.W_SP],
               help="Megatron-LM --tp-comm-overlap (needs sequence parallelism): the all-gathers and reduce-scatters "
                    "run under the GEMMs next to them; the Cost page shows what stays exposed and what is hidden")
    bar.toggle("Overlap pipeline sends", key=S.W_OVERLAP_P2P, disabled=not schedule_overlaps_sends(ss[S.W_SCHEDULE]),
               help="Megatron-LM --overlap-p2p-communication (interleaved schedule only): the point-to-point sends "
                    "between stages run under computation and a stage waits only for the input it needs; the Cost "
                    "page shows what stays exposed and what is hidden")
    fields = fields or _fields()
    draw_option(bar, S.option_widgets()[S.W_CUDA_GRAPHS], fields)
    left, right = _pair(bar)
    left.selectbox("Precision", DTYPES, key=S.W_DTYPE,
                   help="fp8: Transformer Engine FP8 GEMMs at the device's FP8 peak; weights, gradients and "
                        "activations stay bf16, fp32 master weights and Adam states")
    right.selectbox("Gradients", (GRAD_FROM_FRAMEWORK, *GRAD_DTYPES), key=S.W_GRAD_DTYPE,
                    help="framework: the framework's own default (below); model: reduced in the training dtype; fp32: "
                         "Megatron-LM's fp32 gradient accumulation and all-reduce (4 B/param, twice the dp bytes). "
                         "ZeRO 1 + fp32 = Megatron's distributed optimizer")
    left, right = _pair(bar)
    draw_option(left, S.option_widgets()[S.W_FP8_RECIPE], fields)
    draw_option(right, S.option_widgets()[S.W_ADAM_MOMENTS], fields)
    draw_option(bar, S.option_widgets()[S.W_RECOMPUTE_MODULES], fields)
    for option in S.option_widgets(moe_only=False).values():     # the table's other options, in its order
        if option.name not in PLACED:
            draw_option(bar, option, fields)
    bar.selectbox("Framework", STRATEGY_FRAMEWORKS, key=S.W_FRAMEWORK, format_func=_framework_title,
                  help="the framework the strategy targets (generic: the explorer's own defaults): its defaults are costed (gradients reduced in fp32 by "
                       "Megatron-LM with bf16, Megatron-Bridge's bf16 recipes, torchtitan and MindSpore; in the "
                       "training dtype by DeepSpeed), and the Export page writes them")


def draw_summary() -> None:
    """On the Start and Learn pages: what the explorer holds (its controls come back on its pages)."""
    ss = st.session_state
    st.sidebar.caption(f"The lessons use their own example. The explorer keeps **{plain(ss[S.MODEL].name)}** on "
                       f"**{plain(ss[S.CLUSTER].name)}**, d·t·p = {ss[S.W_DP]}·{ss[S.W_TP]}·{ss[S.W_PP]}"
                       + (f" (cp {ss[S.W_CP]})" if ss[S.W_CP] > 1 else "") + "; its "
                       "controls are on the Explore pages.")
