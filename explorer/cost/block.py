"""Symbolic cost of one block (a layer, the embedding or the head) for one micro-batch.

The block's operators are split over a group of `t` devices (the block's
operator-parallel degree). For each operator: computation time (GEMMs at the
device's FLOP/s, memory-bound operators at HBM bandwidth), the collectives its
split needs (layouts.py), the bytes it keeps for backward and its parameters.
Everything is a sympy expression in explorer.symbols; g_t and L_t stand for the
level the block's group crosses.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache
import sympy as sp

from explorer.cost import collectives as coll
from explorer.cost import layouts as lay
from explorer.cost.compile import BoundedCache
from explorer.model.ops import Block, Operator
from explorer.symbols import F, L_t, W_hbm, beta, eta, g_t, phi, t, t_launch

GEMM_KINDS = ("matmul", "conv", "attention")
BWD_BYTES = sp.Rational(3, 2)
ZERO = sp.Integer(0)


@dataclass(frozen=True)
class OpStep:
    """One operator's micro-step on one micro-batch (per device)."""

    op: str
    kind: str
    split: str
    layout_in: str
    layout_out: str
    fwd_s: sp.Expr
    bwd_s: sp.Expr
    bwd_weight_s: sp.Expr   # the part of bwd_s that computes weight gradients (dW)
    flops_fwd: sp.Expr      # whole operator
    collectives: tuple      # Collective, ...


@dataclass(frozen=True, eq=False)
class BlockCost:
    """Compared and hashed by identity: block_cost() returns one object per `key`."""

    key: tuple                   # (block structure, preset, overrides, sp, recompute, incoming)
    fwd_compute_s: sp.Expr
    bwd_compute_s: sp.Expr
    bwd_weight_s: sp.Expr        # weight-gradient part of bwd_compute_s (zero-bubble schedules)
    fwd_comm_s: sp.Expr
    bwd_comm_s: sp.Expr
    comm_bytes: sp.Expr          # op_comm bytes per device, fwd + bwd (+ recomputed fwd)
    recompute_s: sp.Expr
    recompute_flops: sp.Expr     # whole block
    act_bytes: sp.Expr           # kept per micro-batch, per device
    params_dev: sp.Expr          # parameters held per device
    params: sp.Expr              # parameters of the whole block
    flops_fwd: sp.Expr
    flops_bwd: sp.Expr
    layout_in: str               # layout the first operator needs
    layout_out: str
    out_elements: sp.Expr
    steps: tuple                 # OpStep, ...
    grad_sync: tuple = ()        # Collectives once per iteration: gradients of batch-split weights

    @property
    def grad_sync_s(self) -> sp.Expr:
        return sp.Add(*[c.time(g_t, L_t) for c in self.grad_sync])

    @property
    def grad_sync_bytes(self) -> sp.Expr:
        return sp.Add(*[c.bytes() for c in self.grad_sync])


@lru_cache(maxsize=4096)
def _roofline(compute, memory):
    """sympy's Max of the two (the same object): Max simplifies its arguments, slowly, and the same
    pair recurs in every split of the search."""
    return sp.Max(compute, memory)


def compute_time(op: Operator, divisor) -> tuple:
    """(forward, backward) seconds of one operator on one device.

    GEMMs: the roofline max of compute and memory time (Williams et al., CACM
    2009). Compute: (x + phi)/(F eta) with x the device's FLOPs -- an efficiency
    curve eta x/(x + phi) that saturates for large GEMMs (a smooth form of the
    size-stepped GEMM efficiency of Calculon, Isaev et al. SC'23, systems/a100_80g.json).
    Memory: the bytes of A, B and C over the achieved HBM bandwidth.
    Backward = two GEMMs (dX and dW; for attention both operands), Narayanan et
    al. SC'21 Appendix. Memory-bound operators: bytes / achieved HBM bandwidth;
    the forward reads x and writes y (2 tensors), the backward reads the saved
    tensor and dy and writes dx (3 tensors): BWD_BYTES = 3/2 of the forward bytes.
    Every kernel pays a launch overhead tau.
    """
    if op.kind in GEMM_KINDS and op.flops_fwd != 0:
        x = op.flops_fwd / divisor
        one = _roofline((x + phi) / (F * eta), op.gemm_bytes / (divisor * W_hbm)) if op.gemm \
            else (x + phi) / (F * eta)
        return one + t_launch, 2 * one + 2 * t_launch
    moved = op.mem_bytes_fwd / divisor
    return moved / W_hbm + t_launch, BWD_BYTES * moved / W_hbm + 2 * t_launch


def weight_grad_time(op: Operator, divisor) -> sp.Expr:
    """The dW GEMM of a weighted operator: one of its two backward GEMMs."""
    if op.kind in ("matmul", "conv") and op.flops_fwd != 0 and op.params != 0:
        return compute_time(op, divisor)[0]
    return ZERO


def _collective(kind, phase, op_name, size):
    """A conversion inside the block's group of t; an all-to-all's buffer is a device's 1/t of the
    array (lay.reshard)."""
    return coll.Collective(kind, phase, op_name, "op_comm", "tp", size / t if kind == "all_to_all" else size, t)


def _act(op: Operator, layout_in: str, layout_out: str, recompute: str):
    total = ZERO
    for term in op.act:
        if recompute == "selective" and term.attention_core:
            continue
        layout = layout_in if term.of == "in" else layout_out
        total += term.bytes / t if lay.is_sharded(layout) else term.bytes
    return total


_COSTS = BoundedCache(512)


def block_cost(block: Block, preset: str, overrides: tuple, sequence_parallel: bool,
               recompute: str, incoming: str) -> BlockCost:
    """Cost of `block` split by `preset` over t devices, after a producer giving `incoming`.

    Blocks with the same structure key (all layers of a GPT, say) share one object.
    """
    key = (block.key, block.kind, preset, overrides, sequence_parallel, recompute, incoming)
    return _COSTS.get(key, lambda: _block_cost(key, block, preset, dict(overrides), sequence_parallel,
                                               recompute, incoming))


def _block_cost(key, block, preset, over, sequence_parallel, recompute, incoming) -> BlockCost:
    cur, cur_elements = incoming, None
    steps, act, params_dev, grad_sync = [], ZERO, ZERO, []
    layout_first = None
    for op in block.ops:
        split = lay.resolve_split(op, preset, over, sequence_parallel)
        needed, out, grad = lay.layouts(op, split, cur)
        layout_first = layout_first or needed
        colls = []
        if cur_elements is not None:  # conversions between operators of this block
            size = beta * cur_elements
            fwd_kind = lay.conversion(cur, needed)
            if fwd_kind:
                colls.append(_collective(fwd_kind, "fwd", op.name, size))
            bwd_kind = lay.conversion(grad, lay.needed_grad(cur))
            if bwd_kind:
                colls.append(_collective(bwd_kind, "bwd", op.name, size))
        if split == "batch" and op.params != 0:  # replicated weights: reduce their gradients once
            grad_sync.append(_collective("all_reduce", "step", op.name, beta * op.params))
        divisor = t if lay.is_sharded(out) else 1
        fwd, bwd = compute_time(op, divisor)
        stored_in = cur if (lay.is_sharded(cur) and cur != lay.P) else needed
        act += _act(op, stored_in, out, recompute)
        params_dev += op.params / t if (split in ("column", "row") and op.params != 0) else op.params
        steps.append(OpStep(op.name, op.kind, split, needed, out, fwd, bwd, weight_grad_time(op, divisor),
                            op.flops_fwd, tuple(colls)))
        cur, cur_elements = out, op.out_elements
    if cur == lay.P:  # partial sums leave the block reduced (Megatron's g operator)
        target = lay.SEQ if sequence_parallel else lay.R
        kind = lay.conversion(lay.P, target)
        extra = [_collective(kind, "fwd", "out", beta * cur_elements)]
        if target == lay.SEQ:
            extra.append(_collective("all_gather", "bwd", "out", beta * cur_elements))
        last = steps[-1]
        steps[-1] = OpStep(last.op, last.kind, last.split, last.layout_in, target, last.fwd_s,
                           last.bwd_s, last.bwd_weight_s, last.flops_fwd, last.collectives + tuple(extra))
        cur = target
    cost = _total(key, block, steps, act, params_dev, recompute, layout_first, cur)
    return replace(cost, grad_sync=tuple(grad_sync))


def _total(key, block, steps, act, params_dev, recompute, layout_first, layout_out) -> BlockCost:
    def comm(phase, what):
        return sp.Add(*[getattr(c, what)(g_t, L_t) if what == "time" else c.bytes()
                        for s in steps for c in s.collectives if c.phase == phase])
    fwd_compute = sp.Add(*[s.fwd_s for s in steps])
    fwd_comm = comm("fwd", "time")
    recompute_s, recompute_flops, recompute_bytes = ZERO, ZERO, ZERO
    if block.kind == "layer" and recompute == "full":
        # Full recomputation: keep only the layer input (Korthikanti Table 2: 2sbh), sharded
        # along the sequence under sequence parallelism (Korthikanti Sec 5: the checkpointed input
        # is the sequence-parallel one, 2sbh/t), and redo the whole forward, collectives included
        # (ZeRO Sec 7-C: "2 recompute"). Fidelity issue, E6.
        act = beta * sp.Mul(*block.ops[0].in_shape) / (t if lay.is_sharded(layout_first) else 1)
        recompute_s, recompute_flops = fwd_compute + fwd_comm, block.flops_fwd
        recompute_bytes = comm("fwd", "bytes")
    elif block.kind == "layer" and recompute == "selective":
        core = [s for s in steps if any(op.name == s.op and op.attention_core for op in block.ops)]
        recompute_s = sp.Add(*[s.fwd_s for s in core])
        recompute_flops = sp.Add(*[s.flops_fwd for s in core])
    out_elements = block.ops[-1].out_elements
    return BlockCost(
        key=key, fwd_compute_s=fwd_compute, bwd_compute_s=sp.Add(*[s.bwd_s for s in steps]),
        bwd_weight_s=sp.Add(*[s.bwd_weight_s for s in steps]),
        fwd_comm_s=fwd_comm, bwd_comm_s=comm("bwd", "time"),
        comm_bytes=comm("fwd", "bytes") + comm("bwd", "bytes") + recompute_bytes,
        recompute_s=recompute_s, recompute_flops=recompute_flops, act_bytes=act,
        params_dev=params_dev, params=block.params, flops_fwd=block.flops_fwd,
        flops_bwd=block.flops_bwd, layout_in=layout_first, layout_out=layout_out,
        out_elements=out_elements, steps=tuple(steps))
