"""explorer/cost/checked.py: the evaluation every page and CLI command asks for, remembered for every session of a
server (a page run evaluates the sidebar's strategy on each rerun), keyed by what the inputs are, not by the objects."""
from dataclasses import replace

import pytest

from explorer.cost import cold
from explorer.cost.checked import evaluate_checked
from explorer.errors import ExplorerError
from explorer.io.clusters import load_cluster
from explorer.io.models import load_model
from explorer.strategy import Strategy

TINY, CLASSROOM = load_model("tiny-gpt"), load_cluster("classroom")
STRATEGY = Strategy(dp=2, tp=2, pp=2, micro_batch=1, global_batch=16)


def test_equal_inputs_find_the_result_of_the_first_evaluation():
    first = evaluate_checked(TINY, STRATEGY, CLASSROOM)
    assert evaluate_checked(replace(TINY), replace(STRATEGY), replace(CLASSROOM)) is first


def test_inputs_that_differ_in_any_field_are_evaluated_for_themselves():
    first = evaluate_checked(TINY, STRATEGY, CLASSROOM)
    wider = evaluate_checked(replace(TINY, hidden=TINY.hidden + 64), STRATEGY, CLASSROOM)
    bigger = evaluate_checked(TINY, replace(STRATEGY, global_batch=32), CLASSROOM)
    assert wider is not first and wider.params > first.params
    assert bigger is not first and bigger.micro_batches == 2 * first.micro_batches
    with pytest.raises(ExplorerError):          # gpus is part of the key: 8 devices do not make 16
        evaluate_checked(TINY, STRATEGY, CLASSROOM, gpus=16)


def test_clearing_the_memory_forgets_the_results_with_the_trees():
    first = evaluate_checked(TINY, STRATEGY, CLASSROOM)
    cold.clear_memory()
    again = evaluate_checked(TINY, STRATEGY, CLASSROOM)
    assert again is not first and again.iteration_time_s == first.iteration_time_s


def test_a_refusal_is_not_remembered(monkeypatch):
    calls = []
    impossible = replace(STRATEGY, tp=3)        # 3 divides neither the heads nor the hidden size
    real = evaluate_checked.__globals__["evaluate"]
    monkeypatch.setitem(evaluate_checked.__globals__, "evaluate", lambda *a: calls.append(a) or real(*a))
    for _ in range(2):
        with pytest.raises(ExplorerError):
            evaluate_checked(TINY, impossible, CLASSROOM)
    assert len(calls) == 2


def test_a_strategy_of_many_stages_is_not_remembered():
    """A Result keeps its cost tree alive: past REMEMBERED_STAGES virtual stages it is evaluated each time."""
    from explorer.cost.cold import REMEMBERED_STAGES
    model = replace(TINY, layers=2 * REMEMBERED_STAGES)
    deep = Strategy(dp=1, tp=1, pp=2 * REMEMBERED_STAGES, micro_batch=1, global_batch=2 * REMEMBERED_STAGES)
    first = evaluate_checked(model, deep, CLASSROOM)
    again = evaluate_checked(model, deep, CLASSROOM)
    assert again is not first and again.iteration_time_s == first.iteration_time_s
