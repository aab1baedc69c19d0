"""Lesson 5: ZeRO stages 1, 2, 3: memory saved against communication added."""
from __future__ import annotations

from explorer.charts.lesson_figures import capacity_in_view, memory_bars
from explorer.cost.evaluate import evaluate
from explorer.lessons.base import Control, Lesson, Reveal, Setup, cluster, fmt_bytes, model, ratio_words, strategy

STAGES = (0, 1, 2, 3)
MODELS = ("classroom-gpt", "gpt-3.6b")


def build(values: dict) -> Setup:
    s = strategy(gpus=values["dp"], zero=values["zero"])
    return Setup(model(values["model"]), cluster(), s, page="cost")


def result(values: dict):
    setup = build(values)
    return evaluate(setup.model, setup.strategy, setup.cluster)


def label(z: int) -> str:
    return "no ZeRO" if z == 0 else f"ZeRO-{z}"


def picture(setup: Setup, values: dict):
    results = {label(z): result({**values, "zero": z}) for z in STAGES}
    return memory_bars(results, setup.cluster.device.memory_bytes, current=label(values["zero"]),
                       title=f"Memory per GPU: {setup.model.name}, d = {values['dp']} (pure data parallelism)")


def comm_bytes(r) -> float:
    return r.comm_bytes_per_device["dp_comm"] + r.comm_bytes_per_device["zero_comm"]


def comm_factor(z: int, m: int) -> int:
    """k of the bytes a GPU sends per iteration, k (d − 1)/d · Ψβ, at ZeRO stage z with m micro-batches
    (explorer.cost.superstep.dp_bytes: ZeRO-2 and 3 reduce-scatter after every backward, ZeRO-3 also
    all-gathers the weights before every pass)."""
    return {0: 2, 1: 2, 2: m + 1, 3: 3 * m}[z]


FORMULA = {0: "2(d − 1)/d · Ψβ", 1: "2(d − 1)/d · Ψβ", 2: "(m + 1)(d − 1)/d · Ψβ",
           3: "3m(d − 1)/d · Ψβ"}      # comm_factor(z, m) (d − 1)/d · Ψβ in words
HOW = {0: "one all-reduce of the gradients",
       1: "a reduce-scatter of the gradients and an all-gather of the updated weights: an all-reduce's bytes",
       2: "a reduce-scatter after each micro-batch's backward, as only a gradient shard is kept, and one "
          "all-gather of the weights",
       3: "a reduce-scatter after each micro-batch's backward and an all-gather of the weights before each "
          "of its forward and backward passes"}


def comm_sentence(z: int) -> str:
    return f"{label(z)} sends {FORMULA[z]} ({HOW[z]})"


def question(values: dict) -> Reveal:
    z = values["zero"]
    other = z + 1 if z < 3 else 0
    then, now = result({**values, "zero": other}), result(values)
    mem_then, mem_now = then.memory_bytes_per_device["total"], now.memory_bytes_per_device["total"]
    cap = build(values).cluster.device.memory_bytes
    fits = "fits in" if mem_then <= cap else "does NOT fit in"
    m = now.micro_batches
    return Reveal(
        question=f"Predict: how much memory does each GPU need with {label(other)} instead of {label(z)}?",
        answer=mem_then, unit="bytes", answer_text=fmt_bytes(mem_then), now=mem_now, now_text=fmt_bytes(mem_now),
        explanation=f"It {fits} the {fmt_bytes(cap, 2)} GPU: memory {ratio_words(mem_then, mem_now)} "
                    f"({fmt_bytes(mem_now)} → {fmt_bytes(mem_then)}) while the bytes each GPU sends per iteration "
                    f"{ratio_words(comm_bytes(then), comm_bytes(now), 'grow', 'shrink', 'stay')} "
                    f"({fmt_bytes(comm_bytes(now))} → {fmt_bytes(comm_bytes(then))}). With m = {m} micro-batches, "
                    f"{comm_sentence(z)}; {comm_sentence(other)}.")


def caption(setup, values: dict, palette: str = "default") -> str:
    cap = build(values).cluster.device.memory_bytes
    totals = [result({**values, "zero": z}).memory_bytes_per_device["total"] for z in STAGES]
    line = "the dashed line the GPU's memory" if capacity_in_view(cap, totals) else \
        f"the GPU's {fmt_bytes(cap, 2)} is above the top of the axis"
    return f"One bar per ZeRO stage at the same d; the outlined bar is the current setting, {line}."


LESSON = Lesson(
    number=5, slug="zero", title="ZeRO: sharding the training state",
    text=("Plain data parallelism keeps a full copy of everything on each of the d GPUs: 2 bytes per "
          "parameter for bf16 weights, 2 for gradients and K = 12 for the Adam state (fp32 master weights, "
          "momentum, variance). **ZeRO** shards what it can across the d copies: stage 1 the optimizer "
          "state, stage 2 also the gradients, stage 3 also the weights, which must be all-gathered before "
          "each use. ZeRO-1 sends what the all-reduce sends; so do ZeRO-2 with one micro-batch per step, and "
          "ZeRO-3 1.5× that. With m micro-batches a gradient shard must be reduce-scattered after every "
          "backward, (m + 1)/2 × for ZeRO-2, and ZeRO-3 gathers the weights for every pass: 3m/2 ×. "
          "Activations are not sharded: they depend on the micro-batch, not on d."),
    formula_latex=r"M_0 = (4+K)\Psi,\;\; M_1 = 4\Psi + \tfrac{K\Psi}{d},\;\; M_2 = 2\Psi + "
                  r"\tfrac{(2+K)\Psi}{d},\;\; M_3 = \tfrac{(4+K)\Psi}{d}",
    formula_text="M_0 = (4+K)Ψ,  M_1 = 4Ψ + KΨ/d,  M_2 = 2Ψ + (2+K)Ψ/d,  M_3 = (4+K)Ψ/d  (bytes; K = 12)",
    source="Rajbhandari et al., 'ZeRO: Memory optimizations toward training trillion parameter models', "
           "SC'20, Fig. 1 and Sec. 5 (K = 12 for mixed-precision Adam), Sec. 7 (communication)",
    controls=(Control("zero", "ZeRO stage", STAGES, 0, labels=tuple(label(z) for z in STAGES)),
              Control("dp", "d — data-parallel GPUs", (2, 4, 8), 2),
              Control("model", "Model", MODELS, "gpt-3.6b", labels=("classroom-gpt (0.47 B)", "gpt-3.6b (3.6 B)"))),
    build=build, picture=picture, question=question, caption=caption)
