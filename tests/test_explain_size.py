"""explain() does work linear in the pipeline stages p (issue 31, item 3): work bounds, not clock times.

The Cost page's first view of gpt3-175b, interleaved with the data-parallel sync overlapped, cost 6.6 s
CPU at p = 8, 31 s at p = 16 and 87 s at p = 32: rebuilding each stage maximum as sympy's Max made
sympy try to prove an order between every pair of stage expressions (factor_terms of each
difference). Here, at p = 8, 16 and 32 (interleaved, v = 3; GPipe): the Python function calls of
explaining and printing (cProfile, sympy's cache and explain's memo cleared first) at most double when p doubles,
sympy's ordering proofs and factor_terms run a number of times that does not grow with p, the
expressions explain() returns have a node count at most linear in p (doubling p at most doubles it)
and the LaTeX the page prints does not grow faster either; the terms still evaluate to evaluate()'s
numbers at p = 32.
(benchmarks/bench_explain.py prints the CPU seconds.)
"""
import cProfile
import pstats

import pytest
import sympy as sp
from sympy.core.cache import clear_cache
from sympy.functions.elementary import miscellaneous
from sympy.functions.elementary.miscellaneous import MinMaxBase

from explorer import Strategy, evaluate, load_cluster, load_model
from explorer.cost.explain import clear_memory, explain

STAGES = (8, 16, 32)
WARM_UP = 4             # explained first, untimed: the schedule's super-step variant, built once for any p
SCHEDULES = {"interleaved": 3, "gpipe": 1}      # schedule -> chunks v (96 layers = 32 x 3 chunks)


def nodes(expr) -> int:
    return sum(1 for _ in sp.preorder_traversal(expr))


def exactly(expr, values: dict) -> float:
    return float(expr.xreplace({sym: sp.Rational(x) for sym, x in values.items()}))


@pytest.fixture(scope="module")
def measured():
    """(schedule, p) -> (model, strategy, cluster, result, SymbolicCost, calls) while explaining and printing
    the LaTeX, calls: all Python function calls, sympy's pairwise ordering proofs (Max/Min._is_connected)
    and factor_terms (sympy.factor_terms, which readable() uses, and the one Max's proofs use)."""
    model, cluster = load_model("gpt3-175b"), load_cluster("dgx-a100-80gb")
    proofs, factor_terms = MinMaxBase._is_connected.__func__, miscellaneous.factor_terms
    out = {}
    for schedule, chunks in SCHEDULES.items():
        for p in (WARM_UP,) + STAGES:
            strategy = Strategy(dp=16, tp=8, pp=p, micro_batch=1, global_batch=1536, schedule=schedule,
                                chunks=chunks, overlap_dp=True)
            result = evaluate(model, strategy, cluster)
            calls = {"proofs": 0, "factor_terms": 0}

            def counted_proofs(cls, x, y):
                calls["proofs"] += 1
                return proofs(cls, x, y)

            def counted_factor_terms(*args, **kwargs):
                calls["factor_terms"] += 1
                return factor_terms(*args, **kwargs)
            with pytest.MonkeyPatch.context() as mp:
                mp.setattr(MinMaxBase, "_is_connected", classmethod(counted_proofs))
                mp.setattr(miscellaneous, "factor_terms", counted_factor_terms)
                mp.setattr(sp, "factor_terms", counted_factor_terms)
                clear_cache()
                clear_memory()      # the symbolic stages an earlier test may have built for the same strategy
                profile = cProfile.Profile()
                profile.enable()
                try:
                    sc = explain(model, strategy, cluster, result=result)
                    sc.latex(), sc.total_latex(), sc.definitions_latex()
                finally:
                    profile.disable()
            calls["python"] = pstats.Stats(profile).total_calls
            out[schedule, p] = (model, strategy, cluster, result, sc, calls)
    return out


@pytest.mark.parametrize("schedule", list(SCHEDULES))
def test_function_calls_grow_at_most_linearly_in_the_stages(measured, schedule):
    """Before the linear explanation: about 4x per doubling of p (11.6 s, 44 s, 204 s CPU)."""
    calls = [measured[schedule, p][-1]["python"] for p in STAGES]
    for small, large in zip(calls, calls[1:]):      # p doubles: a + b p at most doubles
        assert large <= 2 * small, calls


@pytest.mark.parametrize("schedule", list(SCHEDULES))
def test_costly_sympy_calls_do_not_grow_with_the_stages(measured, schedule):
    calls = [measured[schedule, p][-1] for p in STAGES]
    for name in ("proofs", "factor_terms"):
        assert calls[-1][name] <= calls[0][name], (name, calls)
    assert calls[-1]["factor_terms"] <= 10 and calls[-1]["proofs"] <= 50, calls


@pytest.mark.parametrize("schedule", list(SCHEDULES))
def test_expressions_grow_at_most_linearly_in_the_stages(measured, schedule):
    sizes = [nodes(measured[schedule, p][4].total) for p in STAGES]
    for small, large in zip(sizes, sizes[1:]):      # p doubles: a + b p at most doubles
        assert large <= 2 * small, sizes
    for category in measured[schedule, STAGES[0]][4].terms:
        by_p = [nodes(measured[schedule, p][4].terms[category]) for p in STAGES]
        assert all(large <= 2 * small for small, large in zip(by_p, by_p[1:])), (category, by_p)


@pytest.mark.parametrize("schedule", list(SCHEDULES))
def test_printed_latex_grows_at_most_linearly_in_the_stages(measured, schedule):
    lengths = []
    for p in STAGES:
        sc = measured[schedule, p][4]
        lengths.append(len(sc.total_latex()) + sum(map(len, sc.latex().values())) +
                       sum(len(k) + len(v) for k, v in sc.definitions_latex().items()))
    assert all(large <= 2 * small for small, large in zip(lengths, lengths[1:])), lengths


@pytest.mark.parametrize("schedule", list(SCHEDULES))
def test_the_terms_still_equal_the_numbers_at_32_stages(measured, schedule):
    model, strategy, cluster, result, sc, _ = measured[schedule, 32]
    for category, term in sc.terms.items():
        assert exactly(term, sc.values) == pytest.approx(result.breakdown_s[category], rel=1e-9,
                                                         abs=1e-15 * result.iteration_time_s), category
    assert exactly(sc.total, sc.values) == pytest.approx(result.iteration_time_s, rel=1e-9)


def test_writing_out_the_stages_checks_the_budget_as_it_goes(monkeypatch):
    """A hostile review: a 2,048-stage pipeline's sensitivity spent 182 s in _expand past a 5 s budget, which was
    checked only between its calls. The expansion now checks every EXPAND_CHECK_EVERY builds: its checks grow with
    the stages, and a budget that says stop stops it inside."""
    from explorer.cost import explain as ex
    from explorer.limits import WorkCancelled, _BUDGET, work_budget
    model, cluster = load_model("gpt3-175b"), load_cluster("dgx-a100-80gb")
    checks = {}
    for pp in (4, 32):
        s = Strategy(dp=1, tp=8, pp=pp, micro_batch=1, global_batch=64, schedule="interleaved", chunks=3,
                     overlap_dp=True)
        clear_memory()
        with work_budget("the test", cpu_s=1000):
            explain(model, s, cluster)
            checks[pp] = _BUDGET.get().checks
    assert checks[32] >= checks[4] + 10, checks
    calls = []
    monkeypatch.setattr(ex, "spend", lambda doing: calls.append(doing) if len(calls) < 40 else
                        (_ for _ in ()).throw(WorkCancelled(doing)))
    clear_memory()
    with pytest.raises(WorkCancelled, match="stage by stage"):
        explain(model, s, cluster)
