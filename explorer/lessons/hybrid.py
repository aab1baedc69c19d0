"""Lesson 7: hybrid and per-layer strategies, and the redistribution between differently split layers."""
from __future__ import annotations

from explorer.charts.breakdown import breakdown_bar
from explorer.cost.evaluate import evaluate
from explorer.strategy.strategy import LayerSplit
from explorer.lessons.base import Control, Lesson, Reveal, Setup, cluster, fmt_seconds, model, strategy

TP = 4                      # one node's GPUs per layer group
SPLITS = ("megatron", "batch", "replicated")
SPLIT_LABELS = ("Megatron column→row ×4", "batch split ×4", "replicated (no split)")


def layer_split(name: str) -> LayerSplit:
    return LayerSplit(1, "replicated") if name == "replicated" else LayerSplit(TP, name)


def build(values: dict) -> Setup:
    layers = model().layers
    half = layers // 2
    splits = tuple(layer_split(values["first"]) for _ in range(half)) + \
        tuple(layer_split(values["second"]) for _ in range(layers - half))
    s = strategy(tp=TP, pp=values["pp"], micro_batch=TP, layer_splits=splits)   # b = 4: a batch split needs b ≥ 4
    return Setup(model(), cluster(), s, page="strategy")


def result(values: dict):
    setup = build(values)
    return evaluate(setup.model, setup.strategy, setup.cluster)


def picture(setup: Setup, values: dict):
    first, second = (SPLIT_LABELS[SPLITS.index(values[k])].split(" ×")[0] for k in ("first", "second"))
    uniform = {"first": values["first"], "second": values["first"], "pp": values["pp"]}
    results = {f"all layers: {first}": result(uniform), f"{first} | {second}": result(values)}
    return breakdown_bar(results, f"Iteration time by category, t = {TP}, p = {values['pp']}, "
                                  f"d = {setup.strategy.dp}")


def question(values: dict) -> Reveal:
    now = result(values)
    same = result({**values, "second": values["first"]})
    seconds = now.breakdown_s["redistribution"]
    return Reveal(
        question="Predict: how much time per iteration does this strategy spend redistributing activations "
                 "between layer 3 and layer 4?",
        answer=seconds, unit="s", answer_text=fmt_seconds(seconds),
        now=same.breakdown_s["redistribution"], now_text=fmt_seconds(same.breakdown_s["redistribution"]),
        now_label="both halves split alike",
        explanation=f"{now.comm_bytes_per_device['redistribution'] / 2 ** 20:.3g} MiB per GPU per iteration "
                    "(forward and backward, every micro-batch) to change the layout of the b·s·h activations; "
                    "zero when both halves are split alike. The whole iteration: "
                    f"{fmt_seconds(now.iteration_time_s)} against {fmt_seconds(same.iteration_time_s)} "
                    "with the first half's split everywhere.")


LESSON = Lesson(
    number=7, slug="hybrid", title="Hybrid and per-layer strategies, and redistribution",
    text=("Real runs combine the three: **d × t × p** GPUs, tensor parallelism inside a node, pipeline stages "
          "across nodes, data parallelism over the copies. Nothing forces every layer to be split the same "
          "way: a layer can use Megatron's column→row split, split its micro-batch instead (weights "
          "replicated, no collective inside the layer but a gradient all-reduce), or not be split at all. "
          "Where two neighbouring layers lay their activations out differently, the activations must be "
          "**redistributed** (an all-gather or all-to-all) between them, in the forward and again in the "
          "backward pass. A per-layer strategy pays off when that price is below what it saves."),
    formula_latex=r"T = \sum_{\text{layers}} T_{\text{layer}}(\text{split}) + \sum_{\text{boundaries}} "
                  r"T_{\text{redistribution}}(\text{split}_i \to \text{split}_{i+1})",
    formula_text="T = Σ_layers T_layer(split) + Σ_boundaries T_redistribution(split_i → split_i+1)",
    source="Jia, Zaharia & Aiken, 'Beyond Data and Model Parallelism for Deep Neural Networks' (FlexFlow), "
           "MLSys 2019, Sec. 5; Zheng et al., 'Alpa', OSDI 2022, Sec. 4 (resharding cost between operators)",
    controls=(Control("first", "Layers 0–3", SPLITS, "megatron", labels=SPLIT_LABELS),
              Control("second", "Layers 4–7", SPLITS, "batch", labels=SPLIT_LABELS),
              Control("pp", "p — pipeline stages", (1, 2), 1)),
    build=build, picture=picture, question=question,
    caption=lambda setup, values: "Top bar: every layer split like layers 0–3; bottom bar: this mix. Red: "
                                  "redistribution.")
