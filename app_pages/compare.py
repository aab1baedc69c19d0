"""Compare: pin up to four strategies; totals, breakdowns and super-step timelines side by side."""
import dataclasses

import streamlit as st

from explorer.facade import breakdown_bar
from explorer.facade import MAX_MICRO_BATCHES, micro_batches_end, readable_columns, summary_table
from app_pages import compute as C
from app_pages import state as S
from app_pages.text import plain, plain_html

ss = st.session_state


def _pin(view):
    pins = ss[S.PINS]
    if len(pins) >= S.MAX_PINS:
        S.notify(f"At most {S.MAX_PINS} strategies can be pinned; unpin one first.")
        return
    label = (ss.get(S.W_PIN_LABEL) or "").strip()[:40] or f"#{len(pins) + 1} {C.strategy_label(view.strategy)}"
    if any(p.label == label for p in pins):
        label = f"{label} ({len(pins) + 1})"
    pins.append(dataclasses.replace(view, label=label))
    ss[S.W_PIN_LABEL] = ""


def _unpin(index: int):
    del ss[S.PINS][index]


def _load(pin):
    ss[S.MODEL], ss[S.CLUSTER] = pin.model, pin.cluster
    S.apply_strategy(pin.strategy)
    S.notify(f"Loaded the pinned strategy “{pin.label}”.")


view, error = C.current()
C.show_errors(error)
st.title("Compare strategies")
left, right = st.columns([3, 1], vertical_alignment="bottom")
left.text_input("Label for the pin (optional)", key=S.W_PIN_LABEL, max_chars=40)
right.button(f"Pin the current strategy ({len(ss[S.PINS])}/{S.MAX_PINS})", on_click=_pin, args=(view,),
             type="primary", disabled=len(ss[S.PINS]) >= S.MAX_PINS)

pins = ss[S.PINS]
shown = {p.label: p for p in pins}
if not any((p.model, p.cluster, p.strategy) == (view.model, view.cluster, view.strategy) for p in pins):
    shown.setdefault(f"current: {C.strategy_label(view.strategy)}", dataclasses.replace(view, label="current"))
if not pins:
    st.info("Pin strategies to compare them; the current one is shown for reference.")
results = {label: p.result for label, p in shown.items()}
batches = {label: p.strategy.global_batch for label, p in shown.items()}
summary = C.table(readable_columns(summary_table(results, batches)))
st.dataframe(summary, hide_index=True, column_config=C.pinned_names(summary))   # names stay when scrolled sideways
if len(set(batches.values())) > 1:      # another B is another amount of work an iteration
    st.caption(f"These strategies run different global batches (B = {', '.join(f'{b:,}' for b in sorted(set(batches.values())))} "
               "sequences): their iteration times are not the same work; compare TFLOP/s per GPU or MFU.")
bars = breakdown_bar({plain_html(label): r for label, r in results.items()},
                     "Iteration time by category (exposed)")         # the hidden communication: a table column
st.plotly_chart(C.shown(bars), key="compare_breakdown_chart")

for i, pin in enumerate(pins):
    cols = st.columns([4, 1, 1], vertical_alignment="center")
    over = C.memory_problem(pin.result, pin.cluster)
    band = C.band_text(C.evidence_of(pin.model, pin.strategy, pin.cluster))      # the regime's validated error
    cols[0].markdown(f"**{plain(pin.label)}** — {plain(pin.model.name)} on {plain(pin.cluster.name)}, {pin.result.gpus} GPUs: "
                     f"{C.sig(pin.result.iteration_time_s)} s ({plain(band)})" +
                     (f"  \n:warning: does not fit: {over}" if over else ""))
    cols[1].button("Load", key=f"compare_load_{i}", on_click=_load, args=(pin,))
    cols[2].button("Unpin", key=f"compare_unpin_{i}", on_click=_unpin, args=(i,))

st.subheader("Super-step timelines")
grid = st.columns(1 if S.classroom() else 2)      # on a projector one per row: each as wide as its title
drawn = [C.superstep_or_refusal(p.model, p.strategy, p.cluster, p.strategy.schedule)[0] for p in shown.values()]
if S.classroom():      # at most MAX_MICRO_BATCHES micro-batches drawn at once, on one shared axis
    longest = max((micro_batches_end(sup["events"], MAX_MICRO_BATCHES) for sup in drawn if sup is not None),
                  default=0.0)
    st.caption(f"Same time axis on every chart: 0 to {C.sig(longest)} s, the first {MAX_MICRO_BATCHES} micro-batches "
               "(pan for the rest).")
else:
    longest = max((sup["agreement"]["timeline_s"] for sup in drawn if sup is not None), default=0.0)
    st.caption(f"Same time axis on every chart: 0 to {C.sig(longest)} s (the longest iteration).")
for i, (label, p) in enumerate(shown.items()):
    _, refusal = C.superstep_or_refusal(p.model, p.strategy, p.cluster, p.strategy.schedule)
    if refusal:
        grid[i % len(grid)].warning(f"{plain(label)}: no timeline, {plain(refusal)}")
        continue
    small = C.small_superstep(p.model, p.strategy, p.cluster, label, i == 0, longest)
    if small is None:
        grid[i % len(grid)].warning(f"{plain(label)}: the timeline has more bars than one chart draws")
        continue
    grid[i % len(grid)].plotly_chart(C.shown(small), key=f"compare_gantt_{i}")
