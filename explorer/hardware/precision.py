"""What FP8 training and a lower-precision optimizer keep in memory: bytes per element, per recipe.

FP8 recipes (Megatron-Core TransformerConfig.fp8_recipe, NVIDIA/Megatron-LM
megatron/core/transformer/transformer_config.py @ d98e8a64: 'tensorwise' per-tensor current
scaling, 'delayed' delayed scaling -- the default --, 'mxfp8' for Blackwell, 'blockwise'). Under each,
Transformer Engine (NVIDIA/TransformerEngine @ d0067d0d) keeps, per linear layer it runs:

* the input saved for the weight gradient in FP8, not in BF16: transformer_engine/pytorch/module/
  linear.py _linear_forward ("Discard row-wise data since it is not needed in backward pass":
  inputmat.update_usage(rowwise_usage=False, columnwise_usage=True)) and layernorm_linear.py (ln_out
  saved quantised). One byte per element plus its scales: per-tensor recipes one fp32 scale per
  tensor (nothing per element); MXFP8 one 8-bit E8M0 scale per 32 elements
  (transformer_engine/pytorch/constants.py MXFP8_BLOCK_SCALING_SIZE = 32: 1 + 1/32 B); blockwise
  1x128 tiles with an fp32 scale each (recipe Float8BlockScaling x_block_scaling_dim = 1;
  tensor/float8_blockwise_tensor.py "Blockwise FP8 scales are FP32": 1 + 4/128 B).
* an FP8 copy of its weight, cached for the whole step and kept between steps (linear.py: the
  quantised weight is stored in self._fp8_workspaces["weight"] whenever Megatron passes
  is_first_microbatch, i.e. by default), with row-wise data for the forward GEMM and column-wise data
  for the input-gradient GEMM when the input needs a gradient (columnwise_usage = is_grad_enabled and
  inp.requires_grad): 2 B per parameter with per-tensor scaling (on Hopper the column-wise data is
  the FP8 transpose, csrc/quantizer.cpp with_transpose), 2 (1 + 1/32) with MXFP8, 2 (1 + 4/128^2)
  with blockwise (128x128 weight tiles, w_block_scaling_dim = 2). The BF16 weights stay (Megatron's
  default, without --fp8-param-gather) and so do the fp32 master weights of the optimizer.

Megatron runs two GEMMs of a layer stack outside Transformer Engine, in BF16 whatever the recipe:
the output layer (megatron/core/models/gpt/gpt_model.py: tensor_parallel.ColumnParallelLinear unless
the opt-in fp8_output_proj with MXFP8, megatron/core/fp8_utils.py is_mxfp8_output_proj_active) and
the MoE router's gating GEMM (megatron/core/transformer/moe/router.py Router.gating ->
moe_utils.router_gating_linear, in the input's dtype or fp32) -- BF16_GEMMS, operator names of
explorer/model/graph. Their inputs are saved in BF16 and they run at the 16-bit GEMM rate.

The Adam moments (Megatron-LM --use-precision-aware-optimizer with --exp-avg-dtype and
--exp-avg-sq-dtype, megatron/training/arguments.py @ d98e8a64; the FusedAdam of Transformer Engine):
fp32 by default, 2 B each in bf16. The precision-aware optimizer then also keeps only the 16 low
bits of each fp32 master weight beside the bf16 weight (OptimizerConfig.store_param_remainders,
default True, megatron/core/optimizer/optimizer_config.py) where Transformer Engine manages the
master weights: bf16 parameters without FP8 or with delayed scaling
(use_precision_aware_optimizer_no_fp8_or_ds_fp8); otherwise Megatron keeps the fp32 master copy.
"""
from __future__ import annotations

from fractions import Fraction

FP8_RECIPES = ("delayed", "tensorwise", "blockwise", "mxfp8")
"""Megatron-LM --fp8-recipe choices we cost ('custom' is not a recipe we can price)."""
RECIPE_HARDWARE = {"delayed": "FP8 tensor cores (compute capability 8.9 or later)",
                   "tensorwise": "FP8 tensor cores (compute capability 8.9 or later)",
                   "blockwise": "Hopper or later tensor cores (compute capability 9.0 or later)",
                   "mxfp8": "Blackwell data-centre tensor cores (compute capability 10.x; on AMD, gfx95x: ROCm's "
                            "Transformer Engine README): its 1x32 blocks carry E8M0 "
                            "scales the tensor cores apply in the GEMM"}
"""What each recipe needs of the device, from Transformer Engine's 'Datatype and hardware support matrix'
(nvidia.github.io/TransformerEngine/support_matrix.html: FP8 per tensor -- DelayedScaling, Float8CurrentScaling --
from 8.9; Float8BlockScaling on 9.0, 10.x, 12.0; MXFP8BlockScaling on 10.0 and 10.3 only) and its MXFP8 page
(features/low_precision_training/mxfp8: 'native hardware acceleration on Blackwell GPUs (SM 10.0+)', one E8M0 scale
per 32 consecutive values). A device's `fp8_recipes` (explorer.hardware.cluster.Device) lists those it runs; the rule
table refuses the others (explorer/strategy/rules.py fp8_recipe_hardware)."""
SAVED_INPUT_BYTES = {"delayed": Fraction(1), "tensorwise": Fraction(1), "blockwise": Fraction(33, 32),
                     "mxfp8": Fraction(33, 32)}
"""Bytes per element of a Transformer Engine linear's input saved for its weight gradient (module docstring)."""
WEIGHT_COPY_BYTES = {"delayed": Fraction(2), "tensorwise": Fraction(2), "blockwise": 2 * (1 + Fraction(4, 128 ** 2)),
                     "mxfp8": 2 * Fraction(33, 32)}
"""Bytes per parameter of a Transformer Engine linear's cached FP8 weight, row- and column-wise (module docstring)."""
PARAM_GATHER_BYTES = {"delayed": Fraction(1), "tensorwise": Fraction(1), "blockwise": Fraction(1),
                      "mxfp8": Fraction(2)}
"""Bytes per parameter the distributed optimizer (or FSDP) all-gathers with FP8 parameters (Megatron-LM
--fp8-param-gather; Megatron-Bridge MixedPrecisionConfig.fp8_param_gather, "conducts the parameter all-gather in
fp8, reducing the all-gather overhead by half", its performance guide). NVIDIA/Megatron-LM at 00119989,
megatron/core/distributed/param_and_grad_buffer.py _ParamAndGradBuffer.__init__: an FP8 parameter
(fp8_utils.is_float8tensor: every Transformer Engine QuantizedTensor, per-tensor and blockwise) has its row-wise
FP8 data mapped into the parameter buffer (modify_underlying_storage; the buffer is uint8 for FP8 parameters) and
_ParamAndGradBucketGroup.start_param_sync all-gathers that buffer: 1 B per parameter (the per-tensor or per-block
scales are not in it). With MXFP8 parameters the buffer is a BF16 view of the gradient buffer
(shared_buffer, "For MXFP8 param: Create a shared buffer for param AG and grad RS"): the gather moves 2 B per
parameter and Transformer Engine quantises after it (Megatron-Bridge's bf16_with_mxfp8_mixed pairs fp8_param_gather
with reuse_grad_buf_for_mxfp8_param_ag). Without --fp8-param-gather the gather moves the BF16 weights (beta)."""
BF16_GEMMS = ("logits", "router", "mtp_logits")
"""GEMMs Megatron runs outside Transformer Engine, in BF16 under every FP8 recipe (module docstring); the
MTP module's head is the same shared output layer (explorer/model/graph/mtp.py)."""
MOMENT_DTYPES = ("fp32", "bf16")
"""Adam moment dtypes: Megatron-LM --exp-avg-dtype / --exp-avg-sq-dtype (both set alike here)."""
MOMENT_BYTES = {"fp32": 4, "bf16": 2}


def optimizer_options(dtype: str, fp8_recipe: str, moments: str) -> dict:
    """The super-step's optimizer options (explorer.cost.superstep.terms) of a precision-aware
    optimizer: {} for fp32 moments (ZeRO's K = 12 B of fp32 master weights and moments, or 8 B in
    fp32 training); with bf16 moments their bytes, and the master weights' bytes when only their 16-bit
    remainders are kept (module docstring: bf16 parameters, without FP8 or with delayed scaling)."""
    if moments == "fp32":
        return {}
    out = {"moment_bytes": MOMENT_BYTES[moments]}
    if dtype == "bf16" or (dtype == "fp8" and fp8_recipe == "delayed"):
        out["master_bytes"] = 2
    return out
