"""The cost as readable sympy expressions: each category and the total, in LaTeX.

Built on demand from the same block expressions the numeric path compiles, so
the two agree by construction (tests check it to 1e-9). Symbols: the DESIGN.md
vocabulary; g_{level} and L_{level} for each machine level of the cluster.
"""
from __future__ import annotations

from dataclasses import dataclass

import sympy as sp

from explorer.cost import collectives as coll
from explorer.cost import superstep as ss
from explorer.cost.program import CATEGORIES, Program
from explorer.cost.quantities import Q
from explorer.symbols import L_t, beta, g_t, l, m, p, t, t_launch, v


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
    definitions: dict    # symbol -> expression, for symbols the terms use as shorthands (Psi)

    def definitions_latex(self) -> dict:
        return {sp.latex(sym): sp.latex(expr) for sym, expr in self.definitions.items()}

    def latex(self) -> dict:
        """LaTeX per category; the bubble in its aggregate form (superstep.BUBBLE)."""
        out = {c: sp.latex(readable(e)) for c, e in self.terms.items() if c != "bubble"}
        out["bubble"] = BUBBLE_LATEX
        return {c: out[c] for c in self.terms}

    def total_latex(self) -> str:
        parts = [sp.latex(readable(e)) if c != "bubble" else r"\left(" + BUBBLE_LATEX + r"\right)"
                 for c, e in self.terms.items() if e != 0]
        return "T_{iter} = " + " + ".join(parts)


# superstep.BUBBLE as a person writes it (sympy would print -T_* m first)
BUBBLE_LATEX = r"\frac{\Sigma_{T} + \left(m v - 1\right) \left(F_{max} + B_{max}\right)}{v} - m T_{*}"
PSI = sp.Symbol("Psi", nonnegative=True)   # parameters per device on the synchronising stage


def readable(expr: sp.Expr, max_ops: int = 600) -> sp.Expr:
    """Expanded and collected over the launch overhead when that reads shorter (sums of
    many operators do; products such as 2(d-1)/d x bytes x g do not)."""
    if sp.count_ops(expr) > max_ops or not isinstance(expr, sp.Mul):
        return expr
    flat = sp.collect(sp.expand(expr), [t_launch])
    return flat if len(str(flat)) < len(str(expr)) else expr


USED = ("fwd_compute", "bwd_compute", "fwd_comm", "bwd_comm", "recompute", "params_dev", "grad_sync")


def _stage_exprs(prog: Program, strategy, cluster):
    """Per stage, the sum of its blocks' expressions (degree and level substituted)."""
    g, L = level_symbols(cluster)
    uniform = strategy.schedule != "interleaved" and not strategy.stage_map and \
        prog.plan.model.layers % strategy.pp == 0
    per_layer = prog.plan.model.layers // strategy.pp
    kind_exprs = {}                     # one substitution per block kind, shared by the stages
    for k, kind in enumerate(prog.kinds):
        degree = t if kind.degree == strategy.tp else sp.Integer(kind.degree)
        subs = {t: degree, g_t: g[kind.level], L_t: L[kind.level]}
        kind_exprs[k] = {q: kind.exprs[Q[q]].xreplace(subs) for q in USED}
    stages = []
    for r in range(strategy.pp):
        acc = dict.fromkeys(USED, sp.Integer(0))
        for k in range(len(prog.kinds)):
            count = int(prog.counts[r, k])
            if count:
                n = l / p if (uniform and count == per_layer and count > 1) else count
                for q in USED:
                    acc[q] += n * kind_exprs[k][q]
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

    fwd = [s["fwd_compute"] + s["fwd_comm"] + boundary(r, "fwd") for r, s in enumerate(stages)]
    bwd = [s["bwd_compute"] + s["bwd_comm"] + s["recompute"] + boundary(r, "bwd")
           for r, s in enumerate(stages)]
    k = critical_stage
    sk = stages[k]
    per_mb = {
        "compute": sk["fwd_compute"] + sk["bwd_compute"],
        "recompute": sk["recompute"],
        "op_comm": sk["fwd_comm"] + sk["bwd_comm"] + boundary(k, "fwd", ("op_comm",)) + boundary(k, "bwd", ("op_comm",)),
        "redistribution": boundary(k, "fwd", ("redistribution",)) + boundary(k, "bwd", ("redistribution",)),
        "pp_comm": boundary(k, "fwd", ("pp_comm",)) + boundary(k, "bwd", ("pp_comm",)),
    }
    terms = {c: m * e for c, e in per_mb.items()}
    pipeline = ss.PIPELINE.xreplace({ss.S_T: sp.Add(*fwd) + sp.Add(*bwd),
                                     ss.F_max: sp.Max(*fwd, evaluate=False),
                                     ss.B_max: sp.Max(*bwd, evaluate=False)})
    terms["bubble"] = pipeline - sp.Add(*terms.values())
    sync_stage = numbers["sync_stage"]
    level = numbers["dp_level"]
    psi = stages[sync_stage]["params_dev"]
    sync_subs = {ss.G: beta * PSI, ss.Psi: PSI, ss.g_dp: g[level], ss.L_dp: L[level],
                 ss.B_last: bwd[sync_stage] / v, ss.K_opt: sp.Integer(numbers["K_opt"]),
                 ss.T_split: stages[sync_stage]["grad_sync"]}
    dp = ss.dp_sync(strategy.zero)
    terms["dp_comm"] = ss.exposed(dp, strategy.overlap_dp).xreplace(sync_subs)
    terms["zero_comm"] = ss.zero_gathers(strategy.zero).xreplace(sync_subs)
    terms["optimizer"] = ss.optimizer(strategy.zero).xreplace(sync_subs)
    terms = {c: terms[c] for c in CATEGORIES}
    values = dict(numbers["symbols"])
    for i, lv in enumerate(cluster.levels):
        values[g[i]], values[L[i]] = lv.seconds_per_byte, lv.latency_s
    values[PSI] = psi.xreplace(values)
    return SymbolicCost(terms, sp.Add(*terms.values()), k, values, {PSI: psi})
