"""Context parallelism: the sequence of every micro-batch split over `cp` devices.

Every operator of a block works on s/cp tokens (Megatron-LM context parallelism, docs
`context_parallel.rst`: "CP splits ... the sequence dimension ... all modules except attention
need no change"): its FLOPs, its HBM bytes, the activations it keeps and the tensors its
operator-parallel collectives move are those of the whole operator divided by cp (block.py).
Weights are replicated over the cp group; their gradients are reduced over dp x cp
(Megatron-LM reduces over the data-parallel group "with context parallel").
Attention needs every key and value of the sequence; two algorithms (`cp_algo`):

* ring (Megatron-LM CP, Transformer Engine `AttnFuncWithCPAndKVP2P`; Ring Attention, Liu et al.
  2023, Sec 3): the K/V chunks travel around the cp ring by point-to-point sends (cp - 1 forward,
  cp backward), each overlapped with the attention of the step in hand. The sequence is cut into 2 cp chunks
  and device i holds chunks i and 2cp-1-i so the causal work is balanced (Megatron docs, "load
  balancing"). Forward: each device sends (cp-1) x (K+V bytes of its local s/cp tokens) -- that
  is 2(cp-1) x (K+V bytes of one of the 2cp chunks) -- step i+1's K,V posted before step i's
  kernel; backward: K/V again and their gradients, 2 (cp-1) x (K+V bytes), in cp transfers as
  Transformer Engine runs them (transformer_engine/pytorch/attention/dot_product_attention/
  context_parallel.py, AttnFuncWithCPAndKVP2P.backward): K,V at the first step, K,V with the
  partial dK,dV at the cp-2 middle ones, dK,dV at the last, each one message under one step's
  kernel. Exposed per step: max(0, transfer - attention compute of the step), with the attention
  spread evenly over the cp steps (the load-balanced split gives every step the same work).
* ulysses (DeepSpeed-Ulysses, Jacobs et al. 2023, Sec 3.1): an all-to-all turns the sequence
  split into a head split before attention (Q, K, V) and back after it (the output): 4 all-to-alls
  of the local tensors per layer forward, 4 of their gradients backward, not overlapped. Each
  device sends (cp-1)/cp of its local tensor (nccl-tests all-to-all, size per rank).

The times use g_c and L_c, the seconds per byte and latency of the level the cp group crosses
(its level comes from the mesh in explorer.cost.plan).
"""
from __future__ import annotations

from dataclasses import dataclass

import sympy as sp

from explorer.cost import collectives as coll
from explorer.cost.collectives import cp_kind  # noqa: F401 (re-exported)
from explorer.symbols import L_c, QuickMax, a, a_kv, b, beta, g_c, h, s, t

ZERO = sp.Integer(0)
ALGOS = ("ring", "ulysses")
KV_WIDTH = a_kv * h / a          # width of K (or V) under grouped-query attention


@dataclass(frozen=True)
class CPExchange:
    """One operator's context-parallel communication for one micro-batch, per device."""

    fwd_s: sp.Expr = ZERO        # exposed seconds, forward
    bwd_s: sp.Expr = ZERO        # exposed seconds, backward
    fwd_bytes: sp.Expr = ZERO    # bytes sent per device, forward
    bwd_bytes: sp.Expr = ZERO
    fwd_total_s: sp.Expr = ZERO  # transfer time, hidden part included, forward
    bwd_total_s: sp.Expr = ZERO
    kind: str = ""               # 'p2p' (ring) or 'all_to_all' (ulysses)

    @property
    def total_s(self) -> sp.Expr:
        return self.fwd_total_s + self.bwd_total_s


NONE = CPExchange()


def kv_bytes(heads_sharded: bool, cp: int) -> sp.Expr:
    """K + V bytes of one device's s/cp tokens (its share of the KV heads under tensor parallelism)."""
    return beta * b * s * 2 * KV_WIDTH / ((t if heads_sharded else 1) * cp)


def ring(heads_sharded: bool, cp: int, attn_fwd_s, attn_bwd_s) -> CPExchange:
    """Ring attention: cp - 1 overlapped point-to-point steps forward, cp backward (TE's schedule)."""
    kv = kv_bytes(heads_sharded, cp)
    steps = cp - 1
    one = coll.time("p2p", kv, 2, g_c, L_c)            # K,V (or dK,dV) to the next rank: one message
    both = coll.time("p2p", 2 * kv, 2, g_c, L_c)       # K,V with the partial dK,dV: one message (TE)
    fwd = steps * QuickMax(0, one - attn_fwd_s / cp)
    under = attn_bwd_s / cp
    bwd = 2 * QuickMax(0, one - under) + (cp - 2) * QuickMax(0, both - under)
    return CPExchange(fwd, bwd, steps * kv, steps * 2 * kv, steps * one, 2 * one + (cp - 2) * both, "p2p")


def ulysses(heads_sharded: bool, cp: int) -> CPExchange:
    """DeepSpeed-Ulysses: all-to-all of Q, K, V before attention and of its output after it."""
    width = (t if heads_sharded else 1) * cp
    local = [beta * b * s * h / width, beta * b * s * KV_WIDTH / width, beta * b * s * KV_WIDTH / width,
             beta * b * s * h / width]
    secs = sp.Add(*[coll.time("all_to_all", x, cp, g_c, L_c) for x in local])
    sent = sp.Add(*[coll.bytes_per_device("all_to_all", x, cp) for x in local])
    return CPExchange(secs, secs, sent, sent, secs, secs, "all_to_all")


def exchange(op, ops, heads_sharded: bool, cp: int, algo: str, fwd_s, bwd_s) -> CPExchange:
    """The exchange `op` needs: the whole layer's, on its first attention operator."""
    if cp <= 1 or op.kind != "attention" or op is not next(o for o in ops if o.kind == "attention"):
        return NONE
    if algo == "ulysses":
        return ulysses(heads_sharded, cp)
    return ring(heads_sharded, cp, fwd_s, bwd_s)


