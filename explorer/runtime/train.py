"""The training loop every rank runs: pipeline schedule, gradient synchronisation, SGD.

* Pipeline parallelism: stages exchange activations and gradients with
  isend/recv; with t > 1 and scatter_gather, each rank sends 1/t of the
  replicated activation and the receiving group all-gathers it (Narayanan et al.
  SC'21 Sec 4.1); under sequence parallelism each rank sends its own sequence
  shard. Each stage runs its passes in the order of the cost model's own schedule
  object (explorer/schedules: GPipe, 1F1B, and interleaved 1F1B over v model chunks
  per stage, where the last stage's chunk c feeds the first stage's chunk c+1).
* Data parallelism: one all-reduce of the stage's flattened gradients, or ZeRO-1,
  in the reduction dtype (grad_dtype: bf16 gradients are cast to fp32 first when
  the strategy reduces in fp32, as Megatron-LM's fp32 main_grad buffers are).
  With the embedding and the logits on different stages, the last stage keeps a
  copy of the tied table and the two copies' gradients are all-reduced between
  the first and the last stage (Megatron-LM's word-embedding group).
* Optimizer: plain SGD (no state), so that fp32 rounding cannot be amplified
  by an adaptive step when comparing with the single-process run.

torch is imported inside functions only (torch is optional; `import explorer` never needs it).
"""
from __future__ import annotations

from explorer.runtime.comm import Comm
from explorer.runtime.config import Config, rank_of
from explorer.runtime.gpt import CAST, Stage, batch
from explorer.schedules.base import F
from explorer.schedules.registry import get as get_schedule

LEARNING_RATE = 0.05      # SGD step; any value works, losses are compared run against run


def schedule(cfg: Config, stage: int) -> list:
    """('F' | 'B', chunk, micro-batch) in the order this stage runs them: the schedule object's order."""
    order = get_schedule(cfg.schedule).order(cfg.pp, cfg.micro_batches, cfg.chunks)[stage]
    return [("F" if kind == F else "B", chunk, j) for kind, chunk, j in order]


def neighbours(cfg: Config, stage: int, chunk: int) -> tuple:
    """((stage, chunk) whose forward feeds this pass, (stage, chunk) this pass's output feeds): None at the
    model's ends. Chunks loop over the stages: the last stage's chunk c feeds the first stage's chunk c+1."""
    p, v = cfg.pp, cfg.chunks
    before = (stage - 1, chunk) if stage > 0 else ((p - 1, chunk - 1) if chunk > 0 else None)
    after = (stage + 1, chunk) if stage < p - 1 else ((0, chunk + 1) if chunk < v - 1 else None)
    return before, after


def tag(kind: str, chunk: int) -> int:
    """The message tag of the input of pass (kind, chunk) on its receiver."""
    return 2 * chunk + (kind == "B")


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
    dtype = params[0].dtype                       # activations and sends travel in the parameters' dtype
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
        for kind, c, j in schedule(cfg, stage_index):
            rec.micro_batch = j
            rows = slice(base + j * cfg.micro_batch, base + (j + 1) * cfg.micro_batch)
            before, after = neighbours(cfg, stage_index, c)
            blocks = "+".join(cfg.blocks_of(stage_index, c))
            if kind == "F":
                rec.phase = "fwd"
                x = None
                if before is not None:
                    x = _receive(cfg, comm, act_numel, split, before[0], dp_rank, "fwd", dtype,
                                 tag("F", c)).requires_grad_(True)
                start = rec.now()
                y = stage.forward(x, tokens[rows], targets[rows], c)
                rec.span("forward", blocks, start, rec.now(), phase="fwd")
                if after is None:
                    y = y / (m * cfg.dp)
                    total += float(y.detach())
                else:
                    _send(cfg, comm, y.detach(), split, after[0], dp_rank, "fwd", tag("F", after[1]))
                inputs[c, j], outputs[c, j] = x, y
            else:
                rec.phase = "bwd"
                grad = None if after is None else _receive(cfg, comm, act_numel, split, after[0], dp_rank, "bwd",
                                                           dtype, tag("B", c))
                start = rec.now()
                y = outputs.pop((c, j))
                torch.autograd.backward(y, None if after is None else grad.view_as(y))
                rec.phase = "bwd"
                rec.span("backward", blocks, start, rec.now(), phase="bwd")
                x = inputs.pop((c, j))
                if before is not None:
                    _send(cfg, comm, x.grad.detach(), split, before[0], dp_rank, "bwd", tag("B", before[1]))
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


def _send(cfg, comm, tensor, split, stage, dp_rank, phase, tag_=0):
    flat = tensor.reshape(-1)
    piece = flat.chunk(cfg.tp)[comm.tp_rank].clone() if split else flat.clone()
    comm.send(piece, _peer(cfg, comm, stage, dp_rank), f"boundary {phase}", tag_)


def _receive(cfg, comm, numel, split, stage, dp_rank, phase, dtype=None, tag_=0):
    src = _peer(cfg, comm, stage, dp_rank)
    if not split:
        return comm.recv(numel, src, f"boundary {phase}", dtype, tag_).view(cfg.micro_batch, -1, cfg.hidden)
    piece = comm.recv(numel // cfg.tp, src, f"boundary {phase}", dtype, tag_)
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
        comm.all_reduce(grads["wte"].grad, comm.emb_group, 2, "dp_comm", "wte (tied)", True,
                        "tied embedding between first and last stage (Megatron-LM word-embedding group); "
                        "the cost model's E3 (explorer.cost.tree.TiedCopy)")
    if cfg.sequence_parallel and cfg.tp > 1:    # norms saw only their sequence shard: sum over the group
        norms = [n for n in grads if n.split(".")[-1] in ("ln1_w", "ln1_b", "ln2_w", "ln2_b", "lnf_w", "lnf_b")]
        if norms:
            flat = torch.cat([grads[n].grad.reshape(-1) for n in norms])
            comm.all_reduce(flat, comm.tp_group, comm.tp_size, "dp_comm", "norm weights", True,
                            "LayerNorm gradients under sequence parallelism (Megatron-LM all-reduces the "
                            "sequence-parallel grads over the TP group); the cost model's gradient sync GS_r")
            _unflatten(flat, [grads[n] for n in norms])
    names = [n for n in grads if not (tied_copy and n == "wte")]

    def reduced():            # the flat gradients in the reduction dtype
        return getattr(torch.cat([grads[n].grad.reshape(-1) for n in names]), CAST[cfg.grad_dtype])()
    if comm.dp_size > 1 and cfg.zero == 1:
        flat = _padded(reduced(), comm.dp_size)
        mine = comm.reduce_scatter_flat(flat, comm.dp_group, comm.dp_size, "dp_comm", "gradients")
        start = comm.rec.now()
        with torch.no_grad():      # the 1/d step in the reduction dtype; the shard is gathered in the parameters'
            weights = _padded(torch.cat([grads[n].detach().reshape(-1) for n in names]), comm.dp_size)
            own = weights.chunk(comm.dp_size)[dp_rank]
            comm.zero_shard = (getattr(own, CAST[cfg.grad_dtype])() - LEARNING_RATE * mine).to(own.dtype)
        comm.rec.span("optimizer", "sgd (own 1/d)", start, comm.rec.now(), phase="step")
        if tied_copy:
            comm.all_reduce(grads["wte"].grad, comm.dp_group, comm.dp_size, "dp_comm", "wte copy", True,
                            "the last stage's copy of the tied table (the cost model's E3)")
            return [grads["wte"]]
        return []
    if comm.dp_size > 1:
        flat = reduced()
        comm.all_reduce(flat, comm.dp_group, comm.dp_size, "dp_comm", "gradients")
        _unflatten(flat, [grads[n] for n in names])
        if tied_copy:
            comm.all_reduce(grads["wte"].grad, comm.dp_group, comm.dp_size, "dp_comm", "wte copy", True,
                            "the last stage's copy of the tied table (the cost model's E3)")
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
