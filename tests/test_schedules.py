"""The schedule registry: one object per schedule, read by the cost tree, the timeline and the search.

For equal stages each schedule's critical-path expression (what evaluate() prices)
equals the makespan of its own order simulated pass by pass (what the timeline
draws), and its bubble is an expression of its own, not a remainder: m T_* plus the
bubble is the makespan.
"""
import numpy as np
import pytest
import sympy as sp
from hypothesis import given, settings, strategies as st

from explorer import Strategy, evaluate, load_cluster, load_model
from explorer.cost.superstep import variant
from explorer.schedules import NAMES, SCHEDULES, get
from explorer.schedules.base import AGGREGATES
from explorer.search import search
from explorer.symbols import B_r, F_r, W_r, m, p, v
from explorer.timeline import PassCosts, compare, pipeline_events, superstep_events


def model_makespan(name, F, B, W, micro, chunks):
    stage = {F_r: np.asarray(F, float), B_r: np.asarray(B, float), W_r: np.asarray(W, float)}
    scalars = {m: micro, v: chunks, p: len(F)}
    return float(variant(name, 0, False, 12)(stage, scalars, ("makespan",))["makespan"])


@settings(max_examples=60, deadline=None)
@given(name=st.sampled_from(NAMES), stages=st.integers(1, 6), extra=st.integers(0, 10),
       fwd=st.floats(0.1, 3), bwd=st.floats(0.1, 5), share=st.floats(0.0, 1.0))
def test_equal_stages_the_formula_is_the_simulated_makespan(name, stages, extra, fwd, bwd, share):
    sched = get(name)
    if sched.min_stages > stages:
        stages = sched.min_stages
    chunks = 2 if sched.chunked else 1
    micro = stages * (1 + extra) if sched.micro_batches_multiple_of_stages else stages + extra
    micro = max(micro, sched.min_micro_batches(stages))
    chunks = sched.chunks or chunks
    W = share * bwd if sched.splits_weight else 0.0
    F, B, Wv = [fwd] * stages, [bwd] * stages, [W] * stages
    events = pipeline_events(PassCosts.simple(F, B, Wv if sched.splits_weight else None, chunks), micro, name)
    assert model_makespan(name, F, B, Wv, micro, chunks) == pytest.approx(float(events.end_s.max()), rel=1e-9)


@pytest.mark.parametrize("name", NAMES)
def test_the_bubble_is_the_makespan_less_m_times_the_critical_stage(name):
    sched = get(name)
    T_star = [s for s in AGGREGATES if str(s) == "T_*"][0]
    assert sp.simplify(sched.makespan - m * T_star - sched.bubble) == 0


def test_zb_h1_bubble_is_the_paper_form_when_w_is_small():
    """Qi et al. ICLR'24 Sec 3.1: ZB-H1's bubble is (p-1)(T_F + T_B - T_W) with T_B the
    input-gradient pass, when T_W <= T_F and T_W <= T_B (equal stages: F, B_in = B - W)."""
    F, Bin, W = 1.0, 1.2, 0.5
    p_, micro = 4, 8
    makespan = model_makespan("zb-h1", [F] * p_, [Bin + W] * p_, [W] * p_, micro, 1)
    assert makespan - micro * (F + Bin + W) == pytest.approx((p_ - 1) * (F + Bin - W))


def test_every_registered_schedule_runs_everywhere():
    """evaluate, the timeline and the search all take every registered schedule."""
    model, cluster = load_model("tiny-gpt"), load_cluster("classroom")
    for name, sched in SCHEDULES.items():
        s = Strategy(dp=1, tp=2, pp=2, micro_batch=1, global_batch=8, schedule=name,
                     chunks=2 if sched.chunked else 1)
        r = evaluate(model, s, cluster)
        assert r.iteration_time_s > 0 and sum(r.breakdown_s.values()) == pytest.approx(r.iteration_time_s)
        ev = superstep_events(model, s, cluster, result=r)
        assert abs(compare(ev, r, name)["relative_difference"]) < 0.05     # unequal stages: shown, not hidden
    found = search(model, cluster, 8, 8, top=50)
    assert {c.strategy.schedule for c in found.top} & {"zb-h1"}


def test_zb_h1_on_unequal_stages_the_difference_is_small():
    """classroom-gpt on 4 stages (the head's logits make the last stage heavier): the model's ZB-H1
    equals the simulated timeline; its bubble is below 1F1B's."""
    model, cluster = load_model("classroom-gpt"), load_cluster("classroom")
    s = Strategy(dp=2, tp=1, pp=4, micro_batch=1, global_batch=16, schedule="zb-h1")
    zb, one = evaluate(model, s, cluster), evaluate(model, s.with_(schedule="1f1b"), cluster)
    assert zb.breakdown_s["bubble"] < one.breakdown_s["bubble"]
    cmp = compare(superstep_events(model, s, cluster, result=zb), zb, "zb-h1")
    assert abs(cmp["relative_difference"]) < 1e-9


def test_zb_h1_is_a_first_class_schedule():
    """ZB-H1 priced by the cost model: faster than 1F1B on the same costs, same memory, its
    weight passes drawn in the timeline, and the model equal to its timeline on GPT-3 (whose first
    and last stages differ: the embedding and the head), each stage adding its own warm-up term."""
    model, cluster = load_model("gpt3-175b"), load_cluster("dgx-a100-80gb")
    base = Strategy(dp=1, tp=8, pp=8, micro_batch=1, global_batch=64)
    one, zb = evaluate(model, base, cluster), evaluate(model, base.with_(schedule="zb-h1"), cluster)
    assert zb.iteration_time_s < one.iteration_time_s
    assert zb.breakdown_s["bubble"] < one.breakdown_s["bubble"]
    assert zb.memory_bytes_per_device == one.memory_bytes_per_device
    ev = superstep_events(model, base.with_(schedule="zb-h1"), cluster, result=zb)
    assert (ev.kind == "weight").sum() == 8 * 64
    cmp = compare(ev, zb, "zb-h1")
    assert cmp["model_schedule"] == "zb-h1" and cmp["note"] == ""
    assert abs(cmp["relative_difference"]) < 1e-9
