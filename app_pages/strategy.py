"""Strategy: named presets, per-layer choices by dragging (stages, operator splits) and as a table."""
import streamlit as st

from explorer.facade import BUBBLE_MEANING, GIB, ExplorerError, Strategy
from explorer.facade import layer_choices as lc
from app_pages import compute as C
from app_pages import drag
from app_pages import state as S
from app_pages.classroom import metric_bar
from app_pages.text import plain

ss = st.session_state
st.title("Strategy")
# The sticky metric bar (the live total and any refusal, on screen beside the drag areas while they are
# scrolled to) and the chart under it, filled once the drags are applied.
top = metric_bar()
chart_box = st.container()


def _preset_changes(preset) -> str:
    """What applying a preset changes beyond the degrees, and whether it fits in memory."""
    notes = []
    if preset.strategy.global_batch != int(ss[S.W_BATCH]):
        notes.append(f"it changes the global batch B from {int(ss[S.W_BATCH])} to {preset.strategy.global_batch}")
    over = C.memory_problem(C.result_of(ss[S.MODEL], preset.strategy, ss[S.CLUSTER]), ss[S.CLUSTER])
    if over:
        notes.append(f"it does NOT fit in memory: {over}")
    return "; ".join(notes)


def _apply_preset(preset):
    changes = _preset_changes(preset)          # before the widgets take the preset's values
    S.apply_strategy(preset.strategy)
    S.notify(f"Applied the preset “{preset.name}”: {C.strategy_label(preset.strategy)}."
             + (f" Note: {changes.rstrip('.')}." if changes else ""))


def _reset_layers():
    ss[S.LAYER_SPLITS], ss[S.STAGE_MAP], ss[S.PIPELINE_LAYOUT], ss[S.CHOICE_MESSAGE] = (), (), "", ""


def _layout_entered():
    """The pipeline layout typed (callback): layer counts per virtual stage or a Megatron-LM layout string, used
    when the strategy runs with it (it replaces a dragged stage map); else the reason, in one line, and the last
    valid choice kept. Empty: the even split again (a dragged split too, whose counts the box shows)."""
    text = (ss[S.W_PIPELINE_LAYOUT] or "").strip()
    ss[S.CHOICE_MESSAGE] = ""
    if not text:                # the even split (the box showed a dragged split's counts too)
        ss[S.PIPELINE_LAYOUT], ss[S.STAGE_MAP] = "", ()
        return
    try:
        try:
            base = S.candidate()
        except ExplorerError:
            base = ss[S.LAST_VALID].strategy
        layout = lc.layout_from_text(text, model.layers, model.mtp_layers, base.pp, base.pp * base.chunks)
        C.ensure_fits(base.with_(stage_map=(), pipeline_layout=layout))
    except ExplorerError as err:
        ss[S.CHOICE_MESSAGE] = f"Pipeline layout refused, the last valid choice is kept: {err}"
        return
    ss[S.PIPELINE_LAYOUT], ss[S.STAGE_MAP] = layout, ()
    ss[S.PIPELINE_LAYOUT_TYPED] = (text, layout)      # shown back as typed while this layout applies


def _first_choice(usable: list) -> str | None:
    """The preset the box opens on: the one the sidebar's strategy is, else the first that fits the device's memory,
    else the first (it opened on Pure DP at 476 GiB of an 80 GiB device while Megatron 3D was applied)."""
    try:
        now = C.candidate()
    except ExplorerError:
        now = None
    fits = (p for p in usable if not C.memory_problem(C.result_of(ss[S.MODEL], p.strategy, ss[S.CLUSTER]),
                                                      ss[S.CLUSTER]))
    chosen = next((p for p in usable if p.strategy == now), None) or next(fits, None) or next(iter(usable), None)
    return chosen.name if chosen else None


model, cluster = ss[S.MODEL], ss[S.CLUSTER]
gpus = ss[S.W_DP] * ss[S.W_TP] * ss[S.W_PP] * ss[S.W_CP]
st.subheader(f"Presets for {plain(model.name)} on {gpus} GPUs")
found = C.presets(model, cluster, gpus, int(ss[S.W_BATCH]), ss[S.W_MICRO])
usable = [p for p in found.values() if p.strategy is not None]
left, right = st.columns([3, 1], vertical_alignment="bottom")
if S.W_PRESET not in ss:                        # S.seed, its value computed only when it is needed
    ss[S.W_PRESET] = _first_choice(usable)
# the names alone in the box (a select's value cannot wrap: at 1280x720 in classroom mode 'Megatron 3D — t=8 in a
# node, …' was cut), each preset's description under it
name = left.selectbox("Preset", [p.name for p in usable], key=S.W_PRESET)
if name in found and found[name].strategy is not None:
    right.button("Apply preset", on_click=_apply_preset, args=(found[name],), type="primary")
    changes = _preset_changes(found[name])
    left.caption(f"{found[name].description}: " + C.strategy_label(found[name].strategy)
                 + (f" — **note:** {changes}" if changes else ""))
for preset in found.values():
    if preset.strategy is None:
        st.caption(f"{preset.name} does not fit: {plain(preset.reason)}")

layers, tp, pp = model.layers, ss[S.W_TP], ss[S.W_PP]
C.sync_layer_state()
stages = lc.layer_stages(ss[S.STAGE_MAP], pp, layers)
splits_now = lc.layer_splits(ss[S.LAYER_SPLITS], tp, layers)
st.subheader("Pipeline stages: drag layers between stages")
st.caption("Stages hold consecutive layers: move the last layer of a stage to the next stage, "
           "or the first one to the previous stage.")


def _even(stage_map: tuple) -> tuple:
    return () if stage_map == Strategy(pp=pp).stages(layers) else stage_map


def _splits(splits: tuple) -> tuple:
    return () if lc.uniform(splits, tp) else splits


def _table(edited):
    splits, stage_map = lc.choices_from_table(edited, layers)
    drag.apply_choices(layer_splits=_splits(splits), stage_map=_even(stage_map))


try:
    layout = lc.layout_table(model, S.candidate())      # the layout of what the widgets describe now
except ExplorerError:
    layout = None
if layout is None:
    drag.sortable("stage", "Stage move", lc.stage_columns(stages, pp),
                  lambda moved: drag.apply_choices(stage_map=_even(lc.stage_map_from_columns(moved, layers))))
else:     # read only: what each stage's model chunks hold (E embedding, t layers, m MTP layers, L loss)
    st.caption("This strategy runs a pipeline layout (Megatron-LM --pipeline-model-parallel-layout): E embedding, "
               "t transformer layers, m multi-token-prediction layers, L loss. Change it below (clear it to drag "
               "layers again), or pick p and v whose chunks split the layers evenly.")
    st.dataframe(layout, hide_index=True)
try:                                            # the box shows the layout applied (a link or a file may set it)
    applied = S.candidate().pipeline_layout
except ExplorerError:
    applied = ss[S.PIPELINE_LAYOUT]
typed, typed_layout = ss.get(S.PIPELINE_LAYOUT_TYPED, ("", ""))
ss[S.W_PIPELINE_LAYOUT] = typed if applied and applied == typed_layout else applied    # in the notation typed
if not applied and ss[S.STAGE_MAP]:             # a dragged split (or a link's stages=): its layers per stage
    ss[S.W_PIPELINE_LAYOUT] = ",".join(str(ss[S.STAGE_MAP].count(stage)) for stage in range(pp))
st.text_input("Uneven stages: layers per stage, or a Megatron-LM layout", key=S.W_PIPELINE_LAYOUT,
              on_change=_layout_entered, max_chars=2000, placeholder="e.g. 11,12,12,13 or Et|(tt|)*30mL",
              help="Comma-separated transformer layers per virtual stage (p × v of them, in model order; the "
                   "embedding goes with the first, the loss and any MTP layers with the last), or a Megatron-LM "
                   "--pipeline-model-parallel-layout string such as Et|(tt|)*30mL. Empty: stages split evenly. "
                   "Kept in the share link.")
st.subheader("Operator splits: drag layers between split columns")
st.caption(f"Degrees divide t = {tp}. TP column→row is Megatron-LM's pairing (QKV/FC1 by column, "
           "projection/FC2 by row); the table below offers column-only, row-only and batch splits too.")
drag.sortable("split", "Split move", lc.split_columns(splits_now, tp),
              lambda moved: drag.apply_choices(layer_splits=_splits(lc.splits_from_columns(moved, layers))))
st.subheader("The same choices as a table")
drag.editor(lc.layer_table(stages, splits_now), "Table edit", _table, disabled=["layer"], height=260, column_config={
    "stage": st.column_config.NumberColumn("stage", min_value=0, max_value=pp - 1, step=1, required=True),
    "split": st.column_config.SelectboxColumn("split", options=lc.split_options(tp), required=True)})
st.button("Reset per-layer choices (even stages, Megatron ×t everywhere)", on_click=_reset_layers)

view, error = C.current()
r = view.result
with chart_box:
    C.show_errors(error, refusal_box=top)
with top:
    if ss[S.CHOICE_MESSAGE]:
        st.error(plain(ss[S.CHOICE_MESSAGE]))
    cols = st.columns(5)
    cols[0].metric("Iteration time", f"{C.sig(r.iteration_time_s)} s")
    cols[1].metric(f"Peak memory (of {view.cluster.device.memory_bytes / GIB:.0f} GiB)",
                   f"{r.memory_bytes_per_device['total'] / GIB:.1f} GiB")
    cols[2].metric("MFU", f"{100 * r.mfu:.1f} %")
    cols[3].metric("Bubble", f"{C.sig(r.breakdown_s['bubble'])} s", help=BUBBLE_MEANING.capitalize())
    cols[4].metric("Critical stage", f"{r.critical_stage}")
with chart_box:
    ev = C.evidence_of(view.model, view.strategy, view.cluster)
    optimistic = C.mfu_warning(ev, r)
    if optimistic:                  # above what every published run of the regime reached (issue 30 item 6)
        st.warning(plain(optimistic))
    for gap in ev["known_gaps"]:    # a cost the model does not price (explorer.validation.evidence.KNOWN_GAPS)
        st.warning(plain(gap))
    crowded = C.contention_warning(r)   # its collectives on one level outlast its iteration (explorer.cost.contention)
    if crowded:
        st.warning(plain(crowded))
    st.plotly_chart(C.shown(C.breakdown_chart(view.model, view.strategy, view.cluster)),
                    key="strategy_breakdown_chart")
# The sidebar stays on screen while the drag columns below are scrolled to: the numbers they change too.
st.sidebar.markdown(f"**Now:** {C.sig(r.iteration_time_s)} s per iteration  \n"
                    f"bubble {r.breakdown_s['bubble']:.3g} s · MFU {100 * r.mfu:.1f} % · critical stage {r.critical_stage}")
