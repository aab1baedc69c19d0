"""Pipeline orders and the dependency-driven simulation (explorer.timeline.schedules, simulate).

Formulas: Narayanan et al. SC'21 Sec 2.2 (GPipe/1F1B bubble (p-1)/m, interleaved (p-1)/(vm));
Qi et al. ICLR'24 Sec 3.1 (ZB-H1 bubble (p-1)(F+B-W)).
"""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from explorer import ExplorerError
from explorer.timeline import PassCosts, idle_fraction, makespan, order_for, pipeline_events
from explorer.timeline.schedules import B, F, W
from explorer.timeline.simulate import simulate


def flow_shop(fwd, bwd, m, v=1):
    """The cost model's pipeline term (explorer/superstep.py PIPELINE)."""
    return (sum(f + b for f, b in zip(fwd, bwd)) + (m * v - 1) * (max(fwd) + max(bwd))) / v


@pytest.mark.parametrize("schedule,v", [("gpipe", 1), ("1f1b", 1), ("interleaved", 2), ("interleaved", 3),
                                        ("zb-h1", 1)])
@pytest.mark.parametrize("p,m", [(1, 3), (2, 2), (4, 8), (4, 12), (3, 9)])
def test_every_pass_runs_once_forward_before_backward(schedule, v, p, m):
    if schedule == "interleaved" and p == 1:
        return
    orders = order_for(schedule, p, m, v)
    kinds = (F, B, W) if schedule == "zb-h1" else (F, B)
    for order in orders:
        assert sorted(order) == sorted((k, c, j) for k in kinds for c in range(v) for j in range(m))
        pos = {op: n for n, op in enumerate(order)}
        assert all(pos[(F, c, j)] < pos[(B, c, j)] for c in range(v) for j in range(m))
        if schedule == "zb-h1":
            assert all(pos[(B, 0, j)] < pos[(W, 0, j)] for j in range(m))


def in_flight(order):
    """Most micro-batches whose forward ran and whose backward (B) has not."""
    live = peak = 0
    for kind, _, _ in order:
        live += {F: 1, B: -1, W: 0}[kind]
        peak = max(peak, live)
    return peak


@pytest.mark.parametrize("p,m", [(4, 8), (8, 16), (4, 3)])
def test_1f1b_and_zb_h1_keep_at_most_p_minus_i_micro_batches(p, m):
    """PipeDream-Flush bounds the stashed activations by p - i; ZB-H1 keeps 1F1B's memory."""
    for i, (one, zb) in enumerate(zip(order_for("1f1b", p, m), order_for("zb-h1", p, m))):
        assert in_flight(one) == min(p - i, m)
        assert in_flight(zb) <= min(p - i, m)


def test_bad_schedule_and_interleaved_micro_batches_are_refused():
    with pytest.raises(ExplorerError, match="zz"):
        order_for("zz", 2, 2)
    with pytest.raises(ExplorerError, match="multiple of pp=4"):
        order_for("interleaved", 4, 6, 2)


def test_a_deadlocking_order_is_reported():
    orders = [[(B, 0, 0), (F, 0, 0)], [(F, 0, 0), (B, 0, 0)]]
    with pytest.raises(ExplorerError, match="deadlocks at stage 0"):
        simulate(orders, np.ones((2, 3)), 1, 1)


equal = dict(p=st.integers(1, 6), k=st.integers(1, 4), fwd=st.floats(0.1, 5.0), bwd=st.floats(0.1, 5.0))


@settings(max_examples=60, deadline=None)
@given(**equal, schedule=st.sampled_from(["gpipe", "1f1b"]))
def test_equal_stages_makespan_and_bubble(p, k, fwd, bwd, schedule):
    """Equal stages: makespan (m+p-1)(F+B) = the cost model's term; idle (p-1)/(m+p-1)."""
    m = k * p
    ev = pipeline_events(PassCosts.simple([fwd] * p, [bwd] * p), m, schedule)
    assert makespan(ev) == pytest.approx(flow_shop([fwd] * p, [bwd] * p, m), rel=1e-9)
    assert idle_fraction(ev) == pytest.approx((p - 1) / (m + p - 1), rel=1e-9, abs=1e-12)


@settings(max_examples=60, deadline=None)
@given(**equal, v=st.integers(2, 4))
def test_interleaved_equal_stages(p, k, fwd, bwd, v):
    """Interleaved: m(F+B) + (p-1)(F+B)/v, idle (p-1)/(vm+p-1), i.e. a (p-1)/(vm) bubble."""
    p, m = p + 1, k * (p + 1)
    ev = pipeline_events(PassCosts.simple([fwd] * p, [bwd] * p, chunks=v), m, "interleaved")
    assert makespan(ev) == pytest.approx(flow_shop([fwd] * p, [bwd] * p, m, v), rel=1e-9)
    ideal = m * (fwd + bwd)
    assert (makespan(ev) - ideal) / ideal == pytest.approx((p - 1) / (v * m), rel=1e-9)
    assert idle_fraction(ev) == pytest.approx((p - 1) / (v * m + p - 1), rel=1e-9)


@settings(max_examples=60, deadline=None)
@given(fwd=st.lists(st.floats(0.1, 5.0), min_size=1, max_size=6), data=st.data(), m=st.integers(1, 12))
def test_gpipe_flow_shop_is_exact_for_any_stages(fwd, data, m):
    bwd = data.draw(st.lists(st.floats(0.1, 5.0), min_size=len(fwd), max_size=len(fwd)))
    ev = pipeline_events(PassCosts.simple(fwd, bwd), m, "gpipe")
    assert makespan(ev) == pytest.approx(flow_shop(fwd, bwd, m), rel=1e-9)


@settings(max_examples=60, deadline=None)
@given(fwd=st.lists(st.floats(0.1, 5.0), min_size=2, max_size=6), data=st.data(), k=st.integers(1, 3))
def test_1f1b_unequal_stages_never_exceed_the_model(fwd, data, k):
    """For unequal stages the model's max F + max B pairing is an upper bound of 1F1B."""
    bwd = data.draw(st.lists(st.floats(0.1, 5.0), min_size=len(fwd), max_size=len(fwd)))
    m = k * len(fwd)
    for schedule, v in (("1f1b", 1), ("interleaved", 2)):
        ev = pipeline_events(PassCosts.simple(fwd, bwd, chunks=v), m, schedule)
        assert makespan(ev) <= flow_shop(fwd, bwd, m, v) * (1 + 1e-9)


@settings(max_examples=60, deadline=None)
@given(p=st.integers(1, 6), k=st.integers(1, 3), fwd=st.floats(0.5, 3.0), inp=st.floats(0.5, 3.0),
       frac=st.floats(0.0, 1.0))
def test_zb_h1_bubble(p, k, fwd, inp, frac):
    """ZB-H1 with W <= F, B: makespan m(F+B+W) + (p-1)(F+B-W), never above 1F1B's."""
    m, wgt = k * p, frac * min(fwd, inp)
    zb = pipeline_events(PassCosts.simple([fwd] * p, [inp + wgt] * p, [wgt] * p), m, "zb-h1")
    one = pipeline_events(PassCosts.simple([fwd] * p, [inp + wgt] * p), m, "1f1b")
    assert makespan(zb) == pytest.approx(m * (fwd + inp + wgt) + (p - 1) * (fwd + inp - wgt), rel=1e-9)
    assert makespan(zb) <= makespan(one) * (1 + 1e-12)


def test_idle_events_fill_the_gaps_up_to_each_stages_last_pass():
    """Every row is covered from 0 to its own last pass; with equal stages stage i's last backward
    ends i B before stage 0's (the last micro-batch's backward climbs to stage 0), where each stage's
    synchronisation starts (fidelity issue, E9)."""
    ev = pipeline_events(PassCosts.simple([1.0] * 3, [2.0] * 3), 4, "1f1b")
    for i, (_, rows) in enumerate(sorted(ev.groupby("row"))):
        rows = rows.sort_values("start_s")
        assert rows["start_s"].iloc[0] == 0.0
        assert np.allclose(rows["start_s"].to_numpy()[1:], rows["end_s"].to_numpy()[:-1])
        assert rows["end_s"].iloc[-1] == pytest.approx(makespan(ev) - 2.0 * i)
    idle = ev[ev.kind == "idle"].groupby("row").duration_s.sum()
    assert idle.to_dict() == pytest.approx({f"stage {i}": 6.0 - 2.0 * i for i in range(3)})
