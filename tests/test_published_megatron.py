"""Published Megatron-LM numbers and formulas (Narayanan et al. SC'21, arXiv:2104.04473).

Every test cites the published.json entry it reproduces (its `source` and `id`).
Table 1 does not state the micro-batch size; where one is needed we assume b = 1
(parameter and FLOP counts do not depend on it, Eq. 2 and Eq. 3 have no b).
"""
import dataclasses
from fractions import Fraction

import pytest
import sympy as sp

from explorer import ModelSpec, Strategy, evaluate, load_cluster
from explorer.cost.block import block_cost
from explorer.hardware.cluster import Efficiency
from explorer.model.graph import build_blocks
from explorer.cost.plan import plan
from explorer.schedules import get as schedule_of
from explorer.symbols import B_max, F_max, S_T, T_star, V, a, a_kv, b, beta, f, h, m, p, s, t, v

TABLE1 = ("1.7B", "3.6B", "7.5B", "18.4B", "39.1B", "76.1B", "145.6B", "310.1B", "529.6B", "1008.0B")
BF16 = 2  # bytes per element (Megatron trains in 16-bit)


def table1_model(row: dict) -> ModelSpec:
    i = row["inputs"]
    return ModelSpec(name="table1", family="gpt", layers=i["layers"], hidden=i["hidden_size"],
                     heads=i["attention_heads"], seq_len=i["seq_len"], vocab=i["vocab"])


def table1_strategy(row: dict, recompute: str) -> Strategy:
    """The row's t, p, d and B; b = 1 assumed (Table 1 leaves it open). Table 1 ran the
    interleaved schedule with an unstated v; 1F1B is used since Eq. 2 and Eq. 3 do not
    depend on the schedule."""
    i = row["inputs"]
    return Strategy(dp=i["data_parallel_derived"], tp=i["tensor_parallel"], pp=i["pipeline_parallel"],
                    micro_batch=1, global_batch=i["global_batch_size"], schedule="1f1b",
                    recompute=recompute)


def free_comm_cluster(name="classroom"):
    """Communication costs nothing: huge bandwidth, zero latency, ideal efficiency."""
    c = load_cluster(name)
    levels = tuple(dataclasses.replace(lv, bandwidth_bytes_per_s=1e30, latency_s=0.0) for lv in c.levels)
    return dataclasses.replace(c, name="free-comm", levels=levels, efficiency=Efficiency())


# ---- (a) Eq. 2 parameter counts ----------------------------------------------------------

def eq2_params(l_, h_, V_, s_):
    """Narayanan et al. SC'21 Sec 5.1 Eq. (2) (ptdp_eq2_param_count):
    P = 12 l h^2 (1 + 13/(12h) + (V+s)/(12 l h)), in exact arithmetic."""
    return 12 * l_ * h_ ** 2 * (1 + Fraction(13, 12 * h_) + Fraction(V_ + s_, 12 * l_ * h_))


@pytest.mark.parametrize("size", TABLE1)
def test_table1_params_follow_eq2_plus_final_layernorm(published, size):
    """Narayanan et al. SC'21 Table 1 + Eq. (2) (ptdp_table1_<size>, ptdp_eq2_param_count).

    Our graph has the final LayerNorm (2h parameters) that Eq. 2 leaves out: the
    difference is exactly 2h. The count rounds to the table's params_billion at 0.1 B.
    """
    row = published[f"ptdp_table1_{size}"]
    i = row["inputs"]
    l_, h_, V_, s_ = i["layers"], i["hidden_size"], i["vocab"], i["seq_len"]
    model = table1_model(row)
    expected = eq2_params(l_, h_, V_, s_) + 2 * h_
    numbers = {b: 1, s: s_, h: h_, a: i["attention_heads"], a_kv: i["attention_heads"], f: 4 * h_, V: V_}
    symbolic = sum(block.params for block in build_blocks(model)).subs(numbers)
    assert sp.Rational(symbolic) == sp.Rational(expected.numerator, expected.denominator)
    result = evaluate(model, table1_strategy(row, "full"), load_cluster("dgx-a100-80gb"), i["num_gpus"])
    assert result.params == float(expected)
    assert result.params - float(eq2_params(l_, h_, V_, s_)) == 2 * h_
    assert round(result.params / 1e9, 1) == i["params_billion"]


# ---- (b) Eq. 3 FLOPs ---------------------------------------------------------------------

@pytest.mark.parametrize("size", TABLE1)
def test_table1_flops_follow_eq3(published, size):
    """Narayanan et al. SC'21 Sec 5.1 Eq. (3) and Appendix (ptdp_eq3_flops), for the model
    and batch of Table 1 row ptdp_table1_<size>.

    With full recomputation (4 forward passes of each layer, 3 of the logit layer):
    F = 96 B s l h^2 (1 + s/(6h) + V/(16 l h)). Without recomputation the layers count
    3/4 of that and the logit layer all of it: 72 B s l h^2 (1 + s/(6h)) + 6 B s h V.
    """
    row = published[f"ptdp_table1_{size}"]
    i = row["inputs"]
    B_, s_, l_, h_, V_ = i["global_batch_size"], i["seq_len"], i["layers"], i["hidden_size"], i["vocab"]
    model, cluster = table1_model(row), load_cluster("dgx-a100-80gb")
    eq3 = 96 * B_ * s_ * l_ * h_ ** 2 * (1 + Fraction(s_, 6 * h_) + Fraction(V_, 16 * l_ * h_))
    full = evaluate(model, table1_strategy(row, "full"), cluster, i["num_gpus"])
    assert full.hardware_flops_per_iteration == pytest.approx(float(eq3), rel=1e-12)
    no_recompute = evaluate(model, table1_strategy(row, "none"), cluster, i["num_gpus"])
    model_flops = 72 * B_ * s_ * l_ * h_ ** 2 * (1 + Fraction(s_, 6 * h_)) + 6 * B_ * s_ * h_ * V_
    assert no_recompute.model_flops_per_iteration == pytest.approx(float(model_flops), rel=1e-12)
    assert no_recompute.hardware_flops_per_iteration == pytest.approx(float(model_flops), rel=1e-12)
    # the model FLOPs do not depend on recomputation
    assert full.model_flops_per_iteration == pytest.approx(float(model_flops), rel=1e-12)


# ---- (c) pipeline bubble -------------------------------------------------------------------

def test_pipeline_formula_gives_the_gpipe_1f1b_bubble():
    """Narayanan et al. SC'21 Sec 2.2.1 (ptdp_bubble_gpipe_1f1b): with p equal stages of
    per-micro-batch time T the makespan is (m + p - 1) T, a bubble of (p-1)/m of m T."""
    T = sp.Symbol("T", positive=True)
    for name in ("gpipe", "1f1b"):
        sched = schedule_of(name)
        equal = {S_T: p * T, F_max: T, B_max: 0, T_star: T}
        assert sp.simplify(sched.makespan.subs(equal) - (m + p - 1) * T) == 0
        bubble = sched.bubble.subs(equal)
        assert sp.simplify(bubble / (m * T) - (p - 1) / m) == 0
        # the bubble is its own expression: m T_* plus it is the makespan
        assert sp.simplify(sched.makespan.subs(equal) - m * T - bubble) == 0
        # splitting T into forward and backward changes nothing
        Tf, Tb = sp.symbols("T_f T_b", positive=True)
        split = {S_T: p * (Tf + Tb), F_max: Tf, B_max: Tb}
        assert sp.simplify(sched.makespan.subs(split) - (m + p - 1) * (Tf + Tb)) == 0


def test_pipeline_formula_gives_the_interleaved_bubble():
    """Narayanan et al. SC'21 Sec 2.2.2 (ptdp_bubble_interleaved): v chunks per device
    divide the bubble by v: makespan m T + (p-1) T / v, bubble fraction (p-1)/(v m)."""
    T = sp.Symbol("T", positive=True)
    sched = schedule_of("interleaved")
    equal = {S_T: p * T, F_max: T / 2, B_max: T / 2, T_star: T}
    assert sp.simplify(sched.makespan.subs(equal) - (m * T + (p - 1) * T / v)) == 0
    bubble = sched.bubble.subs(equal)
    assert sp.simplify(bubble / (m * T) - (p - 1) / (v * m)) == 0


FLAT = ModelSpec(name="flat", family="gpt", layers=32, hidden=1024, heads=8, seq_len=16, vocab=1)
"""Embedding and head negligible next to the layers (vocab 1, short sequences), so the
pipeline stages are equal to well under 1 % and the textbook bubble applies."""


def _bubble_fraction(result) -> float:
    bd = result.breakdown_s
    ideal = result.iteration_time_s - bd["bubble"] - bd["dp_comm"] - bd["zero_comm"] - bd["optimizer"]
    return bd["bubble"] / ideal


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
@pytest.mark.parametrize("pp,micro_batches", [(2, 4), (4, 8), (4, 32), (8, 16)])
def test_library_bubble_fraction_gpipe_1f1b(schedule, pp, micro_batches):
    """Narayanan et al. SC'21 Sec 2.2.1 (ptdp_bubble_gpipe_1f1b): bubble = (p-1)/m of the
    ideal time, here on free communication and near-equal stages (within 1 %)."""
    strategy = Strategy(dp=1, tp=1, pp=pp, micro_batch=1, global_batch=micro_batches, schedule=schedule)
    result = evaluate(FLAT, strategy, free_comm_cluster(), pp)
    assert _bubble_fraction(result) == pytest.approx((pp - 1) / micro_batches, rel=0.01)


@pytest.mark.parametrize("pp,chunks,micro_batches", [(2, 2, 4), (4, 2, 8), (4, 4, 16), (4, 2, 32)])
def test_library_bubble_fraction_interleaved(pp, chunks, micro_batches):
    """Narayanan et al. SC'21 Sec 2.2.2 (ptdp_bubble_interleaved): bubble = (p-1)/(v m)."""
    strategy = Strategy(dp=1, tp=1, pp=pp, micro_batch=1, global_batch=micro_batches,
                        schedule="interleaved", chunks=chunks)
    result = evaluate(FLAT, strategy, free_comm_cluster(), pp)
    assert _bubble_fraction(result) == pytest.approx((pp - 1) / (chunks * micro_batches), rel=0.01)


def test_interleaving_multiplies_pipeline_sends_by_v():
    """Narayanan et al. SC'21 Sec 2.2.2 (ptdp_bubble_interleaved): "pipeline p2p
    communication increases by factor v" -- a middle stage sends 2 v messages per
    micro-batch instead of 2."""
    def p2p_bytes(schedule, chunks):
        strategy = Strategy(dp=1, tp=1, pp=4, micro_batch=1, global_batch=8, schedule=schedule, chunks=chunks)
        the_plan = plan(FLAT, strategy, free_comm_cluster())
        return sum(c.size for bd in the_plan.boundaries for c in bd.collectives
                   if c.kind == "p2p" and (c.phase == "fwd" and bd.stage_from == 1
                                           or c.phase == "bwd" and bd.stage_to == 1))
    base = p2p_bytes("1f1b", 1)
    assert sp.simplify(base - 2 * beta * b * s * h) == 0
    for chunks in (2, 4):
        assert sp.simplify(p2p_bytes("interleaved", chunks) - chunks * base) == 0


# ---- (d) tensor-parallel traffic -------------------------------------------------------------

def _layer(model):
    return next(block for block in build_blocks(model) if block.kind == "layer")


def _numbers(b_, s_, h_, a_, t_):
    return {b: b_, s: s_, h: h_, a: a_, a_kv: a_, f: 4 * h_, beta: BF16, t: t_}


@pytest.mark.parametrize("sequence_parallel", [False, True])
def test_layer_tp_bytes_block_cost_symbolic(sequence_parallel):
    """Narayanan et al. SC'21 Sec 2.3/3.2 (ptdp_tp_comm_volume): 8 b s h (t-1)/t elements per
    layer per device per micro-batch; Korthikanti et al. Sec 4.2.2 (kor_sp_comm): the same
    volume with sequence parallelism (4 all-gathers + 4 reduce-scatters instead of 4
    all-reduces), plus Megatron-LM's 2 backward all-gathers of the linears' inputs for the weight
    gradients (LinearWithGradAccumulationAndAsyncCommunication; fidelity issue E5): 10 b s h (t-1)/t."""
    cost = block_cost(_layer(FLAT), "megatron", (), sequence_parallel, "none",
                      "S:seq" if sequence_parallel else "R")
    elements = 10 if sequence_parallel else 8
    assert sp.simplify(cost.comm_bytes - elements * b * s * h * (t - 1) / t * beta) == 0
    kinds = sorted((c.kind, c.phase) for step in cost.steps for c in step.collectives)
    if sequence_parallel:
        assert kinds == sorted([("all_gather", "fwd")] * 2 + [("reduce_scatter", "bwd")] * 2
                               + [("reduce_scatter", "fwd")] * 2 + [("all_gather", "bwd")] * 4)
    else:
        assert kinds == sorted([("all_reduce", "fwd")] * 2 + [("all_reduce", "bwd")] * 2)


@pytest.mark.parametrize("sequence_parallel", [False, True])
@pytest.mark.parametrize("tp,b_", [(2, 1), (4, 2), (8, 1)])
def test_layer_tp_bytes_from_evaluate(tp, b_, sequence_parallel):
    """ptdp_tp_comm_volume (Narayanan et al. SC'21 Sec 2.3 and 3.2) and kor_sp_comm
    (Korthikanti et al. Sec 4.2.2): one more layer adds 8 b s h (t-1)/t elements x 2 bytes
    of op_comm per device per micro-batch (pp = 1, m = 1, d = 1)."""
    cluster = load_cluster("dgx-a100-80gb")
    strategy = Strategy(dp=1, tp=tp, pp=1, micro_batch=b_, global_batch=b_,
                        sequence_parallel=sequence_parallel)
    base = dict(name="tp", family="gpt", hidden=1024, heads=16, seq_len=512, vocab=5120)
    r2 = evaluate(ModelSpec(layers=2, **base), strategy, cluster, tp)
    r3 = evaluate(ModelSpec(layers=3, **base), strategy, cluster, tp)
    per_layer = r3.comm_bytes_per_device["op_comm"] - r2.comm_bytes_per_device["op_comm"]
    elements = 10 if sequence_parallel else 8       # + E5's two backward re-gathers
    assert per_layer == pytest.approx(elements * b_ * 512 * 1024 * (tp - 1) / tp * BF16, rel=1e-12)


def test_full_recompute_repeats_the_forward_all_reduces():
    """Rajbhandari et al. SC'20 Sec 7-C (zero_mp_comm): with activation checkpointing a
    Megatron block does 2 all-reduces forward + 2 in recomputation + 2 backward of b s h
    each; all-reduce volume = 2x message: 12 b s h elements per layer (times (t-1)/t)."""
    cost = block_cost(_layer(FLAT), "megatron", (), False, "full", "R")
    assert sp.simplify(cost.comm_bytes - 12 * b * s * h * (t - 1) / t * beta) == 0


# ---- (e) pipeline traffic ----------------------------------------------------------------------

@pytest.mark.parametrize("scatter_gather", [False, True])
def test_pipeline_p2p_bytes(scatter_gather):
    """Narayanan et al. SC'21 Sec 3.2 and 4.1 (ptdp_pp_comm_volume, t = 8): a stage sends
    b s h elements per micro-batch (each of forward and backward) without scatter/gather,
    b s h / t with it (then all-gathered at the receiver)."""
    model = ModelSpec(name="pp", family="gpt", layers=4, hidden=1024, heads=16, seq_len=512, vocab=5120)
    t_, b_, m_ = 8, 2, 4
    strategy = Strategy(dp=1, tp=t_, pp=2, micro_batch=b_, global_batch=b_ * m_, scatter_gather=scatter_gather)
    cluster = load_cluster("dgx-a100-80gb")
    the_plan = plan(model, strategy, cluster)
    crossing = [bd for bd in the_plan.boundaries if bd.stage_from != bd.stage_to]
    assert len(crossing) == 1
    p2p = [c for c in crossing[0].collectives if c.kind == "p2p"]
    assert sorted(c.phase for c in p2p) == ["bwd", "fwd"]
    expected = beta * b * s * h / (t_ if scatter_gather else 1)
    for c in p2p:
        assert sp.simplify(c.size - expected) == 0
        assert c.category == "pp_comm"
    gathers = [c for c in crossing[0].collectives if c.kind == "all_gather"]
    assert len(gathers) == (2 if scatter_gather else 0)
    # the numbers: each stage sends one p2p per micro-batch (stage 0 forward, stage 1 backward)
    result = evaluate(model, strategy, cluster, 16)
    rows = [row for row in result.comm_by_kind if row["kind"] == "p2p"]
    assert len(rows) == 1 and rows[0]["category"] == "pp_comm"
    per_mb = b_ * 512 * 1024 * BF16 / (t_ if scatter_gather else 1)
    assert rows[0]["bytes"] == pytest.approx(m_ * per_mb, rel=1e-12)
