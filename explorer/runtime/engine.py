"""The training code every rank runs: a GPT split by Megatron-style TP, pipelined, data parallel.

torch is imported inside functions only (torch is optional; `import explorer` never needs it).

* Tensor parallelism (Shoeybi et al. 2019, Sec 3): QKV and FC1 split by column
  (heads), proj and FC2 by row, with the conjugate operators f (identity forward,
  all-reduce backward) before a column-parallel pair and g (all-reduce forward,
  identity backward) after the row-parallel one. The embedding is vocab-parallel
  (and the learned position table position-parallel: rank i holds rows
  [i s/t, (i+1) s/t)); its partial sums are reduced by g. A row-parallel bias is
  held as h/t slices added to the partial sums before the reduction, so every
  weight and bias of a split linear is held once per group (the model's
  params/t, explorer/cost/block.py). The logits reuse the vocab-parallel table and
  the loss is Megatron's vocab-parallel cross-entropy (three all-reduces of b*s
  fp32 values: max, target logit, sum of exponentials -- Megatron-LM
  core/tensor_parallel/cross_entropy.py).
* Pipeline parallelism: stages exchange activations and gradients with
  isend/recv; with t > 1 and scatter_gather, each rank sends 1/t of the
  replicated activation and the receiving group all-gathers it (Narayanan et al.
  SC'21 Sec 4.1). Schedules: GPipe (all forwards, then all backwards; Huang et
  al. 2019) and 1F1B (p-r-1 warm-up forwards, then one forward one backward;
  Narayanan et al. SC'21 Sec 2.2, PipeDream-Flush).
* Data parallelism: one all-reduce of the stage's flattened gradients.
  With the embedding and the logits on different stages, the last stage keeps a
  copy of the tied table and the two copies' gradients are all-reduced between
  the first and the last stage (Megatron-LM's word-embedding group).
* Optimizer: plain SGD (no state), so that fp32 rounding cannot be amplified
  by an adaptive step when comparing with the single-process run.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache

from explorer.runtime.record import Recorder

LEARNING_RATE = 0.05      # SGD step; any value works, losses are compared run against run
INIT_STD = 0.02           # GPT-2 / Megatron-LM init_method_std default
LN_EPS = 1e-5             # torch.nn.LayerNorm default


@dataclass(frozen=True)
class Config:
    """Everything a rank needs, as plain data (it crosses process boundaries)."""

    hidden: int
    heads: int
    ffn_hidden: int
    seq_len: int
    vocab: int
    layers: int
    dp: int
    tp: int
    pp: int
    micro_batch: int
    global_batch: int
    schedule: str             # gpipe or 1f1b
    scatter_gather: bool
    sequence_parallel: bool   # residual stream split along the sequence (Korthikanti et al. 2022)
    zero: int                 # 0, or 1: optimizer step sharded over the data-parallel group
    stage_blocks: tuple       # per stage: block names ('embedding', 'layer3', 'head')
    iterations: int
    seed: int

    @property
    def micro_batches(self) -> int:
        return self.global_batch // (self.micro_batch * self.dp)


def coords(cfg: Config, rank: int) -> tuple:
    """(tp, dp, pp) index of a rank; rank order tp-dp-pp, tp fastest (the explorer's default mesh)."""
    return rank % cfg.tp, (rank // cfg.tp) % cfg.dp, rank // (cfg.tp * cfg.dp)


def rank_of(cfg: Config, tp: int, dp: int, pp: int) -> int:
    return tp + cfg.tp * (dp + cfg.dp * pp)


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

    def send(self, tensor, dst, op):
        import torch.distributed as dist
        start = self.rec.now()
        self.pending.append((dist.isend(tensor, dst), tensor))
        self.rec.call("p2p", "send", "pp_comm", op, tensor.numel() * tensor.element_size(), 2, start,
                      self.rec.now())

    def recv(self, numel, src, op):
        import torch
        import torch.distributed as dist
        buf = torch.empty(numel, device=torch.get_default_device())
        start = self.rec.now()
        dist.recv(buf, src)
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
            note = "vocab-parallel cross-entropy (Megatron-LM cross_entropy.py); not in the cost model"
            top = logits.max(dim=-1).values
            comm.all_reduce(top, comm.tp_group, comm.tp_size, "op_comm", "loss", False, note, maximum=True)
            z = logits - top[:, None]
            local = target - start
            inside = (local >= 0) & (local < logits.shape[-1])
            idx = local.clamp(0, logits.shape[-1] - 1)
            picked = z.gather(1, idx[:, None])[:, 0] * inside
            comm.all_reduce(picked, comm.tp_group, comm.tp_size, "op_comm", "loss", False, note)
            exp = z.exp()
            total = exp.sum(dim=-1)
            comm.all_reduce(total, comm.tp_group, comm.tp_size, "op_comm", "loss", False, note)
            ctx.save_for_backward(exp / total[:, None], idx, inside)
            return total.log() - picked

        @staticmethod
        def backward(ctx, grad):
            soft, idx, inside = ctx.saved_tensors
            out = soft.clone()
            out.scatter_add_(1, idx[:, None], -inside[:, None].to(out.dtype))
            return out * grad[:, None], None, None, None

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


def full_parameters(cfg: Config) -> dict:
    """The whole model's parameters, the same on every rank (one generator, one order)."""
    import torch
    gen = torch.Generator().manual_seed(cfg.seed)
    h, f = cfg.hidden, cfg.ffn_hidden

    def randn(*shape):
        return torch.randn(*shape, generator=gen, device="cpu") * INIT_STD
    out = {"wte": randn(cfg.vocab, h), "wpe": randn(cfg.seq_len, h)}
    for i in range(cfg.layers):
        out.update({f"layer{i}.ln1_w": 1 + randn(h), f"layer{i}.ln1_b": randn(h),
                    f"layer{i}.qkv_w": randn(h, 3 * h), f"layer{i}.qkv_b": randn(3 * h),
                    f"layer{i}.proj_w": randn(h, h), f"layer{i}.proj_b": randn(h),
                    f"layer{i}.ln2_w": 1 + randn(h), f"layer{i}.ln2_b": randn(h),
                    f"layer{i}.fc1_w": randn(h, f), f"layer{i}.fc1_b": randn(f),
                    f"layer{i}.fc2_w": randn(f, h), f"layer{i}.fc2_b": randn(h)})
    out.update({"lnf_w": 1 + randn(h), "lnf_b": randn(h)})
    return out


def shard(cfg: Config, name: str, full, i: int):
    """Rank i's piece of one parameter under t-way tensor parallelism."""
    t, h, a = cfg.tp, cfg.hidden, cfg.heads
    kind = name.split(".")[-1]
    if kind in ("wte", "wpe", "proj_w", "fc2_w", "proj_b", "fc2_b", "fc1_b"):   # split along dim 0
        piece = full.chunk(t, dim=0)[i]
    elif kind == "fc1_w":                                                       # columns
        piece = full.chunk(t, dim=1)[i]
    elif kind == "qkv_w":                                                       # heads of q, k and v
        piece = full.view(h, 3, a, h // a).chunk(t, dim=2)[i].reshape(h, 3 * h // t)
    elif kind == "qkv_b":
        piece = full.view(3, a, h // a).chunk(t, dim=1)[i].reshape(3 * h // t)
    else:                                                                       # layer norms: replicated
        piece = full
    return piece.clone().contiguous().to(_device()).requires_grad_(True)


def stage_parameters(cfg: Config, stage: int, tp_rank: int) -> dict:
    """The parameters rank (stage, tp_rank) holds; the last stage keeps its own copy of the tied table."""
    full = full_parameters(cfg)
    names = []
    blocks = cfg.stage_blocks[stage]
    for block in blocks:
        if block == "embedding":
            names += ["wte", "wpe"]
        elif block == "head":
            names += ["lnf_w", "lnf_b"] + ([] if "embedding" in blocks else ["wte"])
        else:
            names += [n for n in full if n.startswith(block + ".")]
    return {n: shard(cfg, n, full[n], tp_rank) for n in names}


class Stage:
    """The blocks of one pipeline stage on one rank, with per-operator forward spans."""

    def __init__(self, cfg: Config, comm: Comm, stage: int):
        self.cfg, self.comm, self.stage = cfg, comm, stage
        self.params = stage_parameters(cfg, stage, comm.tp_rank)
        self.blocks = cfg.stage_blocks[stage]

    def timed(self, op, fn, *args):
        rec = self.comm.rec
        start = rec.now()
        out = fn(*args)
        rec.span("op", op, start, rec.now(), phase="fwd")
        return out

    def forward(self, x, tokens, targets):
        """x: activations from the previous stage (None on the first); returns activations or the loss."""
        for block in self.blocks:
            if block == "embedding":
                x = self.embed(tokens)
            elif block == "head":
                x = self.head(x, targets)
            else:
                x = self.layer(block, x)
        return x

    def embed(self, tokens):
        import torch
        _, g, _ = functions()
        wte, wpe, i = self.params["wte"], self.params["wpe"], self.comm.tp_rank

        def lookup():
            out = 0
            for table, ids in ((wte, tokens), (wpe, torch.arange(tokens.shape[1]).expand_as(tokens))):
                local = ids - i * table.shape[0]
                inside = (local >= 0) & (local < table.shape[0])
                out = out + table[local.clamp(0, table.shape[0] - 1)] * inside[..., None]
            return out
        x = self.timed("embed", lookup)
        if self.cfg.sequence_parallel and self.cfg.tp > 1:
            return sequence_functions()[1].apply(x, self.comm, "emb_dropout")
        return g.apply(x, self.comm, "emb_dropout")

    def layer(self, name, x):
        import torch.nn.functional as F
        f, g = self.enter_exit()
        p = {k.split(".")[1]: v for k, v in self.params.items() if k.startswith(name + ".")}
        cfg, comm = self.cfg, self.comm
        h, hl = cfg.hidden, cfg.hidden // cfg.tp
        heads, dh = cfg.heads // cfg.tp, cfg.hidden // cfg.heads
        pad = (comm.tp_rank * hl, h - (comm.tp_rank + 1) * hl)    # where a row bias slice sits in h
        b, s = x.shape[0], cfg.seq_len

        y = self.timed(f"{name}.ln1", F.layer_norm, x, (h,), p["ln1_w"], p["ln1_b"], LN_EPS)
        y = f.apply(y, comm, f"{name}.qkv")
        qkv = self.timed(f"{name}.qkv", lambda: y @ p["qkv_w"] + p["qkv_b"])
        q, k, v = qkv.view(b, s, 3, heads, dh).permute(2, 0, 3, 1, 4)
        scores = self.timed(f"{name}.score", lambda: (q @ k.transpose(-1, -2)) / math.sqrt(dh))
        probs = self.timed(f"{name}.softmax", lambda: F.softmax(scores + _causal(s), dim=-1))
        ctx = self.timed(f"{name}.context", lambda: (probs @ v).transpose(1, 2).reshape(b, s, heads * dh))
        out = self.timed(f"{name}.proj", lambda: ctx @ p["proj_w"] + F.pad(p["proj_b"], pad))
        out = g.apply(out, comm, f"{name}.add1")
        x = self.timed(f"{name}.add1", lambda: x + out)
        y = self.timed(f"{name}.ln2", F.layer_norm, x, (h,), p["ln2_w"], p["ln2_b"], LN_EPS)
        y = f.apply(y, comm, f"{name}.fc1")
        y = self.timed(f"{name}.fc1", lambda: y @ p["fc1_w"] + p["fc1_b"])
        y = self.timed(f"{name}.gelu", F.gelu, y)
        out = self.timed(f"{name}.fc2", lambda: y @ p["fc2_w"] + F.pad(p["fc2_b"], pad))
        out = g.apply(out, comm, f"{name}.add2")
        return self.timed(f"{name}.add2", lambda: x + out)

    def enter_exit(self):
        """The operators entering and leaving a column->row pair: Megatron's f and g, or, under
        sequence parallelism, the all-gather / reduce-scatter pair along the sequence."""
        if self.cfg.sequence_parallel and self.cfg.tp > 1:
            return sequence_functions()
        f, g, _ = functions()
        return f, g

    def head(self, x, targets):
        import torch.nn.functional as F
        f, _ = self.enter_exit()
        ce = functions()[2]
        wte = self.params["wte"]
        y = self.timed("final_ln", F.layer_norm, x, (self.cfg.hidden,), self.params["lnf_w"],
                       self.params["lnf_b"], LN_EPS)
        y = f.apply(y, self.comm, "logits")
        logits = self.timed("logits", lambda: y @ wte.t())
        start = self.comm.tp_rank * wte.shape[0]
        per_token = ce.apply(logits.reshape(-1, wte.shape[0]), targets.reshape(-1), start, self.comm)
        return per_token.mean()


def _device():
    import torch
    return torch.get_default_device()


@lru_cache(maxsize=8)
def _causal_mask(s: int, device: str):
    import torch
    return torch.full((s, s), float("-inf"), device=device).triu(1)


def _causal(s: int):
    return _causal_mask(s, str(_device()))


def batch(cfg: Config, iteration: int):
    """The global batch of one iteration: (B, s) input tokens and (B, s) targets."""
    import torch
    gen = torch.Generator().manual_seed(cfg.seed * 7919 + iteration + 1)
    tokens = torch.randint(0, cfg.vocab, (cfg.global_batch, cfg.seq_len + 1), generator=gen,
                           device="cpu").to(_device())
    return tokens[:, :-1], tokens[:, 1:]


def schedule(cfg: Config, stage: int) -> list:
    """('F' | 'B', micro-batch) in the order this stage runs them."""
    m = cfg.micro_batches
    if cfg.schedule == "gpipe":
        return [("F", j) for j in range(m)] + [("B", j) for j in range(m)]
    warm = min(cfg.pp - stage - 1, m)
    order = [("F", j) for j in range(warm)]
    for j in range(m - warm):
        order += [("F", warm + j), ("B", j)]
    return order + [("B", j) for j in range(m - warm, m)]


def train(cfg: Config, comm: Comm, stage_index: int, dp_rank: int) -> list:
    """Run cfg.iterations iterations on this rank; returns this replica's loss per iteration
    (the sum over its micro-batches of mean loss / (m d); meaningful on the last stage)."""
    import torch
    stage = Stage(cfg, comm, stage_index)
    rec, t, m = comm.rec, cfg.tp, cfg.micro_batches
    first, last = stage_index == 0, stage_index == cfg.pp - 1
    sp = cfg.sequence_parallel and t > 1          # stages exchange their own sequence shard
    act_numel = cfg.micro_batch * (cfg.seq_len // t if sp else cfg.seq_len) * cfg.hidden
    split = cfg.scatter_gather and t > 1 and not sp
    params = list(stage.params.values())
    losses = []
    for it in range(cfg.iterations):
        if comm.dp_group is not None or comm.tp_group is not None or cfg.pp > 1:
            import torch.distributed as dist
            dist.barrier()
        rec.iteration = it
        begin = rec.now()
        for prm in params:
            prm.grad = None
        tokens, targets = batch(cfg, it)
        base = dp_rank * cfg.global_batch // cfg.dp
        inputs, outputs, total = {}, {}, 0.0
        for kind, j in schedule(cfg, stage_index):
            rec.micro_batch = j
            rows = slice(base + j * cfg.micro_batch, base + (j + 1) * cfg.micro_batch)
            if kind == "F":
                rec.phase = "fwd"
                x = None
                if not first:
                    x = _receive(cfg, comm, act_numel, split, stage_index - 1, dp_rank, "fwd").requires_grad_(True)
                start = rec.now()
                y = stage.forward(x, tokens[rows], targets[rows])
                rec.span("forward", "+".join(stage.blocks), start, rec.now(), phase="fwd")
                if last:
                    y = y / (m * cfg.dp)
                    total += float(y.detach())
                else:
                    _send(cfg, comm, y.detach(), split, stage_index + 1, dp_rank, "fwd")
                inputs[j], outputs[j] = x, y
            else:
                rec.phase = "bwd"
                grad = None if last else _receive(cfg, comm, act_numel, split, stage_index + 1, dp_rank, "bwd")
                start = rec.now()
                y = outputs.pop(j)
                torch.autograd.backward(y, None if last else grad.view_as(y))
                rec.phase = "bwd"
                rec.span("backward", "+".join(stage.blocks), start, rec.now(), phase="bwd")
                x = inputs.pop(j)
                if not first:
                    _send(cfg, comm, x.grad.detach(), split, stage_index - 1, dp_rank, "bwd")
        rec.micro_batch, rec.phase = -1, "step"
        comm.finish_sends()
        rest = _sync_gradients(cfg, comm, stage, first, last, dp_rank)
        start = rec.now()
        with torch.no_grad():
            for prm in rest:
                prm -= LEARNING_RATE * prm.grad
        rec.span("optimizer", "sgd", start, rec.now(), phase="step")
        if cfg.zero == 1 and comm.dp_size > 1:
            _zero1_gather(cfg, comm, stage, first, last, dp_rank)
        rec.iteration_bounds.append((begin, rec.now()))
        losses.append(total)
    return losses


def _peer(cfg: Config, comm: Comm, stage: int, dp_rank: int) -> int:
    return rank_of(cfg, comm.tp_rank, dp_rank, stage)


def _send(cfg, comm, tensor, split, stage, dp_rank, phase):
    flat = tensor.reshape(-1)
    piece = flat.chunk(cfg.tp)[comm.tp_rank].clone() if split else flat.clone()
    comm.send(piece, _peer(cfg, comm, stage, dp_rank), f"boundary {phase}")


def _receive(cfg, comm, numel, split, stage, dp_rank, phase):
    src = _peer(cfg, comm, stage, dp_rank)
    if not split:
        return comm.recv(numel, src, f"boundary {phase}").view(cfg.micro_batch, -1, cfg.hidden)
    piece = comm.recv(numel // cfg.tp, src, f"boundary {phase}")
    whole = comm.all_gather(piece, comm.tp_group, comm.tp_size, "pp_comm", f"boundary {phase}")
    return whole.view(cfg.micro_batch, cfg.seq_len, cfg.hidden)


def _sync_gradients(cfg, comm, stage, first, last, dp_rank) -> list:
    """Tied-table gradients between first and last stage, then one data-parallel all-reduce -- or, under
    ZeRO-1 (Rajbhandari et al. SC'20, P_os), a reduce-scatter after which this rank updates its 1/d of
    the flat parameters (updated here) before _zero1_gather shares them. Returns the parameters the
    caller's SGD step still updates."""
    import torch
    grads = stage.params
    tied_copy = last and not first and "wte" in grads
    if cfg.pp > 1 and (first or last) and "wte" in grads:
        comm.all_reduce(grads["wte"].grad, comm.emb_group, 2, "dp_comm", "wte (tied)", False,
                        "tied embedding between first and last stage (Megatron-LM word-embedding group); "
                        "not in the cost model")
    if cfg.sequence_parallel and cfg.tp > 1:    # norms saw only their sequence shard: sum over the group
        norms = [n for n in grads if n.split(".")[-1] in ("ln1_w", "ln1_b", "ln2_w", "ln2_b", "lnf_w", "lnf_b")]
        if norms:
            flat = torch.cat([grads[n].grad.reshape(-1) for n in norms])
            comm.all_reduce(flat, comm.tp_group, comm.tp_size, "op_comm", "norm weights", False,
                            "LayerNorm gradients under sequence parallelism (Megatron-LM all-reduces the "
                            "sequence-parallel grads over the TP group); not in the cost model")
            _unflatten(flat, [grads[n] for n in norms])
    names = [n for n in grads if not (tied_copy and n == "wte")]
    if comm.dp_size > 1 and cfg.zero == 1:
        flat = _padded(torch.cat([grads[n].grad.reshape(-1) for n in names]), comm.dp_size)
        mine = comm.reduce_scatter_flat(flat, comm.dp_group, comm.dp_size, "dp_comm", "gradients")
        start = comm.rec.now()
        with torch.no_grad():
            weights = _padded(torch.cat([grads[n].detach().reshape(-1) for n in names]), comm.dp_size)
            comm.zero_shard = weights.chunk(comm.dp_size)[dp_rank] - LEARNING_RATE * mine
        comm.rec.span("optimizer", "sgd (own 1/d)", start, comm.rec.now(), phase="step")
        if tied_copy:
            comm.all_reduce(grads["wte"].grad, comm.dp_group, comm.dp_size, "dp_comm", "wte copy", False,
                            "the last stage's copy of the tied table; not in the cost model")
            return [grads["wte"]]
        return []
    if comm.dp_size > 1:
        flat = torch.cat([grads[n].grad.reshape(-1) for n in names])
        comm.all_reduce(flat, comm.dp_group, comm.dp_size, "dp_comm", "gradients")
        _unflatten(flat, [grads[n] for n in names])
        if tied_copy:
            comm.all_reduce(grads["wte"].grad, comm.dp_group, comm.dp_size, "dp_comm", "wte copy", False,
                            "the last stage's copy of the tied table; not in the cost model")
    return list(grads.values())


def _padded(flat, d: int):
    """`flat` zero-padded to a multiple of d (padding is sent too, and counted)."""
    import torch.nn.functional as F
    return F.pad(flat, (0, (-flat.numel()) % d))


def _zero1_gather(cfg, comm, stage, first, last, dp_rank) -> None:
    """ZeRO-1: all-gather the updated 1/d shards and copy them into the parameters."""
    import torch
    grads = stage.params
    names = [n for n in grads if not (last and not first and n == "wte")]
    full = comm.all_gather(comm.zero_shard, comm.dp_group, comm.dp_size, "dp_comm", "parameters")
    offset = 0
    with torch.no_grad():
        for n in names:
            prm = grads[n]
            prm.copy_(full[offset:offset + prm.numel()].view_as(prm))
            offset += prm.numel()


def _unflatten(flat, params) -> None:
    """Copy the slices of a flat gradient back into the parameters' .grad, in order."""
    offset = 0
    for prm in params:
        prm.grad.copy_(flat[offset:offset + prm.numel()].view_as(prm))
        offset += prm.numel()
