"""The framework a strategy targets, and what that framework does by default that changes the cost.

`Strategy.framework` names it (issue 26 item 5): "generic" (the explorer's own defaults: gradients reduced in
the training dtype) or one of the frameworks the explorer exports to. Where the user does not choose the
gradient reduction dtype (`Strategy.grad_dtype` left at GRAD_FROM_FRAMEWORK), the framework's default applies,
so that the strategy costed is the one the framework runs with the exported config (explorer/codegen: every
exporter writes the costed grad_dtype explicitly, tests/test_framework_defaults.py).

Each framework's default gradient reduction dtype, for a training dtype ("model": that dtype's bytes, beta;
"fp32": 4 B, Strategy.GRAD_BYTES):
* megatron-lm -- with --bf16 (and --fp8-format, which runs on --bf16 parameters) Megatron-LM accumulates and
  all-reduces gradients in fp32 unless --grad-reduce-in-bf16 ("bfloat16 requires gradient accumulation and
  all-reduce to be done in fp32", megatron/training/arguments.py validate_args; training.py passes
  grad_reduce_in_fp32 = args.accumulate_allreduce_grads_in_fp32 to the DDP config: NVIDIA/Megatron-LM at
  d98e8a64, 2026-08, quoted in tests/data/frameworks/rules.json megatron.grad_reduce_dtype); with --fp16 in
  fp16 (--accumulate-allreduce-grads-in-fp32 off by default). Megatron-FSDP (ZeRO-2/3,
  --use-megatron-fsdp) reduces in --megatron-fsdp-grad-comm-dtype, default 'auto' = the parameters' dtype
  (megatron_fsdp/param_and_grad_buffer.py, rules.json megatron_fsdp_grad_dtype).
* megatron-bridge -- the mixed-precision recipe's grad_reduce_in_fp32, copied onto the DDP config by its
  setup(): bf16_mixed True, the FP8 recipes (built on bf16_mixed) True, fp16_mixed False
  (src/megatron/bridge/training/mixed_precision.py, NVIDIA-NeMo/Megatron-Bridge at 067f987d, 2026-08-22;
  explorer/codegen/megatron_bridge.py). Its performance scripts turn it off (set_basic_perf_overrides): the
  validation rows say grad_dtype "model" explicitly (explorer/validation/megatron_bridge.py).
* deepspeed -- communication_data_type unset: the engine reduces in the model's dtype ("fp16 with fp16 on,
  bf16 with bf16 on, else fp32": deepspeed/runtime/engine.py communication_data_type, and
  data_types.grad_accum_dtype defaults to the model dtype, engine.get_data_types; deepspeedai/DeepSpeed at
  edaa7221, 2026-08; explorer/codegen/deepspeed.py).
* torchtitan -- FSDP's MixedPrecisionPolicy reduces in training.mixed_precision_reduce, default (and only
  accepted value) "float32" (Literal['float32'], tests/data/frameworks/torchtitan_config.json, read from
  torchtitan v0.2.2, commit 73a0e697); under DDP the gradients are fp32 (explorer/codegen/torchtitan.py).
* mindspore -- set_auto_parallel_context(gradient_fp32_sync=...) defaults to True: gradients all-reduced in
  fp32 (mindspore/parallel/_auto_parallel_context.py, MindSpore 2.10, the key listed in
  tests/data/frameworks/mindspore_api.json; explorer/codegen/mindspore.py).
An fp32 model's gradients are 4 B whichever is named: "model" there.

Pipeline sends (`Strategy.scatter_gather`, Narayanan et al. SC'21 Sec 4.1: a replicated boundary tensor sent as
bsh/t per rank and all-gathered at the receiver): Megatron-Core no longer does it. Its schedules send
[s/cp, b, h] from every tensor-parallel rank, divided by t only under sequence parallelism
(megatron/core/pipeline_parallel/schedules.py get_tensor_shapes, NVIDIA/Megatron-LM at d98e8a64; the flag
--no-scatter-gather-tensors-in-pipeline went in commit 10e7b745), so megatron-lm and megatron-bridge (which runs
Megatron-Core's schedules) cost the whole tensor whatever the field asks (SENDS_WHOLE; Strategy.scatters_sends, read where
the sends are priced: the field keeps what was asked, so the strategy under another framework scatters again).
DeepSpeed's pipeline engine partitions them over the model-parallel group by default ("pipe_partitioned": True,
"grad_partitioned": True: deepspeed/runtime/config.py get_pipeline_config), as the field's default says.

The input gradient of a column-parallel linear (ASYNC_DGRAD): Megatron-LM's own linear layers all-reduce it (or, under
sequence parallelism, reduce-scatter it) asynchronously, launched before the weight-gradient GEMM and waited for after
it ("Here we rely on CUDA_DEVICE_MAX_CONNECTIONS=1 to ensure that the all-reduce is scheduled before the weight
gradient computation": megatron/core/tensor_parallel/layers.py LinearWithGradAccumulationAndAsyncCommunication.backward;
the all-reduce since 2021-08, commit cf7efd4f5a, the reduce-scatter since sequence parallelism came in, 2022-03,
02bb1f5c86), and Transformer Engine's Linear and LayerNormLinear, which Megatron-Core builds them from, launch it
the same way before their weight gradient. So under megatron-lm and megatron-bridge that collective runs under the
weight-gradient GEMM (explorer/cost/block.py), as Korthikanti et al.'s runs (2022) had it. The generic strategy keeps
SC'21's Megatron-LM (its runs predate both: Narayanan et al.'s Table 1, 2021-04), with the collective exposed.

Other defaults of these frameworks that change the cost are already the Strategy's own defaults (no overlap
of the gradient reduction or the parameter gathers unless asked: Megatron-LM --overlap-grad-reduce and
--overlap-param-gather are off by default; DeepSpeed's overlap_comm is written as costed).
"""
from __future__ import annotations

from explorer.errors import ExplorerError

GENERIC = "generic"
FRAMEWORKS = (GENERIC, "megatron-lm", "megatron-bridge", "deepspeed", "torchtitan", "mindspore")
"""What Strategy.framework may name."""
GRAD_FROM_FRAMEWORK = "framework"
"""Strategy.grad_dtype's default: the framework's own gradient reduction dtype (default_grad_dtype)."""
EXPORTER = {"megatron-lm": "megatron", "megatron-bridge": "megatron-bridge", "deepspeed": "deepspeed",
            "torchtitan": "torchtitan", "mindspore": "mindspore"}
"""Strategy.framework -> the exporter that writes it (explorer.codegen.EXPORTERS)."""
TARGET = {exporter: framework for framework, exporter in EXPORTER.items()}
"""An exporter's name (the search's and export-config's --framework) -> Strategy.framework."""
TITLES = {GENERIC: "generic (the explorer's defaults)", "megatron-lm": "Megatron-LM",
          "megatron-bridge": "Megatron-Bridge", "deepspeed": "DeepSpeed", "torchtitan": "torchtitan",
          "mindspore": "MindSpore"}

_FP32_WHEN_HALF = {"megatron-lm": ("bf16", "fp8"), "megatron-bridge": ("bf16", "fp8"), "deepspeed": (),
                   "torchtitan": ("bf16", "fp16", "fp8"), "mindspore": ("bf16", "fp16", "fp8"), GENERIC: ()}
"""The training dtypes each framework reduces gradients in fp32 for by default (module docstring)."""


SENDS_WHOLE = ("megatron-lm", "megatron-bridge")
"""Frameworks whose pipeline sends carry the whole boundary tensor from every tensor-parallel rank: no scatter/gather
(module docstring)."""


ASYNC_DGRAD = ("megatron-lm", "megatron-bridge")
"""Frameworks whose column-parallel linears reduce their input gradient under the weight-gradient GEMM (module
docstring)."""


def overlaps_dgrad(framework: str) -> bool:
    """Whether `framework` runs a column-parallel linear's input-gradient collective under its weight gradient."""
    return framework in ASYNC_DGRAD


def scatters_sends(framework: str, asked: bool) -> bool:
    """Strategy.scatter_gather as `framework` runs it: what was asked, except where the framework cannot."""
    return asked and framework not in SENDS_WHOLE


def check_framework(name) -> str:
    """`name` if it is one of FRAMEWORKS (an exporter's name is taken too), else one ExplorerError line."""
    if isinstance(name, str) and name in TARGET and name not in FRAMEWORKS:
        return TARGET[name]
    if not isinstance(name, str) or name not in FRAMEWORKS:
        raise ExplorerError(f"framework {str(name)[:40]!r} is unknown; use one of {', '.join(FRAMEWORKS)}")
    return name


def default_grad_dtype(framework: str, dtype: str, zero: int = 0) -> str:
    """The gradient reduction dtype ("model" or "fp32") `framework` uses for `dtype` training at ZeRO stage
    `zero` when the user says nothing (module docstring: each with its source)."""
    if framework == "megatron-lm" and zero >= 2:     # Megatron-FSDP: 'auto', the parameters' dtype
        return "model"
    return "fp32" if dtype in _FP32_WHEN_HALF[framework] else "model"
