"""The iteration time's derivative with respect to every hardware number, from the cost tree (sympy).

explain() writes each category of one evaluation as sympy expressions in the hardware symbols (F, eta,
phi, W_hbm, tau_k, F_a, eta_a, and g_level, L_level of each machine level) with the stages' ends on the
schedule's critical path as symbols T^{end}_i. Here the same terms -- the super-step variant's, its
per-stage symbols at the stages the evaluation picked, composed by explorer.cost.tree.stage_inputs --
are differentiated with sympy: `build` returns two functions, lambdified once per structure (their
source goes to the disk cache, so that a later process needs no sympy):

* `stage_fn(base...)`: each stage-end function's arguments per stage (F_r, B_r, W_r, sends) and their
  derivatives with respect to each hardware symbol;
* `total_fn(base..., ends...)`: the iteration time and the categories, their partial derivatives with
  respect to each hardware symbol and to each stage end.

A stage end is a longest path (a maximum of sums of pass times); its derivative is that of the path that
attains it (explorer.schedules.critical_path.path_weights), and a maximum's derivative that of its
largest argument (`_Active`: the first of equals), so the result is the exact derivative of the active
branch -- no finite differences. explorer.validation.sensitivity chains the pieces and names them by the
cluster file's fields.
"""
from __future__ import annotations

import numpy as np
import sympy as sp

from explorer.cost.compile import lambdify
from explorer.cost.explain import _expand, level_symbols, symbolic_stages
from explorer.cost.numbers import hardware_numbers
from explorer.cost.numeric import grad_norm_time, optimizer_state_bytes, optimizer_update_bytes
from explorer.cost.superstep import CATEGORIES, variant
from explorer.cost.superstep_inputs import T_norm
from explorer.schedules.base import AGGREGATES
from explorer.schedules.registry import SCHEDULES
from explorer.strategy.strategy import options_of
from explorer.symbols import AtStage, K_opt, _StageEnd

OUTPUTS = ("iteration",) + tuple(c for c in CATEGORIES if c != "bubble")
"""What total_fn differentiates: the iteration time and every category but the bubble (the bubble is the
iteration less the others: its derivative follows)."""
END_ARGS = 5
"""A stage end's per-stage arguments: forward, backward, weight gradient, sends forward, sends backward."""
class _Active(sp.Function):
    """1 where argument i + 1 is the first largest of the others, else 0: a maximum's derivative is its
    active branch's (the first of equals)."""

    def fdiff(self, argindex=1):
        return sp.Integer(0)

    def _numpycode(self, printer):
        i, *args = self.args
        return ("numpy.equal(numpy.argmax(numpy.stack((" + ", ".join(printer._print(x) for x in args) +
                ",)), axis=0), " + printer._print(i) + ").astype(float)")


def _depends(expr, x, memo: dict) -> bool:
    """Whether expr contains x, each shared subexpression visited once."""
    key = (expr, x)
    found = memo.get(key)
    if found is None:
        found = memo[key] = expr == x if not expr.args else any(_depends(y, x, memo) for y in expr.args)
    return found


def _derivative(expr, x, memo: dict, deps: dict):
    """d expr / d x, forward mode over the expression's graph (each shared subexpression once: sympy's diff
    walks it as a tree), a maximum by its active branch."""
    if not _depends(expr, x, deps):
        return sp.Integer(0)
    key = (expr, x)
    done = memo.get(key)
    if done is not None:
        return done
    d = lambda y: _derivative(y, x, memo, deps)
    if expr == x:
        out = sp.Integer(1)
    elif expr.is_Add:
        out = sp.Add(*[d(y) for y in expr.args])
    elif expr.is_Mul:
        args = expr.args
        out = sp.Add(*[sp.Mul(d(y), *args[:i], *args[i + 1:]) for i, y in enumerate(args) if _depends(y, x, deps)])
    elif expr.is_Pow and not _depends(expr.exp, x, deps):
        out = expr.exp * expr.base ** (expr.exp - 1) * d(expr.base)
    elif isinstance(expr, sp.Max):
        args = expr.args
        out = sp.Add(*[_Active(sp.Integer(i), *args) * d(y) for i, y in enumerate(args) if _depends(y, x, deps)])
    else:
        out = sp.diff(expr, x)
    memo[key] = out
    return out


def _stage_end_schedule(app) -> tuple:
    """(schedule name, with sends) of a stage-end function application."""
    name = type(app).__name__
    if name == "StageEndInterleavedSends":
        return "interleaved", True
    for schedule in SCHEDULES.values():
        if schedule.function_name == name:
            return schedule.name, False
    raise ValueError(f"no schedule has the stage-end function {name}")


def build(model, strategy, cluster, critical_stage: int, sync_stage: int, hardware: set) -> dict:
    """The compiled derivative of one evaluation's structure, whose most loaded stage is `critical_stage`
    and whose synchronisation ends last on `sync_stage`: {base, hw, apps, stages, stage_fn, total_fn}
    (see the module docstring; `base` the names of both functions' leading arguments, `hw` those
    differentiated: those named in `hardware`, `apps` the (schedule, sends) of each stage-end function)."""
    stage = symbolic_stages(model, strategy, cluster)
    dtype_bytes = hardware_numbers(cluster, strategy.dtype)["beta"]
    var = variant(strategy.schedule, strategy.zero, strategy.overlap_dp, optimizer_state_bytes(dtype_bytes),
                  model.is_moe, **options_of(strategy))
    agg = dict(AGGREGATES)
    pp = strategy.pp
    exprs = [var.terms[name].expr.xreplace(agg) for name in OUTPUTS]
    apps, placeholders = [], {}
    for expr in exprs:
        for app in sorted(expr.atoms(_StageEnd), key=sp.srepr):
            if app not in placeholders:
                n = len(apps)
                apps.append(app)
                placeholders[app] = sp.Symbol(f"E{n}_r", nonnegative=True)
                stage[placeholders[app]] = np.array([sp.Symbol(f"T^{{end,{n}}}_{{{i}}}", nonnegative=True)
                                                     for i in range(pp)], dtype=object)
    at = {sp.Integer(i): i for i in range(pp)}
    for name, index in (("critical_stage", critical_stage), ("sync_stage", sync_stage)):
        chosen = var.terms[name].expr
        at.update({chosen: index, chosen.xreplace(agg): index, chosen.xreplace(agg).xreplace(placeholders): index})
    # T_norm in the levels' g and L, so that its elasticities count too (numeric.grad_norm_time)
    constants = {K_opt: sp.Integer(optimizer_update_bytes(dtype_bytes)),
                 T_norm: sp.Integer(0) + grad_norm_time(cluster, strategy.mesh, strategy.zero, strategy.dtype,
                                                        *level_symbols(cluster))}
    terms = [_expand(expr.xreplace(placeholders), stage, at, pp, (), constants) for expr in exprs]
    ends = [list(stage[placeholders[app]]) for app in apps]
    args = []       # per application, per argument (END_ARGS), per stage
    for app in apps:
        per_arg = [app.args[0], app.args[1], app.args[2]] + list(app.args[5:7])
        per_arg += [sp.Integer(0)] * (END_ARGS - len(per_arg))
        args.append([[_expand(AtStage(sp.Integer(0) + x, sp.Integer(i)), stage, at, pp, (), constants) for i in range(pp)]
                     for x in per_arg])
    flat_args = [e for per_app in args for per_arg in per_app for e in per_arg]
    end_syms = [e for per_app in ends for e in per_app]
    free = set().union(*(e.free_symbols for e in terms + flat_args)) - set(end_syms)
    base = sorted(free, key=lambda x: x.name)
    hw = [x for x in base if x.name in hardware]
    memo, deps = {}, {}
    d_args = [_diffs(e, hw, memo, deps) for e in flat_args]
    stage_exprs = flat_args + [d for row in d_args for d in row]
    d_terms = [_diffs(e, hw + end_syms, memo, deps) for e in terms]
    total_exprs = terms + [d for row in d_terms for d in row]
    return {"base": [x.name for x in base], "hw": [x.name for x in hw],
            "apps": [list(_stage_end_schedule(app)) for app in apps],
            "stages": pp, "outputs": list(OUTPUTS),
            "stage_fn": lambdify(base, [sp.Integer(0) + e for e in stage_exprs] or [sp.Integer(0)], cse=_cse),
            "total_fn": lambdify(base + end_syms, [sp.Integer(0) + e for e in total_exprs], cse=_cse)}


def _cse(exprs):
    """sympy's common subexpressions without its canonical ordering of arguments (which counts the nodes of
    every argument as a tree: most of the time on the derivatives' shared graphs)."""
    return sp.cse(exprs, order="none", list=False)


def _diffs(expr, syms, memo: dict, deps: dict) -> list:
    """expr's derivative with respect to each of syms, maxima by their active branch."""
    return [_derivative(expr, x, memo, deps) for x in syms]


__all__ = ["OUTPUTS", "END_ARGS", "build"]
