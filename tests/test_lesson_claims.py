"""Each lesson's words against the numbers it shows (issue 30, item 1).

For every value of every control (each lesson has at most three), the claims of the lesson's text, its
reveal and its caption hold in the model; and each content error a lecturer found has a test here that
fails on the old text:
  lesson 1 pointed the wrong way at t = 8; lesson 2's caption said "green" for a pink bar; lesson 4 said
  ZB-H1 "fills" the bubble and quoted (p − 1)/m for it; lesson 5 said ZeRO-1 and 2 "cost nothing extra" and
  ZeRO-3 "≈ 1.5×" beside 4.5× and 12×; lesson 6's bars were lost on a 70 GiB axis and its caption said
  "red" for pink; lesson 7 summed every boundary when asked about one and gave "replicated" no reason;
  lesson 8's answer was cut off and its counts did not add up.
"""
import functools
import itertools
import re

import pytest

from explorer.charts.gantt import IDLE_NAME

from explorer import Strategy, evaluate, load_cluster
from explorer.charts.classroom import classroom_figure
from explorer.charts.lesson_figures import CAPACITY_IN_VIEW, COLOUR_NAMES, colour_word, palette_colour
from explorer.charts.palette import PALETTES, SCOPES
from explorer.charts.tables import CATEGORY_LABELS, GIB
from explorer.errors import ExplorerError
from explorer.lessons import LESSONS, by_slug, fmt_bytes, fmt_seconds
from explorer.lessons import (activations, data_parallel, double_level, hybrid, pipeline, search_lesson,
                              tensor_parallel, zero)

C = load_cluster("classroom")
NODE = C.levels[0].fanout
PALETTE_NAMES = tuple(PALETTES)
MEMORY_LESSONS = ("zero", "activations")       # app_pages/lesson_view.py: their 'optimizer' is the state
MAX_METRIC_CHARS = 14                          # what a Streamlit metric shows without cutting it off


def combos(slug: str) -> list:
    """Every combination of the lesson's control values."""
    lesson = by_slug(slug)
    names = [c.name for c in lesson.controls]
    return [dict(zip(names, combo)) for combo in itertools.product(*(c.options for c in lesson.controls))]


def ids(slug: str) -> list:
    return [",".join(f"{k}={v}" for k, v in values.items()) for values in combos(slug)]


@functools.lru_cache(maxsize=None)
def _reveal(slug: str, items: tuple):
    try:
        return by_slug(slug).reveal(dict(items))
    except ExplorerError as err:            # an impossible setting names its problem in one line
        assert str(err) and "\n" not in str(err)
        return None


def reveal_of(slug: str, values: dict):
    """The reveal of a setting; the test is skipped for a setting that cannot run (test_lessons checks
    that it names its problem)."""
    reveal = _reveal(slug, tuple(values.items()))
    if reveal is None:
        pytest.skip("this setting cannot run and says why")
    return reveal


def settings(lesson) -> list:
    """(values, Reveal) of every setting that runs."""
    out = [(values, _reveal(lesson.slug, tuple(values.items()))) for values in combos(lesson.slug)]
    return [(values, reveal) for values, reveal in out if reveal is not None]


def each(slug: str):
    """pytest.mark.parametrize over every setting of a lesson, as `values`."""
    return pytest.mark.parametrize("values", combos(slug), ids=ids(slug))


def direction(new: float, old: float, tolerance: float = 0.05) -> str:
    """'up', 'down' or 'same' (within the tolerance lessons.base.ratio_words uses)."""
    if old == new or (old and abs(new / old - 1) <= tolerance):
        return "same"
    return "up" if new > old else "down"


WORDS = {"up": ("grows", "grow", "more"), "down": ("shrinks", "shrink", "less"), "same": ("stays", "stay")}


def says(text: str, subject: str, way: str) -> bool:
    """Does `text` say that `subject` goes `way` ('up', 'down', 'same') -- and no other way?"""
    found = re.search(re.escape(subject) + r" (grows|grow|shrinks|shrink|stays|stay)\b", text)
    return bool(found) and found.group(1) in WORDS[way]


# ---- every lesson, every setting ------------------------------------------------------------------------

@pytest.mark.parametrize("lesson", LESSONS, ids=lambda lesson: lesson.slug)
def test_no_reveal_is_cut_off_or_unfinished(lesson):
    """Lesson 8 showed '171 ms: d=4 ·': the answer must fit its metric and every sentence must end."""
    for values, reveal in settings(lesson):
        assert len(reveal.answer_text) <= MAX_METRIC_CHARS, (values, reveal.answer_text)
        assert len(reveal.now_text) <= MAX_METRIC_CHARS, (values, reveal.now_text)
        assert not reveal.answer_text.rstrip().endswith(("·", ":", ",")), reveal.answer_text
        assert reveal.explanation.endswith("."), (values, reveal.explanation[-40:])
        assert reveal.explanation.count("(") == reveal.explanation.count(")"), reveal.explanation
        assert reveal.question.startswith("Predict") and reveal.question.endswith("?")


def test_every_palette_colour_has_a_name_and_names_tell_categories_apart():
    for name, palette in PALETTES.items():
        for key, colour in palette.items():
            assert colour.upper() in COLOUR_NAMES, (name, key, colour)
        for scope, colour in SCOPES[name].items():
            assert colour.upper() in COLOUR_NAMES, (name, scope, colour)
        # the categories a caption names are told apart by their words in each palette
        words = [colour_word(palette[c]) for c in ("compute", "op_comm", "redistribution", "pp_comm", "dp_comm",
                                                   "bubble")]
        assert len(set(words)) == len(words), (name, words)
    assert colour_word("#FF0000") == "red" and colour_word("#00FF00") == "green" and colour_word("#777777") == "grey"


def shown(lesson, values: dict, palette: str):
    """The picture as the page shows it in `palette` (classroom mode repaints it, app_pages/lesson_view)."""
    fig = lesson.figure(values)
    return fig if palette == "default" else classroom_figure(fig, palette, memory=lesson.slug in MEMORY_LESSONS)


def names_of(trace_name: str) -> set:
    """A trace's name, and its label once classroom mode renames categories ('op_comm' -> 'TP / operator comm')."""
    return {trace_name, CATEGORY_LABELS.get(trace_name, trace_name)}


def word_of(fig, trace_name: str) -> str:
    colours = {trace.marker.color for trace in fig.data if trace.name in names_of(trace_name)}
    assert len(colours) == 1, (trace_name, colours)
    return colour_word(colours.pop())


# the colour words of each caption, as phrases, from the colours of the traces the picture actually has
CAPTION_COLOURS = {
    "double-level": lambda w: f"{w('compute').capitalize()}: compute; {w('op_comm')}: communication",
    "data-parallel": lambda w: f"the {w(CATEGORY_LABELS['dp_comm'])} part is the exposed gradient all-reduce",
    "tensor-parallel": lambda w: (f"{w('intra-node exposed').capitalize()}: inside a node, {w('inter-node exposed')}: "
                                  f"between nodes ({w('intra-node hidden')} and {w('inter-node hidden')}: hidden"),
    # the grey bars are every stage's waiting (IDLE_NAME), not only the critical stage's bubble (issue 30 item 5)
    "pipeline": lambda w: f"{w(IDLE_NAME).capitalize()}: idle, on any stage; the bubble is the critical stage's",
    "activations": lambda w: f"{w('activations').capitalize()}: activations",
    "hybrid": lambda w: f"{w(CATEGORY_LABELS['redistribution']).capitalize()}: redistribution",
}


@pytest.mark.parametrize("palette", PALETTE_NAMES)
@pytest.mark.parametrize("slug", sorted(CAPTION_COLOURS))
def test_caption_colour_words_are_the_colours_of_the_bars(slug, palette):
    """Lesson 2's caption said 'green' for a pink bar, lesson 6's 'red' for pink bars (classroom mode)."""
    lesson = by_slug(slug)
    for values, reveal in settings(lesson):
        fig = shown(lesson, values, palette)
        caption = lesson.caption_text(values, palette)
        if slug == "double-level" and not names_of("op_comm") & {t.name for t in fig.data}:
            assert f"{colour_word(palette_colour('op_comm', palette))}:" not in caption, caption   # none drawn
            continue
        expected = CAPTION_COLOURS[slug](lambda name: word_of(fig, name))
        assert expected in caption, (values, palette, expected, caption)


@pytest.mark.parametrize("palette", PALETTE_NAMES)
def test_the_old_colour_words_are_gone_where_the_bar_is_not_that_colour(palette):
    dp = word_of(shown(by_slug("data-parallel"), {}, palette), CATEGORY_LABELS["dp_comm"])
    assert dp != "green" and "green" not in by_slug("data-parallel").caption_text(palette=palette)
    act = word_of(shown(by_slug("activations"), {}, palette), "activations")
    caption = by_slug("activations").caption_text(palette=palette)
    assert caption.startswith(act.capitalize()) and (act == "red" or "Red" not in caption)


# ---- lesson 1: the double-level model -------------------------------------------------------------------

@each("double-level")
def test_lesson1_every_direction_word_follows_the_micro_steps(values):
    reveal = reveal_of("double-level", values)
    t = values["tp"]
    other = int(re.search(r"with t = (\d+)", reveal.question).group(1))
    (c_now, x_now), (c_then, x_then) = double_level.parts(values), double_level.parts({**values, "tp": other})
    text = reveal.explanation
    assert text.startswith(f"From t = {t} to t = {other},")
    assert says(text, "computation", direction(c_then, c_now)), text
    assert f"({fmt_seconds(c_now)} → {fmt_seconds(c_then)})" in text
    if x_now or x_then:
        assert says(text, "all-reduces and barriers", direction(x_then, x_now)), text
    else:
        assert "no collective of its own" in text
    crosses = max(t, other) > NODE >= min(t, other)
    assert ("spans" in text) == (crosses and bool(x_now or x_then)), text
    assert reveal.answer == pytest.approx(double_level.makespan({**values, "tp": other}))


def test_lesson1_at_t8_the_answer_points_the_right_way():
    """Old text at t = 8 (asked about t = 4): 'Computation shrinks about 0.5×... crosses the node'."""
    reveal = by_slug("double-level").reveal({"tp": 8})
    assert "t = 4 instead of 8" in reveal.question
    assert "shrinks about 0.5×" not in reveal.explanation
    assert "computation grows" in reveal.explanation and "all-reduces and barriers shrink" in reveal.explanation


# ---- lesson 2: data parallelism --------------------------------------------------------------------------

@each("data-parallel")
def test_lesson2_the_ring_numbers_and_the_time_follow_the_model(values):
    reveal = reveal_of("data-parallel", values)
    d = values["dp"]
    other = int(re.search(r"with d = (\d+)", reveal.question).group(1))
    then, now = data_parallel.result({**values, "dp": other}), data_parallel.result(values)
    assert reveal.answer == then.comm_bytes_per_device["dp_comm"]
    assert reveal.answer == pytest.approx(data_parallel.ring_bytes(other, then.params))
    text = reveal.explanation
    assert f"gives {fmt_bytes(reveal.answer)}: {100 * (other - 1) / other:.0f} % of 2Ψβ" in text
    if min(d, other) > 1:
        way = direction(data_parallel.sync_seconds(then), data_parallel.sync_seconds(now))
        assert says(text, "Its time", way), text
        assert ("leaves the node" in text) == (max(d, other) > NODE >= min(d, other))
    if values["overlap_dp"]:
        assert f"{fmt_seconds(then.hidden_s['dp_comm'])} of it at d = {other} hides" in text


def test_lesson2_text_no_longer_says_almost_2_psi_beta_whatever_d():
    lesson = by_slug("data-parallel")
    assert "almost 2Ψβ" not in lesson.text
    r = data_parallel.result({"dp": 2, "overlap_dp": False})
    assert r.comm_bytes_per_device["dp_comm"] == pytest.approx(r.params * data_parallel.BYTES_PER_GRADIENT)   # Ψβ
    assert "Ψβ at d = 2" in lesson.text


# ---- lesson 3: tensor parallelism ------------------------------------------------------------------------

@each("tensor-parallel")
def test_lesson3_tp_time_jumps_when_the_group_leaves_the_node(values):
    reveal = reveal_of("tensor-parallel", values)
    t = values["tp"]
    other = int(re.search(r"with t = (\d+)", reveal.question).group(1))
    then, now = tensor_parallel.result({**values, "tp": other}), tensor_parallel.result(values)
    assert reveal.answer == then.breakdown_s["op_comm"]
    text = reveal.explanation
    if t > 1:
        assert says(text, "the exposed TP time", direction(then.breakdown_s["op_comm"], now.breakdown_s["op_comm"]))
    wide = max(t, other)
    assert wide > NODE and f"At t = {wide} the group spans 2 nodes" in text
    in_node = tensor_parallel.result({**values, "tp": NODE}).breakdown_s["op_comm"]
    across = tensor_parallel.result({**values, "tp": wide}).breakdown_s["op_comm"]
    assert across > 3 * in_node, "that is why TP stays inside a node"
    # 'every layer pays 2 all-reduces forward and 2 backward of b s h': the layers' bytes, the rest the head's
    m, spec = now.micro_batches, tensor_parallel.model()
    layers = 4 * spec.layers * m * 2 * (wide - 1) / wide * spec.seq_len * spec.hidden * 2
    sent = tensor_parallel.result({**values, "tp": wide}).comm_bytes_per_device["op_comm"]
    assert layers <= sent <= (1.1 if not values["sequence_parallel"] else 1.4) * layers


# ---- lesson 4: the pipeline bubble -----------------------------------------------------------------------

@each("pipeline")
def test_lesson4_bubble_claims_hold(values):
    reveal = reveal_of("pipeline", values)
    schedule, m = values["schedule"], values["micro_batches"]
    doubled = {**values, "micro_batches": 2 * m}
    text = reveal.explanation
    assert reveal.answer == pipeline.bubble_seconds(doubled) and reveal.now == pipeline.bubble_seconds(values)
    assert direction(reveal.answer, reveal.now) == "same", "whatever m"
    if schedule == "dualpipev" and pipeline.no_bubble(values):
        ref = pipeline.bubble_seconds({**values, "schedule": "1f1b"})
        assert reveal.now == reveal.answer == 0.0 and ref > 0
        assert f"DualPipeV leaves no bubble here, at m = {m} as at m = {2 * m}, against 1F1B's {fmt_seconds(ref)}" in text
        assert "(p − 1)/m" not in text, "no 1F1B formula for DualPipeV"
        return
    assert says(text, "The bubble", direction(reveal.answer, reveal.now)), text
    assert pipeline.share(doubled) < pipeline.share(values), "its share falls"
    assert (f"falls from {100 * pipeline.share(values):.2g} % at m = {m} to "
            f"{100 * pipeline.share(doubled):.2g} % at m = {2 * m}") in text
    if schedule in ("zb-h1", "dualpipev"):
        ref = pipeline.bubble_seconds({**values, "schedule": "1f1b"})
        assert 0 < reveal.now < ref, "ZB-H1 shrinks the bubble, it does not remove it"
        assert f"{fmt_seconds(reveal.now)} against 1F1B's {fmt_seconds(ref)}" in text
        assert "(p − 1)/m" not in text and "(p − 1)/(v m)" not in text, "no 1F1B formula for ZB-H1"
    else:
        setup = pipeline.build(values)
        r = evaluate(setup.model, setup.strategy, setup.cluster)
        passes = [st["fwd_s"] + st["bwd_s"] for st in r.stage_times_s]
        others = sum(passes) - passes[r.critical_stage]       # 'one pass of each of the p − 1 other stages'
        v = pipeline.CHUNKS if schedule == "interleaved" else 1
        assert reveal.now == pytest.approx(others / v, rel=0.01)
        formula = "(p − 1)/(v m)" if schedule == "interleaved" else "(p − 1)/m"
        assert (f"{formula} of the ideal time halves, {pipeline.textbook_fraction(values):.3g} → "
                f"{pipeline.textbook_fraction(doubled):.3g}") in text


def test_lesson4_text_says_zb_h1_shrinks_the_bubble_not_fills_it():
    """Old text: 'fills the bubble with the latter' while the model cuts it 56.8 -> 32.1 ms."""
    lesson = by_slug("pipeline")
    assert "fills the bubble" not in lesson.text and "shrinks" in lesson.text
    for p in (2, 4, 8):
        zb = pipeline.bubble_seconds({"schedule": "zb-h1", "pp": p, "micro_batches": 8})
        assert 0 < zb < pipeline.bubble_seconds({"schedule": "1f1b", "pp": p, "micro_batches": 8})


# ---- lesson 5: ZeRO --------------------------------------------------------------------------------------

@each("zero")
def test_lesson5_communication_words_follow_the_model(values):
    reveal = reveal_of("zero", values)
    z, d = values["zero"], values["dp"]
    other = int(re.search(r"with (?:ZeRO-(\d)|no ZeRO) instead", reveal.question).group(1) or 0)
    now, then = zero.result(values), zero.result({**values, "zero": other})
    m, text = now.micro_batches, reveal.explanation
    for stage, r in ((z, now), (other, then)):      # the formulas the text quotes are the model's bytes
        assert zero.comm_bytes(r) == pytest.approx(zero.comm_factor(stage, m) * (d - 1) / d * r.params * 2)
        assert f"{zero.label(stage)} sends {zero.FORMULA[stage]}" in text
    way = direction(zero.comm_bytes(then), zero.comm_bytes(now))
    assert says(text, "the bytes each GPU sends per iteration", way), text
    assert f"({fmt_bytes(zero.comm_bytes(now))} → {fmt_bytes(zero.comm_bytes(then))})" in text
    assert says(text, "memory", direction(reveal.answer, reveal.now)), text
    if way == "up":
        assert "nothing extra" not in text and "cost nothing" not in text
    fits = reveal.answer <= C.device.memory_bytes
    assert ("It fits in" if fits else "It does NOT fit in") in text


def test_lesson5_no_longer_says_zero_1_and_2_cost_nothing_beside_more_traffic():
    """Old reveal: '6.64 GiB to 29.9 GiB: ZeRO-1 and 2 cost nothing extra'."""
    reveal = by_slug("zero").reveal({"zero": 1, "dp": 2, "model": "gpt-3.6b"})
    assert "cost nothing" not in reveal.explanation
    assert "grow 4.5× (6.64 GiB → 29.9 GiB)" in reveal.explanation


@pytest.mark.parametrize("model", zero.MODELS)
@pytest.mark.parametrize("d", (2, 4, 8))
def test_lesson5_text_ratios_hold_at_m_and_at_one_micro_batch(model, d):
    """The text: ZeRO-1 = the all-reduce; at one micro-batch ZeRO-2 = it and ZeRO-3 1.5x (the paper's
    numbers); with m micro-batches (m + 1)/2 x and 3m/2 x (what the model shows: 12x at m = 8, not 1.5x)."""
    text = by_slug("zero").text
    assert "1.5×" in text and "(m + 1)/2 ×" in text and "3m/2 ×" in text
    assert "about 1.5× the communication" not in text
    for m in (1, 8):
        spec = zero.model(model)
        sent = [zero.comm_bytes(evaluate(spec, Strategy(dp=d, global_batch=m * d, zero=z), C)) for z in zero.STAGES]
        assert sent[1] == pytest.approx(sent[0])
        assert sent[2] / sent[0] == pytest.approx((m + 1) / 2)
        assert sent[3] / sent[0] == pytest.approx(3 * m / 2)
    assert zero.result({"zero": 3, "dp": d, "model": model}).micro_batches == 8


# ---- lesson 6: activation memory -------------------------------------------------------------------------

@each("activations")
def test_lesson6_korthikanti_is_the_models_layers_and_the_picture_fits_its_bars(values):
    reveal = reveal_of("activations", values)
    t = values["tp"]
    other = {**values, "sequence_parallel": not values["sequence_parallel"]} if t > 1 else \
        {**values, "tp": 2, "sequence_parallel": True}
    layers = activations.layer_bytes(other)
    assert layers == pytest.approx(activations.textbook_bytes(other), rel=0.01)
    text = reveal.explanation
    assert f"and so do the model's layers ({fmt_bytes(layers)})" in text
    assert f"it adds {fmt_bytes(reveal.answer - layers)} for the embedding" in text
    assert activations.build(other).strategy.pp == 1, "'one micro-batch is in flight at a time'"
    # the picture: its axis fits the bars; the capacity is drawn only when it is in view
    fig = by_slug("activations").figure(values)
    top = fig.layout.yaxis.range[1]
    tallest = max(r.memory_bytes_per_device["total"] / GIB for r in
                  (activations.result({**values, "recompute": rc}) for rc in activations.RECOMPUTE))
    assert tallest >= 0.5 * top, (tallest, top)
    drawn = any(shape.type == "line" for shape in fig.layout.shapes)
    assert drawn == (C.device.memory_bytes / GIB <= CAPACITY_IN_VIEW * tallest)
    assert ("above the axis" in by_slug("activations").caption_text(values)) == (not drawn)


def test_lesson6_caption_numbers_are_the_models():
    spec = activations.model()
    ratio = 5 * spec.heads * spec.seq_len / spec.hidden
    caption = by_slug("activations").caption_text()
    assert f"s = {spec.seq_len}, h = {spec.hidden}, a = {spec.heads}: 5as/h = {ratio:.3g}" in caption
    assert ("dominate" in caption) == (ratio > 34)


@each("zero")
def test_lesson5_picture_fits_its_bars_too(values):
    fig = by_slug("zero").figure(values)
    top = fig.layout.yaxis.range[1]
    tallest = max(zero.result({**values, "zero": z}).memory_bytes_per_device["total"] / GIB for z in zero.STAGES)
    assert tallest >= 0.5 * top
    drawn = any(shape.type == "line" for shape in fig.layout.shapes)
    assert ("dashed line" in by_slug("zero").caption_text(values)) == drawn


# ---- lesson 7: per-layer strategies and redistribution ---------------------------------------------------

@each("hybrid")
def test_lesson7_the_answer_is_the_one_boundary_asked_about(values):
    reveal = reveal_of("hybrid", values)
    a, b = hybrid.middle() - 1, hybrid.middle()
    assert f"between layer {a} and layer {b}?" in reveal.question
    bounds = hybrid.boundaries(values)
    asked = [secs for x, y, secs, _ in bounds if (x, y) == (f"layer {a}", f"layer {b}")]
    assert reveal.answer == (asked[0] if asked else 0.0)
    assert reveal.now == pytest.approx(sum(secs for _, _, secs, _ in bounds))
    if values["pp"] == 1:      # the boundaries priced one by one add up to the model's redistribution
        r = hybrid.result(values)
        assert reveal.now == pytest.approx(r.breakdown_s["redistribution"], rel=1e-6, abs=1e-12)
        assert sum(sent for *_, sent in bounds) == pytest.approx(r.comm_bytes_per_device["redistribution"])
    text = reveal.explanation
    if values["first"] == values["second"]:
        assert reveal.answer == 0 and "split alike, so nothing is redistributed" in text
    elif reveal.answer == 0:
        assert text.count("nothing to send") == 2 and "costs nothing" in text
    else:
        assert "an all-gather over the 4 GPUs" in text
        assert f"{fmt_bytes(hybrid.asked(values)[1])} per GPU per iteration" in text
    for x, y, secs, _ in bounds:
        if (x, y) != (f"layer {a}", f"layer {b}"):
            assert f"{x} → {y} ({fmt_seconds(secs)})" in text
            assert "embedding" in x or "head" in y, "where a batch-split layer meets the embedding or the head"


def test_lesson7_batch_to_megatron_is_one_boundary_not_the_sum():
    """Old reveal: batch→Megatron and 'both halves alike' both 4.07 ms ('zero when split alike')."""
    lesson = by_slug("hybrid")
    mixed = lesson.reveal({"first": "batch", "second": "megatron", "pp": 1})
    alike = lesson.reveal({"first": "batch", "second": "batch", "pp": 1})
    assert alike.answer == 0 < mixed.answer < mixed.now
    assert mixed.now_label == "every boundary together"


def test_lesson7_replicated_says_why_it_costs_nothing():
    reveal = by_slug("hybrid").reveal({"first": "megatron", "second": "replicated", "pp": 1})
    assert reveal.answer == 0
    assert "whole on every GPU" in reveal.explanation and "nothing to send" in reveal.explanation


# ---- lesson 8: systematic search -------------------------------------------------------------------------

@each("search")
def test_lesson8_counts_add_up_and_the_answer_is_whole(values):
    reveal = reveal_of("search", values)
    found = search_lesson._run(values)
    n = search_lesson.counts(found)
    assert n["ruled_out"] + n["evaluated"] == n["total"]
    assert n["over_cap"] + n["within_cap"] == n["evaluated"]
    text = reveal.explanation
    assert f"looked at {n['total']:,} combinations" in text and f"ruled out {n['ruled_out']:,}" in text
    assert f"the other {n['evaluated']:,} in bulk" in text
    if n["over_cap"]:
        assert f"of which {n['over_cap']:,} need more than" in text and f"and {n['within_cap']:,} fit" in text
    else:
        assert "all of which fit" in text
    best = found.top[0]
    assert reveal.answer == best.iteration_time_s and reveal.answer_text == fmt_seconds(best.iteration_time_s)
    assert reveal.now_text == f"{best.strategy.dp} · {best.strategy.tp} · {best.strategy.pp}"
    assert f"Fastest: {search_lesson.label(best.strategy)}, " in text


def test_lesson8_old_counts_did_not_add_up():
    """Old: 'pruned 21,912 ... evaluated 3,624' of 24,000 (the memory cap counted in both)."""
    reveal = by_slug("search").reveal({"gpus": 8, "global_batch": 16, "cap_gib": 4})
    said = re.search(r"looked at ([\d,]+) combinations: its rules ruled out ([\d,]+) .* the other ([\d,]+) in bulk, "
                     r"of which ([\d,]+) need more than 4 GiB per GPU and ([\d,]+) fit", reveal.explanation)
    total, ruled_out, evaluated, over, within = (int(x.replace(",", "")) for x in said.groups())
    assert ruled_out + evaluated == total and over + within == evaluated and over > 0
    assert ":" not in reveal.answer_text
