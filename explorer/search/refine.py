"""Improve one global choice: its per-layer splits and its layer->stage partition.

Small problems are solved jointly (one DP choosing splits and cuts, exact);
large ones alternate the two exact sub-problems -- splits for fixed stages
(layer_dp), then stages for fixed splits (partition) -- while the time
improves, which is coordinate descent and may stop short of the joint optimum.
"""
from __future__ import annotations

from math import inf

from explorer.schedules import chunked
from explorer.search.layer_dp import best_splits, usable
from explorer.search.partition import best_partition
from explorer.search.problem import problem_for
from explorer.search.space import layer_options

JOINT_BUDGET = 1500
"""layers x per-layer options x stages up to which the joint DP is used (its state
space is p times the fixed-stage one; a few tenths of a second at this size)."""


MAX_LABELS = 24
"""Labels kept per DP state; a state with more keeps those of least lower bound (the
solution is then marked inexact). Tiny models never reach it; long chains whose memory
and time trade off layer by layer (m = 1, batch vs operator splits) do."""


def refine(model, cluster, strategy, incumbent_s: float = inf, cap_bytes=None, chains=None,
           max_labels: int = MAX_LABELS):
    """(strategy, predicted seconds, predicted bytes) of the best splits and stages found
    for `strategy`'s global choices, or None when nothing fits the cap."""
    pb = problem_for(model, cluster, strategy, cap_bytes, chains)
    pipelined = strategy.pp > 1 and not chunked(strategy.schedule)
    size = model.layers * len(usable(layer_options(strategy.tp), strategy, model)) * strategy.pp
    if pipelined and size <= JOINT_BUDGET:
        sol = best_splits(pb, None, incumbent=incumbent_s, max_labels=max_labels)
    else:
        sol = best_splits(pb, pb.even_stages, incumbent=incumbent_s, max_labels=max_labels)
        sol = _alternate(pb, sol, max_labels) if pipelined and sol is not None else sol
    if sol is None:
        return None
    return pb.strategy_for(sol), sol.time_s, sol.memory_bytes


def _alternate(pb, sol, max_labels: int, rounds: int = 3):
    for _ in range(rounds):
        part = best_partition(pb, sol.splits, incumbent=sol.time_s, max_labels=max_labels)
        if part is None or part.time_s >= sol.time_s:
            break
        again = best_splits(pb, part.stages, incumbent=part.time_s, max_labels=max_labels)
        sol = again if again is not None and again.time_s < part.time_s else part
    return sol
