"""Lesson 4: pipeline parallelism and the bubble: GPipe, 1F1B, interleaved, zero-bubble (ZB-H1), DualPipeV."""
from __future__ import annotations

from functools import lru_cache

from explorer.charts.gantt import superstep_figure
from explorer.charts.lesson_figures import colour_of_part
from explorer.errors import ExplorerError
from explorer.cost.evaluate import evaluate
from explorer.cost.numeric import tied_place
from explorer.schedules import get as schedule_of
from explorer.timeline import compare, superstep_events
from explorer.lessons.base import Control, Lesson, Reveal, Setup, cluster, fmt_seconds, model, ratio_words, strategy

SCHEDULES = ("gpipe", "1f1b", "interleaved", "zb-h1", "dualpipev")
CHUNKS = 2                  # model chunks per stage of the interleaved schedule in this lesson (DualPipeV's own 2)
NO_BUBBLE = 1e-9
"""A bubble below this fraction of the iteration is none (the simulated timeline's rounding, ~1e-17 s)."""


def build(values: dict) -> Setup:
    schedule, p, m = values["schedule"], values["pp"], values["micro_batches"]
    layers = model().layers
    if schedule == "interleaved" and p * CHUNKS > layers:
        raise ExplorerError(f"interleaved with v = {CHUNKS} chunks needs p·v ≤ {layers} layers; choose p ≤ "
                            f"{layers // CHUNKS}")
    if schedule == "interleaved" and m % p:
        raise ExplorerError(f"the interleaved schedule needs m to be a multiple of p; {m} is not a multiple of {p}")
    sched = schedule_of(schedule)
    if schedule == "dualpipev" and p * sched.chunks > layers:
        raise ExplorerError(f"DualPipeV places v = {sched.chunks} chunks per stage in a V: p·v ≤ {layers} layers; "
                            f"choose p ≤ {layers // sched.chunks}")
    if m < sched.micro_batches_per_stage * p:
        raise ExplorerError(f"{sched.title} needs m ≥ {sched.micro_batches_per_stage} p = "
                            f"{sched.micro_batches_per_stage * p} micro-batches; choose a larger m or a smaller p")
    fields = {"schedule": schedule}
    if sched.chunked:
        fields["chunks"] = sched.chunks or CHUNKS
    s = strategy(pp=p, micro_batches=m, **fields)
    note = f"{sched.title}: the backward is split into input- and weight-gradient passes (B and W); its bubble " \
        "here is the simulated timeline's, pass by pass." if sched.splits_weight else ""
    return Setup(model(), cluster(), s, schedule_drawn=schedule, page="timeline", note=note)


@lru_cache(maxsize=64)
def _bubble(schedule: str, p: int, m: int) -> tuple:
    """(bubble seconds on the critical stage, iteration seconds, events) for one setting."""
    setup = build({"schedule": schedule, "pp": p, "micro_batches": m})
    r = evaluate(setup.model, setup.strategy, setup.cluster)
    events = superstep_events(setup.model, setup.strategy, setup.cluster, schedule=schedule, result=r)
    if schedule_of(schedule).splits_weight:  # the simulated timeline's idle time on the critical stage (W fills it)
        agree = compare(events, r, schedule)
        bubble = agree["bubble_timeline_s"]            # rounding below NO_BUBBLE of the iteration (~1e-17 s): none
        return (0.0 if bubble <= NO_BUBBLE * agree["timeline_s"] else bubble), agree["timeline_s"], events
    return r.breakdown_s["bubble"], r.iteration_time_s, events


def bubble_seconds(values: dict) -> float:
    return _bubble(values["schedule"], values["pp"], values["micro_batches"])[0]


def events(values: dict):
    return _bubble(values["schedule"], values["pp"], values["micro_batches"])[2]


def picture(setup: Setup, values: dict):
    return superstep_figure(events(values), f"One iteration: {schedule_of(values['schedule']).title}, p = {values['pp']}, "
                                            f"m = {values['micro_batches']}")


def textbook_fraction(values: dict) -> float:
    """Bubble over ideal time: (p-1)/m, (p-1)/(vm) interleaved (Narayanan et al. SC'21 Sec. 2.2)."""
    v = CHUNKS if values["schedule"] == "interleaved" else 1
    return (values["pp"] - 1) / (v * values["micro_batches"])


def share(values: dict) -> float:
    """The bubble's share of the iteration (critical stage), in the model."""
    bubble, total, _ = _bubble(values["schedule"], values["pp"], values["micro_batches"])
    return bubble / total


def no_bubble(values: dict) -> bool:
    """Is the model's bubble none at this setting (DualPipeV's W passes can fill all of it)?"""
    bubble, total, _ = _bubble(values["schedule"], values["pp"], values["micro_batches"])
    return bubble <= NO_BUBBLE * total


def explanation(values: dict, doubled: dict) -> str:
    """Why the bubble's seconds stay and its share falls, each claim read off the model's numbers."""
    schedule, m = values["schedule"], values["micro_batches"]
    then, now = bubble_seconds(doubled), bubble_seconds(values)
    ref = bubble_seconds({**values, "schedule": "1f1b"})
    if schedule == "dualpipev" and no_bubble(values) and no_bubble(doubled):
        return (f"DualPipeV leaves no bubble here, at m = {m} as at m = {2 * m}, against 1F1B's {fmt_seconds(ref)}: "
                "each device holds two chunks placed in a V, micro-batches flow down and back up at once, and the "
                "weight-gradient passes (W) fill the warm-up and cool-down. The DeepSeek-V3 report's Table 2 "
                "bounds its bubble by (PP/2 − 1)(F&B + B − 3W) chunk passes; this model runs the overlapped "
                "pair F&B as F + B one pass at a time (the communication it hides is not taken off), and its "
                "critical path here has no idle time at all.")
    change = ratio_words(then, now, "grows", "shrinks", "stays")
    others = "one forward+backward pass of each of the p − 1 other stages"
    why = {"gpipe": f"it is {others}, whatever m", "1f1b": f"it is {others}, whatever m",
           "interleaved": f"it is {others}, divided by the v = {CHUNKS} chunks of a stage, whatever m",
           "zb-h1": "it is what the weight-gradient passes moved into the warm-up and cool-down leave idle, "
                    "whatever m",
           "dualpipev": "it is what the V's two directions and the weight-gradient passes leave idle in the "
                        "warm-up and cool-down, whatever m"}[schedule]
    text = (f"The bubble {change} ({fmt_seconds(now)} → {fmt_seconds(then)}): {why}. "
            f"Its share of the iteration falls from {100 * share(values):.2g} % at m = {m} to "
            f"{100 * share(doubled):.2g} % at m = {2 * m}")
    if schedule_of(schedule).splits_weight:
        title = schedule_of(schedule).title
        return text + (f". {title} shrinks the bubble but does not remove it: {fmt_seconds(now)} against 1F1B's "
                       f"{fmt_seconds(ref)} at p = {values['pp']}, m = {m}.")
    formula = "(p − 1)/(v m)" if schedule == "interleaved" else "(p − 1)/m"
    return text + (f"; the textbook {formula} of the ideal time halves, {textbook_fraction(values):.3g} → "
                   f"{textbook_fraction(doubled):.3g}.")


def question(values: dict) -> Reveal:
    m = values["micro_batches"]
    doubled = {**values, "micro_batches": 2 * m}
    build(doubled)                      # same checks as the controls
    then, now = bubble_seconds(doubled), bubble_seconds(values)
    return Reveal(
        question=f"Predict: how long is the bubble if we double m from {m} to {2 * m}?",
        answer=then, unit="s", answer_text=fmt_seconds(then), now=now, now_text=fmt_seconds(now),
        explanation=explanation(values, doubled))


def caption(setup, values: dict, palette: str = "default") -> str:
    chunks = " (F3.1: chunk 1 of the stage's two)" if schedule_of(values.get("schedule", "1f1b")).chunked else ""
    tied = ""
    setup = setup if setup is not None else build(values)        # the offline deck asks without one
    if setup.strategy.dp == 1 and tied_place(setup.model, setup.strategy, setup.cluster) is not None:
        tied = (f" With d = 1 the {colour_of_part('dp_comm', palette)} gradient sync on the first and last stage is "
                "not data parallelism: the word embedding is tied to the output layer, and the two stages that hold "
                "a copy all-reduce its gradients (Megatron-LM _allreduce_word_embedding_grads).")
    return ("Rows: stages. F3 / B3 / W3: forward, backward, weight-gradient pass of micro-batch 3"
            f"{chunks}. {colour_of_part('bubble', palette).capitalize()}: idle, on any stage; the bubble is the "
            f"critical stage's idle time.{tied}")


LESSON = Lesson(
    number=4, slug="pipeline", title="Pipeline parallelism and the bubble",
    text=("**Pipeline parallelism** cuts the layers into p stages on p GPUs and streams m micro-batches "
          "through them. Stage 1 waits for stage 0's first forward, and the last backward drains back: the "
          "idle triangles are the **bubble**, p − 1 forward+backward passes long. **GPipe** runs all "
          "forwards, then all backwards (m micro-batches of activations kept). **1F1B** alternates one "
          "forward and one backward: same bubble, at most p micro-batches kept. **Interleaved** 1F1B gives "
          "each GPU v chunks of layers, dividing the bubble by v at the price of more messages. **Zero-bubble** "
          "(ZB-H1) splits the backward into input- and weight-gradient passes and moves weight-gradient passes "
          "into the idle slots: the bubble shrinks, it does not vanish. **DualPipeV** (DeepSeek-V3) gives each GPU "
          "two chunks placed in a V, so micro-batches flow down and back up at once, and fills the warm-up and "
          "cool-down with weight-gradient passes too."),
    formula_latex=r"\frac{T_{\text{bubble}}}{T_{\text{ideal}}} = \frac{p-1}{m}, \qquad \text{interleaved: } "
                  r"\frac{p-1}{v\,m}",
    formula_text="bubble / ideal time = (p − 1) / m   ((p − 1) / (v m) interleaved)",
    source="Huang et al., 'GPipe', NeurIPS 2019; Narayanan et al., SC'21, Sec. 2.2 (1F1B, interleaved, "
           "bubble fraction); Qi et al., 'Zero Bubble Pipeline Parallelism', ICLR 2024 (ZB-H1); DeepSeek-AI, "
           "'DeepSeek-V3 Technical Report', arXiv:2412.19437, Sec 3.2.1 and Table 2 (DualPipe, DualPipeV)",
    controls=(Control("schedule", "Schedule", SCHEDULES, "1f1b",
                      labels=("GPipe", "1F1B", "interleaved 1F1B (v = 2)", "zero-bubble ZB-H1",
                              "DualPipeV (V, v = 2)")),
              Control("pp", "p — pipeline stages", (2, 4, 8), 4),
              Control("micro_batches", "m — micro-batches", (4, 8, 16, 32), 8)),
    build=build, picture=picture, question=question, caption=caption)
