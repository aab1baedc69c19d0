"""The GPT of the reference run, split by Megatron-style tensor parallelism.

Pre-LayerNorm GPT blocks (attention with a causal mask, GeLU MLP), learned
position embeddings and logits tied to the token embedding, no dropout (so that
the parallel run and one process compute the same numbers). QKV and FC1 are
split by column (heads), proj and FC2 by row. The token table is
vocab-parallel and the position table position-parallel (rank i holds rows
[i s/t, (i+1) s/t)); their partial sums are reduced by g. A row-parallel bias
is held as h/t slices added to the partial sums before the reduction, so every
weight and bias of a split linear is held once per group -- the model's
params/t (explorer/cost/block.py). torch is imported inside functions only.
"""
from __future__ import annotations

import math

from explorer.runtime.comm import Comm, functions, gather_linear, sequence_functions
from explorer.runtime.config import Config

INIT_STD = 0.02           # GPT-2 / Megatron-LM init_method_std default
LN_EPS = 1e-5             # torch.nn.LayerNorm default


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
    if "." in name and layer_degree(cfg, name.split(".")[0]) == 1:             # a replicated layer
        piece = full
    elif kind in ("wte", "wpe", "proj_w", "fc2_w", "proj_b", "fc2_b", "fc1_b"):   # split along dim 0
        piece = full.chunk(t, dim=0)[i]
    elif kind == "fc1_w":                                                       # columns
        piece = full.chunk(t, dim=1)[i]
    elif kind == "qkv_w":                                                       # heads of q, k and v
        piece = full.view(h, 3, a, h // a).chunk(t, dim=2)[i].reshape(h, 3 * h // t)
    elif kind == "qkv_b":
        piece = full.view(3, a, h // a).chunk(t, dim=1)[i].reshape(3 * h // t)
    else:                                                                       # layer norms: replicated
        piece = full
    piece = getattr(piece.clone().contiguous().to(_device()), CAST[cfg.dtype])()
    return piece.requires_grad_(True)


CAST = {"fp32": "float", "bf16": "bfloat16"}
"""The dtypes the reference run trains in, as the tensor method that casts to each (parameters are drawn in
fp32 from one generator, then cast, so a bf16 run starts from the fp32 run's weights, rounded);
explorer/runtime/measure.py refuses the others."""


def layer_degree(cfg: Config, block: str) -> int:
    """The operator-parallel degree of a layer ('layer3'): the strategy's per-layer split, else t."""
    return cfg.layer_degrees[int(block[len("layer"):])] if cfg.layer_degrees else cfg.tp


class _Identity:
    """f and g of a layer that is not split (degree 1): nothing to communicate."""

    @staticmethod
    def apply(x, comm, op):
        return x


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

    def forward(self, x, tokens, targets, chunk=0):
        """x: activations from the previous stage or chunk (None on the first); returns activations or the
        loss. Under full recomputation each layer keeps only its input and runs its forward again in the
        backward (Megatron-LM --recompute-granularity full --recompute-method uniform
        --recompute-num-layers 1), its collectives included."""
        for block in self.cfg.blocks_of(self.stage, chunk):
            if block == "embedding":
                x = self.embed(tokens)
            elif block == "head":
                x = self.head(x, targets)
            elif self.cfg.recompute == "full":
                x = _checkpoint(self.layer, block, x)
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
        t = layer_degree(self.cfg, name)
        f, g = self.enter_exit() if t > 1 else (_Identity, _Identity)
        p = {k.split(".")[1]: v for k, v in self.params.items() if k.startswith(name + ".")}
        cfg, comm = self.cfg, self.comm
        i = comm.tp_rank if t > 1 else 0
        h, hl = cfg.hidden, cfg.hidden // t
        heads, dh = cfg.heads // t, cfg.hidden // cfg.heads
        pad = (i * hl, h - (i + 1) * hl)                          # where a row bias slice sits in h
        b, s = x.shape[0], cfg.seq_len

        y = self.timed(f"{name}.ln1", F.layer_norm, x, (h,), p["ln1_w"], p["ln1_b"], LN_EPS)
        qkv = self.column(f"{name}.qkv", f, y, p["qkv_w"], p["qkv_b"], t)
        q, k, v = qkv.view(b, s, 3, heads, dh).permute(2, 0, 3, 1, 4)
        if cfg.recompute == "selective":    # the attention core (Korthikanti et al. 2022 Sec 5): no collective
            ctx = _checkpoint(self.core_attention, name, q, k, v)
        else:
            ctx = self.core_attention(name, q, k, v)
        out = self.timed(f"{name}.proj", lambda: ctx @ p["proj_w"] + F.pad(p["proj_b"], pad))
        out = g.apply(out, comm, f"{name}.add1")
        x = self.timed(f"{name}.add1", lambda: x + out)
        y = self.timed(f"{name}.ln2", F.layer_norm, x, (h,), p["ln2_w"], p["ln2_b"], LN_EPS)
        y = self.column(f"{name}.fc1", f, y, p["fc1_w"], p["fc1_b"], t)
        y = self.timed(f"{name}.gelu", F.gelu, y)
        out = self.timed(f"{name}.fc2", lambda: y @ p["fc2_w"] + F.pad(p["fc2_b"], pad))
        out = g.apply(out, comm, f"{name}.add2")
        return self.timed(f"{name}.add2", lambda: x + out)

    def core_attention(self, name, q, k, v):
        """Scores, causal softmax and context: what selective recomputation recomputes."""
        b, heads, s, dh = q.shape
        scores = self.timed(f"{name}.score", lambda: (q @ k.transpose(-1, -2)) / math.sqrt(dh))
        probs = self.timed(f"{name}.softmax", lambda: (scores + _causal(scores)).softmax(dim=-1))
        return self.timed(f"{name}.context", lambda: (probs @ v).transpose(1, 2).reshape(b, s, heads * dh))

    def column(self, op, f, y, w, bias, t):
        """A column-parallel linear after f: under sequence parallelism Megatron-LM's fused
        gather-and-GEMM, which re-gathers its input in the backward (comm.gather_linear)."""
        if self.cfg.sequence_parallel and t > 1:
            return self.timed(op, lambda: gather_linear().apply(y, w, bias, self.comm, op))
        y = f.apply(y, self.comm, op)
        return self.timed(op, lambda: y @ w + bias)

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


def _causal(scores):
    """The causal mask (-inf above the diagonal) for (..., s, s) scores, in their dtype and device."""
    s = scores.shape[-1]
    return scores.new_full((s, s), float("-inf")).triu(1)


def _checkpoint(fn, *args):
    """fn(*args) keeping only its inputs; the backward runs the whole of fn again first, its collectives
    included, as Megatron-LM's CheckpointFunction does (core/tensor_parallel/random.py, an autograd Function
    that re-runs the forward in its backward): torch.utils.checkpoint's reentrant form. (The non-reentrant
    form stops re-running once the saved tensors are back, which drops a layer's last all-reduce.)"""
    import torch
    return torch.utils.checkpoint.checkpoint(fn, *args, use_reentrant=True)


def batch(cfg: Config, iteration: int):
    """The global batch of one iteration: (B, s) input tokens and (B, s) targets."""
    import torch
    gen = torch.Generator().manual_seed(cfg.seed * 7919 + iteration + 1)
    tokens = torch.randint(0, cfg.vocab, (cfg.global_batch, cfg.seq_len + 1), generator=gen,
                           device="cpu").to(_device())
    return tokens[:, :-1], tokens[:, 1:]
