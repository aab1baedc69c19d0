"""The fused attention kernel's efficiency as a sympy expression of the block's symbols.

The curve (explorer/hardware/attention.py, constants in assets/attention_kernels.json), per direction:

    g(n) = eta_a* n/(n + n_a*) (d/128)(128 + d_a*)/(d + d_a*),   * = f (forward) or b (backward)

at n tokens per kernel call and head dimension d. Tokens per call: the sequence s; under ring context
parallelism each of the cp steps runs the kernel on the device's chunk, s/cp tokens (Megatron-LM /
Transformer Engine AttnFuncWithCPAndKVP2P); Ulysses runs whole sequences on a/cp heads (s per call).
Under the causal mask a query block loops over half the keys on average (n/2) and the kernel runs at
kappa_a of the unmasked rate. With the load-balanced causal split (2cp chunks, device i holding chunks
i and 2cp-1-i) one of the cp steps is the causal diagonal (s/cp x s/cp under the mask) and the other
cp-1 are unmasked blocks of s/cp x s/(2cp): the same work each, priced on the unmasked curve at the
half chunk s/(2cp), so the kernel's mean efficiency is g(s/2cp) / (1/(kappa_a cp) + (cp-1)/cp).
Without cp (or under Ulysses) a causal kernel runs at kappa_a g(s/2), an unmasked one at g(s). A sliding
window (op.window: the keys a query block loops over, explorer/model/graph/moe.py window_keys) runs at
kappa_a g(min(s/2, window)) -- the band's blocks as a call of that many keys, masked at its edges (Ulysses
keeps the whole sequence per call; ring context parallelism refuses a window: explorer/strategy/rules.py _cp_algo,
after Transformer Engine).
The explanation, the LaTeX and the compiled numbers read this one expression.
"""
from __future__ import annotations

import sympy as sp

from explorer.symbols import d_ab, d_af, eta_ab, eta_af, kappa_a, n_ab, n_af, s

REF_HEAD_DIM = 128   # eta_a* is the saturated efficiency at this head dimension (explorer/hardware/attention.py)


def curve(n, head_dim, backward: bool):
    """g(n) of one direction at head dimension `head_dim` (sympy)."""
    eta_max, n_half, d_half = (eta_ab, n_ab, d_ab) if backward else (eta_af, n_af, d_af)
    return eta_max * n / (n + n_half) * head_dim * (REF_HEAD_DIM + d_half) / (REF_HEAD_DIM * (head_dim + d_half))


def efficiency(op, cp: int, cp_algo: str, backward: bool) -> sp.Expr:
    """The fused attention kernel's achieved fraction of F_a for operator `op` (its head_dim and mask)."""
    ring = cp > 1 and cp_algo == "ring"
    n = s / cp if ring else s
    if op.causal and op.window:       # never under ring CP (the rule table refuses it)
        return kappa_a * curve(sp.Min(s / 2, sp.Integer(op.window)), op.head_dim, backward)
    if not op.causal:
        return curve(n, op.head_dim, backward)
    if ring:
        return curve(n / 2, op.head_dim, backward) / (1 / (kappa_a * cp) + sp.Rational(cp - 1, cp))
    return kappa_a * curve(n / 2, op.head_dim, backward)


def is_fused(op) -> bool:
    """A fused attention kernel (FlashAttention): one attention operator whose backward recomputes."""
    return op.kind == "attention" and op.bwd_recompute_flops != 0
