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
