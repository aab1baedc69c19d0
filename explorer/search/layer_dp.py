"""Per-layer operator splits by dynamic programming along the layer chain.

Each layer may take any split of `space.layer_options(t)`; a layer's cost
depends on its split and on the layout its producer hands it, and every
boundary between neighbours with different splits pays the redistribution
the plan prices (a gather, reduce or all-to-all). With the stage of every
block fixed, `chain_dp.ChainDP` finds the splits of least iteration time
under the memory cap -- the chain version of the per-operator sharding
choice of Alpa's intra-operator pass (Zheng et al., OSDI'22, Sec 4), here
solved exactly by dynamic programming because the graph is a chain of blocks.
With `stages=None` the cuts between stages are chosen in the same pass
(the joint problem; its state space is p times larger).

>>> from explorer import load_model, load_cluster, Strategy
>>> from explorer.search.problem import problem_for
>>> s = Strategy(dp=2, tp=2, pp=2, micro_batch=1, global_batch=8)
>>> pb = problem_for(load_model("tiny-gpt"), load_cluster("classroom"), s)
>>> best_splits(pb, pb.even_stages).time_s > 0
True
"""
from __future__ import annotations

from math import inf

from explorer.search.chain_dp import ChainDP, Solution
from explorer.strategy import rules
from explorer.search.space import layer_options


def usable(options, strategy, model) -> tuple:
    """The options `strategy` and `model` allow as every layer's split, by the rule table
    (explorer.strategy.rules): heads and key/value heads divisible, a batch split dividing b."""
    def fits(option):
        v = rules.view(tp=strategy.tp, micro_batch=strategy.micro_batch, layer_splits=(option,) * model.layers)
        return not any(rule.broken(v, model) for rule in rules.RULES
                       if rule.scope == "model" and set(rule.fields) <= {"tp", "micro_batch", "layer_splits"})
    return tuple(o for o in options if fits(o))


def best_splits(problem, stages, options=None, incumbent: float = inf, max_labels: int = 64) -> Solution | None:
    """Least-time per-layer splits with every block's stage fixed to `stages` -- or, with
    stages=None, the stage cuts chosen jointly (pipelines without interleaving only).
    None when nothing fits the memory cap (or nothing beats `incumbent`)."""
    options = usable(options or layer_options(problem.tp), problem.strategy, problem.model)
    chain = problem.chain
    choices = [options if chain.is_layer(i) else (None,) for i in range(chain.n)]
    seed = problem.even_stages if stages is None else None
    return ChainDP(chain, problem.objective, problem.setting, choices, stages).solve(incumbent, max_labels, seed)
