"""evaluate() as every untrusted input reaches it: the input limits, arithmetic errors as ExplorerError, and a
finite Result (explorer.limits holds the checks; this is where they meet the cost model).

The results are remembered (RESULTS, shared by every session of the app's server): a page run evaluates the
sidebar's strategy on every rerun, and a class revisits the same strategies from page to page; with thirty sessions
each on its own model that was a tenth of a page run's CPU when nothing else was computed
(benchmarks/bench_load.py --diverse, docs/benchmarks-classroom.md, issue 31). A Result is frozen and nothing
changes its dicts; a refusal (ExplorerError) is not remembered.
"""
from __future__ import annotations

from explorer.cost.cold import REMEMBERED_STAGES, RESULTS
from explorer.cost.evaluate import evaluate
from explorer.limits import check_result, guarded


def evaluate_checked(model, strategy, cluster, gpus=None):
    """evaluate() with the limits, arithmetic errors as ExplorerError, and a finite Result (or ExplorerError);
    remembered (up to REMEMBERED_STAGES virtual stages) by the reprs of model, strategy and cluster (frozen dataclasses
    whose reprs name every field, floats exactly: the disk cache keys trees the same way) and gpus."""
    what = f"evaluating {getattr(model, 'name', 'the model')[:40]!r}"

    def checked():
        return check_result(guarded(evaluate, model, strategy, cluster, gpus, what=what), model, cluster)
    if getattr(strategy, "pp", 1) * getattr(strategy, "chunks", 1) > REMEMBERED_STAGES:
        return checked()                # a large Result (and the tree it keeps): not remembered
    return RESULTS.get((repr(model), repr(strategy), repr(cluster), gpus), checked)
