"""DeepSpeed configuration (the JSON passed to deepspeed.initialize) for a (model, strategy).

Keys, from DeepSpeed's configuration reference (deepspeed.ai/docs/config-json): train_batch_size =
train_micro_batch_size_per_gpu x gradient_accumulation_steps x data-parallel size; zero_optimization.stage
(0-3) and zero_optimization.overlap_comm (overlap the gradient reduction with the backward); bf16.enabled /
fp16.enabled; activation_checkpointing (partition_activations, cpu_checkpointing,
contiguous_memory_optimization, number_checkpoints). The "pipeline" section's keys are those of
deepspeed/runtime/config.py get_pipeline_config (stages, partition, seed_layers,
activation_checkpoint_interval, pipe_partitioned, grad_partitioned; deepspeedai/DeepSpeed at edaa7221,
2026-08). Of these the PipelineEngine reads activation_checkpoint_interval (deepspeed/runtime/pipe/engine.py);
"stages" and "partition" record the layout for the reader, and the training script must build its
PipelineModule(num_stages=stages, partition_method=partition) to match: "uniform" is
deepspeed/runtime/utils.py partition_uniform, equal layer counts with the remainder on the first stages,
as the explorer's even split (over the PipelineModule's layer list: keep the embedding and head out of the
count, or use "type:<transformer layer class>").

Gradient reduction dtype: DeepSpeed reduces in "communication_data_type" (deepspeed/runtime/engine.py
communication_data_type: the key's value, else fp16 with fp16 on, bf16 with bf16 on, else fp32) and
accumulates in "data_types": {"grad_accum_dtype"} (default: the model dtype, engine.get_data_types). Both are
written, so that DeepSpeed reduces in strategy.grad_dtype; fp32 gradients of a half-precision model need ZeRO
(without it engine._do_optimizer_sanity_check raises "unsupported mix of model_dtype and grad_accum_dtype"),
and are refused otherwise. Every key is one of tests/data/frameworks/deepspeed_keys.json (read from the
source at edaa7221).

What it cannot say: DeepSpeed's core configuration has no tensor-parallel key (tensor parallelism comes from
a model-parallel unit, `mpu`, that the training script passes to deepspeed.initialize, e.g. Megatron-DeepSpeed's);
its PipelineEngine asserts "ZeRO-2 and ZeRO-3 are incompatible with pipeline parallelism"
(deepspeed/runtime/pipe/engine.py; the explorer's rule table refuses that pair before any exporter); its
pipeline runs its own TrainSchedule (1F1B-like, one model chunk per
stage); it partitions layers by "uniform", "parameters" or "type:regex", never by an explicit layer list;
and activation checkpointing is whole-layer (no selective, attention-only recomputation key).
"""
from __future__ import annotations

from explorer.codegen.common import check_host_options, check_pipeline_layout, check_rank_order, check_uniform_split, refuse, stage_counts

NAME = "DeepSpeed"


def deepspeed_config(model, strategy) -> dict:
    s = strategy
    if s.tp > 1:
        raise refuse(NAME, f"tensor parallelism t={s.tp}: its config has no tensor-parallel key (it comes "
                           "from a model-parallel unit the training script passes to deepspeed.initialize)")
    check_uniform_split(NAME, model, s)
    if s.pp > 1 and s.schedule != "1f1b":
        raise refuse(NAME, f"the {s.schedule} schedule: its pipeline engine runs its own 1F1B-like "
                           "TrainSchedule with one model chunk per stage")
    if s.pp > 1 and s.stage_map and len(set(stage_counts(model, s))) > 1:
        raise refuse(NAME, f"the stage map ({', '.join(map(str, stage_counts(model, s)))} layers per stage): "
                           "PipelineModule partitions by 'uniform', 'parameters' or 'type:regex', not by a list")
    if s.recompute == "selective":
        raise refuse(NAME, "selective recomputation: its activation checkpointing recomputes whole layers")
    if s.dtype == "fp8":
        raise refuse(NAME, "fp8: its configuration has no FP8 training switch (Transformer Engine FP8 is set in "
                           "the model code)")
    check_rank_order(NAME, s)
    check_host_options(NAME, s)
    check_pipeline_layout(NAME, model, s)
    if s.overlap_param_gather and s.zero in (1, 2):
        raise refuse(NAME, f"an overlapped parameter gather with ZeRO-{s.zero}: it all-gathers the updated "
                           "parameters inside the optimizer step (stage_1_and_2.py), not under the next forward")
    reduce = "fp32" if s.grad_dtype == "fp32" else s.dtype
    if reduce != s.dtype and s.zero == 0:
        raise refuse(NAME, f"fp32 gradients of a {s.dtype} model without ZeRO: DeepSpeed accumulates them in the "
                           "model dtype (its optimizer check raises 'unsupported mix of model_dtype and "
                           "grad_accum_dtype' otherwise); use ZeRO-1 or grad_dtype model")
    config = {
        "train_batch_size": s.global_batch,
        "train_micro_batch_size_per_gpu": s.micro_batch,
        "gradient_accumulation_steps": s.micro_batches,
        "zero_optimization": {"stage": s.zero, "overlap_comm": s.overlap_dp},
        "bf16": {"enabled": s.dtype == "bf16"},
        "fp16": {"enabled": s.dtype == "fp16"},
        "communication_data_type": reduce,
        "data_types": {"grad_accum_dtype": reduce},
    }
    if s.zero == 3 and not s.zero_prefetch:   # DeepSpeed prefetches by default; a bucket of 0 turns it off
        config["zero_optimization"]["stage3_prefetch_bucket_size"] = 0
    if s.recompute == "full":
        config["activation_checkpointing"] = {"partition_activations": False, "cpu_checkpointing": False,
                                              "contiguous_memory_optimization": False,
                                              "number_checkpoints": max(stage_counts(model, s))}
    if s.pp > 1:
        config["pipeline"] = {"stages": s.pp, "partition": "uniform",
                              "activation_checkpoint_interval": 1 if s.recompute == "full" else 0}
    return config


def notes(model, strategy) -> list:
    """What DeepSpeed would do differently from what was costed, and how the config pins it."""
    s = strategy
    out = [f"DeepSpeed reduces gradients in the model dtype by default: communication_data_type is written "
           f"({'fp32' if s.grad_dtype == 'fp32' else s.dtype}), as costed.",
           "The data-parallel degree is train_batch_size / (micro-batch x gradient_accumulation_steps); "
           f"launch on {s.devices} GPUs."]
    if s.pp > 1:
        out.append("The PipelineEngine reads the stages from the PipelineModule the script builds: build it with "
                   f"num_stages={s.pp} and partition_method='uniform' (the embedding and head kept out of the count).")
    if s.zero in (1, 2):
        out.append("After the optimizer step ZeRO-1/2 all-gather the updated parameters inside the step (not under "
                   "the next forward), as costed.")
    return out
