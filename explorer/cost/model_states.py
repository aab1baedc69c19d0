"""What a stage keeps in memory and what its optimizer step moves, as sympy terms: the model states by ZeRO stage
and precision recipe, the activations in flight of its schedule, and the Adam step (explorer.cost.superstep
composes them)."""
from __future__ import annotations

import sympy as sp

from explorer.cost.superstep_inputs import A_l_r
from explorer.hardware.precision import WEIGHT_COPY_BYTES
from explorer.symbols import A_r, K_opt, Psi_r, W_hbm, beta, d, m, v


def optimizer_step(zero: int, psi=Psi_r, n=d, saved: int = 0) -> sp.Expr:
    """Adam step, memory-bound: K_opt bytes per parameter at HBM speed; ZeRO-1 and above
    update only the 1/d shard a device owns. `saved`: the bytes per parameter a precision-aware
    optimizer does not move (optimizer_bytes)."""
    return (K_opt - saved) * psi / ((n if zero >= 1 else 1) * W_hbm)


def optimizer_bytes(k_states: int, moment_bytes=None, master_bytes=None) -> tuple:
    """(K, saved): optimizer bytes kept per parameter and the bytes per parameter its step moves less
    than K_opt. ZeRO's K = 12 (fp32 master weights and moments; 8 in fp32 training: no master copy);
    with the precision-aware optimizer's moments at `moment_bytes` and its master weights at
    `master_bytes` (their 16-bit remainders; explorer/hardware/precision.py): K = master + 2 moments,
    and the step reads and writes each moment and the master weight at those bytes (Transformer Engine
    FusedAdam: 4 (4 - moment_bytes) + 2 (4 - master_bytes) bytes fewer than K_opt)."""
    if moment_bytes is None and master_bytes is None:
        return k_states, 0
    master = k_states - 8 if master_bytes is None else master_bytes
    moments = 4 if moment_bytes is None else moment_bytes
    return master + 2 * moments, 4 * (4 - moments) + 2 * (k_states - 8 - master)


def model_states(zero: int, k_states: int, psi=Psi_r, n=d, *, grad_bytes=None, fp8_weights=None,
                 fp8_params: bool = False) -> dict:
    """Bytes of parameters, gradients, optimizer states per device on stage r.

    Rajbhandari et al. SC'20 Sec 5 (published.json zero_model_state_formulas): baseline
    (2+2+K)Psi; P_os: 4Psi + K Psi/Nd; P_os+g: 2Psi + (2+K)Psi/Nd; P_os+g+p: (2+2+K)Psi/Nd.
    With fp32 gradients (grad_bytes 4) the gradient buffer is 4 Psi: Megatron-LM's 18 B/param
    (bf16 params, fp32 grads, Adam) and 6 + 12/d with its distributed optimizer
    (docs/user-guide/features/dist_optimizer.md). `fp8_weights` (an FP8 recipe): Transformer Engine's
    cached FP8 weight copies, WEIGHT_COPY_BYTES per parameter beside the 16-bit weights
    (explorer/hardware/precision.py; counted over every weight of the stage, the embedding, output layer,
    norms and router included, which stay BF16: an upper bound by those weights' copies). `fp8_params`
    (Strategy.fp8_param_gather): the weights are created as FP8 tensors (Megatron-LM --fp8-param-gather builds the
    model under Transformer Engine's fp8_model_init: pretrain_gpt.py model_provider, build_model_context, which
    "--fp8-param-gather requires") and the FP8 tensor is the parameter: its row- and column-wise data
    (WEIGHT_COPY_BYTES) with no BF16 weight beside it (the fp32 main weights stay in the optimizer's K)."""
    copies = sp.Integer(0) if fp8_weights is None else _rational(WEIGHT_COPY_BYTES[fp8_weights])
    held = copies if fp8_params and fp8_weights is not None else beta + copies
    return {"params": held * psi / (n if zero >= 3 else 1),
            "grads": (beta if grad_bytes is None else grad_bytes) * psi / (n if zero >= 2 else 1),
            "optimizer": k_states * psi / (n if zero >= 1 else 1)}


def _rational(x) -> sp.Rational:
    """A fractions.Fraction (explorer/hardware/precision.py) as an exact sympy number."""
    return sp.Rational(x.numerator, x.denominator)


def activations_in_flight(sched, ep_overlap: bool = False) -> sp.Expr:
    """Activation bytes stage r holds at its peak: the schedule's micro-batches in flight times A_r; under
    expert-parallel overlap (Strategy.overlap_ep) one more layer's, A^l_r, wherever the schedule has a steady
    state (a forward after the warm-up: v (m - in_flight) >= 1).

    Megatron-Core (NVIDIA/Megatron-LM @ d98e8a6) schedules one extra warm-up forward with the overlap
    (megatron/core/pipeline_parallel/schedules.py get_pp_rank_microbatches: num_warmup_microbatches + 1, for the
    interleaved schedule; at p = 1 combined_1f1b.py combined_1f1b_schedule_for_no_pipelining runs the first forward
    alone), so before each merged step the stage holds the same warm-up + 1 (chunk-)micro-batches as the plain
    1F1B step after its forward; the merged step then runs the forward of the next micro-batch and the backward of
    the oldest layer by layer, layer i's forward beside layer L-1-i's backward
    (megatron/core/models/common/model_chunk_schedule_plan.py TransformerModelChunkSchedulePlan.run), each
    backward node releasing its saved tensors when it ends (pipeline_parallel/utils.py ScheduleNode._backward:
    _release_state). The peak is therefore one layer above the plain schedule's, not one micro-batch: the largest
    layer of the stage (the head's logits are made after the partner's layers are freed: forward_postprocess)."""
    held = sched.in_flight * A_r
    if not ep_overlap:
        return held
    return held + A_l_r * sp.Min(1, v * (m - sched.in_flight))
