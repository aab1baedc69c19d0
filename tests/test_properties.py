"""Property tests (hypothesis): valid strategies never crash and give consistent numbers;
invalid ones are refused with an ExplorerError naming the offending value.

Model tiny-gpt (4 layers, 4 heads) on the classroom cluster (64 devices), gpus = d t p.
"""
import math

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from explorer import ExplorerError, LayerSplit, Strategy, evaluate, load_cluster, load_model
from explorer.cost.superstep import CATEGORIES
from explorer.strategy.strategy import LAYER_PRESETS

MODEL = load_model("tiny-gpt")
CLUSTER = load_cluster("classroom")
LAYERS, HEADS = MODEL.layers, MODEL.heads
assert (LAYERS, HEADS) == (4, 4)

SETTINGS = settings(max_examples=60, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow])


def divisors(n: int) -> list:
    return [k for k in range(1, n + 1) if n % k == 0]


@st.composite
def layer_split(draw, tp: int, micro_batch: int) -> LayerSplit:
    preset = draw(st.sampled_from(LAYER_PRESETS))
    # a 'batch' split divides the micro-batch; the others divide the heads (4) -- both divide tp
    degrees = divisors(math.gcd(tp, micro_batch)) if preset == "batch" else divisors(tp)
    if preset == "replicated":   # a replicated layer is not split: degree 1
        degrees = [1]
    return LayerSplit(degree=draw(st.sampled_from(degrees)), preset=preset)


@st.composite
def stage_map(draw, pp: int) -> tuple:
    """A non-decreasing layer -> stage map using every stage."""
    cuts = sorted(draw(st.lists(st.integers(1, LAYERS - 1), min_size=pp - 1, max_size=pp - 1, unique=True)))
    out, stage = [], 0
    for layer in range(LAYERS):
        while stage < len(cuts) and layer >= cuts[stage]:
            stage += 1
        out.append(stage)
    return tuple(out)


@st.composite
def valid_strategy(draw) -> Strategy:
    tp = draw(st.sampled_from([1, 2, 4]))
    pp = draw(st.sampled_from([1, 2, 4]))
    dp = draw(st.sampled_from([1, 2, 3]))
    micro_batch = draw(st.sampled_from([1, 2, 4]))
    schedule = draw(st.sampled_from(["gpipe", "1f1b", "interleaved"] if pp > 1 else ["gpipe", "1f1b"]))
    chunks = draw(st.sampled_from([v for v in (1, 2, 4) if pp * v <= LAYERS])) if schedule == "interleaved" else 1
    per_replica = draw(st.integers(1, 4)) * (pp if schedule == "interleaved" else 1)
    splits = ()
    if draw(st.booleans()):
        splits = tuple(draw(layer_split(tp, micro_batch)) for _ in range(LAYERS))
    stages = ()
    if schedule != "interleaved" and pp > 1 and draw(st.booleans()):
        stages = draw(stage_map(pp))
    return Strategy(
        dp=dp, tp=tp, pp=pp, micro_batch=micro_batch, global_batch=micro_batch * dp * per_replica,
        schedule=schedule, chunks=chunks, zero=draw(st.sampled_from([0, 1] if pp > 1 else [0, 1, 2, 3])),
        recompute=draw(st.sampled_from(["none", "selective", "full"])),
        sequence_parallel=draw(st.booleans()) if tp > 1 else False,
        overlap_dp=draw(st.booleans()), scatter_gather=draw(st.booleans()),
        dtype=draw(st.sampled_from(["bf16", "fp16", "fp32"])), layer_splits=splits, stage_map=stages)


@SETTINGS
@given(valid_strategy())
def test_valid_strategies_give_consistent_finite_numbers(strategy):
    """DESIGN.md invariants on random valid strategies: no crash, finite positive times,
    categories >= 0 summing to the total, finite positive memory, m = B/(b d)."""
    result = evaluate(MODEL, strategy, CLUSTER, strategy.devices)
    total = result.iteration_time_s
    assert math.isfinite(total) and total > 0
    assert set(result.breakdown_s) == set(CATEGORIES)
    for category, secs in result.breakdown_s.items():
        assert math.isfinite(secs) and secs >= 0, (category, secs)
    assert sum(result.breakdown_s.values()) == pytest.approx(total, rel=1e-12)
    assert result.breakdown_s["compute"] > 0
    for nbytes in result.comm_bytes_per_device.values():
        assert math.isfinite(nbytes) and nbytes >= 0
    assert len(result.memory_by_stage) == strategy.pp
    for row in result.memory_by_stage:
        assert all(math.isfinite(x) and x >= 0 for x in row.values())
        assert row["total"] > 0
    assert result.micro_batches == strategy.global_batch // (strategy.micro_batch * strategy.dp)
    assert result.gpus == strategy.devices
    assert 0 < result.mfu <= 1
    assert result.hardware_flops_per_iteration >= result.model_flops_per_iteration > 0


@settings(SETTINGS, max_examples=25)
@given(valid_strategy())
def test_symbolic_terms_equal_the_numbers_on_random_strategies(strategy):
    """DESIGN.md: the sympy expression evaluated exactly equals the lambdified number, per
    category and in total (explain(); exact rational substitution, rel 1e-9)."""
    import sympy as sp
    from explorer.cost.explain import explain

    result = evaluate(MODEL, strategy, CLUSTER, strategy.devices)
    sc = explain(MODEL, strategy, CLUSTER, strategy.devices, result)
    exact = {sym: sp.Rational(x) for sym, x in sc.values.items()}
    for category, term in sc.terms.items():
        assert float(term.xreplace(exact)) == pytest.approx(
            result.breakdown_s[category], rel=1e-9, abs=1e-15 * result.iteration_time_s), category
    assert float(sc.total.xreplace(exact)) == pytest.approx(result.iteration_time_s, rel=1e-9)


# ---- invalid input -----------------------------------------------------------------------------

INT_FIELDS = ("dp", "tp", "pp", "micro_batch", "global_batch", "chunks")
BASE = dict(dp=1, tp=2, pp=2, micro_batch=1, global_batch=4)   # valid on 4 GPUs


def case(fields: dict, gpus: int, *needles: str):
    return {"fields": {**BASE, **fields}, "gpus": gpus, "needles": needles}


@st.composite
def invalid_case(draw) -> dict:
    kind = draw(st.sampled_from([
        "degree", "batch", "pp_layers", "gpus", "zero_pp", "negative", "negative_zero", "type",
        "heads", "interleaved_m", "stage_out_of_range", "stage_missing", "splits_length", "batch_degree"]))
    if kind == "degree":          # a layer's degree must divide tp
        tp = draw(st.sampled_from([2, 4]))
        degree = draw(st.sampled_from([k for k in (3, 4, 8) if tp % k]))
        layer = draw(st.integers(0, LAYERS - 1))
        splits = [LayerSplit(tp)] * LAYERS
        splits[layer] = LayerSplit(degree)
        return case(dict(tp=tp, layer_splits=tuple(splits)), 2 * tp, f"degree {degree}", f"layer {layer}")
    if kind == "batch":           # B must be a multiple of b d
        dp, mb = draw(st.sampled_from([1, 2, 3])), draw(st.sampled_from([1, 2, 4]))
        if dp * mb == 1:
            dp = 2
        gb = dp * mb * draw(st.integers(1, 5)) + draw(st.integers(1, dp * mb - 1))
        return case(dict(dp=dp, micro_batch=mb, global_batch=gb), 4 * dp, f"global batch {gb}")
    if kind == "pp_layers":       # more stages than layers
        pp = draw(st.sampled_from([5, 6, 8]))
        return case(dict(tp=1, pp=pp, global_batch=8), pp, f"pp={pp}")
    if kind == "gpus":            # d t p != gpus
        gpus = draw(st.sampled_from([1, 2, 3, 5, 6, 7, 8, 16, 63]))
        return case({}, gpus, f"the {gpus} GPUs", "2 x 2 = 4")
    if kind == "zero_pp":         # ZeRO 2/3 shard what pipelining accumulates
        zero = draw(st.sampled_from([2, 3]))
        return case(dict(zero=zero), 4, f"zero={zero}", "pp=2")
    if kind == "negative":
        name, value = draw(st.sampled_from(INT_FIELDS)), draw(st.integers(-1000, 0))
        return case({name: value}, 4, f"'{name}'", f"got {value}")
    if kind == "negative_zero":
        value = draw(st.integers(-1000, -1))
        return case(dict(zero=value), 4, f"got {value}")
    if kind == "type":
        name = draw(st.sampled_from(INT_FIELDS + ("schedule", "recompute", "dtype", "sequence_parallel",
                                                  "overlap_dp", "scatter_gather")))
        if name in INT_FIELDS:
            value = draw(st.sampled_from(["2", 2.0, True, None, [2], 1.5]))
        elif name in ("schedule", "recompute", "dtype"):
            value = draw(st.sampled_from([1, None, "1F1B-ish", 2.5]))
        else:
            value = draw(st.sampled_from(["yes", 1, 0, None]))
        return case({name: value}, 4, repr(value))
    if kind == "heads":           # tp must divide the 4 heads
        tp = draw(st.sampled_from([3, 8]))
        return case(dict(tp=tp, pp=1, global_batch=1), tp, f"degree {tp}", f"{HEADS} attention heads")
    if kind == "interleaved_m":   # interleaving needs m to be a multiple of p
        m = draw(st.sampled_from([1, 3, 5, 7]))
        return case(dict(schedule="interleaved", chunks=2, global_batch=m), 4, f"({m})", "pp=2")
    if kind == "stage_out_of_range":
        bad = draw(st.sampled_from([2, 3, 7, -1]))
        return case(dict(stage_map=(0, 0, 1, bad) if bad > 1 else (bad, 0, 1, 1)), 4, f"stage {bad}")
    if kind == "stage_missing":   # pp = 3 but the map skips a stage
        stages = draw(st.sampled_from([(0, 0, 2, 2), (0, 1, 1, 1), (0, 0, 0, 0)]))
        missing = min(set(range(3)) - set(stages))
        return case(dict(tp=1, pp=3, global_batch=3, stage_map=stages), 3, f"stage {missing}")
    if kind == "splits_length":
        n = draw(st.sampled_from([1, 2, 3, 5, 8]))
        return case(dict(layer_splits=(LayerSplit(2),) * n), 4, f"{n} entries", f"{LAYERS} layers")
    # batch_degree: a batch split larger than the micro-batch
    mb = draw(st.sampled_from([1, 3]))
    return case(dict(tp=2, micro_batch=mb, global_batch=mb * 2, layer_splits=(LayerSplit(2, "batch"),) * LAYERS),
                4, "batch 2 ways", f"micro-batch is {mb}")


@SETTINGS
@given(invalid_case())
def test_invalid_strategies_are_refused_naming_the_value(bad):
    """DESIGN.md: an invalid strategy is refused with a message naming the offending value
    (an ExplorerError, one line, never another exception)."""
    with pytest.raises(ExplorerError) as err:
        strategy = Strategy(**bad["fields"])
        evaluate(MODEL, strategy, CLUSTER, bad["gpus"])
    message = str(err.value)
    assert "\n" not in message
    for needle in bad["needles"]:
        assert needle in message, (needle, message)


@pytest.mark.parametrize("zero", [1.0, 0.0])
def test_float_zero_stage_is_refused(zero):
    """Wrong types are refused (DESIGN.md): zero must be the integer 0-3, as the strategy
    file loader (strategy_io, field kind int) already requires."""
    with pytest.raises(ExplorerError, match=repr(zero)):
        Strategy(zero=zero)


@pytest.mark.parametrize("name", ["qvk", "embed", "logits"])
def test_override_of_an_unknown_operator_is_refused(name):
    """An invalid strategy is refused with a message naming the offending value (DESIGN.md):
    a misspelt operator in a layer's overrides must not be dropped without a word."""
    splits = (LayerSplit(2, "megatron", ((name, "row"),)),) + (LayerSplit(2),) * (LAYERS - 1)
    strategy = Strategy(dp=1, tp=2, pp=1, micro_batch=1, global_batch=1, layer_splits=splits)
    with pytest.raises(ExplorerError, match=name):
        evaluate(MODEL, strategy, CLUSTER, 2)


def test_replicated_layer_with_a_degree_is_refused():
    """'replicated' splits nothing: a degree above 1 is a contradiction, named in the message."""
    with pytest.raises(ExplorerError, match="degree is 1, not 4"):
        LayerSplit(4, "replicated")


def test_degree_must_divide_the_kv_heads():
    """Grouped-query attention splits whole key/value heads (Megatron-LM requires
    num_query_groups % tensor_model_parallel_size == 0)."""
    from explorer import ModelSpec
    gqa = ModelSpec(name="gqa", family="llama", layers=2, hidden=256, heads=8, kv_heads=2, seq_len=64, vocab=100)
    with pytest.raises(ExplorerError, match="does not divide the 2 key/value heads"):
        evaluate(gqa, Strategy(dp=1, tp=4, pp=1, micro_batch=1, global_batch=1), CLUSTER, 4)
