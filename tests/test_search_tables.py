"""The search's numbers (tables.Chain, objective.Objective) equal explorer.evaluate()'s."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from explorer import LayerSplit, Strategy, evaluate, load_cluster, load_model
from explorer.hardware.cluster import BYTES_PER_ELEMENT
from explorer.search.objective import Objective
from explorer.search.space import layer_options
from explorer.search.tables import A, B, F, GS, PSI, W, Chain, node_stages, stage_sums

CLUSTER = load_cluster("classroom")
MODELS = {name: load_model(name) for name in ("tiny-gpt", "tiny-mlp")}


@st.composite
def strategies(draw):
    model = MODELS[draw(st.sampled_from(sorted(MODELS)))]
    tp = draw(st.sampled_from((1, 2, 4)))
    pp = draw(st.sampled_from((1, 2, 4)))
    dp = draw(st.sampled_from((1, 2, 3)))          # d = 3 puts some groups across a node boundary
    b = draw(st.sampled_from((1, 2, 4)))
    m = draw(st.sampled_from((1, 2, 4, 8)))
    schedule = draw(st.sampled_from(("gpipe", "1f1b", "interleaved") if pp > 1 else ("gpipe", "1f1b")))
    chunks = 1
    if schedule == "interleaved":
        chunks, m = 2 if model.layers >= 2 * pp else 1, pp * m
        schedule = schedule if chunks == 2 else "1f1b"
    splits = ()
    if draw(st.booleans()):
        options = [o for o in layer_options(tp) if o.preset != "batch" or b % o.degree == 0]
        splits = tuple(draw(st.sampled_from(options)) for _ in range(model.layers))
    stage_map = ()
    if schedule != "interleaved" and pp > 1 and draw(st.booleans()):
        cuts = sorted(draw(st.lists(st.integers(1, model.layers - 1), min_size=pp - 1, max_size=pp - 1,
                                    unique=True)))
        bounds = [0] + cuts + [model.layers]
        stage_map = tuple(s for s in range(pp) for _ in range(bounds[s], bounds[s + 1]))
    strategy = Strategy(dp=dp, tp=tp, pp=pp, micro_batch=b, global_batch=b * dp * m, schedule=schedule,
                        chunks=chunks, zero=draw(st.sampled_from((0, 1) if pp > 1 else (0, 1, 2, 3))),
                        recompute=draw(st.sampled_from(("none", "selective", "full"))),
                        sequence_parallel=tp > 1 and draw(st.booleans()), overlap_dp=draw(st.booleans()),
                        scatter_gather=draw(st.booleans()), layer_splits=splits, stage_map=stage_map)
    return model, strategy


def predicted(model, strategy):
    chain = Chain(model, CLUSTER, strategy, [strategy.micro_batch])
    splits = strategy.layer_splits or tuple(strategy.split_of(i) for i in range(model.layers))
    stages = node_stages(model, strategy)
    sums = stage_sums(chain, chain.chain(splits, stages), stages, strategy.pp)[:, :, 0]
    obj = Objective(CLUSTER, BYTES_PER_ELEMENT[strategy.dtype], chain.hw, strategy.dp, strategy.tp, strategy.pp)
    s = strategy
    return (float(obj.time(sums[F], sums[B], sums[PSI], sums[GS], s.micro_batches, s.chunks, s.zero,
                           s.overlap_dp, s.schedule, sums[W])),
            float(obj.peak_memory(sums[PSI], sums[A], s.micro_batches, s.chunks, s.zero, s.schedule)), sums)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=strategies())
def test_chain_numbers_equal_evaluate(case):
    model, strategy = case
    r = evaluate(model, strategy, CLUSTER)
    time_s, memory, sums = predicted(model, strategy)
    assert time_s == pytest.approx(r.iteration_time_s, rel=1e-12)
    assert memory == pytest.approx(r.memory_bytes_per_device["total"], rel=1e-12)
    assert sums[F] == pytest.approx([row["fwd_s"] for row in r.stage_times_s], rel=1e-12)
    assert sums[B] == pytest.approx([row["bwd_s"] for row in r.stage_times_s], rel=1e-12)


def test_vector_of_micro_batches_equals_one_at_a_time():
    model = MODELS["tiny-gpt"]
    base = Strategy(dp=2, tp=2, pp=2, micro_batch=1, global_batch=16)
    chain = Chain(model, CLUSTER, base, [1, 2, 4])
    stages = node_stages(model, base)
    nodes = chain.chain([LayerSplit(2, "megatron")] * model.layers, stages)
    together = stage_sums(chain, nodes, stages, 2)
    for k, b in enumerate((1, 2, 4)):
        one = Chain(model, CLUSTER, base.with_(micro_batch=b), [b])
        alone = stage_sums(one, one.chain([LayerSplit(2, "megatron")] * model.layers, stages), stages, 2)
        assert np.allclose(together[:, :, k], alone[:, :, 0], rtol=1e-13)
