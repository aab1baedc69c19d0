"""One global choice made ready for the dynamic programmes, and turned back into a Strategy."""
from __future__ import annotations

from dataclasses import dataclass

from explorer.cost.placement import ep_overlaps
from explorer.errors import ExplorerError
from explorer.hardware.cluster import BYTES_PER_ELEMENT
from explorer.schedules import chunked
from explorer.strategy import rules
from explorer.strategy.strategy import GRAD_BYTES, LayerSplit, Strategy, memory_options
from explorer.search.chain_dp import Setting, Solution
from explorer.search.objective import Objective
from explorer.search.tables import Chain, node_stages


@dataclass(frozen=True, eq=False)
class Problem:
    model: object
    cluster: object
    strategy: Strategy       # the global choices (its layer_splits / stage_map are ignored)
    chain: Chain             # numbers for this micro-batch size
    objective: Objective
    setting: Setting

    @property
    def tp(self) -> int:
        return self.strategy.tp

    @property
    def even_stages(self) -> tuple:
        """Stage of every block under the default placement (even split, or interleaved chunks)."""
        return node_stages(self.model, self.strategy.with_(stage_map=()))

    def strategy_for(self, solution: Solution) -> Strategy:
        """The Strategy of a solution; default splits and the default stage map are left empty."""
        s = self.strategy
        default = LayerSplit(s.tp, "megatron")
        same = lambda x: (x.degree, x.effective_preset, x.overrides) == \
            (default.degree, default.effective_preset, default.overrides)
        splits = () if all(same(x) for x in solution.splits) else tuple(solution.splits)
        layers = slice(1, 1 + self.model.layers)     # the layers' stages (then MTP modules, head)
        layer_stages = tuple(solution.stages[layers])
        stage_map = () if layer_stages == tuple(self.even_stages[layers]) or chunked(s.schedule) \
            or s.pipeline_layout else layer_stages
        return s.with_(layer_splits=splits, stage_map=stage_map)


def problem_for(model, cluster, strategy: Strategy, cap_bytes: float | None = None, chains=None) -> Problem:
    """The DP problem of `strategy`'s global choices; `chains` caches chains between problems."""
    rules.check(model, strategy, None, cluster)       # the cluster's rules too (e.g. an FP8 recipe its device runs)
    if ep_overlaps(model, strategy):
        raise ExplorerError("the dynamic programmes do not refine a strategy with expert-parallel overlap (its "
                            "exposed all-to-alls, max(sigma E, E - C) of a stage's sums, are not monotone in the "
                            "stage's blocks, as their labels and bounds assume); the sweep prices it as it stands")
    key = (strategy.tp, strategy.dp * strategy.tp, strategy.recompute, strategy.sequence_parallel,
           strategy.scatter_gather, strategy.dtype, strategy.micro_batch, strategy.cp, strategy.cp_algo, strategy.ep,
           strategy.etp, strategy.fp8_recipe)
    chains = {} if chains is None else chains
    if key not in chains:
        chains[key] = Chain(model, cluster, strategy.with_(layer_splits=(), stage_map=()), [strategy.micro_batch])
    chain = chains[key]
    objective = Objective(cluster, BYTES_PER_ELEMENT[strategy.dtype], chain.hw, strategy.dp, strategy.tp,
                          strategy.pp, strategy.cp, strategy if model.is_moe else None,
                          GRAD_BYTES.get(strategy.grad_dtype), memory_options(strategy), dtype=strategy.dtype)
    cap = cluster.device.memory_bytes if cap_bytes is None else cap_bytes
    setting = Setting(strategy.micro_batches, strategy.chunks, strategy.zero, strategy.overlap_dp,
                      strategy.schedule, cap, param_gather=strategy.overlap_param_gather)
    return Problem(model, cluster, strategy.with_(layer_splits=(), stage_map=()), chain, objective, setting)
