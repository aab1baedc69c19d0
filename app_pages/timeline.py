"""Timelines: the super-step Gantt (one iteration) and the micro-step Gantt (one layer or operator)."""
import streamlit as st

from explorer.facade import animated_gantt, layer_ops, readable_events, schedule_drawn_as
from explorer.facade import BUBBLE_MEANING, STAGES_IDLE
from app_pages import compute as C
from app_pages import state as S
from app_pages.text import plain
from app_pages.row import side_by_side

ROWS_SHOWN = 500        # the whole table of a large pipeline would dominate the rerun time
MAX_ANIMATED = 3000     # events: beyond, the frames would weigh megabytes (pick a smaller m to play)

view, error = C.current()
C.show_errors(error)
st.title("Timelines")
st.caption(f"{plain(view.model.name)} on {plain(view.cluster.name)} · {C.strategy_label(view.strategy)}")

st.subheader("Super-step: micro-batches through the pipeline stages")
schedules = schedule_drawn_as(view.strategy.schedule, view.strategy.pp)    # no ZB-H1 what-if at p = 1
if st.session_state.get(S.W_TIMELINE_SCHEDULE) not in schedules:
    st.session_state.pop(S.W_TIMELINE_SCHEDULE, None)
schedule = st.radio("Schedule drawn", schedules, horizontal=True, key=S.W_TIMELINE_SCHEDULE,
                    help="A schedule may be drawn as another on its own costs (a what-if): ZB-H1 (zero-bubble) "
                         "splits 1F1B's backward into input- and weight-gradient passes.")
sup, refusal = C.superstep_or_refusal(view.model, view.strategy, view.cluster, schedule)
play = False
if sup is None:
    st.warning(f"No super-step timeline: {plain(refusal)}. The cost on the other pages still holds.")
else:
    play = st.toggle("Play step by step", key=S.W_TIMELINE_PLAY, disabled=len(sup["events"]) > MAX_ANIMATED,
                     help=f"plays both charts; up to {MAX_ANIMATED} events (this iteration has {len(sup['events'])})")
    play = play and len(sup["events"]) <= MAX_ANIMATED
    if sup["figure"] is None:
        st.warning(f"The super-step Gantt is not drawn: {plain(sup['figure_refusal'])}. The events are on the "
                   "Export page (CSV); `python -m explorer timeline --format chrome-trace` opens them in Perfetto.")
    else:
        st.plotly_chart(C.shown(animated_gantt(sup["figure"]) if play else sup["figure"], events=sup["events"]),
                        key="timeline_superstep_chart")
        if sup.get("subpixel_note") and not S.classroom():   # classroom mode opens on the first micro-batches
            st.caption(sup["subpixel_note"])
    agree = sup["agreement"]
    cols = st.columns(4)      # metrics: equal columns (in one horizontal container each took its own width)
    band = C.band_text(C.evidence_of(view.model, view.strategy, view.cluster))   # the regime's validated error
    cols[0].metric("Timeline makespan", f"{C.sig(agree['timeline_s'])} s", help=f"Evidence: {plain(band)}")
    cols[1].metric(f"Cost model ({agree['model_schedule']})", f"{C.sig(agree['model_s'])} s")
    agreeing = abs(agree["relative_difference"]) < 1e-9      # floating-point rounding, not a difference
    cols[2].metric("Difference", "none" if agreeing else f"{100 * agree['relative_difference']:+.2f} %",
                   help=f"timeline − model = {agree['difference_s']:+.3g} s")
    cols[3].metric(STAGES_IDLE.capitalize(), f"{100 * agree['idle_fraction']:.1f} %",
                   help=f"Every stage's idle time over stages × makespan: not the bubble, which is "
                        f"{BUBBLE_MEANING.split(': ', 1)[1]} (here {C.sig(view.result.breakdown_s['bubble'])} s, "
                        f"{100 * view.result.breakdown_s['bubble'] / view.result.iteration_time_s:.3g} %).")
    st.caption(f"**Evidence:** {plain(band)} (the makespan is the model's; Validation page).")
    if agree["note"]:
        st.caption(plain(agree["note"]))
    elif not agreeing:
        st.caption("The cost model prices each stage's end on the schedule's critical path, the very path "
                   "this timeline runs, so the two should agree to rounding; a difference is shown, not hidden.")

st.subheader("Micro-steps: one layer's operators on its operator-parallel group")
layers = view.model.layers
S.seed(S.W_MICRO_LAYER, 0)
if st.session_state[S.W_MICRO_LAYER] >= layers:
    st.session_state[S.W_MICRO_LAYER] = 0
left, right = side_by_side(st, 2)
layer = left.selectbox("Layer", range(layers), key=S.W_MICRO_LAYER, format_func=lambda i: f"layer {i}")
ops = layer_ops(view.model)
op = right.selectbox("Operator", [None] + ops, key=f"{S.W_MICRO_OP}_{view.model.family}",
                     format_func=lambda o: "the whole layer" if o is None else o)
micro = C.microstep(view.model, view.strategy, view.cluster, layer, op)
st.plotly_chart(C.shown(animated_gantt(micro["figure"]) if play else micro["figure"]), key="timeline_microstep_chart")
if view.model.is_moe and view.strategy.overlap_ep:
    st.caption("One micro-batch's operators: its dispatch and combine all-to-alls are drawn whole. With the EP "
               "overlap on they run under another micro-batch's compute; the super-step above and the Cost page "
               "count what stays exposed, max(σE, E − C) (σ: the fused dispatcher's share of the SMs).")

tables = C.lazy_expander("Event tables: every operator, message and sync with its start and end", S.W_EVENT_TABLES)
if tables.open:
    events = sup["events"] if sup is not None else micro["events"].iloc[:0]
    tables.caption(f"First {min(len(events), ROWS_SHOWN)} of {len(events)} super-step events; "
                   "every event is on the Export page (CSV).")
    end_s = float(events["end_s"].max()) if len(events) else 0.0     # the Gantt's unit, not the first rows'
    tables.dataframe(readable_events(events.head(ROWS_SHOWN), end_s), hide_index=True, height=240)
    tables.dataframe(readable_events(micro["events"]), hide_index=True, height=240)
