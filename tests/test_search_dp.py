"""The per-layer and partition DPs find the brute-force optimum (issue 5, Tests).

Brute force: every per-layer split combination (and every stage map) of a
small model, each priced by explorer.evaluate(); the DP must reach the same
least iteration time under the same memory cap.
"""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from explorer import Strategy, evaluate
from explorer.search.layer_dp import best_splits, usable
from explorer.search.partition import best_partition
from explorer.search.problem import problem_for
from explorer.search.space import layer_options
from search_brute import CLUSTER, TINY, TINY3, TINY6, best_under, brute, caps, stage_maps

GLOBALS = [
    (TINY, Strategy(dp=2, tp=2, pp=2, micro_batch=2, global_batch=16, overlap_dp=True)),
    (TINY, Strategy(dp=2, tp=2, pp=2, micro_batch=1, global_batch=8, schedule="interleaved", chunks=2,
                    overlap_dp=True, zero=1)),
    (TINY, Strategy(dp=4, tp=2, pp=1, micro_batch=2, global_batch=16, zero=3, sequence_parallel=True)),
    (TINY3, Strategy(dp=1, tp=4, pp=2, micro_batch=4, global_batch=16, schedule="gpipe", recompute="full")),
    (TINY3, Strategy(dp=2, tp=4, pp=1, micro_batch=2, global_batch=4, recompute="selective", overlap_dp=True)),
]


@pytest.mark.parametrize("model,strategy", GLOBALS, ids=lambda x: getattr(x, "name", None) or "")
def test_layer_dp_matches_brute_force(model, strategy):
    table = brute(model, strategy)
    for cap in caps(table):
        pb = problem_for(model, CLUSTER, strategy, cap)
        sol = best_splits(pb, pb.even_stages)
        expected = best_under(table, cap)
        if expected is None:
            assert sol is None
            continue
        assert sol.exact
        assert sol.time_s == pytest.approx(expected, rel=1e-12)
        assert sol.memory_bytes <= cap
        r = evaluate(model, pb.strategy_for(sol), CLUSTER, strategy.devices)
        assert r.iteration_time_s == pytest.approx(sol.time_s, rel=1e-12)
        assert r.memory_bytes_per_device["total"] == pytest.approx(sol.memory_bytes, rel=1e-12)


@pytest.mark.parametrize("strategy", [
    Strategy(dp=1, tp=2, pp=3, micro_batch=1, global_batch=8, overlap_dp=True),
    Strategy(dp=2, tp=1, pp=4, micro_batch=2, global_batch=16, zero=1),
    Strategy(dp=1, tp=2, pp=2, micro_batch=4, global_batch=8, schedule="gpipe"),
])
def test_partition_matches_brute_force(strategy):
    rng = np.random.default_rng(strategy.pp)
    options = usable(layer_options(strategy.tp), strategy, TINY6)
    maps = list(stage_maps(TINY6.layers, strategy.pp))
    for _ in range(3):
        splits = tuple(options[i] for i in rng.integers(len(options), size=TINY6.layers))
        table = [(r.iteration_time_s, r.memory_bytes_per_device["total"]) for r in
                 (evaluate(TINY6, strategy.with_(layer_splits=splits, stage_map=mp), CLUSTER) for mp in maps)]
        mems = sorted(m for _, m in table)
        for cap in (np.inf, mems[len(mems) // 2], mems[0] * (1 - 1e-9)):
            pb = problem_for(TINY6, CLUSTER, strategy, cap)
            sol = best_partition(pb, splits)
            fits = [t for t, m in table if m <= cap]
            if not fits:
                assert sol is None
                continue
            assert sol.time_s == pytest.approx(min(fits), rel=1e-12)
            chosen = pb.strategy_for(sol).with_(layer_splits=splits)
            assert evaluate(TINY6, chosen, CLUSTER).iteration_time_s == pytest.approx(sol.time_s, rel=1e-12)


def test_joint_dp_matches_brute_force_over_splits_and_maps():
    strategy = Strategy(dp=1, tp=2, pp=2, micro_batch=2, global_batch=16, overlap_dp=True)
    table = brute(TINY3, strategy, maps=list(stage_maps(TINY3.layers, 2)))
    for cap in caps(table):
        pb = problem_for(TINY3, CLUSTER, strategy, cap)
        sol = best_splits(pb, None)
        expected = best_under(table, cap)
        assert (sol is None) == (expected is None)
        if sol is not None:
            assert sol.time_s == pytest.approx(expected, rel=1e-12)


def test_incumbent_prunes_but_keeps_ties():
    strategy = Strategy(dp=2, tp=2, pp=2, micro_batch=2, global_batch=16)
    pb = problem_for(TINY, CLUSTER, strategy)
    free = best_splits(pb, pb.even_stages)
    assert best_splits(pb, pb.even_stages, incumbent=free.time_s).time_s == free.time_s
    assert best_splits(pb, pb.even_stages, incumbent=free.time_s * 0.999) is None


@st.composite
def global_choices(draw):
    tp = draw(st.sampled_from((1, 2)))
    pp = draw(st.sampled_from((1, 2, 3)))
    dp = draw(st.sampled_from((1, 2)))
    b = draw(st.sampled_from((1, 2)))
    schedule = draw(st.sampled_from(("gpipe", "1f1b")))
    zero = draw(st.sampled_from((0, 1) if pp > 1 else (0, 1, 2, 3)))
    return Strategy(dp=dp, tp=tp, pp=pp, micro_batch=b, global_batch=b * dp * draw(st.sampled_from((1, 4))),
                    schedule=schedule, zero=zero, recompute=draw(st.sampled_from(("none", "selective", "full"))),
                    sequence_parallel=tp > 1 and draw(st.booleans()), overlap_dp=draw(st.booleans()))


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(strategy=global_choices(), quantile=st.sampled_from((1.0, 0.5, 0.2)))
def test_layer_dp_matches_brute_force_property(strategy, quantile):
    table = brute(TINY3, strategy)
    cap = float(np.quantile([m for _, m, _ in table], quantile))
    pb = problem_for(TINY3, CLUSTER, strategy, cap)
    sol = best_splits(pb, pb.even_stages)
    assert sol is not None and sol.time_s == pytest.approx(best_under(table, cap), rel=1e-12)
