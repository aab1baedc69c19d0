"""Operators and blocks: the nodes of the operator graph.

Every quantity is a sympy expression in the DESIGN.md symbols (explorer.symbols),
for ONE micro-batch and the whole (unsplit) operator. Splitting is decided later
(layouts.py) and never changes these expressions.
"""
from __future__ import annotations

from dataclasses import dataclass

import sympy as sp

from explorer.symbols import beta

ZERO = sp.Integer(0)

KINDS = ("matmul", "attention", "softmax", "norm", "elementwise", "embedding",
         "conv", "pool", "loss")
"""matmul: Y = X W with weights; attention: batched matmul of activations split by
heads; softmax/norm/elementwise/pool: memory-bound; embedding: table lookup;
conv: convolution (a matmul over channels); loss: cross-entropy."""

ROLES = ("column", "row", "heads", "stream", "follow", "none")
"""How an operator takes part in Megatron's pairing when its layer is split:
column/row: the MatMul's split in the column->row pair; heads: attention ops split
by head; stream: residual-stream ops (replicated, or split by sequence under
sequence parallelism); follow: takes the layout of its input; none: never split."""


@dataclass(frozen=True)
class ActTerm:
    """A tensor an operator keeps for its backward pass (Korthikanti et al. 2022, Sec 4.1)."""

    bytes: sp.Expr        # full size in bytes (16-bit activations, 1-byte masks)
    of: str               # 'in' or 'out': the tensor whose layout decides if it is sharded
    attention_core: bool = False  # dropped by selective recomputation (Korthikanti Sec 5)
    kept_by: str = ""     # an earlier operator of the block that keeps this same tensor (one storage): counted
    #                       only where this operator keeps a copy of its own (Transformer Engine's FP8 cast)


@dataclass(frozen=True)
class Operator:
    name: str
    kind: str
    role: str
    in_shape: tuple                 # of sympy expressions
    out_shape: tuple
    flops_fwd: sp.Expr = ZERO       # GEMM FLOPs (2 per multiply-add)
    flops_bwd: sp.Expr = ZERO
    mem_bytes_fwd: sp.Expr = ZERO   # HBM bytes read + written by a memory-bound forward
    mem_bytes_bwd: sp.Expr | None = None  # ... by its backward when counted; None: the memory-bound rule
    #                                       (explorer/cost/block.py BWD_BYTES x the forward's)
    params: sp.Expr = ZERO
    act: tuple = ()                 # ActTerm, ...
    gemm: tuple = ()                # (M, N, K[, batch]) of the GEMM: its roofline bytes
    attention_core: bool = False    # recomputed under selective recomputation
    bwd_recompute_flops: sp.Expr = ZERO  # FLOPs the backward redoes of the forward (FlashAttention's QK^T)
    executed: sp.Expr = sp.Integer(1)   # fraction of its FLOPs the kernel runs (causal FlashAttention skips
    #                                     the masked blocks); model FLOPs count them all (Narayanan Eq. 3)
    causal: bool = False            # a fused attention kernel under the causal mask (its efficiency curve)
    head_dim: sp.Expr = ZERO        # a fused attention kernel's head dimension (its efficiency curve)
    window: int = 0                 # a windowed fused attention kernel: the keys each query block loops over
    #                                 (explorer/model/graph/moe.py window_keys; its efficiency curve's tokens)
    expert: bool = False            # weights of the E routed experts: sharded over ep, time x the load factor
    routes: bool = False            # token dispatch/combine: an all-to-all over the ep group

    def __post_init__(self):
        assert self.kind in KINDS, self.kind
        assert self.role in ROLES, self.role

    @property
    def out_elements(self) -> sp.Expr:
        return sp.Mul(*self.out_shape)

    @property
    def gemm_bytes(self) -> sp.Expr:
        """HBM bytes a GEMM moves: read A[M,K] and B[K,N], write C[M,N] (x batch)."""
        if not self.gemm:
            return ZERO
        M, N, K = self.gemm[:3]
        batch = self.gemm[3] if len(self.gemm) > 3 else 1
        return beta * batch * (M * K + K * N + M * N)

    @property
    def act_bytes(self) -> sp.Expr:
        """Bytes kept for backward without any parallelism or recomputation."""
        return sp.Add(*[term.bytes for term in self.act if not term.kept_by])


@dataclass(frozen=True)
class Block:
    """A group of operators: a layer, or the embedding/head around the layers.

    `key` identifies the block's structure: blocks with equal keys have equal
    expressions, so their cost is built and compiled once.
    """

    name: str
    kind: str            # 'embedding', 'layer', 'mtp' (explorer/model/graph/mtp.py), 'head'
    layer: int           # layer index; -1 for the embedding, l for the head
    key: tuple
    ops: tuple           # Operator, ... in execution order (a chain)

    @property
    def params(self) -> sp.Expr:
        return sp.Add(*[op.params for op in self.ops])

    @property
    def routed(self) -> bool:
        """Does it hold routed experts or route tokens (an MoE layer)?"""
        return any(op.expert or op.routes for op in self.ops)

    @property
    def flops_fwd(self) -> sp.Expr:
        return sp.Add(*[op.flops_fwd for op in self.ops])

    @property
    def flops_bwd(self) -> sp.Expr:
        return sp.Add(*[op.flops_bwd for op in self.ops])
