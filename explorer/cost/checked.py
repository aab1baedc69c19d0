"""evaluate() as every untrusted input reaches it: the input limits, arithmetic errors as ExplorerError, and a
finite Result (explorer.limits holds the checks; this is where they meet the cost model)."""
from __future__ import annotations

from explorer.cost.evaluate import evaluate
from explorer.limits import check_result, guarded


def evaluate_checked(model, strategy, cluster, gpus=None):
    """evaluate() with the limits, arithmetic errors as ExplorerError, and a finite Result (or ExplorerError)."""
    result = guarded(evaluate, model, strategy, cluster, gpus,
                     what=f"evaluating {getattr(model, 'name', 'the model')[:40]!r}")
    return check_result(result, model, cluster)
