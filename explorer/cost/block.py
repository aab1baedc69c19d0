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
from explorer.cost.keys import cost_key  # the key of a BlockCost and of its summary
from explorer.limits import spend
from explorer.hardware.precision import BF16_GEMMS, SAVED_INPUT_BYTES
from explorer.model import kernels as kn
from explorer.model import recompute as rc
from explorer.model.ops import Block, Operator
from explorer.symbols import QuickMax
from explorer.cost import attention_kernel as ak
from explorer.cost import context_parallel as cpx
from explorer.cost import moe_terms as moe
from explorer.symbols import F, F_a, L_t, W_hbm, beta, eta, eta_a, g_t, phi, t, t_launch, tau_h, tau_s

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
    recompute_s: sp.Expr = ZERO   # forward work the backward redoes inside the kernel (FlashAttention)
    cp: cpx.CPExchange = cpx.NONE  # context-parallel exchange of this operator (context_parallel.py)
    launches: tuple = (0, 0)       # (fwd, bwd) kernels the host issues one by one (explorer/model/kernels.py)
    syncs: int = 0                 # device-to-host synchronisations per forward (dropless dispatcher)
    internal: tuple = (0, 0)       # (fwd, bwd) kernels launched inside a library call, from C++ (kernels.internal)


@dataclass(frozen=True, eq=False)
class BlockCost:
    """Compared and hashed by identity: block_cost() returns one object per `key`."""

    key: tuple                   # (block structure, preset, overrides, sp, recompute, incoming)
    fwd_compute_s: sp.Expr
    bwd_compute_s: sp.Expr
    bwd_weight_s: sp.Expr        # weight-gradient part of bwd_compute_s (zero-bubble schedules)
    fwd_comm_s: sp.Expr          # exposed seconds of the block's collectives
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
    hidden_comm_s: sp.Expr = ZERO  # seconds of its collectives hidden under its computation
    cp_fwd_s: sp.Expr = ZERO     # context-parallel exchange left exposed, forward (category cp_comm)
    cp_bwd_s: sp.Expr = ZERO     # ... backward
    cp_bytes: sp.Expr = ZERO     # cp_comm bytes sent per device, fwd + bwd (+ recomputed fwd)
    cp_total_s: sp.Expr = ZERO   # the exchange's whole time, hidden part included
    ep_collectives: tuple = ()   # the expert layer's all-to-alls (category ep_comm; group size set by the plan)
    expert_params_dev: sp.Expr = ZERO  # the part of params_dev that is expert weights (before the ep sharding)
    host_fwd_s: sp.Expr = ZERO   # the host's issue time of the forward: tau_h x its eager launches, min(tau_k, tau_h)
    #                              x those inside library calls (kernels.py)
    host_bwd_s: sp.Expr = ZERO   # ... of the backward (the forward a recomputation replays included)
    sync_fwd_s: sp.Expr = ZERO   # stalls of the forward's device-to-host synchronisations: tau_s + tau_h each
    sync_bwd_s: sp.Expr = ZERO   # ... of the replayed forward's (recomputation)

    @property
    def grad_sync_s(self) -> sp.Expr:
        return sp.Add(*[c.time(g_t, L_t) for c in self.grad_sync])

    @property
    def grad_sync_bytes(self) -> sp.Expr:
        return sp.Add(*[c.bytes() for c in self.grad_sync])


@lru_cache(maxsize=4096)
def _roofline(compute, memory):
    """The max of the two (the same object): the same pair recurs in every split of the search (and
    the MoE blocks share their operators). QuickMax: sympy's Max would spend ~35 ms per pair trying to
    prove an order (explorer.symbols.QuickMax)."""
    return QuickMax(compute, memory)


def compute_time(op: Operator, divisor, cp: int = 1, cp_algo: str = "ring", fp8: bool = False) -> tuple:
    """(forward, backward) seconds of one operator on one device.

    GEMMs: the roofline max of compute and memory time (Williams et al., CACM
    2009). Compute: (x + phi)/(F eta) with x the device's FLOPs -- an efficiency
    curve eta x/(x + phi) that saturates for large GEMMs (a smooth form of the
    size-stepped GEMM efficiency of Calculon, Isaev et al. SC'23, systems/a100_80g.json).
    Memory: the bytes of A, B and C over the achieved HBM bandwidth.
    Backward = two GEMMs (dX and dW; for attention both operands), Narayanan et
    al. SC'21 Appendix. Memory-bound operators: bytes / achieved HBM bandwidth;
    the forward reads x and writes y (2 tensors), the backward reads the saved
    tensor and dy and writes dx (3 tensors): BWD_BYTES = 3/2 of the forward bytes, unless the
    operator counts its backward's own (Operator.mem_bytes_bwd).
    Every kernel pays a launch overhead tau. A fused attention kernel (FlashAttention) runs at its own
    efficiency curve by tokens per call, head dimension, mask and direction (attention_kernel.py; `cp`,
    `cp_algo`: the tokens of a ring step's call). Under an FP8 recipe (`fp8`) the GEMMs Megatron runs
    outside Transformer Engine -- the output layer and the router (explorer/hardware/precision.py
    BF16_GEMMS) -- stay at the 16-bit rate F_a eta_a, as the attention core does.
    """
    if ak.is_fused(op) and op.flops_fwd != 0:
        x = op.flops_fwd * op.executed / divisor
        fwd = (x + phi) / (F_a * ak.efficiency(op, cp, cp_algo, False))
        return fwd + t_launch, 2 * (x + phi) / (F_a * ak.efficiency(op, cp, cp_algo, True)) + 2 * t_launch
    if op.kind in GEMM_KINDS and op.flops_fwd != 0:
        x = op.flops_fwd * op.executed / divisor
        sixteen = op.kind == "attention" or (fp8 and op.name in BF16_GEMMS)
        rate = F_a * eta_a if sixteen else F * eta     # the attention core's own dtype; BF16 GEMMs under FP8
        one = _roofline((x + phi) / rate, op.gemm_bytes / (divisor * W_hbm)) if op.gemm else (x + phi) / rate
        return one + t_launch, 2 * one + 2 * t_launch
    moved = op.mem_bytes_fwd / divisor
    back = BWD_BYTES * moved if op.mem_bytes_bwd is None else op.mem_bytes_bwd / divisor   # counted where known
    return moved / W_hbm + t_launch, back / W_hbm + 2 * t_launch


def weight_grad_time(op: Operator, divisor, fp8: bool = False) -> sp.Expr:
    """The dW GEMM of a weighted operator: one of its two backward GEMMs."""
    if op.kind in ("matmul", "conv") and op.flops_fwd != 0 and op.params != 0:
        return compute_time(op, divisor, fp8=fp8)[0]
    return ZERO


def _collective(kind, phase, op_name, size, under=0):
    """A conversion inside the block's group of t; an all-to-all's buffer is a device's 1/t of the
    array (lay.reshard). `under`: seconds of computation it overlaps with."""
    return coll.Collective(kind, phase, op_name, "op_comm", "tp", size / t if kind == "all_to_all" else size, t,
                           under)


def _act(op: Operator, layout_in: str, layout_out: str, recompute: str, fp8=False, prev=None,
         modules: tuple = rc.DEFAULT):
    """Bytes `op` keeps for its backward (Korthikanti et al. 2022 Sec 4.1), 1/t of a tensor in a sharded
    layout; selective recomputation drops what its `modules` recompute (explorer/model/recompute.py; `prev`
    the operator before). Under an FP8 recipe (`fp8`, its name) a Transformer Engine linear keeps its input
    quantised: SAVED_INPUT_BYTES per element instead of beta (explorer/hardware/precision.py); the output
    layer and the router (BF16_GEMMS) keep theirs in 16 bits."""
    total = ZERO
    saved = _saved_input_factor(op, fp8)
    for term in op.act:
        if recompute == "selective" and not rc.kept(op, prev, term, modules):
            continue
        if term.kept_by and saved == 1:     # the other operator's tensor itself: no bytes of its own
            continue
        layout = layout_in if term.of == "in" else layout_out
        size = term.bytes * saved if term.of == "in" else term.bytes
        total += size / t if lay.is_sharded(layout) else size
    return total


def _saved_input_factor(op: Operator, fp8) -> sp.Expr:
    """What a kept input's bytes are multiplied by: SAVED_INPUT_BYTES[recipe] / beta for the input of a
    linear Transformer Engine runs in FP8 (its ActTerm is beta x elements), else 1."""
    if not fp8 or op.kind != "matmul" or op.name in BF16_GEMMS:
        return sp.Integer(1)
    q = SAVED_INPUT_BYTES[fp8]
    return sp.Rational(q.numerator, q.denominator) / beta


_COSTS = BoundedCache(512)


def block_cost(block: Block, preset: str, overrides: tuple, sequence_parallel: bool,
               recompute: str, incoming: str, cp: int = 1, cp_algo: str = "ring",
               overlap_tp: bool = False, load: float = 1.0, experts_by_seq: bool = False,
               host: tuple = ()) -> BlockCost:
    """Cost of `block` split by `preset` over t devices, after a producer giving `incoming`;
    with context parallelism, the sequence is split over `cp` more devices (context_parallel.py);
    `overlap_tp`: the tensor-parallel collectives run under the GEMMs next to them.

    Blocks with the same structure key (all layers of a GPT, say) share one object. In an MoE
    block the busiest device takes `load` times the average routed tokens
    (explorer.cost.experts.expert_load); `experts_by_seq`: the experts are not tensor-parallel
    (expert_tp = 1) and each device runs its own tokens' share (split 'seq'). The expert-parallel
    degree is not part of the block: the plan divides expert_params_dev by it and sets the
    all-to-alls' group size (explorer.cost.experts), so every ep shares one compiled block.
    `host`: the host side's recipe (explorer/model/kernels.py Recipe as a tuple: CUDA graphs, FP8, local
    experts, dropless, a synchronising dispatcher, a fused one; explorer.cost.placement.host_options); () = eager
    bf16, dropless and synchronising where the block has experts.
    """
    key = cost_key(block, preset, overrides, sequence_parallel, recompute, incoming, cp, cp_algo, overlap_tp,
                   load, experts_by_seq, host)
    def build():
        spend(f"building the cost of block {block.name!s:.40}")
        return _block_cost(key, block, preset, dict(overrides), sequence_parallel, recompute, incoming, cp,
                           cp_algo, overlap_tp, load, experts_by_seq, host)
    return _COSTS.get(key, build)


def _routed_a2a(op: Operator, needed: str, load, cps=1) -> tuple:
    """Dispatch (or combine) of the device's routed token copies over the ep group, forward and
    backward (Megatron-Core MoEAlltoAllTokenDispatcher: the gradient goes back by the reverse
    all-to-all). The array is the device's tokens x top-k x h: b s k h beta, / t when the tokens
    are split over the operator-parallel group (sequence parallelism), / cp under context
    parallelism; each device keeps 1/ep of it and sends the rest: (ep-1)/ep of it per device
    (nccl_busbw, all-to-all). `load`: the busiest device's share over the average (1 when
    force-balanced). The group size is left at 1 here: explorer.cost.experts.expert_collectives
    sets it to the strategy's ep."""
    ins, outs = sp.Mul(*op.in_shape), op.out_elements
    ratio = outs / ins                   # a number when the operator multiplies its tokens (top-k copies)
    routed = outs if ratio.is_number and ratio > 1 else ins
    size = beta * routed * load / (t if lay.is_sharded(needed) else 1) / cps
    return tuple(coll.Collective("all_to_all", phase, op.name, "ep_comm", "ep", size, sp.Integer(1))
                 for phase in ("fwd", "bwd"))


def _block_cost(key, block, preset, over, sequence_parallel, recompute, incoming, cp=1, cp_algo="ring",
                overlap_tp=False, load=1.0, experts_by_seq=False, host=()) -> BlockCost:
    """overlap_tp (Megatron-LM --tp-comm-overlap, Transformer Engine's userbuffers; it needs sequence
    parallelism): a GEMM's input all-gather runs under that GEMM, the reduce-scatter of a row-parallel
    output under the GEMM that made it, the reduce-scatter of an input gradient under the weight-gradient
    GEMM and the backward all-gather of an output gradient under the input-gradient GEMM it feeds
    (Wang et al., 'Overlap communication with dependent computation via decomposition', ASPLOS'23;
    Megatron-LM megatron/core/model_parallel_config.py tp_comm_overlap_*). Exposed: max(0, comm - GEMM)."""
    cps = sp.Integer(cp)   # every operator works on s/cp tokens of the sequence (context_parallel.py)
    recipe = kn.Recipe.of(host)
    cur, cur_elements = incoming, None
    steps, act, params_dev, grad_sync = [], ZERO, ZERO, []
    ep_colls, expert_dev = [], ZERO
    load = sp.Integer(1) if load == 1 else sp.Float(load)
    layout_first = None
    last_gemm = (0, 0)      # (forward, input-gradient) seconds of the latest GEMM (overlap_tp)
    modules, prev = recipe.recompute_modules or rc.DEFAULT, None
    for op in block.ops:
        split = lay.resolve_split(op, preset, over, sequence_parallel)
        if op.expert and experts_by_seq and split in ("column", "row"):
            split = "seq"                    # expert_tp = 1: whole experts, the device's own tokens
        needed, out, grad = lay.layouts(op, split, cur)
        layout_first = layout_first or needed
        divisor = (t if lay.is_sharded(out) else 1) * cps
        fwd, bwd = compute_time(op, divisor, cp, cp_algo, bool(recipe.fp8))
        dW = weight_grad_time(op, divisor, bool(recipe.fp8))
        if op.expert and recipe.fp8:         # FP8 quantisation of the grouped GEMM's operands (moe_terms.py)
            q_fwd, q_bwd = moe.quantise_time(op, divisor, recipe.fp8)
            fwd, bwd = fwd + q_fwd, bwd + q_bwd
        if op.expert and recipe.flex:        # fp32 routing weights make the experts' second bias fp32 (moe_terms.py)
            b_fwd, b_bwd = moe.fp32_bias_time(op, divisor)
            fwd, bwd = fwd + b_fwd, bwd + b_bwd
        if op.expert:                        # the busiest device computes `load` x the average tokens
            fwd, bwd, dW = load * fwd, load * bwd, load * dW
            # one GEMM per local expert, each on its own tokens (moe_terms.py grouped_gemm_time)
            g_fwd, g_bwd = moe.grouped_gemm_time(op, recipe.local_experts)
            fwd, bwd, dW = fwd + g_fwd, bwd + g_bwd, dW + g_fwd
        if op.expert or op.routes or op.name in kn.MANY_KERNELS:
            # an MoE operator is many kernels (explorer/model/kernels.py), those a library launches inside one call
            # too (kernels.internal): each pays the GPU-side launch tau_k (a dense operator keeps one per forward,
            # two per backward, as compute_time charges)
            n_fwd, n_bwd = (x + y for x, y in zip(kn.launches(op, recipe), kn.internal(op, recipe)))
            fwd, bwd = fwd + (n_fwd - 1) * t_launch, bwd + (n_bwd - 2) * t_launch
        gemm = overlap_tp and op.kind in GEMM_KINDS and op.flops_fwd != 0
        colls = []
        if cur_elements is not None:  # conversions between operators of this block
            size = beta * cur_elements / cps
            # under overlap_tp: reducing a GEMM's partial output runs under that GEMM, and gathering the
            # gradient it needs under its input-gradient GEMM; a GEMM's own input conversions under it
            fwd_under, bwd_under = last_gemm if cur == lay.P else ((fwd, dW) if gemm else (0, 0))
            if recipe.async_dgrad and grad == lay.P and dW != 0 and not op.expert and cur != lay.P:
                # Megatron's column-parallel linear launches its input gradient's all-reduce / reduce-scatter
                # before its weight-gradient GEMM and waits after it (explorer/strategy/frameworks.py ASYNC_DGRAD).
                # Not an expert's: its dispatcher reduces over the expert-TP group itself, after the GEMMs
                bwd_under = dW
            fwd_kind = lay.conversion(cur, needed)
            if fwd_kind:
                colls.append(_collective(fwd_kind, "fwd", op.name, size, under=fwd_under))
            bwd_kind = lay.conversion(grad, lay.needed_grad(cur))
            if bwd_kind:
                colls.append(_collective(bwd_kind, "bwd", op.name, size, under=bwd_under))
        if (split in ("batch", "seq") or op.name == "qk_norm") and op.params != 0 and \
                not (op.expert and experts_by_seq):
            # replicated weights that saw only a batch or sequence shard (LayerNorms under sequence
            # parallelism, the router): their gradients are all-reduced over the group once per iteration
            # (Megatron-LM finalize_model_grads -> _allreduce_layernorm_grads; Korthikanti et al. Sec 4.2.2),
            # coalesced into one all-reduce below. Not the experts under expert_tp = 1 (`experts_by_seq`): whole
            # experts on each device, no `sequence_parallel` attribute (Megatron-Core sets it on the router's and
            # the shared-expert gate's weights only: transformer/moe/router.py, shared_experts.py); their
            # gradients are reduced over the expert-data-parallel group (EXPERT_GROUP, explorer/cost/superstep.py),
            # d t / (e etp) devices. Experts split by batch or sequence with etp = t (a layer-split preset) keep it:
            # their expert-data-parallel group is d / e, so the t devices' shards are summed here. Qwen3's query and
            # key norms too: split by heads, their weights see only the device's heads (Megatron-Core
            # finalize_model_grads.py _allreduce_non_tensor_model_parallel_grads: "sequence parallel or qk_layernorm",
            # the q_layernorm / k_layernorm parameters; NVIDIA/Megatron-LM at d98e8a64)
            grad_sync.append(beta * op.params)
        if op.kind == "loss" and lay.is_sharded(cur) and cur != lay.P and cur_elements is not None:
            # cross-entropy over a vocabulary split over t (Megatron-LM vocab_parallel_cross_entropy):
            # all-reduces of the logits' maximum, the target's logit and the sum of exponentials, each
            # one fp32 value per token (core/tensor_parallel/cross_entropy.py)
            for _ in range(3):
                colls.append(_collective("all_reduce", "fwd", op.name, 4 * op.out_elements / cps))
        if gemm:
            last_gemm = (fwd, bwd - dW)
        if sequence_parallel and cur == lay.SEQ and needed == lay.R and dW != 0 and not op.expert:
            # Sequence parallelism keeps only the 1/t shard of a linear's input, so the backward
            # all-gathers it again for the weight gradient, overlapped with the input-gradient GEMM
            # (Megatron-LM LinearWithGradAccumulationAndAsyncCommunication.backward; Korthikanti et al.
            # 2022 Sec 4.2.2). Fidelity issue, E5.
            elements = cur_elements if cur_elements is not None else sp.Mul(*op.in_shape)
            colls.append(_collective("all_gather", "bwd", op.name, beta * elements / cps, under=bwd - dW))
            # Not an expert's: Megatron-Core's token dispatcher all-gathers the routed tokens over the expert-TP
            # group itself (transformer/moe/token_dispatcher.py, gather_from_sequence_parallel_region after the
            # all-to-all) and the grouped GEMM, built without tensor parallelism of its own ("comms ... explicitly
            # handled by MoE token dispatcher": extensions/transformer_engine.py TEGroupedLinear, parallel_mode
            # None), keeps the gathered tokens for its weight gradient: no second gather, the whole input kept
        stored_in = needed if op.expert else cur if (lay.is_sharded(cur) and cur != lay.P) else needed
        kept = _act(op, stored_in, out, recompute, recipe.fp8, prev, modules) / cps
        if op.expert:                        # the busiest device keeps `load` x the average
            kept = load * kept
        act += kept
        own = op.params / t if (split in ("column", "row") and op.params != 0) else op.params
        params_dev += own
        if op.expert:
            expert_dev += own
        if op.routes:    # the all-gather dispatcher gathers every token; the others send the routed copies
            ep_colls += moe.gather_collectives(op, needed, cps) if recipe.gather else _routed_a2a(op, needed, load, cps)
        redo = kernel_recompute_time(op, divisor, cp, cp_algo)
        exchange = cpx.exchange(op, block.ops, lay.is_sharded(needed), cp, cp_algo, fwd, bwd + redo)
        steps.append(OpStep(op.name, op.kind, split, needed, out, fwd, bwd, dW, op.flops_fwd, tuple(colls), redo,
                            exchange, kn.eager(op, block.kind, recipe), kn.syncs(op, recipe, block.kind),
                            kn.eager_internal(op, block.kind, recipe)))
        cur, cur_elements, prev = out, op.out_elements, op
    if cur == lay.P:  # partial sums leave the block reduced (Megatron's g operator)
        target = lay.SEQ if sequence_parallel else lay.R
        kind = lay.conversion(lay.P, target)
        extra = [_collective(kind, "fwd", "out", beta * cur_elements / cps, under=last_gemm[0])]
        if target == lay.SEQ:
            extra.append(_collective("all_gather", "bwd", "out", beta * cur_elements / cps, under=last_gemm[1]))
        last = steps[-1]
        steps[-1] = replace(last, layout_out=target, collectives=last.collectives + tuple(extra))
        cur = target
    cost = _total(key, block, steps, act, params_dev, recompute, layout_first, cur, cps, modules)
    # Megatron-LM flattens those gradients into one buffer and all-reduces it once (finalize_model_grads.py
    # _allreduce_non_tensor_model_parallel_grads, alias _allreduce_layernorm_grads: _flatten_dense_tensors, one
    # all_reduce over the tp group; NVIDIA/Megatron-LM at d98e8a64): one all-reduce of the block's replicated
    # weights' gradients, so that its latency is paid once, not per LayerNorm (issue 26 item 8c). Megatron
    # coalesces every layer of a stage (all its model chunks) into that one buffer; the explorer, whose stage
    # terms are sums of block quantities, pays one latency per block that has such weights.
    grad_sync = (_collective("all_reduce", "step", "replicated_grads", sp.Add(*grad_sync)),) if grad_sync else ()
    return replace(cost, grad_sync=grad_sync, ep_collectives=tuple(ep_colls), expert_params_dev=expert_dev,
                   **host_terms(block, steps, recompute, modules))


def host_terms(block, steps, recompute: str, modules: tuple = rc.DEFAULT) -> dict:
    """The host side of the block's passes (explorer/model/kernels.py): tau_h per kernel the host issues
    one by one, forward and backward; each device-to-host synchronisation stalls the GPU for the copy's
    round trip tau_s and the issue of the kernel after it, tau_h (the host has no lead left); a full
    recomputation replays the forward (its launches and synchronisations) inside the backward, a selective one
    the forward of the operators its `modules` recompute (explorer/model/recompute.py). A kernel a library
    launches inside one call from C++ (kernels.internal) costs the host the driver's launch, tau_k (cuLaunchKernel,
    efficiency.kernel_launch_s), not tau_h -- never more than tau_h, so nothing where the host is not priced."""
    library = sp.Min(t_launch, tau_h)

    def forward(of):
        return tau_h * sum(s.launches[0] for s in of) + library * sum(s.internal[0] for s in of), \
            (tau_s + tau_h) * sum(s.syncs for s in of)

    fwd, sync_fwd = forward(steps)
    bwd = tau_h * sum(s.launches[1] for s in steps) + library * sum(s.internal[1] for s in steps)
    if block.kind == "layer" and recompute == "full":
        redone = steps
    elif block.kind == "layer" and recompute == "selective":
        names = rc.recomputed_names(block.ops, modules)
        redone = [s for s in steps if s.op in names]
    else:
        redone = []
    replay, sync_bwd = forward(redone)
    return {"host_fwd_s": fwd, "host_bwd_s": bwd + replay, "sync_fwd_s": sync_fwd, "sync_bwd_s": sync_bwd}


def kernel_recompute_time(op: Operator, divisor, cp: int = 1, cp_algo: str = "ring") -> sp.Expr:
    """Seconds the backward kernel spends redoing forward work (FlashAttention recomputes S = QK^T,
    Dao 2023 Sec 4.1): the recomputed FLOPs at the backward kernel's efficiency (attention_kernel.py;
    the published backward TFLOP/s count these FLOPs too: 2.5 x the forward's)."""
    if op.bwd_recompute_flops == 0:
        return ZERO
    rate = F_a * (ak.efficiency(op, cp, cp_algo, True) if ak.is_fused(op) else eta_a)
    return (op.bwd_recompute_flops * op.executed / divisor + phi) / rate


def _total(key, block, steps, act, params_dev, recompute, layout_first, layout_out, cps=1,
           modules: tuple = rc.DEFAULT) -> BlockCost:
    def comm(phase, what):
        return sp.Add(*[getattr(c, what)(g_t, L_t) if what in ("exposed", "hidden") else c.bytes()
                        for s in steps for c in s.collectives if c.phase == phase])
    fwd_compute = sp.Add(*[s.fwd_s for s in steps])
    fwd_comm = comm("fwd", "exposed")
    recompute_s, recompute_flops, recompute_bytes = ZERO, ZERO, ZERO
    if block.kind == "layer" and recompute == "full":
        # Full recomputation: keep only the layer input (Korthikanti Table 2: 2sbh), sharded
        # along the sequence under sequence parallelism (Korthikanti Sec 5: the checkpointed input
        # is the sequence-parallel one, 2sbh/t), and redo the whole forward, collectives included
        # (ZeRO Sec 7-C: "2 recompute"). Fidelity issue, E6.
        act = beta * sp.Mul(*block.ops[0].in_shape) / (t if lay.is_sharded(layout_first) else 1) / cps
        recompute_s, recompute_flops = fwd_compute + fwd_comm, block.flops_fwd
        recompute_bytes = comm("fwd", "bytes")
        replayed = steps          # the replay exchanges K/V again (context parallelism)
    elif block.kind == "layer" and recompute == "selective":
        # the operators the modules recompute (explorer/model/recompute.py: the attention core by default), their
        # forward again; the other modules' with their exposed collectives too (a recomputed MLP's tensor-parallel
        # reduction, say). Megatron's core_attn region holds no collective under its split: the attention core
        # is priced without the layout conversions a research preset may put inside it, as it always was.
        redone = rc.recomputed_names(block.ops, modules)
        core = [s for s in steps if s.op in redone]
        again = [c for s in core for c in s.collectives if c.phase == "fwd" and
                 not any(op.name == s.op and op.attention_core for op in block.ops)]
        recompute_s = sp.Add(*[s.fwd_s for s in core]) + sp.Add(*[c.exposed(g_t, L_t) for c in again])
        recompute_flops = sp.Add(*[s.flops_fwd for s in core])
        recompute_bytes = sp.Add(*[c.bytes() for c in again])
        replayed = core
    else:
        replayed = []
    # FlashAttention's own recomputation in its backward kernel: hardware FLOPs, category recompute
    recompute_s += sp.Add(*[s.recompute_s for s in steps])
    recompute_flops += sp.Add(*[op.bwd_recompute_flops for op in block.ops])
    recompute_s += sp.Add(*[s.cp.fwd_s for s in replayed])
    out_elements = block.ops[-1].out_elements
    return BlockCost(
        key=key, fwd_compute_s=fwd_compute, bwd_compute_s=sp.Add(*[s.bwd_s for s in steps]),
        bwd_weight_s=sp.Add(*[s.bwd_weight_s for s in steps]),
        fwd_comm_s=fwd_comm, bwd_comm_s=comm("bwd", "exposed"),
        hidden_comm_s=comm("fwd", "hidden") + comm("bwd", "hidden"),
        comm_bytes=comm("fwd", "bytes") + comm("bwd", "bytes") + recompute_bytes,
        recompute_s=recompute_s, recompute_flops=recompute_flops, act_bytes=act,
        params_dev=params_dev, params=block.params, flops_fwd=block.flops_fwd,
        flops_bwd=block.flops_bwd, layout_in=layout_first, layout_out=layout_out,
        out_elements=out_elements, steps=tuple(steps),
        cp_fwd_s=sp.Add(*[s.cp.fwd_s for s in steps]), cp_bwd_s=sp.Add(*[s.cp.bwd_s for s in steps]),
        cp_bytes=sp.Add(*[s.cp.fwd_bytes + s.cp.bwd_bytes for s in steps]) +
        sp.Add(*[s.cp.fwd_bytes for s in replayed]),
        cp_total_s=sp.Add(*[s.cp.total_s for s in steps]))
