"""Lesson 7: hybrid and per-layer strategies, and the redistribution between differently split layers."""
from __future__ import annotations

from explorer.charts.breakdown import breakdown_bar
from explorer.charts.lesson_figures import colour_of_part
from explorer.cost import collectives as coll
from explorer.cost import layouts as lay
from explorer.cost.evaluate import evaluate
from explorer.cost.numbers import Numbers
from explorer.cost.plan import returned_grad
from explorer.cost.tree import cost_tree, size_function
from explorer.strategy.strategy import LayerSplit
from explorer.lessons.base import Control, Lesson, Reveal, Setup, cluster, fmt_bytes, fmt_seconds, model, strategy

TP = 4                      # one node's GPUs per layer group
SPLITS = ("megatron", "batch", "replicated")
SPLIT_LABELS = ("Megatron column→row ×4", "batch split ×4", "replicated (no split)")
LAYOUT_WORDS = {lay.R: "whole on every GPU", lay.P: "as partial sums", lay.BATCH: "split by sample",
                lay.FEAT: "split along the hidden dimension", lay.SEQ: "split along the sequence"}
KIND_WORDS = {"all_gather": "an all-gather", "all_reduce": "an all-reduce", "reduce_scatter": "a reduce-scatter",
              "all_to_all": "an all-to-all", "reshard": "a reshard"}


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


def middle() -> int:
    """The first layer of the second half: the question's boundary is between layer middle-1 and middle."""
    return model().layers // 2


def boundaries(values: dict) -> list:
    """Per boundary between consecutive blocks that redistributes: (producer, consumer, seconds, bytes per
    GPU) per iteration -- every micro-batch's forward and backward redistribution collectives there, each
    priced like the cost model prices them (bytes x the group's seconds per byte + latency steps)."""
    setup = build(values)
    s = setup.strategy
    tree = cost_tree(setup.model, s, setup.cluster)
    nums = Numbers.of(setup.model, s.micro_batch, setup.cluster, s.dtype)
    per_replica = micro_batches(values)
    out = []
    for bound in tree.plan.boundaries:
        secs = sent = 0.0
        for c, route in zip(bound.collectives, bound.routes):
            if c.category != "redistribution":
                continue
            size = float(size_function((c.size,))(*nums.size_args())[0])
            nbytes = float(coll.bytes_per_device(c.kind, size, int(c.n)))
            secs += float(nums.collective_seconds(nbytes, coll.latency_steps(c.kind, int(c.n)), c.kind, route))
            sent += nbytes
        if sent:
            out.append((_name(tree.plan.blocks[bound.index - 1].block), _name(tree.plan.blocks[bound.index].block),
                        per_replica * secs, per_replica * sent))
    return out


def _name(block) -> str:
    """'layer 3', 'embedding', 'head'."""
    return f"layer {block.layer}" if block.kind == "layer" else block.name


def asked(values: dict) -> tuple:
    """(seconds, bytes per GPU) per iteration of the one boundary the question asks about."""
    names = (f"layer {middle() - 1}", f"layer {middle()}")
    found = [(secs, sent) for a, b, secs, sent in boundaries(values) if (a, b) == names]
    return found[0] if found else (0.0, 0.0)


def _phase(values: dict, phase: str) -> str:
    """What crosses the asked boundary in one phase, in words, from the plan's layouts and collectives."""
    setup = build(values)
    plan = cost_tree(setup.model, setup.strategy, setup.cluster).plan
    i = next(k for k, pb in enumerate(plan.blocks) if pb.block.kind == "layer" and pb.block.layer == middle())
    prev, cur = plan.blocks[i - 1], plan.blocks[i]
    bound = next(bd for bd in plan.boundaries if bd.index == i)
    kinds = [c.kind for c in bound.collectives if c.category == "redistribution" and c.phase == phase]
    a, b = middle() - 1, middle()
    if phase == "fwd":
        have, need = prev.cost.layout_out, cur.cost.layout_in
        text = (f"forward, layer {a} hands over its output {LAYOUT_WORDS[have]}"
                + (" (the all-reduce closing Megatron's row split made it so)"
                   if values["first"] == "megatron" and have == lay.R else "")
                + f" and layer {b} needs it {LAYOUT_WORDS[need]}")
    else:
        have, need = returned_grad(cur.block, cur.cost), lay.needed_grad(prev.cost.layout_out)
        text = (f"backward, layer {b} returns its input gradient {LAYOUT_WORDS[have]} and layer {a} needs it "
                f"{LAYOUT_WORDS[need]}")
    if kinds:
        n = next(int(c.n) for c in bound.collectives if c.category == "redistribution" and c.phase == phase)
        return text + f": {' and '.join(KIND_WORDS.get(k, k) for k in kinds)} over the {n} GPUs"
    if have == need:
        return text + ": nothing to send"
    return text + ": each GPU keeps its own slice, nothing to send"


def explanation(values: dict) -> str:
    a, b = middle() - 1, middle()
    now, uniform = result(values), result({**values, "second": values["first"]})
    secs, sent = asked(values)
    if values["first"] == values["second"]:
        text = f"Layers {a} and {b} are split alike, so nothing is redistributed between them."
    else:
        text = f"In the {_phase(values, 'fwd')}; in the {_phase(values, 'bwd')}. "
        text += (f"{fmt_bytes(sent)} per GPU per iteration ({sent / 2 ** 20 / micro_batches(values):.3g} MiB for "
                 f"each of the m = {micro_batches(values)} micro-batches)." if sent else
                 "So this boundary costs nothing.")
    others = [(x, y, t) for x, y, t, _ in boundaries(values) if (x, y) != (f"layer {a}", f"layer {b}")]
    if others:
        text += (" The other boundaries that redistribute: " +
                 ", ".join(f"{x} → {y} ({fmt_seconds(t)})" for x, y, t in others) +
                 ", where a batch-split layer meets the embedding or the output head.")
    return text + (f" The whole iteration: {fmt_seconds(now.iteration_time_s)} against "
                   f"{fmt_seconds(uniform.iteration_time_s)} with the first half's split everywhere.")


def micro_batches(values: dict) -> int:
    """m: the micro-batches each replica runs per iteration."""
    s = build(values).strategy
    return s.global_batch // (s.micro_batch * s.dp)


def question(values: dict) -> Reveal:
    seconds = asked(values)[0]
    every = sum(t for _, _, t, _ in boundaries(values))
    return Reveal(
        question=f"Predict: how much time per iteration does this strategy spend redistributing activations "
                 f"between layer {middle() - 1} and layer {middle()}?",
        answer=seconds, unit="s", answer_text=fmt_seconds(seconds),
        now=every, now_text=fmt_seconds(every), now_label="every boundary together",
        explanation=explanation(values))


def caption(setup, values: dict, palette: str = "default") -> str:
    where = "every boundary" if values["pp"] == 1 else "the slowest stage's boundaries"
    return (f"Top bar: every layer split like layers 0–{middle() - 1}; bottom bar: this mix. "
            f"{colour_of_part('redistribution', palette).capitalize()}: redistribution ({where}).")


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
    build=build, picture=picture, question=question, caption=caption)
