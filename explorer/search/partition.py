"""Layer -> stage partition by dynamic programming.

With the splits fixed, the stages hold consecutive layers (the embedding
with the first, the head with the last); choosing the p - 1 cuts is the
linear partition problem (Skiena, The Algorithm Design Manual, Sec 8.5:
minimise the largest part) extended as in PipeDream's partitioner
(Narayanan et al., SOSP'19, Sec 3.1: stage time includes the sends at the
cut, each stage within its memory) and Alpa's inter-operator pass (Zheng et
al., OSDI'22, Sec 5.2, Eq. 2: sum of stage times + (B - 1) x the slowest).
Here the objective is the model's own iteration time -- the pipeline formula
(sum + (m - 1)(max F + max B)) plus the slowest stage's synchronisation --
and `chain_dp.ChainDP` solves it exactly, the cut after each layer being
the DP's decision.
"""
from __future__ import annotations

from math import inf

from explorer.search.chain_dp import ChainDP, Solution


def best_partition(problem, splits, incumbent: float = inf, max_labels: int = 64) -> Solution | None:
    """Least-time stage map for per-layer `splits` (None when no partition fits the cap)."""
    chain = problem.chain
    choices, layer = [], 0
    for i in range(chain.n):
        if chain.is_layer(i):
            choices.append((splits[layer],))
            layer += 1
        else:
            choices.append((None,))
    dp = ChainDP(chain, problem.objective, problem.setting, choices, None)
    return dp.solve(incumbent, max_labels, seed_stages=problem.even_stages)
