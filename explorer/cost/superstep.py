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
from explorer.cost.numeric import (CATEGORIES, COMM_CATEGORIES, MEMORY_PARTS, OUTPUTS,  # noqa: F401 (re-exported)
                                   SCALAR_INPUT_NAMES, STAGE_INPUT_NAMES, optimizer_state_bytes,
                                   optimizer_update_bytes)
from explorer.cost.reductions import STAGE_FUNCTIONS
from explorer.hardware.precision import PARAM_GATHER_BYTES, WEIGHT_COPY_BYTES
from explorer.schedules import get as schedule_of
from explorer.schedules.base import AGGREGATES
from explorer.symbols import (A_r, AtStage, B_r, C_r, F_r, GS_r, K_opt, L_r, O_r, P_r, Psi_r, QuickMax, R_r,
                              S_b_r, S_f_r, StageArgMax, StageMax, W_hbm, W_r, X_r, beta, d, g_r, m, p, r, v)

GSB_r = sp.Symbol("GSB_r", nonnegative=True)   # bytes of GS_r per device
CP_r = sp.Symbol("CP_r", nonnegative=True)     # exposed context-parallel exchange (cp_comm) of stage r
# Mixture-of-Experts (issue 11): the expert layers' all-to-alls and the experts' own weights
E_r = sp.Symbol("E_r", nonnegative=True)       # expert-parallel all-to-all part of F_r + B_r (ep_comm)
Psi_e_r = sp.Symbol("Psi^e_r", nonnegative=True)  # expert parameters per device on stage r (sharded over ep)
g_e_r = sp.Symbol("g^e_r", nonnegative=True)   # seconds per byte of stage r's expert-data-parallel groups
L_e_r = sp.Symbol("L^e_r", nonnegative=True)   # latency of that level
e = sp.Symbol("e", positive=True)              # d over the expert weights' data-parallel replicas: ep (ep etp / t)
T_norm = sp.Symbol("T_{norm}", nonnegative=True)  # gradient-norm all-reduce(s) before the step (numeric.grad_norm_seconds)
A_l_r = sp.Symbol("A^l_r", nonnegative=True)   # the largest layer's activations on stage r (numeric.layer_activations)
STAGE_INPUTS = (F_r, B_r, W_r, C_r, R_r, O_r, X_r, P_r, Psi_r, A_r, GS_r, GSB_r, g_r, L_r, r, CP_r, E_r, Psi_e_r,
                g_e_r, L_e_r, S_f_r, S_b_r, A_l_r)
"""Per-stage arrays (axis 0 = stage) a variant reads; F_r + B_r = C_r + R_r + O_r + E_r + X_r + P_r + CP_r,
and S^f_r + S^b_r the point-to-point sends within P_r."""
SENDS_EXPOSED = sp.Symbol("T^{sends}", nonnegative=True)
"""explain()'s name for pp_sends_exposed: what overlapped point-to-point sends still add to the iteration."""
SCALAR_INPUTS = (m, v, p, d, beta, W_hbm, K_opt, e, T_norm)
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


def dp_sync(zero: int, psi=Psi_r, n=d, g=g_r, L=L_r, gs=GS_r, *, grad_bytes=None, pb=beta) -> sp.Expr:
    """Gradient synchronisation of stage r over d replicas per iteration, plus GS_r (the
    all-reduce of batch-split layers' gradients inside their operator group).

    ZeRO-0: ring all-reduce of the gradients once; ZeRO-1: reduce-scatter of the gradients and
    all-gather of the updated parameters, the same 2(d-1)/d volume (Rajbhandari et al. SC'20
    Sec 7, published.json zero_comm_volume). ZeRO-2 and -3 keep only a gradient shard, so
    with m micro-batches the gradients are reduce-scattered after every backward (DeepSpeed's
    stage-2/3 behaviour, deepspeedai/DeepSpeed#2252): m reduce-scatters, then ZeRO-2's one
    all-gather of the parameters -- (m+1)(d-1)/d beta Psi -- and ZeRO-3's parameter gathers in
    zero_comm -- 3m(d-1)/d beta Psi in all (fidelity issue, E2).

    `grad_bytes` (fidelity issue, E7): bytes of a reduced gradient element when they differ
    from beta -- 4 with fp32 gradients (Megatron-LM --accumulate-allreduce-grads-in-fp32): the
    gradients move at 4 B, the parameters ZeRO-1/2 gather back at beta (Megatron's distributed
    optimizer: reduce-scatter of fp32 main grads, all-gather of bf16 params,
    docs/user-guide/features/dist_optimizer.md). `pb`: bytes of a gathered parameter element when they differ
    from beta -- FP8 parameters (Strategy.fp8_param_gather, param_gather_bytes)."""
    rs = grad_reduce_scatter(psi, n, g, L, grad_bytes=grad_bytes)
    if grad_bytes is not None or pb != beta:
        grad_bytes = beta if grad_bytes is None else grad_bytes
        ag = coll.time("all_gather", pb * psi, n, g, L)
        if zero == 0:
            return coll.time("all_reduce", grad_bytes * psi, n, g, L) + gs
        return (m * rs if zero >= 2 else rs) + (ag if zero in (1, 2) else 0) + gs
    if zero == 3:
        return m * rs + gs
    if zero == 2:
        return m * rs + coll.time("all_gather", beta * psi, n, g, L) + gs
    return coll.time("all_reduce", beta * psi, n, g, L) + gs


def grad_reduce_scatter(psi=Psi_r, n=d, g=g_r, L=L_r, *, grad_bytes=None) -> sp.Expr:
    """One reduce-scatter of stage r's gradients over n replicas (at beta bytes, or grad_bytes)."""
    return coll.time("reduce_scatter", (beta if grad_bytes is None else sp.Integer(grad_bytes)) * psi, n, g, L)


def sharded_sync_exposed(sched, rs, rest, hidden_fwd, hidden_bwd) -> sp.Expr:
    """ZeRO-2/3 with the sync overlapped: micro-batch j's gradient reduce-scatter (`rs` seconds) starts
    under its own backward (bucketed: DeepSpeed overlap_comm, PyTorch FSDP's post-backward
    reduce-scatter, Megatron FSDP) and the m reduce-scatters queue on the data-parallel link, the rest
    of the sync (`rest` - m rs: batch-split layers' all-reduce, ZeRO-2's parameter all-gather) after
    them. Between two backwards' starts the link is free for the compute its prefetched gathers do not
    take (`hidden_fwd`, `hidden_bwd`: the gather seconds hidden under a forward and a backward pass):
    gap = B_r - hidden_bwd, plus F_r - hidden_fwd unless the schedule runs its backwards back to back
    (GPipe; ZeRO-2/3 run at p = 1, strategy/rules.py); the last backward offers last = B_r -
    hidden_bwd. The queue then ends max over k = 1..m of k rs + others - (k-1) gap - last after the
    stage's last pass (the last k reduce-scatters back to back): linear in k, so k = 1 or m. With
    m = 1 this is the one-window rule max(0, rest - B_r) less the link time the gather takes."""
    others = rest - m * rs
    last = B_r - hidden_bwd
    gap = last + (0 if sched.backwards_adjacent else F_r - hidden_fwd)
    return QuickMax(0, rs + others - last, m * rs + others - (m - 1) * gap - last)


def dp_bytes(zero: int, psi=Psi_r, n=d, gsb=GSB_r, *, grad_bytes=None, pb=beta) -> sp.Expr:
    """Bytes of dp_sync per device (nccl_busbw factors)."""
    if grad_bytes is not None or pb != beta:
        grad_bytes = beta if grad_bytes is None else grad_bytes
        rs = coll.bytes_per_device("reduce_scatter", grad_bytes * psi, n)
        ag = coll.bytes_per_device("all_gather", pb * psi, n)
        if zero == 0:
            return coll.bytes_per_device("all_reduce", grad_bytes * psi, n) + gsb
        return (m * rs if zero >= 2 else rs) + (ag if zero in (1, 2) else 0) + gsb
    rs = coll.bytes_per_device("reduce_scatter", beta * psi, n)
    if zero == 3:
        return m * rs + gsb
    if zero == 2:
        return m * rs + coll.bytes_per_device("all_gather", beta * psi, n) + gsb
    return coll.bytes_per_device("all_reduce", beta * psi, n) + gsb


def zero_gather_pass(zero: int, psi=Psi_r, n=d, g=g_r, L=L_r, pb=beta) -> sp.Expr:
    """ZeRO-3 all-gathers the parameters before every forward and every backward pass
    (Rajbhandari et al. SC'20 Sec 7-B: Psi per pass, 3 Psi with the gradient reduce-scatter), `pb` bytes each."""
    return coll.time("all_gather", pb * psi, n, g, L) if zero >= 3 else sp.Integer(0)


def zero_gathers(zero: int, pb=beta, **group) -> sp.Expr:
    """The iteration's gathers: one before each of the 2 m passes of a micro-batch."""
    return 2 * m * zero_gather_pass(zero, pb=pb, **group)


def zero_pass_exposed(zero: int, prefetch: bool, phase: str, psi=Psi_r, n=d, g=g_r, L=L_r, pb=beta) -> sp.Expr:
    """What one pass's ZeRO-3 gather leaves exposed (phase 'fwd' or 'bwd'). With prefetch (DeepSpeed
    stage3_prefetch_bucket_size, on by default; PyTorch FSDP forward_prefetch /
    backward_prefetch=BACKWARD_PRE) the next layer's all-gather runs under the current layer's compute,
    per layer max(0, gather - compute); over a stage's layers, summed as one collective under the pass
    (F_r forward, B_r backward) -- exact for equal layers, a lower bound otherwise (a sum of maxima is
    at least the maximum of the sums)."""
    if zero < 3:
        return sp.Integer(0)
    if not prefetch:
        return zero_gather_pass(zero, psi, n, g, L, pb)
    c = coll.Collective("all_gather", phase, "zero3_prefetch", "zero_comm", "dp", pb * psi, n,
                        under=F_r if phase == "fwd" else B_r)
    return c.exposed(g, L)


def param_gather(zero: int, psi=Psi_r, n=d, g=g_r, L=L_r, pb=beta) -> sp.Expr:
    """ZeRO-1/2's all-gather of the updated parameter shards after the optimizer step (the all-gather
    half of dp_sync; Megatron's distributed optimizer gathers bf16 parameters at beta, FP8 ones at `pb`)."""
    return coll.time("all_gather", pb * psi, n, g, L) if zero in (1, 2) else sp.Integer(0)


def param_gather_exposed(zero: int, psi=Psi_r, n=d, g=g_r, L=L_r, pb=beta) -> sp.Expr:
    """Megatron-LM --overlap-param-gather (with --use-distributed-optimizer; default off):
    distributed/param_and_grad_buffer.py dispatches each bucket's parameter all-gather at the end of
    the step and waits for it in a forward pre-hook of the bucket's first layer, so it runs under the
    next iteration's first micro-batch forward: exposed max(0, gather - F_r / v) (one model chunk's
    forward with interleaving)."""
    if zero not in (1, 2):
        return sp.Integer(0)
    c = coll.Collective("all_gather", "step", "param_gather", "dp_comm", "dp", pb * psi, n, under=F_r / v)
    return c.exposed(g, L)


def optimizer_step(zero: int, psi=Psi_r, n=d, saved: int = 0) -> sp.Expr:
    """Adam step, memory-bound: K_opt bytes per parameter at HBM speed; ZeRO-1 and above
    update only the 1/d shard a device owns. `saved`: the bytes per parameter a precision-aware
    optimizer does not move (optimizer_bytes)."""
    return (K_opt - saved) * psi / ((n if zero >= 1 else 1) * W_hbm)


def optimizer_bytes(k_states: int, moment_bytes=None, master_bytes=None) -> tuple:
    """(K, saved): optimizer bytes kept per parameter and the bytes per parameter its step moves less
    than K_opt. ZeRO's K = 12 (fp32 master weights and moments; 8 in fp32 training: no master copy);
    with the precision-aware optimizer's moments at `moment_bytes` and its master weights at
    `master_bytes` (their 16-bit remainders; explorer/hardware/precision.py): K = master + 2 moments,
    and the step reads and writes each moment and the master weight at those bytes (Transformer Engine
    FusedAdam: 4 (4 - moment_bytes) + 2 (4 - master_bytes) bytes fewer than K_opt)."""
    if moment_bytes is None and master_bytes is None:
        return k_states, 0
    master = k_states - 8 if master_bytes is None else master_bytes
    moments = 4 if moment_bytes is None else moment_bytes
    return master + 2 * moments, 4 * (4 - moments) + 2 * (k_states - 8 - master)


def model_states(zero: int, k_states: int, psi=Psi_r, n=d, *, grad_bytes=None, fp8_weights=None,
                 fp8_params: bool = False) -> dict:
    """Bytes of parameters, gradients, optimizer states per device on stage r.

    Rajbhandari et al. SC'20 Sec 5 (published.json zero_model_state_formulas): baseline
    (2+2+K)Psi; P_os: 4Psi + K Psi/Nd; P_os+g: 2Psi + (2+K)Psi/Nd; P_os+g+p: (2+2+K)Psi/Nd.
    With fp32 gradients (grad_bytes 4) the gradient buffer is 4 Psi: Megatron-LM's 18 B/param
    (bf16 params, fp32 grads, Adam) and 6 + 12/d with its distributed optimizer
    (docs/user-guide/features/dist_optimizer.md). `fp8_weights` (an FP8 recipe): Transformer Engine's
    cached FP8 weight copies, WEIGHT_COPY_BYTES per parameter beside the 16-bit weights
    (explorer/hardware/precision.py; counted over every weight of the stage, the embedding, output layer,
    norms and router included, which stay BF16: an upper bound by those weights' copies). `fp8_params`
    (Strategy.fp8_param_gather): the weights are created as FP8 tensors (Megatron-LM --fp8-param-gather builds the
    model under Transformer Engine's fp8_model_init: pretrain_gpt.py model_provider, build_model_context, which
    "--fp8-param-gather requires") and the FP8 tensor is the parameter: its row- and column-wise data
    (WEIGHT_COPY_BYTES) with no BF16 weight beside it (the fp32 main weights stay in the optimizer's K)."""
    copies = sp.Integer(0) if fp8_weights is None else _rational(WEIGHT_COPY_BYTES[fp8_weights])
    held = copies if fp8_params and fp8_weights is not None else beta + copies
    return {"params": held * psi / (n if zero >= 3 else 1),
            "grads": (beta if grad_bytes is None else grad_bytes) * psi / (n if zero >= 2 else 1),
            "optimizer": k_states * psi / (n if zero >= 1 else 1)}


EXPERT_GROUP = {"psi": Psi_e_r, "n": d / e, "g": g_e_r, "L": L_e_r}
"""The expert weights' data-parallel group: their d / e replicas (Megatron-Core expert data
parallelism: expert gradients are all-reduced, and their ZeRO shards split, over dp x cp / ep ranks;
Psi_r then counts only the other, dense weights)."""


def _with_experts(moe: bool, dense, expert):
    """dense + the same term over the expert weights' group, for a model with experts."""
    return dense + expert if moe else dense


def _rational(x) -> sp.Rational:
    """A fractions.Fraction (explorer/hardware/precision.py) as an exact sympy number."""
    return sp.Rational(x.numerator, x.denominator)


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
    sync = _with_experts(moe, dp_sync(zero, grad_bytes=grad_bytes, pb=pb),
                         dp_sync(zero, gs=0, grad_bytes=grad_bytes, pb=pb, **eg))
    gathers = _with_experts(moe, zero_gathers(zero, pb), zero_gathers(zero, pb, **eg))
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
    add("dp_bytes", "dp_comm", "nccl_busbw",
        _with_experts(moe, dp_bytes(zero, grad_bytes=grad_bytes, pb=pb),
                      dp_bytes(zero, Psi_e_r, eg["n"], 0, grad_bytes=grad_bytes, pb=pb)), True)
    pass_bytes = _with_experts(moe, coll.bytes_per_device("all_gather", pb * Psi_r, d),
                               coll.bytes_per_device("all_gather", pb * Psi_e_r, eg["n"])) \
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


def activations_in_flight(sched, ep_overlap: bool = False) -> sp.Expr:
    """Activation bytes stage r holds at its peak: the schedule's micro-batches in flight times A_r; under
    expert-parallel overlap (Strategy.overlap_ep) one more layer's, A^l_r, wherever the schedule has a steady
    state (a forward after the warm-up: v (m - in_flight) >= 1).

    Megatron-Core (NVIDIA/Megatron-LM @ d98e8a6) schedules one extra warm-up forward with the overlap
    (megatron/core/pipeline_parallel/schedules.py get_pp_rank_microbatches: num_warmup_microbatches + 1, for the
    interleaved schedule; at p = 1 combined_1f1b.py combined_1f1b_schedule_for_no_pipelining runs the first forward
    alone), so before each merged step the stage holds the same warm-up + 1 (chunk-)micro-batches as the plain
    1F1B step after its forward; the merged step then runs the forward of the next micro-batch and the backward of
    the oldest layer by layer, layer i's forward beside layer L-1-i's backward
    (megatron/core/models/common/model_chunk_schedule_plan.py TransformerModelChunkSchedulePlan.run), each
    backward node releasing its saved tensors when it ends (pipeline_parallel/utils.py ScheduleNode._backward:
    _release_state). The peak is therefore one layer above the plain schedule's, not one micro-batch: the largest
    layer of the stage (the head's logits are made after the partner's layers are freed: forward_postprocess)."""
    held = sched.in_flight * A_r
    if not ep_overlap:
        return held
    return held + A_l_r * sp.Min(1, v * (m - sched.in_flight))


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
