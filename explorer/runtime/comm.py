"""Recorded communication of one rank, and the collectives as autograd operators.

Megatron-LM's conjugate operators (Shoeybi et al. 2019, Sec 3): f is the
identity forward and an all-reduce of the gradient backward, g an all-reduce of
partial sums forward and the identity backward. Under sequence parallelism
(Korthikanti et al. 2022, Sec 4.2.2) the pair becomes an all-gather along the
sequence (forward; reduce-scatter backward) and a reduce-scatter (forward;
all-gather backward). The loss over a vocabulary split across the group is
Megatron's vocab-parallel cross-entropy: three all-reduces of b*s fp32 values
(max, target logit, sum of exponentials; Megatron-LM
core/tensor_parallel/cross_entropy.py). torch is imported inside functions only.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

from explorer.runtime.record import Recorder


@dataclass
class Comm:
    """One rank's process groups and recorded wrappers around torch.distributed (mutable state)."""

    rec: Recorder
    rank: int = 0
    tp_rank: int = 0
    tp_size: int = 1
    tp_group: object = None
    dp_size: int = 1
    dp_group: object = None
    emb_group: object = None          # first and last stage (tied table), when they differ
    pending: list = field(default_factory=list)
    zero_shard: object = None         # ZeRO-1: this rank's updated 1/d of the flat parameters

    def all_reduce(self, tensor, group, n, category, op, modelled=True, note="", maximum=False):
        if n == 1:
            return tensor
        import torch.distributed as dist
        start = self.rec.now()
        dist.all_reduce(tensor, op=dist.ReduceOp.MAX if maximum else dist.ReduceOp.SUM, group=group)
        self.rec.call("all_reduce", "collective", category, op, tensor.numel() * tensor.element_size(), n,
                      start, self.rec.now(), modelled, note)
        return tensor

    def all_gather(self, local, group, n, category, op):
        """Concatenation of every member's flat `local` (in group order)."""
        import torch
        import torch.distributed as dist
        start = self.rec.now()
        parts = [torch.empty_like(local) for _ in range(n)]
        dist.all_gather(parts, local.contiguous(), group=group)
        out = torch.cat(parts)
        self.rec.call("all_gather", "collective", category, op, out.numel() * out.element_size(), n,
                      start, self.rec.now())
        return out

    def gather_dim(self, x, dim, op, phase=None):
        """All-gather along `dim` over the TP group (sequence parallelism's g-bar forward)."""
        import torch
        import torch.distributed as dist
        start = self.rec.now()
        parts = [torch.empty_like(x) for _ in range(self.tp_size)]
        dist.all_gather(parts, x.contiguous(), group=self.tp_group)
        out = torch.cat(parts, dim=dim)
        self.rec.call("all_gather", "collective", "op_comm", op, out.numel() * out.element_size(), self.tp_size,
                      start, self.rec.now(), phase=phase)
        return out

    def scatter_dim(self, x, dim, op, phase=None):
        """Reduce-scatter along `dim` over the TP group (sequence parallelism's g forward)."""
        import torch
        import torch.distributed as dist
        start = self.rec.now()
        chunks = [c.contiguous() for c in x.chunk(self.tp_size, dim=dim)]
        out = torch.empty_like(chunks[0])
        dist.reduce_scatter(out, chunks, group=self.tp_group)
        self.rec.call("reduce_scatter", "collective", "op_comm", op, x.numel() * x.element_size(), self.tp_size,
                      start, self.rec.now(), phase=phase)
        return out

    def reduce_scatter_flat(self, flat, group, n, category, op):
        """This member's 1/n of the sum of every member's flat tensor (its length divides by n)."""
        import torch
        import torch.distributed as dist
        start = self.rec.now()
        chunks = [c.contiguous() for c in flat.chunk(n)]
        out = torch.empty_like(chunks[0])
        dist.reduce_scatter(out, chunks, group=group)
        self.rec.call("reduce_scatter", "collective", category, op, flat.numel() * flat.element_size(), n,
                      start, self.rec.now())
        return out

    def send(self, tensor, dst, op, tag=0):
        """Non-blocking; `tag` keeps apart the kinds of message one pair of ranks exchanges (the interleaved
        schedule's loop sends forward and backward between the last and the first stage)."""
        import torch.distributed as dist
        start = self.rec.now()
        self.pending.append((dist.isend(tensor, dst, tag=tag), tensor))
        self.rec.call("p2p", "send", "pp_comm", op, tensor.numel() * tensor.element_size(), 2, start,
                      self.rec.now())

    def recv(self, numel, src, op, dtype=None, tag=0):
        import torch
        import torch.distributed as dist
        buf = torch.empty(numel, device=torch.get_default_device(), dtype=dtype)
        start = self.rec.now()
        dist.recv(buf, src, tag=tag)
        self.rec.call("p2p", "recv", "pp_comm", op, buf.numel() * buf.element_size(), 2, start, self.rec.now())
        return buf

    def finish_sends(self):
        for work, _ in self.pending:
            work.wait()
        self.pending.clear()


@lru_cache(maxsize=1)
def functions():
    """Megatron's f and g and the vocab-parallel cross-entropy as autograd Functions."""
    import torch

    class CopyToTP(torch.autograd.Function):
        """f: identity forward, all-reduce of the input gradient backward."""

        @staticmethod
        def forward(ctx, x, comm, op):
            ctx.comm, ctx.op = comm, op
            return x.view_as(x)

        @staticmethod
        def backward(ctx, grad):
            grad = grad.contiguous().clone()
            ctx.comm.rec.phase = "bwd"
            ctx.comm.all_reduce(grad, ctx.comm.tp_group, ctx.comm.tp_size, "op_comm", ctx.op)
            return grad, None, None

    class ReduceFromTP(torch.autograd.Function):
        """g: all-reduce of partial sums forward, identity backward."""

        @staticmethod
        def forward(ctx, x, comm, op):
            x = x.contiguous().clone()
            comm.all_reduce(x, comm.tp_group, comm.tp_size, "op_comm", op)
            return x

        @staticmethod
        def backward(ctx, grad):
            return grad, None, None

    class VocabParallelCrossEntropy(torch.autograd.Function):
        """Per-token loss from logits split over the vocabulary (rows [start, start + V/t))."""

        @staticmethod
        def forward(ctx, logits, target, start, comm):
            note = "vocab-parallel cross-entropy (Megatron-LM cross_entropy.py); in the cost model's loss operator"
            ctx.dtype = logits.dtype
            logits = logits.float()      # calculate_logits_max casts the logits to fp32 (so the three all-reduces)
            top = logits.max(dim=-1).values
            comm.all_reduce(top, comm.tp_group, comm.tp_size, "op_comm", "loss", True, note, maximum=True)
            z = logits - top[:, None]
            local = target - start
            inside = (local >= 0) & (local < logits.shape[-1])
            idx = local.clamp(0, logits.shape[-1] - 1)
            picked = z.gather(1, idx[:, None])[:, 0] * inside
            comm.all_reduce(picked, comm.tp_group, comm.tp_size, "op_comm", "loss", True, note)
            exp = z.exp()
            total = exp.sum(dim=-1)
            comm.all_reduce(total, comm.tp_group, comm.tp_size, "op_comm", "loss", True, note)
            ctx.save_for_backward(exp / total[:, None], idx, inside)
            return total.log() - picked

        @staticmethod
        def backward(ctx, grad):
            soft, idx, inside = ctx.saved_tensors
            out = soft.clone()
            out.scatter_add_(1, idx[:, None], -inside[:, None].to(out.dtype))
            return (out * grad[:, None]).to(ctx.dtype), None, None, None

    return CopyToTP, ReduceFromTP, VocabParallelCrossEntropy


@lru_cache(maxsize=1)
def sequence_functions():
    """Sequence parallelism's conjugate pair (Korthikanti et al. 2022, Sec 4.2.2): g-bar = all-gather
    along the sequence forward, reduce-scatter backward; g = reduce-scatter forward, all-gather backward."""
    import torch

    class GatherSeq(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, comm, op):
            ctx.comm, ctx.op = comm, op
            return comm.gather_dim(x, 1, op)

        @staticmethod
        def backward(ctx, grad):
            ctx.comm.rec.phase = "bwd"
            return ctx.comm.scatter_dim(grad, 1, ctx.op, phase="bwd"), None, None

    class ScatterSeq(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, comm, op):
            ctx.comm, ctx.op = comm, op
            return comm.scatter_dim(x, 1, op)

        @staticmethod
        def backward(ctx, grad):
            ctx.comm.rec.phase = "bwd"
            return ctx.comm.gather_dim(grad, 1, ctx.op, phase="bwd"), None, None

    return GatherSeq, ScatterSeq


@lru_cache(maxsize=1)
def gather_linear():
    """A column-parallel linear under sequence parallelism as Megatron-LM runs it
    (LinearWithGradAccumulationAndAsyncCommunication): it keeps only its input's sequence shard,
    all-gathers it for the GEMM, and all-gathers it again in the backward for the weight gradient
    (the cost model's fidelity item E5), then reduce-scatters the input gradient."""
    import torch

    class GatherLinear(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, w, bias, comm, op):
            ctx.comm, ctx.op = comm, op
            ctx.save_for_backward(x, w)
            return comm.gather_dim(x, 1, op) @ w + bias

        @staticmethod
        def backward(ctx, grad):
            x, w = ctx.saved_tensors
            comm = ctx.comm
            comm.rec.phase = "bwd"
            full = comm.gather_dim(x, 1, ctx.op, phase="bwd")         # again, for the weight gradient
            rows = grad.reshape(-1, grad.shape[-1])
            grad_w = full.reshape(-1, full.shape[-1]).t() @ rows
            grad_x = comm.scatter_dim(grad @ w.t(), 1, ctx.op, phase="bwd")
            return grad_x, grad_w, rows.sum(0), None, None

    return GatherLinear
