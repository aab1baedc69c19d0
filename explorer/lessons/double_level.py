"""Lesson 1: the double-level model. One iteration is a super-step; one operator a micro-step."""
from __future__ import annotations

from explorer.charts.gantt import microstep_figure
from explorer.timeline import microstep_events
from explorer.lessons.base import Control, Lesson, Reveal, Setup, cluster, fmt_seconds, model, strategy

OPERATORS = (None, "qkv", "proj", "fc1", "fc2")


def build(values: dict) -> Setup:
    s = strategy(tp=values["tp"], micro_batch=values["micro_batch"])
    return Setup(model(), cluster(), s, page="timeline")


def _events(values: dict):
    setup = build(values)
    return microstep_events(setup.model, setup.strategy, setup.cluster, layer=0, op=values["op"])


def makespan(values: dict) -> float:
    """Seconds of the drawn micro-step(s): forward and backward of one micro-batch."""
    return float(_events(values)["end_s"].max())


def picture(setup: Setup, values: dict):
    what = "layer 0" if values["op"] is None else f"operator {values['op']} of layer 0"
    return microstep_figure(_events(values), f"Micro-steps of {what}, one micro-batch, t = {values['tp']}")


def question(values: dict) -> Reveal:
    t = values["tp"]
    other = t * 2 if t < 8 else t // 2
    then = makespan({**values, "tp": other})
    now = makespan(values)
    what = "this layer's" if values["op"] is None else f"operator {values['op']}'s"
    return Reveal(
        question=f"Predict: how long do {what} micro-steps (forward + backward) take with t = {other} "
                 f"instead of {t}?",
        answer=then, unit="s", answer_text=fmt_seconds(then), now=now, now_text=fmt_seconds(now),
        explanation=f"Computation shrinks about {other / t:g}×, but each all-reduce and barrier stays or grows"
                    + (" and t = 8 crosses the node boundary (10 GB/s instead of 100 GB/s)." if other == 8 or t == 8
                       else "."))


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
    controls=(Control("op", "Operator", OPERATORS, None,
                      labels=("the whole layer", "qkv (column split)", "proj (row split)", "fc1 (column split)",
                              "fc2 (row split)")),
              Control("tp", "t — GPUs per operator", (1, 2, 4, 8), 4),
              Control("micro_batch", "b — micro-batch", (1, 2, 4), 1)),
    build=build, picture=picture, question=question,
    caption=lambda setup, values: "Rows: the GPUs of one operator-parallel group. Colours: compute, "
                                  "communication (all-reduce), barrier. Hover a bar for its bytes and level.")
