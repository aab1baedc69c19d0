"""The cost as readable sympy expressions: each category and the total, in LaTeX.

Built on demand from the same block expressions the numeric path compiles, so
the two agree by construction (tests check it to 1e-9). Symbols: the DESIGN.md
vocabulary; g_{level} and L_{level} for each machine level of the cluster.
"""
from __future__ import annotations

from dataclasses import dataclass

import sympy as sp

from . import collectives as coll
from . import superstep as ss
from .program import CATEGORIES, Program
from .quantities import Q
from .symbols import L_t, W_hbm, beta, d, g_t, l, m, p, t, v


def level_symbols(cluster) -> tuple:
    g = [sp.Symbol(f"g_{{{lv.name}}}", nonnegative=True) for lv in cluster.levels]
    L = [sp.Symbol(f"L_{{{lv.name}}}", nonnegative=True) for lv in cluster.levels]
    return g, L


@dataclass(frozen=True)
class SymbolicCost:
    terms: dict          # category -> sympy expression (seconds per iteration)
    total: sp.Expr
    stage: int           # the most loaded stage the terms describe
    values: dict         # symbol -> number, to evaluate the expressions exactly

    def latex(self) -> dict:
        return {c: sp.latex(e) for c, e in self.terms.items()}

    def total_latex(self) -> str:
        return "T_{iter} = " + sp.latex(self.total)


def _stage_exprs(prog: Program, strategy, cluster):
    """Per stage, the sum of its blocks' expressions (degree and level substituted)."""
    g, L = level_symbols(cluster)
    uniform = strategy.schedule != "interleaved" and not strategy.stage_map and \
        prog.plan.model.layers % strategy.pp == 0
    per_layer = prog.plan.model.layers // strategy.pp
    stages = []
    for r in range(strategy.pp):
        acc = [sp.Integer(0)] * len(Q)
        for k, kind in enumerate(prog.kinds):
            count = int(prog.counts[r, k])
            if not count:
                continue
            degree = t if kind.degree == strategy.tp else sp.Integer(kind.degree)
            subs = {t: degree, g_t: g[kind.level], L_t: L[kind.level]}
            n = l / p if (uniform and count == per_layer and count > 1) else count
            for i, e in enumerate(kind.exprs):
                acc[i] += n * e.xreplace(subs)
        stages.append(acc)
    return stages, g, L


def _boundary_exprs(prog: Program, strategy, g, L):
    """Per stage and phase, boundary collective seconds by category."""
    out = {}
    for grp in prog.groups:
        n = t if grp.n == strategy.tp else sp.Integer(grp.n)
        secs = grp.count * coll.time(grp.kind, grp.size, n, g[grp.level], L[grp.level])
        key = (grp.stage, grp.phase, grp.category)
        out[key] = out.get(key, sp.Integer(0)) + secs
    return out


def symbolic_cost(prog: Program, strategy, cluster, numbers: dict, critical_stage: int) -> SymbolicCost:
    stages, g, L = _stage_exprs(prog, strategy, cluster)
    bnd = _boundary_exprs(prog, strategy, g, L)
    zero = sp.Integer(0)

    def boundary(r, phase, categories=("op_comm", "redistribution", "pp_comm")):
        return sp.Add(*[bnd.get((r, phase, c), zero) for c in categories])

    fwd = [s[Q["fwd_compute"]] + s[Q["fwd_comm"]] + boundary(r, "fwd") for r, s in enumerate(stages)]
    bwd = [s[Q["bwd_compute"]] + s[Q["bwd_comm"]] + s[Q["recompute"]] + boundary(r, "bwd")
           for r, s in enumerate(stages)]
    k = critical_stage
    sk = stages[k]
    per_mb = {
        "compute": sk[Q["fwd_compute"]] + sk[Q["bwd_compute"]],
        "recompute": sk[Q["recompute"]],
        "op_comm": sk[Q["fwd_comm"]] + sk[Q["bwd_comm"]] + boundary(k, "fwd", ("op_comm",)) + boundary(k, "bwd", ("op_comm",)),
        "redistribution": boundary(k, "fwd", ("redistribution",)) + boundary(k, "bwd", ("redistribution",)),
        "pp_comm": boundary(k, "fwd", ("pp_comm",)) + boundary(k, "bwd", ("pp_comm",)),
    }
    terms = {c: m * e for c, e in per_mb.items()}
    pipeline = ss.PIPELINE.xreplace({ss.S_T: sp.Add(*fwd) + sp.Add(*bwd),
                                     ss.F_max: sp.Max(*fwd), ss.B_max: sp.Max(*bwd)})
    terms["bubble"] = pipeline - sp.Add(*terms.values())
    sync_stage = numbers["sync_stage"]
    level = numbers["dp_level"]
    psi = stages[sync_stage][Q["params_dev"]]
    sync_subs = {ss.G: beta * psi, ss.Psi: psi, ss.g_dp: g[level], ss.L_dp: L[level],
                 ss.B_last: bwd[sync_stage], ss.K_opt: numbers["K_opt"]}
    dp = ss.dp_sync(strategy.zero)
    terms["dp_comm"] = ss.exposed(dp, strategy.overlap_dp).xreplace(sync_subs)
    terms["zero_comm"] = ss.zero_gathers(strategy.zero).xreplace(sync_subs)
    terms["optimizer"] = ss.optimizer(strategy.zero).xreplace(sync_subs)
    terms = {c: terms[c] for c in CATEGORIES}
    values = dict(numbers["symbols"])
    for i, lv in enumerate(cluster.levels):
        values[g[i]], values[L[i]] = lv.seconds_per_byte, lv.latency_s
    return SymbolicCost(terms, sp.Add(*terms.values()), k, values)
