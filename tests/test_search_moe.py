"""The search prices a model with experts with exactly the model it reports (issue 25 item 1): the expert
weights are Psi^e_r of the super-step, sharded over ep (explorer.cost.numeric.sharded_expert_params) and
synchronised over their own expert-data-parallel group (g^e_r, L^e_r, e) in the sweep, the DPs and
evaluate() alike. Before, the search synchronised them over the whole data-parallel group: its times were
0.2 % off evaluate()'s for Mixtral 8x7B with ep = 8 on 64 H100s."""
import numpy as np
import pytest

from explorer import Strategy, evaluate, load_cluster, load_model
from explorer.search import search
from explorer.search.refine import refine
from explorer.search.search import point_strategy
from explorer.search.space import enumerate_space
from explorer.search.sweep import settle, sweep

H100 = load_cluster("dgx-h100")
AGREE = 1e-9


def _agrees(model, strategy, time_s, memory_bytes):
    r = evaluate(model, strategy, H100)
    assert r.iteration_time_s == pytest.approx(time_s, rel=AGREE), strategy
    assert r.memory_bytes_per_device["total"] == pytest.approx(memory_bytes, rel=AGREE), strategy


@pytest.mark.parametrize("name,gpus,batch,ep", [("mixtral-8x7b", 64, 256, 8), ("qwen3-30b-a3b", 32, 128, 8)])
def test_every_swept_point_is_priced_as_evaluate_prices_it(name, gpus, batch, ep):
    model = load_model(name)
    space = enumerate_space(model, gpus, batch, ep=ep)
    points = sweep(model, H100, space.families, batch)
    settle(points, np.arange(points.time_s.size))
    fits = np.flatnonzero(points.memory_bytes <= H100.device.memory_bytes)
    assert fits.size
    fastest = fits[np.argsort(points.time_s[fits], kind="stable")][:10]
    spread = fits[:: max(1, fits.size // 12)]        # pipelines, ZeRO stages and expert t among them
    picked = np.unique(np.concatenate([fastest, spread]))
    strategies = [point_strategy(space, points, int(k), batch) for k in picked]
    assert any(s.pp > 1 for s in strategies) and len({s.zero for s in strategies}) > 1
    for k, s in zip(picked, strategies):
        assert s.ep == ep
        _agrees(model, s, points.time_s[k], points.memory_bytes[k])


def test_the_dynamic_programming_prices_experts_as_evaluate():
    model = load_model("qwen3-30b-a3b")
    for strategy in (Strategy(dp=8, tp=2, pp=2, micro_batch=1, global_batch=64, ep=8, zero=1, overlap_dp=True,
                              sequence_parallel=True),
                     Strategy(dp=16, tp=1, pp=2, micro_batch=2, global_batch=64, ep=8, expert_tp=1, zero=1)):
        found = refine(model, H100, strategy)
        assert found is not None
        chosen, time_s, memory_bytes = found
        _agrees(model, chosen, time_s, memory_bytes)


def test_the_searchs_top_strategies_evaluate_to_its_own_times():
    model = load_model("mixtral-8x7b")
    result = search(model, H100, 64, 256, ep=8, top=5, refine_top=4)
    assert result.top
    for c in result.top + result.pareto:
        assert c.strategy.ep == 8
        assert c.searched_s == pytest.approx(c.iteration_time_s, rel=AGREE)
        assert c.searched_bytes == pytest.approx(c.peak_memory_bytes, rel=AGREE)


def _twins(space):
    """family index -> the index of its twin with expert-parallel overlap (the family after it)."""
    fams = space.families
    return {i: i + 1 for i in range(len(fams) - 1)
            if fams[i + 1].overlap_ep and not fams[i].overlap_ep
            and fams[i + 1].options[:-1] == fams[i].options and
            (fams[i + 1].tp, fams[i + 1].pp, fams[i + 1].schedule, fams[i + 1].chunks, fams[i + 1].recompute,
             fams[i + 1].ep, fams[i + 1].expert_tp, fams[i + 1].pipeline_layout) ==
            (fams[i].tp, fams[i].pp, fams[i].schedule, fams[i].chunks, fams[i].recompute, fams[i].ep,
             fams[i].expert_tp, fams[i].pipeline_layout)}


@pytest.mark.parametrize("dispatcher", ["alltoall", "hybridep", "allgather"])
def test_the_search_tries_expert_parallel_overlap_where_megatron_core_runs_it(dispatcher):
    """Issue 27: every family with ep > 1 is tried again with Strategy.overlap_ep exactly where the option's
    blocker (Megatron-Core's checks, explorer/strategy/moe_rules.py) lets it on: not with full recomputation,
    not at p > 1 without a chunked schedule, never with the all-gather dispatcher; the raw count still adds up."""
    from explorer.strategy.moe_rules import ep_overlap_blocker
    model = load_model("qwen3-30b-a3b")
    space = enumerate_space(model, 32, 128, moe_dispatcher=dispatcher)
    assert space.kept + sum(space.pruned.values()) == space.total
    twins = _twins(space)
    overlapped = [f for f in space.families if f.overlap_ep]
    assert len(overlapped) == len(twins)                   # each one the twin of the family before it
    for i, f in enumerate(space.families):
        if f.overlap_ep:
            continue
        can = ep_overlap_blocker(model, f.ep, dispatcher, f.recompute, f.pp, f.schedule) is None and f.ep > 1
        assert (i in twins) == can, f
    if dispatcher == "allgather":
        assert not overlapped
    else:
        assert {f.pp > 1 for f in overlapped} == {False, True} and {f.recompute for f in overlapped} == \
            {"none", "selective"}
        assert all(f.pp == 1 or f.schedule in ("interleaved", "dualpipev") for f in overlapped)
    dense = enumerate_space(load_model("tiny-gpt"), 8, 8)
    assert not any(f.overlap_ep for f in dense.families)


@pytest.mark.parametrize("name,gpus,batch,ep,dispatcher", [("mixtral-8x7b", 64, 256, 8, "alltoall"),
                                                           ("qwen3-30b-a3b", 32, 128, 8, "hybridep")])
def test_every_overlapped_point_is_priced_as_evaluate_prices_it(name, gpus, batch, ep, dispatcher):
    """The sweep prices expert-parallel overlap on each stage's sums (explorer.search.tables.ep_overlapped:
    max(sigma E, E - C), sigma > 0 for HybridEP's 16 SMs of 132) as evaluate() does (rel 1e-9), pipelines
    (interleaved, DualPipeV) among them; an overlapped point is never slower than its twin without the overlap,
    and faster where the all-to-alls were exposed; its peak memory is its twin's plus at most one layer's
    activations (Megatron-Core's merged forward-backward steps, explorer.cost.model_states.activations_in_flight),
    as evaluate() prices the twin pair."""
    model = load_model(name)
    space = enumerate_space(model, gpus, batch, ep=ep, moe_dispatcher=dispatcher)
    points = sweep(model, H100, space.families, batch)
    bound, exact = points.time_s.copy(), points.exact.copy()
    settle(points, np.arange(points.time_s.size))
    on = np.array([space.families[f].overlap_ep for f in points.family])
    assert (~exact[on]).any()                             # the sweep's first pass bounds them: lower bounds
    assert (bound[on] <= points.time_s[on] * (1 + 1e-12)).all()
    fits = np.flatnonzero(on & (points.memory_bytes <= H100.device.memory_bytes))
    fastest = fits[np.argsort(points.time_s[fits], kind="stable")][:6]
    picked = np.unique(np.concatenate([fastest, fits[:: max(1, fits.size // 10)]]))
    strategies = [point_strategy(space, points, int(k), batch) for k in picked]
    assert any(s.pp > 1 for s in strategies) and any(s.pp == 1 for s in strategies)
    # twins: the same (micro-batch, zero, DP overlap) point of the family without the overlap
    index = {(int(f), int(b), int(z), bool(o)): k for k, (f, b, z, o) in
             enumerate(zip(points.family, points.micro_batch, points.zero, points.overlap))}
    twin_of = {j: i for i, j in _twins(space).items()}
    for k, s in zip(picked, strategies):
        assert s.overlap_ep and s.moe_dispatcher == dispatcher
        _agrees(model, s, points.time_s[k], points.memory_bytes[k])
        # the twin's memory, and the difference: one layer's activations where a forward follows the warm-up
        plain = index[(twin_of[int(points.family[k])], int(points.micro_batch[k]), int(points.zero[k]),
                       bool(points.overlap[k]))]
        over, base = evaluate(model, s, H100), evaluate(model, s.with_(overlap_ep=False), H100)
        assert base.memory_bytes_per_device["total"] == pytest.approx(points.memory_bytes[plain], rel=AGREE)
        layer = _largest_layer_bytes(model, s)
        extra = [o["activations"] - b_["activations"] for o, b_ in zip(over.memory_by_stage, base.memory_by_stage)]
        assert extra == pytest.approx([layer[i] if s.micro_batches * s.chunks > _held(s, i) else 0.0
                                       for i in range(s.pp)], rel=1e-9)
    faster = compared = grew = 0
    for (f, b, z, o), k in index.items():
        if f in twin_of:
            plain = index[(twin_of[f], b, z, o)]
            assert points.time_s[k] <= points.time_s[plain] * (1 + 1e-12)
            assert points.memory_bytes[plain] <= points.memory_bytes[k]
            grew += points.memory_bytes[k] > points.memory_bytes[plain]
            faster += points.time_s[k] < points.time_s[plain] * (1 - 1e-6)
            compared += 1
    assert compared == on.sum() and faster > 0 and grew > 0


def _largest_layer_bytes(model, strategy) -> list:
    """Per stage, the activations of its largest block but the head, one micro-batch (from evaluate()'s blocks)."""
    from explorer.cost.evaluation import build_evaluation
    ev = build_evaluation(model, [strategy], H100)
    act = ev.block_q("act")[:, 0]
    return [max([a for a, n in zip(act[:-1], row[:-1]) if n] + [0.0]) for row in ev.tree.counts]


def _held(s, stage: int) -> int:
    """Chunk-micro-batches stage `stage` holds after the warm-up (the schedule's in_flight x v)."""
    if s.schedule == "interleaved":
        return min(s.micro_batches * s.chunks, 2 * (s.pp - stage - 1) + (s.chunks - 1) * s.pp + 1)
    if s.schedule == "dualpipev":
        return min(s.micro_batches * s.chunks, 2 * s.pp + 1)
    return min(s.pp - stage, s.micro_batches)


def test_the_searchs_overlapped_strategies_evaluate_to_its_own_times():
    """The search lists expert-parallel overlap (Qwen3-30B-A3B on 16 H100s, HybridEP) at evaluate()'s times; the
    DPs do not refine it (its exposed all-to-alls are not monotone in a stage's blocks) and say so in one line."""
    from explorer.errors import ExplorerError
    from explorer.search.problem import problem_for
    model = load_model("qwen3-30b-a3b")
    result = search(model, H100, 16, 256, ep=16, top=5, refine_top=2, moe_dispatcher="hybridep")
    assert any(c.strategy.overlap_ep for c in result.top)
    from explorer.search.report import label
    assert all(label(c.strategy).endswith(" overlapped") == c.strategy.overlap_ep for c in result.top)
    for c in result.top + result.pareto:
        assert c.searched_s == pytest.approx(c.iteration_time_s, rel=AGREE)
        assert c.searched_bytes == pytest.approx(c.peak_memory_bytes, rel=AGREE)
    with pytest.raises(ExplorerError) as err:
        problem_for(model, H100, next(c.strategy for c in result.top if c.strategy.overlap_ep))
    assert "\n" not in str(err.value) and "expert-parallel overlap" in str(err.value)
