"""The data-parallel synchronisation of a stage as sympy terms: the gradient all-reduce or reduce-scatter, ZeRO's
parameter gathers and what their overlaps leave exposed, and their bytes per device (explorer.cost.superstep
composes them into the iteration)."""
from __future__ import annotations

import sympy as sp

from explorer.cost import collectives as coll
from explorer.cost.superstep_inputs import GSB_r
from explorer.symbols import B_r, F_r, GS_r, L_r, Psi_r, QuickMax, beta, d, g_r, m, v


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
    m = 1 this is the one-window rule max(0, rest - B_r) less the link time the gather takes. A window is at least 0:
    with experts the dense and the expert weights' gathers are each hidden under the whole pass (their own groups'
    links), so together they can hide more than B_r, and the sync's exposed part must not exceed the sync
    (dp_exposed > dp_sync for GPT-OSS on 64 B200 with ZeRO-3 and e 8 until 2026-12-08: a review)."""
    others = rest - m * rs
    last = QuickMax(0, B_r - hidden_bwd)
    gap = last + (0 if sched.backwards_adjacent else QuickMax(0, F_r - hidden_fwd))
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
