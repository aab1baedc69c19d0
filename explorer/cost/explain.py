"""explain(): the evaluated cost as readable formulas (symbolic.py) with their numbers."""
from __future__ import annotations

from explorer.cost import superstep as ss
from explorer.hardware.cluster import BYTES_PER_ELEMENT
from explorer.cost.evaluate import Result, evaluate, hardware_numbers
from explorer.cost.program import program_for
from explorer.symbols import F, V, W_hbm, a, a_kv, b, beta, d, eta, f, h, l, m, p, phi, s, t, t_launch, v
from explorer.cost.symbolic import SymbolicCost, symbolic_cost


def symbol_values(model, strategy, cluster) -> dict:
    hw = hardware_numbers(cluster, strategy.dtype)
    return {b: strategy.micro_batch, s: model.seq_len, h: model.hidden, a: model.heads,
            a_kv: model.kv_heads, f: model.ffn_hidden, V: model.vocab, l: model.layers,
            t: strategy.tp, d: strategy.dp, p: strategy.pp, v: strategy.chunks,
            m: strategy.micro_batches, F: hw["F"], eta: hw["eta"], phi: hw["phi"],
            W_hbm: hw["W"], t_launch: hw["tau"], beta: hw["beta"]}


def explain(model, strategy, cluster, gpus=None, result: Result | None = None) -> SymbolicCost:
    """Symbolic terms for the most loaded stage of `result` (evaluated if not given)."""
    result = result or evaluate(model, strategy, cluster, gpus)
    prog = program_for(model, strategy, cluster, gpus)
    numbers = {"symbols": symbol_values(model, strategy, cluster),
               "sync_stage": result.extra["sync_stage"], "dp_level": result.extra["dp_level"],
               "K_opt": ss.optimizer_bytes_per_param(BYTES_PER_ELEMENT[strategy.dtype])}
    return symbolic_cost(prog, strategy, cluster, numbers, result.critical_stage)
