"""The super-step: one training iteration as named sympy terms over the per-stage quantities.

The tree has three levels (DESIGN.md, "Structure the code should show"):
micro-steps (each block's operators, explorer.cost.block), stages (a stage's
blocks and boundaries summed: F_r, B_r, W_r and their parts, explorer.cost.program)
and the super-step here: the schedule's critical path and bubble (explorer.schedules),
the gradient synchronisation, ZeRO gathers and optimizer step of every stage, the
memory of every stage, and the categories of DESIGN.md, each a `Term` with
its name, category, citation and expression. `variant(...)` builds them for one
(schedule, ZeRO stage, overlap, dtype) and lambdifies them once; evaluate(),
evaluate_batch(), explain(), the search and the timeline all read that one object.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import sympy as sp

from explorer.cost import collectives as coll
from explorer.cost.numeric import (CATEGORIES, COMM_CATEGORIES, MEMORY_PARTS, OUTPUTS,  # noqa: F401 (re-exported)
                                   SCALAR_INPUT_NAMES, STAGE_INPUT_NAMES, optimizer_state_bytes,
                                   optimizer_update_bytes)
from explorer.schedules import get as schedule_of
from explorer.schedules.base import AGGREGATES
from explorer.symbols import (A_r, AtStage, B_r, C_r, F_r, GS_r, K_opt, L_r, O_r, P_r, Psi_r, R_r,
                              STAGE_FUNCTIONS, StageArgMax, StageMax, W_hbm, W_r, X_r, beta, d, g_r, m, p, r, v)

GSB_r = sp.Symbol("GSB_r", nonnegative=True)   # bytes of GS_r per device
STAGE_INPUTS = (F_r, B_r, W_r, C_r, R_r, O_r, X_r, P_r, Psi_r, A_r, GS_r, GSB_r, g_r, L_r, r)
"""Per-stage arrays (axis 0 = stage) a variant reads; F_r + B_r = C_r + R_r + O_r + X_r + P_r."""
SCALAR_INPUTS = (m, v, p, d, beta, W_hbm, K_opt)
"""Numbers (or arrays over candidates) a variant reads."""
assert tuple(x.name for x in STAGE_INPUTS) == STAGE_INPUT_NAMES
assert tuple(x.name for x in SCALAR_INPUTS) == SCALAR_INPUT_NAMES


@dataclass(frozen=True)
class Term:
    """One named node of the cost tree."""

    name: str
    category: str            # a DESIGN.md category, or '' for intermediate nodes
    citation: str
    expr: sp.Expr
    per_stage: bool = False  # a vector over stages (axis 0) rather than one number


def dp_sync(zero: int) -> sp.Expr:
    """Gradient synchronisation of stage r over d replicas per iteration, plus GS_r (the
    all-reduce of batch-split layers' gradients inside their operator group).

    ZeRO-0: ring all-reduce of the gradients once; ZeRO-1: reduce-scatter of the gradients and
    all-gather of the updated parameters, the same 2(d-1)/d volume (Rajbhandari et al. SC'20
    Sec 7, published.json zero_comm_volume). ZeRO-2 and -3 keep only a gradient shard, so
    with m micro-batches the gradients are reduce-scattered after every backward (DeepSpeed's
    stage-2/3 behaviour, deepspeedai/DeepSpeed#2252): m reduce-scatters, then ZeRO-2's one
    all-gather of the parameters -- (m+1)(d-1)/d beta Psi -- and ZeRO-3's parameter gathers in
    zero_comm -- 3m(d-1)/d beta Psi in all (fidelity issue, E2)."""
    rs = coll.time("reduce_scatter", beta * Psi_r, d, g_r, L_r)
    if zero == 3:
        return m * rs + GS_r
    if zero == 2:
        return m * rs + coll.time("all_gather", beta * Psi_r, d, g_r, L_r) + GS_r
    return coll.time("all_reduce", beta * Psi_r, d, g_r, L_r) + GS_r


def dp_bytes(zero: int) -> sp.Expr:
    """Bytes of dp_sync per device (nccl_busbw factors)."""
    rs = coll.bytes_per_device("reduce_scatter", beta * Psi_r, d)
    if zero == 3:
        return m * rs + GSB_r
    if zero == 2:
        return m * rs + coll.bytes_per_device("all_gather", beta * Psi_r, d) + GSB_r
    return coll.bytes_per_device("all_reduce", beta * Psi_r, d) + GSB_r


def zero_gather_pass(zero: int) -> sp.Expr:
    """ZeRO-3 all-gathers the parameters before every forward and every backward pass
    (Rajbhandari et al. SC'20 Sec 7-B: Psi per pass, 3 Psi with the gradient reduce-scatter)."""
    return coll.time("all_gather", beta * Psi_r, d, g_r, L_r) if zero >= 3 else sp.Integer(0)


def zero_gathers(zero: int) -> sp.Expr:
    """The iteration's gathers: one before each of the 2 m passes of a micro-batch."""
    return 2 * m * zero_gather_pass(zero)


def optimizer_step(zero: int) -> sp.Expr:
    """Adam step, memory-bound: K_opt bytes per parameter at HBM speed; ZeRO-1 and above
    update only the 1/d shard a device owns."""
    return K_opt * Psi_r / ((d if zero >= 1 else 1) * W_hbm)


def model_states(zero: int, k_states: int) -> dict:
    """Bytes of parameters, gradients, optimizer states per device on stage r.

    Rajbhandari et al. SC'20 Sec 5 (published.json zero_model_state_formulas): baseline
    (2+2+K)Psi; P_os: 4Psi + K Psi/Nd; P_os+g: 2Psi + (2+K)Psi/Nd; P_os+g+p: (2+2+K)Psi/Nd."""
    return {"params": beta * Psi_r / (d if zero >= 3 else 1),
            "grads": beta * Psi_r / (d if zero >= 2 else 1),
            "optimizer": k_states * Psi_r / (d if zero >= 1 else 1)}


def terms(schedule: str, zero: int, overlap: bool, k_states: int) -> dict:
    """name -> Term: the super-step of one (schedule, ZeRO stage, overlap, optimizer states)."""
    sched = schedule_of(schedule)
    sync = dp_sync(zero)
    exposed = sp.Max(0, sync - sched.overlap_window) if overlap else sync
    after = exposed + zero_gathers(zero) + optimizer_step(zero)
    critical = StageArgMax(F_r + B_r)
    last = StageArgMax(after)
    t = {}

    def add(name, category, citation, expr, per_stage=False):
        t[name] = Term(name, category, citation, expr, per_stage)

    for sym, expr in AGGREGATES.items():
        add(sp.latex(sym), "", "stage reduction (explorer.schedules.base.AGGREGATES)", expr)
    add("makespan", "", sched.source, sched.makespan)
    add("dp_sync", "dp_comm", "Rajbhandari et al. SC'20 Sec 7; nccl_busbw, mpich_alpha_beta", sync, True)
    add("dp_exposed", "dp_comm", "overlap window: " + sched.name, exposed, True)
    add("zero_gather", "zero_comm", "Rajbhandari et al. SC'20 Sec 7-B", zero_gathers(zero), True)
    add("dp_bytes", "dp_comm", "nccl_busbw", dp_bytes(zero), True)
    pass_bytes = coll.bytes_per_device("all_gather", beta * Psi_r, d) if zero >= 3 else sp.Integer(0)
    add("zero_gather_pass", "zero_comm", "Rajbhandari et al. SC'20 Sec 7-B", zero_gather_pass(zero), True)
    add("zero_bytes_pass", "zero_comm", "Rajbhandari et al. SC'20 Sec 7-B", pass_bytes, True)
    add("zero_bytes", "zero_comm", "Rajbhandari et al. SC'20 Sec 7-B", 2 * m * pass_bytes, True)
    add("optimizer_step", "optimizer", "Adam at HBM speed, ZeRO Sec 3.1", optimizer_step(zero), True)
    add("after", "", "what follows the pipeline on stage r", after, True)
    add("critical_stage", "", "the most loaded stage", critical)
    add("sync_stage", "", "the stage whose synchronisation ends last", last)
    for part, expr in model_states(zero, k_states).items():
        add(f"memory_{part}", "", "Rajbhandari et al. SC'20 Sec 5", expr, True)
    add("memory_activations", "", sched.source + " (micro-batches in flight)", sched.in_flight * A_r, True)
    add("memory_total", "", "model states + activations in flight",
        sum(t[f"memory_{part}"].expr for part in MEMORY_PARTS), True)
    per_mb = {"compute": C_r, "recompute": R_r, "op_comm": O_r, "redistribution": X_r, "pp_comm": P_r}
    for category, sym in per_mb.items():
        add(category, category, "m micro-batches on the most loaded stage", m * AtStage(sym, critical))
    add("bubble", "bubble", sched.source, sp.Max(0, sched.bubble))
    add("dp_comm", "dp_comm", t["dp_exposed"].citation, AtStage(exposed, last))
    add("zero_comm", "zero_comm", t["zero_gather"].citation, AtStage(zero_gathers(zero), last))
    add("optimizer", "optimizer", t["optimizer_step"].citation, AtStage(optimizer_step(zero), last))
    add("iteration", "", "makespan + the slowest stage's synchronisation (DESIGN.md super-step)",
        sched.makespan + StageMax(after))
    return t


@dataclass(frozen=True, eq=False)
class Variant:
    """The super-step terms of one (schedule, zero, overlap, k_states), lambdified once."""

    key: tuple
    terms: dict

    def function(self, names: tuple):
        """A numpy function (STAGE_INPUTS + SCALAR_INPUTS + aggregates) -> the named terms."""
        return _compiled(self.key, names)

    def lean(self, names: tuple) -> tuple:
        """(function, its argument symbols): the named terms compiled over only the symbols they
        use, in a fixed order -- for loops that call one term many times (the search)."""
        return _lean(self.key, names)

    def __call__(self, stage: dict, scalars: dict, names: tuple = OUTPUTS) -> dict:
        """The named terms for per-stage arrays `stage` (symbol -> array, axis 0 = stage) and
        `scalars` (symbol -> number or array over candidates)."""
        args = [stage.get(sym, 0.0) for sym in STAGE_INPUTS] + [scalars.get(sym, 1.0) for sym in SCALAR_INPUTS]
        return dict(zip(names, self.function(names)(*args)))


AGGREGATE_SYMBOLS = tuple(AGGREGATES)


@lru_cache(maxsize=256)
def _compiled(key: tuple, names: tuple):
    t = terms(*key)
    return _compile_all(tuple(_with_aggregates([t[n].expr for n in names])))


@lru_cache(maxsize=256)
def _compile_all(exprs: tuple):
    """Lambdified once per distinct expression tuple: variants whose terms are equal (GPipe's and
    1F1B's makespan, say) share one function."""
    return sp.lambdify(STAGE_INPUTS + SCALAR_INPUTS, list(exprs), modules=[STAGE_FUNCTIONS, "numpy"], cse=True)


@lru_cache(maxsize=256)
def _lean(key: tuple, names: tuple) -> tuple:
    t = terms(*key)
    return _compile_lean(tuple(_with_aggregates([t[n].expr for n in names])))


@lru_cache(maxsize=256)
def _compile_lean(exprs: tuple) -> tuple:
    used = set().union(*(e.free_symbols for e in exprs))
    args = tuple(sym for sym in STAGE_INPUTS + SCALAR_INPUTS if sym in used)
    fn = sp.lambdify(args, list(exprs) if len(exprs) > 1 else exprs[0], modules=[STAGE_FUNCTIONS, "numpy"],
                     cse=True)
    return fn, args


def _with_aggregates(exprs: list) -> list:
    """The expressions with each aggregate symbol replaced by its stage reduction."""
    subs = dict(AGGREGATES)
    return [e.xreplace(subs) for e in exprs]


@lru_cache(maxsize=64)
def variant(schedule: str, zero: int, overlap: bool, k_states: int) -> Variant:
    return Variant((schedule, zero, bool(overlap), k_states), terms(schedule, zero, overlap, k_states))


@lru_cache(maxsize=64)
def aggregate_function(schedule: str, name: str):
    """A schedule's makespan or bubble as a function of the aggregates and (m, v, p) -- what the
    search's dynamic programmes evaluate from partial sums (same expression, no reductions)."""
    expr = getattr(schedule_of(schedule), name)
    return sp.lambdify(AGGREGATE_SYMBOLS + (m, v, p), expr, modules="numpy")
