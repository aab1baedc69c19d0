"""DeepSpeed JSON configs back into strategy fields (explorer.codegen.imports); what a file does not set is DeepSpeed's
default (deepspeed/runtime/zero/config.py and the engine, cited where used)."""
from __future__ import annotations

import json

from explorer.codegen.import_fields import choice, divide, flag, whole
from explorer.errors import ExplorerError


def read_deepspeed(text: str, world_size):
    """(model fields ({}: a DeepSpeed config names no model), Strategy fields) of a DeepSpeed JSON config."""
    try:
        config = json.loads(text)
    except json.JSONDecodeError as err:
        raise ExplorerError(f"malformed JSON at line {err.lineno} column {err.colno}: {err.msg}") from None
    if not isinstance(config, dict):
        raise ExplorerError("a DeepSpeed config is a JSON object")
    batch = whole(config.get("train_batch_size"), "train_batch_size")
    micro = whole(config.get("train_micro_batch_size_per_gpu"), "train_micro_batch_size_per_gpu")
    steps = whole(config.get("gradient_accumulation_steps", 1), "gradient_accumulation_steps")
    dp = divide(batch, micro * steps, "train_batch_size over micro-batch x gradient_accumulation_steps")
    zero_cfg = config.get("zero_optimization", {})
    if not isinstance(zero_cfg, dict):
        raise ExplorerError("zero_optimization must be an object")
    zero = choice(zero_cfg.get("stage", 0), "zero_optimization.stage", (0, 1, 2, 3))
    # overlap_comm: DeepSpeed's default is false, true for ZeRO-3 (deepspeed/runtime/zero/config.py)
    overlap = flag(zero_cfg.get("overlap_comm", zero == 3), "zero_optimization.overlap_comm")
    bf16 = flag(config.get("bf16", {}).get("enabled", False), "bf16.enabled")
    fp16 = flag(config.get("fp16", {}).get("enabled", False), "fp16.enabled")
    if bf16 and fp16:
        raise ExplorerError("bf16 and fp16 are both enabled")
    dtype = "bf16" if bf16 else ("fp16" if fp16 else "fp32")
    comm = config.get("communication_data_type", dtype)     # engine.communication_data_type: the model dtype
    choice(comm, "communication_data_type", ("fp32", "bf16", "fp16"))
    accum = config.get("data_types", {}).get("grad_accum_dtype", comm)
    if accum != comm:
        raise ExplorerError(f"data_types.grad_accum_dtype {str(accum)[:20]!r} differs from communication_data_type "
                            f"{comm!r}: the explorer accumulates and reduces gradients in one dtype")
    pipe = config.get("pipeline", {})
    if not isinstance(pipe, dict):
        raise ExplorerError("pipeline must be an object")
    pp = whole(pipe.get("stages", 1), "pipeline.stages")
    if pipe.get("partition", "uniform") != "uniform":
        raise ExplorerError(f"pipeline.partition {str(pipe.get('partition'))[:40]!r}: the explorer reads 'uniform'")
    recompute = "full" if config.get("activation_checkpointing") else "none"
    fields = {"dp": dp, "tp": 1, "pp": pp, "micro_batch": micro, "global_batch": batch, "zero": zero,
              "overlap_dp": overlap, "dtype": dtype, "grad_dtype": "fp32" if comm == "fp32" and dtype != "fp32"
              else "model", "recompute": recompute}
    if zero == 3 and zero_cfg.get("stage3_prefetch_bucket_size") == 0:
        fields["zero_prefetch"] = False
    return {}, fields
