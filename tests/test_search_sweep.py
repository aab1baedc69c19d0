"""The sweep prices every global choice with lower bounds on its stage ends and walks the critical
path only where a search reads the time (issue "Speed where a person waits": the search of gpt3-175b
on 1024 GPUs within 3 s CPU). What the search reads must be what a sweep pricing every point on
its critical path gives: the fastest points in order, and the Pareto front."""
import importlib

import numpy as np
import pytest

from explorer import load_cluster, load_model
from explorer.search import search
from explorer.search.pareto import pareto_front
from explorer.search.space import enumerate_space
from explorer.search.sweep import settle, settle_fastest, settle_front, sweep


@pytest.fixture(scope="module", params=[("gpt-1.7b", 16, 128), ("megatron-22b", 16, 128)])
def sweeps(request):
    name, gpus, batch = request.param
    model, cluster = load_model(name), load_cluster("dgx-a100-80gb")
    families = enumerate_space(model, gpus, batch).families
    lazy, full = (sweep(model, cluster, families, batch) for _ in range(2))
    settle(full, np.arange(full.time_s.size))
    fits = np.flatnonzero(full.memory_bytes <= cluster.device.memory_bytes)
    return lazy, full, fits


def test_the_bounds_are_bounds_and_the_rest_exact(sweeps):
    lazy, full, _ = sweeps
    assert full.exact.all()
    assert 0 < lazy.exact.sum() < lazy.exact.size          # GPipe's closed form at once, the others bounded
    assert np.all(lazy.time_s <= full.time_s * (1 + 1e-12))
    assert lazy.time_s[lazy.exact] == pytest.approx(full.time_s[lazy.exact], rel=1e-12)
    assert np.array_equal(lazy.memory_bytes, full.memory_bytes)


def test_settling_gives_the_fastest_and_the_front_of_the_exact_sweep(sweeps):
    lazy, full, fits = sweeps
    copy = type(lazy)(*(x.copy() for x in (lazy.family, lazy.option, lazy.micro_batch, lazy.zero, lazy.overlap,
                                             lazy.time_s, lazy.memory_bytes, lazy.exact)), pending=lazy.pending)
    settle_fastest(copy, fits, 40)
    settle_front(copy, fits)
    assert not copy.exact[fits].all(), "most points keep their bound"
    order = lambda pts: fits[np.lexsort((pts.memory_bytes[fits], pts.time_s[fits]))][:40]
    assert np.array_equal(order(copy), order(full))
    assert copy.time_s[order(copy)] == pytest.approx(full.time_s[order(full)], rel=1e-12)
    front = lambda pts: fits[pareto_front(pts.time_s[fits], pts.memory_bytes[fits])]
    assert np.array_equal(front(copy), front(full))
    assert copy.exact[front(copy)].all()


def test_the_top_list_stops_reading_past_its_slowest_row(monkeypatch):
    """_Pool.best stops once no later candidate could join a row: the same rows, with the same
    equivalent variants, as reading all scan x k of them."""
    model, cluster = load_model("gpt-1.7b"), load_cluster("dgx-a100-80gb")
    module = importlib.import_module("explorer.search.search")
    calls, evaluate_one = [], module.candidate
    monkeypatch.setattr(module, "candidate", lambda *args: calls.append(1) or evaluate_one(*args))
    stopped = search(model, cluster, 16, 16, top=8)         # B = 16: GPipe = 1F1B rows to fold (m = 1)
    evaluated = len(calls)
    monkeypatch.setattr(module, "SWEEP_AGREES", np.inf)
    read_all = search(model, cluster, 16, 16, top=8)
    assert evaluated < len(calls) - evaluated
    assert [(c.strategy, c.equivalent) for c in stopped.top] == [(c.strategy, c.equivalent) for c in read_all.top]
    assert any(c.equivalent for c in stopped.top)
