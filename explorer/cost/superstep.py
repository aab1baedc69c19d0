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
from explorer.cost.compile import lambdify
from explorer.cost.gradient_sync import (dp_bytes, dp_sync, grad_reduce_scatter, param_gather, param_gather_exposed,
                                         sharded_sync_exposed, zero_gather_pass, zero_gathers, zero_pass_exposed)
from explorer.cost.model_states import _rational, activations_in_flight, model_states, optimizer_bytes, optimizer_step
from explorer.cost.numeric import CATEGORIES, COMM_CATEGORIES, MEMORY_PARTS, OUTPUTS  # noqa: F401 (re-exported)
from explorer.cost.reductions import STAGE_FUNCTIONS
from explorer.cost.superstep_inputs import (EXPERT_GROUP, SCALAR_INPUTS, STAGE_INPUTS, CP_r, E_r, Psi_e_r, T_norm,
                                            Term)
from explorer.hardware.precision import PARAM_GATHER_BYTES
from explorer.schedules import get as schedule_of
from explorer.schedules.base import AGGREGATES
from explorer.symbols import (AtStage, B_r, C_r, F_r, O_r, P_r, Psi_r, QuickMax, R_r, S_b_r, S_f_r, StageArgMax,
                              StageMax, X_r, beta, d, m)

__all__ = ["CATEGORIES", "COMM_CATEGORIES", "MEMORY_PARTS", "OUTPUTS", "STAGE_INPUTS", "T_norm", "Term", "Variant",
           "bubble_term", "model_states", "overlapped_sends", "sharded_sync_exposed", "terms", "variant"]
"""Re-exported for the modules and tests that import them from here (the terms themselves live in
superstep_inputs, gradient_sync and model_states)."""


def _with_experts(moe: bool, dense, expert):
    """dense + the same term over the expert weights' group, for a model with experts."""
    return dense + expert if moe else dense


def bubble_term(ends, after, busy=F_r + B_r, waiting=0) -> sp.Expr:
    """The critical stage's idle time: the iteration, max_r (ends_r + after_r), less the most loaded
    stage's m passes (`busy` each: F_r + B_r, without the sends when they are overlapped), the finishing
    stage's synchronisation and the wait on overlapped sends that pp_comm counts (`waiting`) (= the
    schedule's closed-form bubble for equal stages; the max with 0 only takes off rounding, ~1e-18 s at
    p = 1). explain() prints it with named symbols for ends and after."""
    return QuickMax(0, StageMax(ends + after) - waiting - m * AtStage(busy, StageArgMax(busy)) -
                    AtStage(after, StageArgMax(ends + after)))


def overlapped_sends(schedule: str, after):
    """(stage ends, the stage's busy time per micro-batch, exposed wait, sends) with the pipeline's
    point-to-point sends overlapped with computation (Megatron-LM --overlap-p2p-communication, which
    Megatron-Core allows for the interleaved schedule only: Schedule.overlaps_sends; strategy/rules.py refuses
    it otherwise). The
    sends S^f_r, S^b_r leave the sender's passes; a pass on the receiving stage waits for its input's
    end plus the send (explorer.schedules.critical_path, sends). What they still add to the
    iteration -- the iteration less the same schedule with instant sends -- is their exposed part."""
    sched = schedule_of(schedule)
    fwd, bwd = F_r - S_f_r, B_r - S_b_r
    ends = sched.stage_end_with(fwd, bwd, (S_f_r, S_b_r))      # ValueError unless sched.overlaps_sends
    instant = sched.stage_end_with(fwd, bwd)
    exposed = QuickMax(0, StageMax(ends + after) - StageMax(instant + after))   # edges only lengthen paths
    return ends, fwd + bwd, exposed, S_f_r + S_b_r


def terms(schedule: str, zero: int, overlap: bool, k_states: int, moe: bool = False, *, grad_bytes=None,
          param_gather_overlap: bool = False, zero_prefetch: bool = False, p2p_overlap: bool = False,
          fp8_weights: str | None = None, moment_bytes: int | None = None, master_bytes: int | None = None,
          fp8_params: bool = False, ep_overlap: bool = False) -> dict:
    """name -> Term: the super-step of one (schedule, ZeRO stage, overlap, optimizer states); with
    `moe`, the expert weights (Psi^e_r) synchronise, shard and update over their own d/e group;
    grad_bytes: None = beta, or 4 for fp32 gradients; param_gather_overlap: ZeRO-1/2's parameter
    all-gather under the next forward (param_gather_exposed); zero_prefetch: ZeRO-3's gathers under
    the layers' compute (zero_gathers_exposed); p2p_overlap: the pipeline's sends under computation
    (overlapped_sends); fp8_weights, moment_bytes, master_bytes: what the precision recipe keeps
    (Strategy.memory_options: model_states, optimizer_bytes); fp8_params: FP8 parameters, gathered at
    param_gather_bytes and kept without their BF16 copy (Strategy.fp8_param_gather: model_states); ep_overlap: the
    MoE all-to-alls under the partner pass (Strategy.overlap_ep), whose merged steps hold one more layer
    (activations_in_flight)."""
    sched = schedule_of(schedule)
    pb = _rational(PARAM_GATHER_BYTES[fp8_weights]) if fp8_params and fp8_weights is not None else beta
    grad_bytes = None if grad_bytes is None else sp.Integer(grad_bytes)
    k_states, saved = optimizer_bytes(k_states, moment_bytes, master_bytes)
    eg = EXPERT_GROUP
    # the expert weights' own parts (their group's route, g^e_r), kept apart too: explorer/cost/rows.py splits the
    # synchronisation's and the gathers' rows over each group's machine levels
    expert_sync = dp_sync(zero, gs=0, grad_bytes=grad_bytes, pb=pb, **eg) if moe else sp.Integer(0)
    expert_gathers = zero_gathers(zero, pb, **eg) if moe else sp.Integer(0)
    expert_pass_bytes = coll.bytes_per_device("all_gather", pb * Psi_e_r, eg["n"]) if moe and zero >= 3 \
        else sp.Integer(0)
    sync = _with_experts(moe, dp_sync(zero, grad_bytes=grad_bytes, pb=pb), expert_sync)
    gathers = _with_experts(moe, zero_gathers(zero, pb), expert_gathers)
    pass_exposed = {ph: _with_experts(moe, zero_pass_exposed(zero, zero_prefetch, ph, pb=pb),
                                      zero_pass_exposed(zero, zero_prefetch, ph, pb=pb, **eg)) for ph in ("fwd", "bwd")}
    gathers_exposed = m * (pass_exposed["fwd"] + pass_exposed["bwd"])     # = gathers without prefetch
    # the step waits for the global gradient norm that clipping needs (an all-reduce over every rank after the
    # gradients are synchronised: T_norm, explorer.cost.numeric.grad_norm_seconds; issue 26 item 8b)
    step = _with_experts(moe, optimizer_step(zero, saved=saved), optimizer_step(zero, Psi_e_r, eg["n"], saved)) + T_norm
    moved = _with_experts(moe, param_gather(zero, pb=pb), param_gather(zero, pb=pb, **eg)) if param_gather_overlap \
        else sp.Integer(0)        # the parameter all-gather, moved under the next forward
    rest = sync - moved
    if overlap and zero >= 2:          # a reduce-scatter after every micro-batch's backward (E2)
        rs = _with_experts(moe, grad_reduce_scatter(grad_bytes=grad_bytes),
                           grad_reduce_scatter(**eg, grad_bytes=grad_bytes))
        gather = _with_experts(moe, zero_gather_pass(zero, pb=pb), zero_gather_pass(zero, pb=pb, **eg))
        exposed = sharded_sync_exposed(sched, rs, rest, gather - pass_exposed["fwd"], gather - pass_exposed["bwd"])
    else:
        exposed = sched.exposed_sync(rest) if overlap else rest
    if param_gather_overlap:
        exposed = exposed + _with_experts(moe, param_gather_exposed(zero, pb=pb), param_gather_exposed(zero, pb=pb, **eg))
    after = exposed + gathers_exposed + step
    if p2p_overlap:
        ends, busy, waiting, sends = overlapped_sends(schedule, after)
    else:
        ends, busy, waiting, sends = sched.stage_end, F_r + B_r, sp.Integer(0), sp.Integer(0)
    critical = StageArgMax(busy)
    # each stage synchronises once its own last pass has ended (fidelity issue, E9): the iteration
    # ends with the stage whose pipeline end plus synchronisation and step is the latest
    finish = ends + after
    last = StageArgMax(finish)
    t = {}

    def add(name, category, citation, expr, per_stage=False):
        t[name] = Term(name, category, citation, expr, per_stage)

    for sym, expr in AGGREGATES.items():
        add(sp.latex(sym), "", "stage reduction (explorer.schedules.base.AGGREGATES)", expr)
    add("stage_end", "", sched.source + "; the longest path to stage r's last pass (explorer.schedules."
        "critical_path)", ends, True)
    add("makespan", "", "the latest stage end", StageMax(ends))
    add("dp_sync", "dp_comm", "Rajbhandari et al. SC'20 Sec 7; nccl_busbw, mpich_alpha_beta", sync, True)
    add("dp_exposed", "dp_comm", "overlap window: " + sched.name, exposed, True)
    add("zero_gather", "zero_comm", "Rajbhandari et al. SC'20 Sec 7-B", gathers, True)
    add("zero_pass_fwd_exposed", "zero_comm", "exposed gather of one forward pass", pass_exposed["fwd"], True)
    add("zero_pass_bwd_exposed", "zero_comm", "exposed gather of one backward pass", pass_exposed["bwd"], True)
    add("zero_exposed", "zero_comm", "prefetch: DeepSpeed stage3_prefetch_bucket_size, FSDP backward_prefetch"
        if zero_prefetch else "Rajbhandari et al. SC'20 Sec 7-B", gathers_exposed, True)
    expert_bytes = dp_bytes(zero, Psi_e_r, eg["n"], 0, grad_bytes=grad_bytes, pb=pb) if moe else sp.Integer(0)
    add("dp_bytes", "dp_comm", "nccl_busbw",
        _with_experts(moe, dp_bytes(zero, grad_bytes=grad_bytes, pb=pb), expert_bytes), True)
    add("dp_sync_experts", "", "dp_sync over the expert weights' data-parallel group (superstep_inputs.EXPERT_GROUP)",
        expert_sync, True)
    add("dp_bytes_experts", "", "dp_bytes over the expert weights' data-parallel group", expert_bytes, True)
    add("zero_gather_experts", "", "zero_gather over the expert weights' data-parallel group", expert_gathers, True)
    add("zero_bytes_experts", "", "zero_bytes over the expert weights' data-parallel group", 2 * m * expert_pass_bytes,
        True)
    pass_bytes = _with_experts(moe, coll.bytes_per_device("all_gather", pb * Psi_r, d), expert_pass_bytes) \
        if zero >= 3 else sp.Integer(0)
    add("zero_gather_pass", "zero_comm", "Rajbhandari et al. SC'20 Sec 7-B",
        _with_experts(moe, zero_gather_pass(zero, pb=pb), zero_gather_pass(zero, pb=pb, **eg)), True)
    add("zero_bytes_pass", "zero_comm", "Rajbhandari et al. SC'20 Sec 7-B", pass_bytes, True)
    add("zero_bytes", "zero_comm", "Rajbhandari et al. SC'20 Sec 7-B", 2 * m * pass_bytes, True)
    add("optimizer_step", "optimizer", "Adam at HBM speed, ZeRO Sec 3.1; after the gradient-norm all-reduce T_norm "
        "(Megatron-LM clip_grads.py get_grad_norm_fp32)", step, True)
    add("after", "", "what follows the pipeline on stage r", after, True)
    add("critical_stage", "", "the most loaded stage", critical)
    add("sync_stage", "", "the stage whose synchronisation ends last", last)
    experts = model_states(zero, k_states, Psi_e_r, eg["n"], grad_bytes=grad_bytes, fp8_weights=fp8_weights,
                           fp8_params=fp8_params)
    for part, expr in model_states(zero, k_states, grad_bytes=grad_bytes, fp8_weights=fp8_weights,
                                   fp8_params=fp8_params).items():
        add(f"memory_{part}", "", "Rajbhandari et al. SC'20 Sec 5", _with_experts(moe, expr, experts[part]), True)
    add("memory_activations", "", sched.source + " (micro-batches in flight)" +
        ("; Megatron-Core combined_1f1b.py: one more layer under EP overlap" if ep_overlap else ""),
        activations_in_flight(sched, ep_overlap), True)
    add("memory_total", "", "model states + activations in flight",
        sum(t[f"memory_{part}"].expr for part in MEMORY_PARTS), True)
    per_mb = {"compute": C_r, "recompute": R_r, "op_comm": O_r, "ep_comm": E_r, "redistribution": X_r,
              "pp_comm": P_r - sends, "cp_comm": CP_r}
    for category, sym in per_mb.items():
        add(category, category, "m micro-batches on the most loaded stage", m * AtStage(sym, critical) +
            (waiting if category == "pp_comm" else 0))
    add("pp_sends_exposed", "pp_comm", "Megatron-LM --overlap-p2p-communication: the iteration less the same "
        "schedule with instant sends", waiting)
    add("pp_sends_hidden", "pp_comm", "the critical stage's m micro-batches of sends, less their exposed part",
        QuickMax(0, m * AtStage(sends, critical) - waiting) if p2p_overlap else sp.Integer(0))
    add("bubble", "bubble", sched.source + "; iteration - m (F+B) of the critical stage - the last sync",
        bubble_term(ends, after, busy, waiting))
    add("dp_comm", "dp_comm", t["dp_exposed"].citation, AtStage(exposed, last))
    add("zero_comm", "zero_comm", t["zero_exposed"].citation, AtStage(gathers_exposed, last))
    add("optimizer", "optimizer", t["optimizer_step"].citation, AtStage(step, last))
    add("iteration", "", "each stage's end + its synchronisation, the latest (DESIGN.md super-step; E9)",
        StageMax(finish))
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
    t = _terms_of(key)
    return _compile_all(tuple(_with_aggregates([t[n].expr for n in names])))


@lru_cache(maxsize=256)
def _compile_all(exprs: tuple):
    """Lambdified once per distinct expression tuple: variants whose terms are equal (GPipe's and
    1F1B's makespan, say) share one function."""
    return lambdify(STAGE_INPUTS + SCALAR_INPUTS, list(exprs), modules=[STAGE_FUNCTIONS, "numpy"])


@lru_cache(maxsize=256)
def _lean(key: tuple, names: tuple) -> tuple:
    t = _terms_of(key)
    return _compile_lean(tuple(_with_aggregates([t[n].expr for n in names])))


@lru_cache(maxsize=256)
def _compile_lean(exprs: tuple) -> tuple:
    used = set().union(*(e.free_symbols for e in exprs))
    args = tuple(sym for sym in STAGE_INPUTS + SCALAR_INPUTS if sym in used)
    fn = lambdify(args, list(exprs) if len(exprs) > 1 else exprs[0], modules=[STAGE_FUNCTIONS, "numpy"])
    return fn, args


def _with_aggregates(exprs: list) -> list:
    """The expressions with each aggregate symbol replaced by its stage reduction."""
    subs = dict(AGGREGATES)
    return [e.xreplace(subs) for e in exprs]


@lru_cache(maxsize=64)
def variant(schedule: str, zero: int, overlap: bool, k_states: int, moe: bool = False, *,
            grad_bytes=None, param_gather_overlap: bool = False, zero_prefetch: bool = False,
            p2p_overlap: bool = False, **memory) -> Variant:
    """grad_bytes: None (gradients at beta, the default) or 4 (fp32 gradients, Strategy.grad_dtype);
    param_gather_overlap, zero_prefetch, p2p_overlap: see terms()."""
    key = (schedule, zero, bool(overlap), k_states) + ((True,) if moe else ()) + \
        (() if grad_bytes is None else (("grad_bytes", grad_bytes),)) + \
        ((("param_gather_overlap", True),) if param_gather_overlap else ()) + \
        ((("zero_prefetch", True),) if zero_prefetch else ()) + \
        ((("p2p_overlap", True),) if p2p_overlap else ()) + \
        tuple(sorted((k, v) for k, v in memory.items() if v is not None))    # fp8_weights, moment/master_bytes
    return Variant(key, _terms_of(key))


def _terms_of(key: tuple) -> dict:
    """terms() of a variant key: positional entries, then (name, value) options such as ("grad_bytes", n)."""
    options = dict(k for k in key if isinstance(k, tuple))
    return terms(*(k for k in key if not isinstance(k, tuple)), **options)
