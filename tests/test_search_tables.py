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
                        overlap_param_gather=draw(st.booleans()), scatter_gather=draw(st.booleans()), layer_splits=splits, stage_map=stage_map)
    return model, strategy


def predicted(model, strategy):
    chain = Chain(model, CLUSTER, strategy, [strategy.micro_batch])
    splits = strategy.layer_splits or tuple(strategy.split_of(i) for i in range(model.layers))
    stages = node_stages(model, strategy)
    sums = stage_sums(chain, chain.chain(splits, stages), stages, strategy.pp)[:, :, 0]
    obj = Objective(CLUSTER, BYTES_PER_ELEMENT[strategy.dtype], chain.hw, strategy.dp, strategy.tp, strategy.pp)
    s = strategy
    return (float(obj.time(sums[F], sums[B], sums[PSI], sums[GS], s.micro_batches, s.chunks, s.zero,
                           s.overlap_dp, s.schedule, sums[W], param_gather=s.overlap_param_gather)),
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
    # the point-to-point sends within them (what overlapped sends take out of the passes)
    from explorer.search.tables import SB, SF
    assert sums[SF] == pytest.approx([row["fwd_p2p_s"] for row in r.stage_times_s], rel=1e-12, abs=1e-18)
    assert sums[SB] == pytest.approx([row["bwd_p2p_s"] for row in r.stage_times_s], rel=1e-12, abs=1e-18)


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


def block_by_block(chain, nodes, stages, pp):
    """stage_sums' scalar path: every node and every link added one at a time (with the sends each
    stage makes, SF and SB); AL, the largest layer's activations, the largest node's, not their sum."""
    from explorer.search.tables import AL, B_FROM, B_TO, F_FROM, F_TO, ROWS, S_FROM, S_TO, SB, SF, STAGE_ROWS
    out = np.zeros((STAGE_ROWS, pp, chain.b.size))
    tied = chain.tied(pp)
    if tied:
        out[PSI] += tied["Psi_r"]
        out[GS] += tied["GS_r"]
    for i, node in enumerate(nodes):
        largest = np.maximum(out[AL, stages[i]], node.values[AL])
        out[:ROWS, stages[i]] += node.values
        out[AL, stages[i]] = largest
        if i:
            link = chain.link(i, nodes[i - 1], node, stages[i - 1], stages[i])
            out[F, stages[i - 1]] += link[F_FROM]
            out[B, stages[i - 1]] += link[B_FROM]
            out[F, stages[i]] += link[F_TO]
            out[B, stages[i]] += link[B_TO]
            out[SF, stages[i - 1]] += link[S_FROM]
            out[SB, stages[i]] += link[S_TO]
    return out


@pytest.mark.parametrize("name,tp,pp,pattern,stage_map", [
    ("tiny-gpt", 2, 2, "uniform", ()),
    ("tiny-gpt", 4, 4, "alternate", ()),
    ("tiny-gpt", 2, 2, "runs", (0, 1, 1, 1)),
    ("tiny-mlp", 2, 2, "alternate", ()),
    ("tiny-gpt", 1, 1, "uniform", ()),
])
def test_stage_sums_by_runs_equal_block_by_block(name, tp, pp, pattern, stage_map):
    model = MODELS[name]
    strategy = Strategy(dp=2, tp=tp, pp=pp, micro_batch=2, global_batch=16)
    if stage_map and len(stage_map) != model.layers:
        pytest.skip("stage map for another depth")
    strategy = strategy.with_(stage_map=stage_map)
    chain = Chain(model, CLUSTER, strategy, [1, 2, 4])
    options = [o for o in layer_options(tp) if o.preset != "batch" or 2 % o.degree == 0]
    if pattern == "uniform":
        splits = [options[0]] * model.layers
    elif pattern == "alternate":
        splits = [options[i % len(options)] for i in range(model.layers)]
    else:
        splits = [options[min(i // 2, len(options) - 1)] for i in range(model.layers)]
    stages = node_stages(model, strategy)
    nodes = chain.chain(splits, stages)
    assert np.allclose(stage_sums(chain, nodes, stages, pp), block_by_block(chain, nodes, stages, pp),
                       rtol=1e-13, atol=0)


def test_node_memo_is_the_node_and_refusals_repeat():
    from explorer.errors import ExplorerError
    model = MODELS["tiny-gpt"]
    strategy = Strategy(dp=2, tp=2, pp=2, micro_batch=1, global_batch=8)
    chain = Chain(model, CLUSTER, strategy, [1])
    split = LayerSplit(2, "megatron")
    first = chain.node(1, split, "R", 0)
    assert chain.node(1, split, "R", 0) is first
    fresh = Chain(model, CLUSTER, strategy, [1])._node(1, split, "R", 0)
    assert np.array_equal(fresh.values, first.values) and fresh.cost.key == first.cost.key
    bad = LayerSplit(2, "megatron", (("softmax", "column"),))      # a softmax has no weights to split
    for _ in range(2):                                                # refused, and refused again from the memo
        assert chain.try_node(1, bad, "R", 0) is None
        with pytest.raises(ExplorerError, match="no weights"):
            chain.node(1, bad, "R", 0)


def test_cached_super_step_terms_equal_the_variant():
    """objective.lean_term (memory, disk or built) computes what superstep.Variant computes."""
    from explorer.cost.superstep import variant
    from explorer.search import objective as objective_module
    obj = Objective(CLUSTER, 2, Chain(MODELS["tiny-gpt"], CLUSTER, Strategy(dp=2, tp=2, pp=4, micro_batch=1,
                                                                            global_batch=8), [1]).hw, 2, 2, 4)
    rng = np.random.default_rng(0)
    F_, B_, W_ = (rng.uniform(0.1, 1.0, (3, 4)) for _ in range(3))
    for schedule in ("gpipe", "1f1b", "zb-h1"):
        objective_module._LEAN.clear()             # from the disk cache (or built) again
        want = variant(schedule, 0, False, obj.k_states)({sym: np.moveaxis(x, -1, 0) for sym, x in
                                                          zip(_stage_symbols(), (F_, B_, W_))},
                                                         _scalars(obj, 4, 1), ("makespan",))["makespan"]
        assert np.allclose(obj.pipeline(F_, B_, 4, 1, schedule, W_), want, rtol=1e-14, atol=0)


def _stage_symbols():
    from explorer.symbols import B_r, F_r, W_r
    return F_r, B_r, W_r


def _scalars(obj, m, v):
    from explorer.symbols import K_opt, W_hbm, beta, d, m as m_, p, v as v_
    return {m_: m, v_: v, p: obj.pp, d: obj.dp, beta: obj.beta, W_hbm: obj.hw["W"], K_opt: obj.k_update}
