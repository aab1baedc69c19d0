"""Lesson 1: the double-level model. One iteration is a super-step; one operator a micro-step."""
from __future__ import annotations

from explorer.charts.gantt import microstep_figure
from explorer.charts.lesson_figures import colour_of_part
from explorer.timeline import microstep_events
from explorer.lessons.base import (Control, Lesson, Reveal, Setup, cluster, fmt_seconds, links, model, per_node,
                                   ratio_words, strategy)

WHOLE_LAYER = "layer"     # a value, not None: a radio shows None as nothing chosen
OPERATORS = (WHOLE_LAYER, "qkv", "proj", "fc1", "fc2")


def build(values: dict) -> Setup:
    s = strategy(tp=values["tp"], micro_batch=values["micro_batch"])
    return Setup(model(), cluster(), s, page="timeline")


def _events(values: dict):
    setup = build(values)
    op = None if values["op"] == WHOLE_LAYER else values["op"]
    return microstep_events(setup.model, setup.strategy, setup.cluster, layer=0, op=op)


def makespan(values: dict) -> float:
    """Seconds of the drawn micro-step(s): forward and backward of one micro-batch."""
    return float(_events(values)["end_s"].max())


def picture(setup: Setup, values: dict):
    what = "layer 0" if values["op"] == WHOLE_LAYER else f"operator {values['op']} of layer 0"
    return microstep_figure(_events(values), f"Micro-steps of {what}, one micro-batch, t = {values['tp']}")


def parts(values: dict) -> tuple:
    """(computation, communication + barriers) seconds of GPU 0's drawn micro-steps: its own row, not the rows
    beside it that take none of its time (hidden, e.g. the host issuing kernels, explorer.timeline.microstep)."""
    events = _events(values)
    mine = events[(events["device"] == events["device"].iloc[0]) & ~events["hidden"]]
    busy = mine["end_s"] - mine["start_s"]
    compute = float(busy[mine["category"] == "compute"].sum())
    return compute, float(busy.sum()) - compute


def explanation(values: dict, other: int) -> str:
    """How the micro-steps change from t to `other`, every direction word read off the model's numbers."""
    t = values["tp"]
    (c_now, x_now), (c_then, x_then) = parts(values), parts({**values, "tp": other})
    node = per_node(cluster())
    text = (f"From t = {t} to t = {other}, each GPU's computation {ratio_words(c_then, c_now)} "
            f"({fmt_seconds(c_now)} → {fmt_seconds(c_then)}): it does 1/t of the work. ")
    if x_now == x_then == 0:
        return text + "It runs no collective of its own at either t."
    text += (f"Its all-reduces and barriers {ratio_words(x_then, x_now, 'grow', 'shrink', 'stay')} "
             f"({fmt_seconds(x_now)} → {fmt_seconds(x_then)})")
    if min(t, other) == 1:
        text += ": t = 1 needs none"
    if max(t, other) > node >= min(t, other):
        inside, across = sorted((t, other))
        text += (f"; t = {across} spans {-(-across // node)} nodes, t = {inside} stays in one ({links(cluster())}), "
                 f"so the all-reduces of t = {across} pay the slower link")
    return text + "."


def question(values: dict) -> Reveal:
    t = values["tp"]
    other = t * 2 if t < 8 else t // 2
    then = makespan({**values, "tp": other})
    now = makespan(values)
    what = "this layer's" if values["op"] == WHOLE_LAYER else f"operator {values['op']}'s"
    return Reveal(
        question=f"Predict: how long do {what} micro-steps (forward + backward) take with t = {other} "
                 f"instead of {t}?",
        answer=then, unit="s", answer_text=fmt_seconds(then), now=now, now_text=fmt_seconds(now),
        explanation=explanation(values, other))


def caption(setup, values: dict, palette: str = "default") -> str:
    rows = f"Rows: the GPUs of one operator-parallel group. {colour_of_part('compute', palette).capitalize()}: compute"
    if not parts(values)[1]:
        return rows + (" (at t = 1 nothing is communicated)." if values["tp"] == 1 else
                       " (this operator runs no collective of its own).")
    return (f"{rows}; {colour_of_part('op_comm', palette)}: communication (each all-reduce and the barrier after "
            "it). Hover a bar for its bytes and level.")


LESSON = Lesson(
    number=1, slug="double-level", title="The double-level model: super-step and micro-step",
    text=("A training **iteration** is one **super-step**: every pipeline stage runs its micro-batches "
          "forward and backward, and each stage synchronises its gradients once its last backward is done. "
          "Inside it, each **operator** (a matrix multiply, a softmax) is a **micro-step** in the BSP style "
          "of Valiant: the devices of its operator-parallel group compute their shares, exchange data with "
          "a collective at one machine level (within a node, or across nodes), then wait at a barrier. "
          "The cost of a micro-step is its computation plus its communication plus its synchronisation; "
          "the cost of the super-step composes the micro-steps along the pipeline schedule."),
    formula_latex=r"T_{\text{micro-step}} = w + \sum_{\ell} \left( h_\ell\, g_\ell + L_\ell \right)",
    formula_text="T_micro-step = w + Σ_l (h_l · g_l + L_l)   (computation + bytes × seconds per byte + latency, per level l)",
    source="Valiant, 'A bridging model for parallel computation', CACM 1990 (BSP cost w + g·h + l); Valiant, "
           "'A bridging model for multi-core computing', JCSS 2011 (Multi-BSP levels); H. Wang, IPDPS-W 2021",
    controls=(Control("op", "Operator", OPERATORS, WHOLE_LAYER,
                      labels=("the whole layer", "qkv (column split)", "proj (row split)", "fc1 (column split)",
                              "fc2 (row split)")),
              Control("tp", "t — GPUs per operator", (1, 2, 4, 8), 4),
              Control("micro_batch", "b — micro-batch", (1, 2, 4), 1)),
    build=build, picture=picture, question=question, caption=caption)
