"""Lesson 3: operator (tensor) parallelism, Megatron's column→row pairing, and why it stays in a node."""
from __future__ import annotations

from explorer.charts.breakdown import comm_figure
from explorer.charts.lesson_figures import colour_of_part
from explorer.charts.tables import comm_table
from explorer.cost.evaluate import evaluate
from explorer.lessons.base import (Control, Lesson, Reveal, Setup, cluster, fmt_seconds, links, model, per_node,
                                   ratio_words, strategy)

DEGREES = (1, 2, 4, 8)


def build(values: dict) -> Setup:
    t, sp = values["tp"], values["sequence_parallel"]
    note = "Sequence parallelism needs t > 1: it is off at t = 1." if sp and t == 1 else ""
    return Setup(model(), cluster(), strategy(tp=t, sequence_parallel=sp and t > 1), page="cost", note=note)


def result(values: dict):
    setup = build(values)
    return evaluate(setup.model, setup.strategy, setup.cluster)


def picture(setup: Setup, values: dict):
    r = evaluate(setup.model, setup.strategy, setup.cluster)
    return comm_figure(comm_table(r, setup.cluster.levels[0].name),
                       f"Communication per GPU, t = {values['tp']}, d = {setup.strategy.dp}")


def explanation(values: dict, other: int) -> str:
    t = values["tp"]
    then, now = result({**values, "tp": other}), result(values)
    what = ("2 reduce-scatters and 2 all-gathers forward and as many backward (plus, for each linear's weight "
            "gradient, an all-gather of its input, mostly under the backward's compute)" if values["sequence_parallel"]
            else "2 all-reduces forward and 2 backward")      # at t = other > 1, where SP applies
    text = f"Every layer pays {what} of its b·s·h activations, on the critical path. "
    if t == 1:
        text += "At t = 1 there is none. "
    else:
        a, b = now.breakdown_s["op_comm"], then.breakdown_s["op_comm"]
        text += (f"From t = {t} to t = {other} the exposed TP time {ratio_words(b, a)} "
                 f"({fmt_seconds(a)} → {fmt_seconds(b)}). ")
    node, wide = per_node(cluster()), max(t, other)
    if wide > node:
        text += (f"At t = {wide} the group spans {-(-wide // node)} nodes, so its collectives cross the slower "
                 f"link ({links(cluster())}): that is why TP stays inside a node.")
    return text.strip()


def question(values: dict) -> Reveal:
    t = values["tp"]
    other = 8 if t < 8 else 4
    then, now = result({**values, "tp": other}), result(values)
    return Reveal(
        question=f"Predict: how long is the exposed TP communication per iteration with t = {other} "
                 f"instead of {t}?",
        answer=then.breakdown_s["op_comm"], unit="s", answer_text=fmt_seconds(then.breakdown_s["op_comm"]),
        now=now.breakdown_s["op_comm"], now_text=fmt_seconds(now.breakdown_s["op_comm"]),
        explanation=explanation(values, other))


def caption(setup, values: dict, palette: str = "default") -> str:
    inside, across = (colour_of_part(scope, palette) for scope in ("intra-node", "inter-node"))
    light_in, light_across = (colour_of_part(f"{scope} hidden", palette) for scope in ("intra-node", "inter-node"))
    return (f"Left: bytes sent per GPU per iteration; right: seconds. {inside.capitalize()}: inside a node, "
            f"{across}: between nodes ({light_in} and {light_across}: hidden under computation); "
            f"d = 8 / t copies.")


LESSON = Lesson(
    number=3, slug="tensor-parallel", title="Operator (tensor) parallelism and the machine hierarchy",
    text=("**Tensor parallelism** splits each layer's matrices over t GPUs. Megatron-LM pairs a **column** "
          "split (QKV, FC1: each GPU computes some output columns, no communication) with a **row** split "
          "(proj, FC2: each GPU holds part of the reduction, so partial sums must be added). The pair needs "
          "one collective: **g**, an all-reduce after the row split in the forward pass, and its conjugate "
          "**f** in the backward pass: two per layer each way. These activations of b·s·h elements sit on "
          "the critical path and cannot hide behind computation, so the group must use the fastest links: "
          "inside a node. With sequence parallelism each all-reduce becomes a reduce-scatter plus an "
          "all-gather of the same volume."),
    formula_latex=r"T_{\mathrm{TP}} = 4\,\ell_{\text{stage}}\,m\cdot 2\,\frac{t-1}{t}\, b s h \beta\, g_\ell",
    formula_text="T_TP = 4 · layers · m · 2 (t − 1)/t · b s h β · g_l   (4 all-reduces per layer and micro-batch)",
    source="Shoeybi et al., 'Megatron-LM', arXiv:1909.08053, Sec. 3 and Fig. 3 (f and g); "
           "Narayanan et al., SC'21, Sec. 3.2 (tensor parallelism within a node)",
    controls=(Control("tp", "t — GPUs per layer", DEGREES, 4),
              Control("sequence_parallel", "Sequence parallelism", (False, True), False)),
    build=build, picture=picture, question=question, caption=caption)
