"""Lesson 6: activation memory: recomputation and sequence parallelism (Korthikanti et al. 2022)."""
from __future__ import annotations

from explorer.charts.lesson_figures import capacity_in_view, colour_of_part, memory_bars
from explorer.cost.evaluate import evaluate
from explorer.cost.evaluation import evaluation
from explorer.cost.tree import cost_tree
from explorer.lessons.base import Control, Lesson, Reveal, Setup, cluster, fmt_bytes, model, strategy

RECOMPUTE = ("none", "selective", "full")


def build(values: dict) -> Setup:
    t, sp = values["tp"], values["sequence_parallel"]
    note = "Sequence parallelism splits the sequence over the t GPUs of a layer: it needs t > 1, so it is " \
        "off at t = 1." if sp and t == 1 else ""
    s = strategy(tp=t, recompute=values["recompute"], sequence_parallel=sp and t > 1)
    return Setup(model(), cluster(), s, page="cost", note=note)


def result(values: dict):
    setup = build(values)
    return evaluate(setup.model, setup.strategy, setup.cluster)


def picture(setup: Setup, values: dict):
    results = {f"recompute {rc}": result({**values, "recompute": rc}) for rc in RECOMPUTE}
    sp = "with SP" if setup.strategy.sequence_parallel else "without SP"
    return memory_bars(results, setup.cluster.device.memory_bytes, current=f"recompute {values['recompute']}",
                       title=f"Memory per GPU, t = {values['tp']}, {sp} (one micro-batch in flight)")


def textbook_bytes(values: dict) -> float:
    """Activation bytes of all layers for one micro-batch, Korthikanti et al. 2022, Table 2 (full
    recomputation keeps the 2sbh layer input, which sequence parallelism shards over t)."""
    spec, t = model(), values["tp"]
    sp = values["sequence_parallel"] and t > 1
    s, b, h, a = spec.seq_len, 1, spec.hidden, spec.heads
    sbh, attn = s * b * h, 5 * a * s / h
    per_layer = {("none", False): sbh * (10 + 24 / t + attn / t), ("none", True): sbh / t * (34 + attn),
                 ("selective", False): sbh * (10 + 24 / t), ("selective", True): sbh / t * 34,
                 ("full", False): 2 * sbh, ("full", True): 2 * sbh / t}[(values["recompute"], sp)]
    return spec.layers * per_layer


def layer_bytes(values: dict) -> float:
    """The model's activation bytes kept by the transformer layers alone (the embedding and the output
    head with its loss left out) for one micro-batch; p = 1 here, so stage 0 holds every layer."""
    setup = build(values)
    tree = cost_tree(setup.model, setup.strategy, setup.cluster)
    ev = evaluation(setup.model, setup.strategy, setup.cluster)     # its block kinds are the tree's, in order
    per_kind = ev.block_q("act")[:, 0]
    layers = [i for i, kind in enumerate(tree.kinds)
              if any(pb.cost is kind.cost and pb.block.kind == "layer" for pb in tree.plan.blocks)]
    return float(sum(ev.tree.counts[0, i] * float(per_kind[i]) for i in layers))


def question(values: dict) -> Reveal:
    t, sp = values["tp"], values["sequence_parallel"]
    other = {**values, "sequence_parallel": not sp} if t > 1 else {**values, "tp": 2, "sequence_parallel": True}
    change = ("switch sequence parallelism " + ("off" if sp else "on")) if t > 1 else "use t = 2 with SP"
    then, now = result(other), result(values)
    act_then, act_now = then.memory_bytes_per_device["activations"], now.memory_bytes_per_device["activations"]
    layers, textbook = layer_bytes(other), textbook_bytes(other)
    agree = "and so do the model's layers" if abs(layers / textbook - 1) < 0.01 else "the model's layers keep"
    return Reveal(
        question=f"Predict: how much activation memory does each GPU keep if we {change}?",
        answer=act_then, unit="bytes", answer_text=fmt_bytes(act_then), now=act_now, now_text=fmt_bytes(act_now),
        explanation=f"Korthikanti's formula gives {fmt_bytes(textbook)} for the {model().layers} "
                    f"layers, {agree} ({fmt_bytes(layers)}); it adds "
                    f"{fmt_bytes(act_then - layers)} for the embedding and the output head with its loss. One "
                    "micro-batch is in flight at a time (no pipeline here).")


def caption(setup, values: dict, palette: str = "default") -> str:
    spec = model()
    ratio = 5 * spec.heads * spec.seq_len / spec.hidden
    scores = (f"5as/h = {ratio:.3g} > 34, so the attention scores dominate unless recomputed" if ratio > 34 else
              f"5as/h = {ratio:.3g} ≤ 34, so the attention scores are the smaller part")
    cap = cluster().device.memory_bytes
    totals = [result({**values, "recompute": rc}).memory_bytes_per_device["total"] for rc in RECOMPUTE]
    axis = "" if capacity_in_view(cap, totals) else f" The GPU's {fmt_bytes(cap, 2)} is above the axis."
    return (f"{colour_of_part('activations', palette).capitalize()}: activations. s = {spec.seq_len}, "
            f"h = {spec.hidden}, a = {spec.heads}: {scores}.{axis}")


LESSON = Lesson(
    number=6, slug="activations", title="Activation memory: recomputation and sequence parallelism",
    text=("The backward pass needs the forward's intermediate results. Per transformer layer and micro-batch "
          "they take s·b·h·(34 + 5as/h) bytes in 16-bit: 34 sbh for the matrix inputs, dropout masks and "
          "norms, and 5as²b for the attention scores, which grow with the square of the sequence. Tensor "
          "parallelism divides most of it by t, but not the layer norms and dropouts; **sequence "
          "parallelism** splits those along the sequence too, so everything is divided by t. **Selective "
          "recomputation** drops the attention scores and recomputes them in the backward (cheap FLOPs, "
          "large memory); **full** recomputation keeps only each layer's input and reruns its forward."),
    formula_latex=r"M_{\text{act}} = s\,b\,h\left(34 + \frac{5\,a\,s}{h}\right) \text{ per layer; } "
                  r"\frac{s b h}{t}\left(34 + \frac{5 a s}{h}\right) \text{ with TP + SP}",
    formula_text="M_act = s b h (34 + 5 a s / h) bytes per layer;  s b h / t (34 + 5 a s / h) with TP + SP",
    source="Korthikanti et al., 'Reducing Activation Recomputation in Large Transformer Models', "
           "arXiv:2205.05198 (MLSys 2023), Eq. (1) and Table 2",
    controls=(Control("recompute", "Recomputation", RECOMPUTE, "none"),
              Control("sequence_parallel", "Sequence parallelism", (False, True), False),
              Control("tp", "t — GPUs per layer", (1, 2, 4), 4)),
    build=build, picture=picture, question=question, caption=caption)
