"""explain(): the evaluated cost as readable sympy expressions, read from the same tree.

Each category is the super-step variant's own Term (explorer.cost.superstep) with
the per-stage symbols at the stage it describes (the most loaded one, or the one
whose synchronisation ends last) replaced by that stage's expression -- built by
the same composition the numbers use (explorer.cost.tree.stage_inputs), applied to
sympy expressions instead of arrays. The two paths agree by construction; tests
check it to 1e-9. Symbols: the DESIGN.md vocabulary (explorer.symbols); g_{level}
and L_{level} for each machine level of the cluster.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
import sympy as sp

from explorer.cost import collectives as coll
from explorer.cost.cache import BoundedCache
from explorer.cost.evaluate import Result, evaluate
from explorer.cost.collectives import cp_kind
from explorer.cost.numbers import hardware_numbers
from explorer.strategy.strategy import GRAD_BYTES, options_of  # noqa: F401
from explorer.cost.placement import ep_overlaps, ep_sm_share
from explorer.cost.plan import expert_dp_route
from explorer.cost.superstep import CATEGORIES, bubble_term, variant
from explorer.cost.superstep_inputs import SENDS_EXPOSED, L_e_r, Psi_e_r, T_norm, g_e_r
from explorer.cost.superstep_inputs import e as ep_symbol
from explorer.cost.numeric import (Q, grad_norm_seconds, optimizer_state_bytes, optimizer_update_bytes,
                                   sharded_expert_params, stage_dp_routes)
from explorer.cost.tree import cost_tree, stage_inputs, tied_terms
from explorer.limits import spend
from explorer.schedules import get as schedule_of
from explorer.schedules.base import AGGREGATES
from explorer.hardware.attention import PARAMS as ATTENTION_PARAMS
from explorer.symbols import (ATTENTION_KERNEL, B_r, F_r, S_b_r, S_f_r, tau_h, tau_s)
from explorer.symbols import (F, F_a, K_opt, L_c, L_r, L_t, Psi_r, V, W_hbm, AtStage, QuickMax, StageMax,
                              StageSum, StageSuffixMax, StageSuffixSum, _StageEnd, a, a_kv, b, beta, d, eta, eta_a,
                              f, g_c, g_r, g_t, h, l, m, p, phi, r, s, t, t_launch, v)

PSI = sp.Symbol("Psi", nonnegative=True)   # parameters per device on the synchronising stage
END_r = sp.Symbol("T^{end}_r", nonnegative=True)    # stage r's last pass ends (the schedule's critical path)
SYNC_r = sp.Symbol("T^{sync}_r", nonnegative=True)  # what follows it on stage r: sync, ZeRO gathers, step


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
    compact: dict        # category -> the super-step Term itself (aggregates, stage symbols)

    def definitions_latex(self) -> dict:
        return dict(self._definitions_latex)

    def latex(self) -> dict:
        """LaTeX per category; the bubble in its aggregate form (Σ_T, F_max, ... of the schedule).
        Printed once per object (printing is the slow part of explaining)."""
        return dict(self._latex)

    def total_latex(self) -> str:
        return self._total_latex

    @cached_property
    def _definitions_latex(self) -> dict:
        return {printed(sym): printed(expr) for sym, expr in self.definitions.items()}

    @cached_property
    def _latex(self) -> dict:
        return {c: (printed(self.compact[c]) if c == "bubble" else printed(e, readable_form=True))
                for c, e in self.terms.items()}

    @cached_property
    def _total_latex(self) -> str:
        latex = self._latex
        parts = [latex[c] if c != "bubble" else r"\left(" + latex[c] + r"\right)"
                 for c, e in self.terms.items() if e != 0]
        return "T_{iter} = " + " + ".join(parts)


_PRINTED = BoundedCache(512)
"""LaTeX by expression: models that differ only in their sizes, and strategies that differ only in d or b, have
the same formulas (the sizes are symbols), so a class of students on their own models prints each formula once
per server process (issue 31 item 5), not once per session."""


def printed(expr, readable_form: bool = False) -> str:
    """sp.latex(expr), or sp.latex(readable(expr)), printed once per equal expression (bounded)."""
    return _PRINTED.get((readable_form, expr), lambda: sp.latex(readable(expr) if readable_form else expr))


def readable(expr: sp.Expr, max_ops: int = 600) -> sp.Expr:
    """The shortest of: the expression, it expanded and collected over the launch overhead (sums of
    many operators), and that with common factors pulled out (per-layer splits of several degrees
    merge into sums like 50 L m t + 94 L m; factored: 2 m (25 L t + 47 L))."""
    if sp.count_ops(expr) > max_ops or not isinstance(expr, sp.Mul):
        return expr
    flat = sp.collect(sp.expand(expr), [t_launch])
    shapes = (expr, flat) + ((sp.factor_terms(flat),) if not flat.has(sp.Max) else ())   # rooflines: too slow
    return min(shapes, key=lambda e: len(str(e)))


def symbol_values(model, strategy, cluster) -> dict:
    hw = hardware_numbers(cluster, strategy.dtype, model.softmax_type)
    return {b: strategy.micro_batch, s: model.seq_len, h: model.hidden, a: model.heads,
            a_kv: model.kv_heads, f: model.ffn_hidden, V: model.vocab, l: model.layers,
            t: strategy.tp, d: strategy.dp * strategy.cp, p: strategy.pp, v: strategy.chunks,
            m: strategy.micro_batches, F: hw["F"], eta: hw["eta"], phi: hw["phi"],
            W_hbm: hw["W"], t_launch: hw["tau"], beta: hw["beta"], F_a: hw["F_a"], eta_a: hw["eta_a"],
            **dict(zip(ATTENTION_KERNEL, (hw["attention"][k] for k in ATTENTION_PARAMS))),
            tau_h: hw["tau_h"], tau_s: hw["tau_s"],
            T_norm: grad_norm_seconds(cluster, strategy.mesh, strategy.zero, strategy.dtype)}


def _stage_tables(tree, strategy, g, L):
    """Per stage, the block quantities (stages x BLOCK_Q, object array of sympy expressions,
    degree and level substituted), the boundary seconds by category and phase, and the
    point-to-point sends' seconds by phase (numeric.boundary_values' sends), and each stage's largest layer's
    activations (numeric.layer_activations: the kinds but the last, the head: numeric.holds_layer_activations)."""
    uniform = not schedule_of(strategy.schedule).chunked and not strategy.stage_map and \
        tree.plan.model.layers % strategy.pp == 0
    per_layer = tree.plan.model.layers // strategy.pp
    kinds = []
    for kind in tree.kinds:
        degree = t if kind.degree == strategy.tp else sp.Integer(kind.degree)
        g_kind, L_kind = coll.route_g_L("all_reduce", kind.route, g, L)
        subs = {t: degree, g_t: g_kind, L_t: L_kind}
        if kind.cp_route:
            subs[g_c], subs[L_c] = coll.route_g_L(cp_kind(strategy.cp_algo), kind.cp_route, g, L)
        else:
            subs[g_c], subs[L_c] = g[0], L[0]
        kinds.append([e.xreplace(subs) for e in kind.exprs])
    stages = strategy.pp
    per_stage = np.full((stages, len(Q)), sp.Integer(0), dtype=object)
    for i in range(stages):
        for k, exprs in enumerate(kinds):
            count = int(tree.counts[i, k])
            if count:
                n = l / p if (uniform and count == per_layer and count > 1) else count
                per_stage[i] = per_stage[i] + np.array([n * e for e in exprs], dtype=object)
    categories = {grp.category for grp in tree.groups} | {"op_comm", "ep_comm", "redistribution", "pp_comm"}
    fwd = {c: np.full(stages, sp.Integer(0), dtype=object) for c in categories}
    bwd = {c: np.full(stages, sp.Integer(0), dtype=object) for c in categories}
    sends = (np.full(stages, sp.Integer(0), dtype=object), np.full(stages, sp.Integer(0), dtype=object))
    for grp in tree.groups:
        n = t if grp.n == strategy.tp else sp.Integer(grp.n)
        secs = grp.count * coll.time(grp.kind, grp.size, n, *coll.route_g_L(grp.kind, grp.route, g, L))
        (fwd if grp.phase == "fwd" else bwd)[grp.category][grp.stage] += secs
        if grp.category == "pp_comm" and grp.kind == "p2p":
            sends[grp.phase != "fwd"][grp.stage] += secs
    layer_act = np.array([_largest([exprs[Q["act"]] for k, exprs in enumerate(kinds[:-1])
                                    if tree.counts[i, k] and exprs[Q["act"]] != 0]) for i in range(stages)],
                         dtype=object)
    return per_stage, fwd, bwd, sends, layer_act


def _largest(exprs: list):
    """The largest of `exprs` (QuickMax), the one itself, or 0 for none."""
    return QuickMax(*exprs) if len(exprs) > 1 else (exprs[0] if exprs else sp.Integer(0))


EXPAND_CHECK_EVERY = 64
"""_expand's builds between two budget checks (explorer.limits.spend: a few microseconds each)."""


def _expand(expr, stage: dict, at: dict, stages: int, ends: tuple = (), constants: dict | None = None):
    """expr with AtStage(x, index) at the stage `at[index]`, and stage sums and maxima written out;
    a schedule's stage end at stage i is the symbol ends[i] (its value: the critical path's number,
    a longest path that no closed form in the stage symbols gives), its suffix sums and maxima
    (GPipe's) are written out over the stages from i on; `constants` replaced everywhere.

    One pass from the leaves up, each (subexpression, stage) built once: a stage's symbols become
    that stage's expressions (inserted whole, never rebuilt), and a maximum is a QuickMax, which
    drops only equal arguments -- sympy's Max would try to prove an order between every pair of
    its arguments (factor_terms of their difference), quadratic in the stages and slow on each pair
    (issue 31). Linear in the stages: p copies of a stage's expression per stage reduction."""
    constants = constants or {}
    tables = [{**{sym: vals[i] for sym, vals in stage.items()}, **constants} for i in range(stages)]
    built: dict = {}

    def over(x, stage_range, combine):
        return combine(*[at_stage(x.args[0], k) for k in stage_range])

    def at_stage(x, i):
        """x at stage i (None: outside any stage, where only AtStage and the reductions pick one)."""
        key = (x, None if isinstance(x, (StageSum, StageMax)) else i)   # the same at every stage
        done = built.get(key)
        if done is None:
            done = built[key] = _build(x, i)
        return done

    def _build(x, i):
        if len(built) % EXPAND_CHECK_EVERY == 0:     # a budget stops it between builds (a 2,048-stage pipeline's
            spend("writing out the formulas stage by stage")   # sensitivity ran 182 s past a 5 s budget here)
        table = constants if i is None else tables[i]
        if x in table:
            return table[x]
        if not x.args:
            return x
        if isinstance(x, AtStage):
            return at_stage(x.args[0], at[x.args[1]])
        if isinstance(x, StageSum):
            return over(x, range(stages), sp.Add)
        if isinstance(x, StageMax):
            return over(x, range(stages), QuickMax)
        if i is not None:
            if isinstance(x, _StageEnd):
                return ends[i]
            if isinstance(x, StageSuffixSum):
                return over(x, range(i, stages), sp.Add)
            if isinstance(x, StageSuffixMax):
                return over(x, range(i, stages), QuickMax)
        args = [at_stage(y, i) for y in x.args]
        if all(y is z for y, z in zip(args, x.args)):
            return x
        return QuickMax(*args) if isinstance(x, sp.Max) else x.func(*args)
    return at_stage(expr, None)


def _tied(tree, strategy, g, L) -> dict:
    """The tied embedding's copy and gradient all-reduce, symbolically (tree.tied_terms)."""
    tied = tree.tied
    if tied is None:
        return {}
    params = tied.params
    size = beta * params
    secs = coll.time("all_reduce", size, sp.Integer(2), *coll.route_g_L("all_reduce", tied.route, g, L))
    return tied_terms(tied, strategy.pp, params, secs, coll.bytes_per_device("all_reduce", size, sp.Integer(2)))


_STAGES = BoundedCache(16)


def clear_memory() -> None:
    """Forget the symbolic stages built in this process (sympy's own cache aside): for tests that measure a
    cold explain()."""
    _STAGES.clear()


def symbolic_stages(model, strategy, cluster) -> dict:
    """A new dict of _symbolic_stages(model, strategy, cluster), built once per (model, strategy, cluster):
    explain() and explorer.cost.elasticity (the sensitivity of the same evaluation, as `evaluate --json` and the
    Cost page ask for both) read the same sympy expressions (built once: ~0.04 s CPU at p = 16 x v = 8);
    callers may add keys to the dict, not change its arrays."""
    return dict(_STAGES.get((model, strategy, cluster), lambda: _symbolic_stages(model, strategy, cluster)))


def _symbolic_stages(model, strategy, cluster) -> dict:
    """The super-step's per-stage inputs of this strategy's stages as sympy expressions (symbol -> object array
    over stages): the same composition as the numbers (explorer.cost.tree.stage_inputs, numeric.stage_values),
    with each stage's data-parallel routes (g_r, L_r), its index r and, for a model with experts, the expert
    weights sharded over ep and their own group's g^e_r, L^e_r (superstep_inputs.EXPERT_GROUP). Read by explain() and
    explorer.cost.elasticity alike."""
    tree = cost_tree(model, strategy, cluster)
    g, L = level_symbols(cluster)
    per_stage, fwd_b, bwd_b, sends_b, layer_act = _stage_tables(tree, strategy, g, L)
    sigma = ep_sm_share(model, strategy, cluster, exact=True)      # a fraction in the formulas (16/148), not 0.108
    stage = stage_inputs(per_stage, fwd_b, bwd_b, _tied(tree, strategy, g, L), sends_b, ep_overlaps(model, strategy),
                         sp.Rational(sigma.numerator, sigma.denominator) if sigma else 0, layer_act)
    routes = [coll.route_g_L("all_reduce", route, g, L) for route in stage_dp_routes(cluster, strategy.mesh, strategy.pp)]
    stage[g_r] = np.array([x for x, _ in routes], dtype=object)
    stage[L_r] = np.array([y for _, y in routes], dtype=object)
    stage[r] = np.array([sp.Integer(i) for i in range(strategy.pp)], dtype=object)
    if model.is_moe:    # the expert weights' data-parallel groups (explorer.cost.superstep_inputs.EXPERT_GROUP)
        stage[Psi_e_r] = np.array([sharded_expert_params(x, strategy.ep) for x in stage[Psi_e_r]], dtype=object)
        pairs = [coll.route_g_L("all_reduce", expert_dp_route(cluster, strategy, i), g, L) for i in range(strategy.pp)]
        stage[g_e_r] = np.array([x for x, _ in pairs], dtype=object)
        stage[L_e_r] = np.array([y for _, y in pairs], dtype=object)
    return stage


def _readable_params(psi: sp.Expr) -> sp.Expr:
    """Psi, the dense parameters per device, is every parameter less the expert weights: sympy keeps the two apart
    (Qwen3-30B-A3B's read 2Vh/t - 294912hl/p + h + l(... + 295042h ...)/p, as if it subtracted parameters, a
    lecturer's walk), so a Psi with a term of negative sign is expanded and collected by layers: 2Vh/t + h +
    l(... + 130h/p). Others are left as they are written."""
    if not any(term.could_extract_minus_sign() for term in sp.Add.make_args(psi)):
        return psi
    return sp.collect(sp.expand(psi), l)


def explain(model, strategy, cluster, gpus=None, result: Result | None = None) -> SymbolicCost:
    """Symbolic terms for the stages `result` reports (evaluated if not given)."""
    result = result or evaluate(model, strategy, cluster, gpus)
    g, L = level_symbols(cluster)
    stage = symbolic_stages(model, strategy, cluster)
    j, k = result.extra["sync_stage"], result.critical_stage
    psi = _readable_params(stage[Psi_r][j])
    shown = dict(stage)
    shown[Psi_r] = np.array([PSI if i == j else e for i, e in enumerate(stage[Psi_r])], dtype=object)
    dtype_bytes = hardware_numbers(cluster, strategy.dtype)["beta"]
    var = variant(strategy.schedule, strategy.zero, strategy.overlap_dp, optimizer_state_bytes(dtype_bytes),
                  model.is_moe, **options_of(strategy))
    critical, last = var.terms["critical_stage"].expr, var.terms["sync_stage"].expr
    at = {critical: k, last: j, critical.xreplace(dict(AGGREGATES)): k, last.xreplace(dict(AGGREGATES)): j}
    constants = {K_opt: sp.Integer(optimizer_update_bytes(dtype_bytes))}
    ends = tuple(sp.Symbol(f"T^{{end}}_{{{i}}}", nonnegative=True) for i in range(strategy.pp))
    terms, compact = {}, {}
    sends = {}          # overlapped sends: their exposed part named (it compares two critical paths)
    if options_of(strategy).get("p2p_overlap"):
        sends = {var.terms["pp_sends_exposed"].expr: SENDS_EXPOSED}
    for c in CATEGORIES:
        term = var.terms[c].expr.xreplace(sends)
        if c == "bubble":
            compact[c] = bubble_term(END_r, SYNC_r, F_r + B_r - S_f_r - S_b_r, SENDS_EXPOSED) if sends \
                else bubble_term(END_r, SYNC_r)
        else:
            compact[c] = term
        terms[c] = _expand(term.xreplace(dict(AGGREGATES)), shown, at, strategy.pp, ends, constants)
    values = dict(symbol_values(model, strategy, cluster))
    for i, row in enumerate(result.stage_times_s):
        values[ends[i]] = sp.Float(row["end_s"], 17)
    for i, lv in enumerate(cluster.levels):
        values[g[i]], values[L[i]] = lv.seconds_per_byte, lv.latency_s
    values[PSI] = psi.xreplace(values)
    values[ep_symbol] = sp.Rational(strategy.ep * strategy.etp, strategy.tp)    # d / e: expert-DP replicas
    definitions = {PSI: psi, END_r: var.terms["stage_end"].expr.xreplace(dict(AGGREGATES)),
                   SYNC_r: var.terms["after"].expr}
    if sends:
        values[SENDS_EXPOSED] = sp.Float(result.extra["pp_sends_exposed_s"], 17)
        definitions[SENDS_EXPOSED] = var.terms["pp_sends_exposed"].expr.xreplace(dict(AGGREGATES))
    return SymbolicCost(terms, sp.Add(*terms.values()), k, values, definitions, compact)


__all__ = ["SymbolicCost", "explain", "level_symbols", "readable", "symbol_values", "symbolic_stages"]
