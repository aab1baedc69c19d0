"""Lesson 2: data parallelism and the ring all-reduce of the gradients."""
from __future__ import annotations

from explorer.charts.breakdown import breakdown_bar
from explorer.charts.lesson_figures import colour_of_part
from explorer.cost.evaluate import evaluate
from explorer.lessons.base import (Control, Lesson, Reveal, Setup, cluster, fmt_bytes, fmt_seconds, gbps, model,
                                   per_node, ratio_words, strategy)

DEGREES = (1, 2, 4, 8)
BYTES_PER_GRADIENT = 2      # bf16 gradients (Strategy.dtype default)


def build(values: dict) -> Setup:
    d = values["dp"]
    return Setup(model(), cluster(), strategy(gpus=d, overlap_dp=values["overlap_dp"]), page="cost")


def result(values: dict):
    setup = build(values)
    return evaluate(setup.model, setup.strategy, setup.cluster)


def picture(setup: Setup, values: dict):
    results = {(f"▶ d = {d}" if d == values["dp"] else f"d = {d}"): result({**values, "dp": d}) for d in DEGREES}
    return breakdown_bar(results, "Iteration time by category as d grows (8 micro-batches per replica)")


def ring_bytes(d: int, params: float) -> float:
    """Bytes each device sends in a ring all-reduce of `params` bf16 gradients: 2(d-1)/d · Ψβ."""
    return 2 * (d - 1) / d * params * BYTES_PER_GRADIENT


def sync_seconds(r) -> float:
    """The gradient all-reduce's whole time per iteration (exposed + hidden under the backward)."""
    return r.breakdown_s["dp_comm"] + r.hidden_s.get("dp_comm", 0.0)


def explanation(values: dict, other: int) -> str:
    """The ring formula with this setting's numbers, and how its time changes (read off the model)."""
    d = values["dp"]
    then, now = result({**values, "dp": other}), result(values)
    sent, full = ring_bytes(other, then.params), 2 * then.params * BYTES_PER_GRADIENT
    text = (f"2(d−1)/d · Ψβ with d = {other}, Ψ = {then.params / 1e9:.3g} B parameters and β = "
            f"{BYTES_PER_GRADIENT} bytes gives {fmt_bytes(sent)}: {100 * (other - 1) / other:.0f} % of "
            f"2Ψβ = {fmt_bytes(full)}, which it approaches as d grows. ")
    t_now, t_then = sync_seconds(now), sync_seconds(then)
    if min(d, other) == 1:
        text += f"At d = 1 there is nothing to sum; at d = {max(d, other)} the all-reduce takes "
        text += f"{fmt_seconds(max(t_now, t_then))}"
    else:
        text += (f"Its time {ratio_words(t_then, t_now)} ({fmt_seconds(t_now)} → {fmt_seconds(t_then)})")
        node = per_node(cluster())
        if max(d, other) > node >= min(d, other):
            levels = cluster().levels
            text += (f": the ring of d = {max(d, other)} leaves the node ({gbps(levels[1])} between nodes "
                     f"instead of {gbps(levels[0])})")
    if values["overlap_dp"]:
        hidden = then.hidden_s.get("dp_comm", 0.0)
        text += f"; overlapped, {fmt_seconds(hidden)} of it at d = {other} hides under the backward"
    return text + "."


def question(values: dict) -> Reveal:
    d = values["dp"]
    other = d * 2 if d < 8 else d // 2
    then, now = result({**values, "dp": other}), result(values)
    sent = then.comm_bytes_per_device["dp_comm"]
    return Reveal(
        question=f"Predict: how many bytes does each GPU send for the gradient all-reduce per iteration "
                 f"with d = {other} instead of {d}?",
        answer=sent, unit="bytes", answer_text=fmt_bytes(sent),
        now=now.comm_bytes_per_device["dp_comm"], now_text=fmt_bytes(now.comm_bytes_per_device["dp_comm"]),
        explanation=explanation(values, other))


def caption(setup, values: dict, palette: str = "default") -> str:
    return (f"Each bar is one iteration with d copies (t = p = 1); the {colour_of_part('dp_comm', palette)} "
            "part is the exposed gradient all-reduce (DP gradient sync).")


LESSON = Lesson(
    number=2, slug="data-parallel", title="Data parallelism and the ring all-reduce",
    text=("**Data parallelism** copies the whole model onto d GPUs; each takes 1/d of the batch. After the "
          "backward pass the gradients must be summed across the copies: an **all-reduce** of Ψ parameters. "
          "In a **ring**, each GPU sends its share of the gradients to its neighbour in 2(d−1) steps of Ψβ/d "
          "bytes (a reduce-scatter, then an all-gather): 2(d−1)/d · Ψβ in all, Ψβ at d = 2 and close to 2Ψβ "
          "for large d, never more however many GPUs there are. Inside a node every hop is fast; a ring that "
          "leaves the node sends part of its bytes over the much "
          "slower network. NCCL runs one ring per GPU of a node, each leaving the node at a different GPU, so "
          "the node's k network cards share that traffic (1/k of the bytes each). Overlapping the all-reduce "
          "with the backward pass hides part of it."),
    formula_latex=r"T_{\text{all-reduce}} = 2\,\frac{d-1}{d}\,\Psi\beta\, g_\ell + 2(d-1)\,L_\ell",
    formula_text="T_all-reduce = 2 (d − 1)/d · Ψ β · g_l + 2 (d − 1) L_l",
    source="Patarasuk & Yuan, 'Bandwidth optimal all-reduce algorithms for clusters of workstations', "
           "JPDC 2009 (ring all-reduce); Thakur, Rabenseifner & Gropp, IJHPCA 2005, Sec. 4.4",
    controls=(Control("dp", "d — data-parallel GPUs", DEGREES, 4),
              Control("overlap_dp", "Overlap the all-reduce with the backward", (False, True), False)),
    build=build, picture=picture, question=question, caption=caption)
