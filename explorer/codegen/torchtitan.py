"""torchtitan job configuration (TOML: [parallelism], [training], [activation_checkpoint]).

Keys and their meaning from torchtitan's torchtitan/config/job_config.py (pytorch/torchtitan at commit
238fa995, the last with TOML job files, 2026-02): data_parallel_replicate_degree (DDP; "1 means disabled"),
data_parallel_shard_degree (FSDP, i.e. ZeRO-3; HSDP when both exceed 1), tensor_parallel_degree,
pipeline_parallel_degree, context_parallel_degree, pipeline_parallel_schedule (a name from
torch.distributed.pipelining's get_schedule_class: "1F1B", "GPipe", "Interleaved1F1B",
"InterleavedZeroBubble", "ZBVZeroBubble", ...), pipeline_parallel_microbatch_size (microbatches =
local_batch_size / it), pipeline_parallel_layers_per_stage with pipeline_parallel_first/last_stage_less_layers
= 0 (the embedding and the
output then weigh nothing in torchtitan's split, torchtitan/distributed/pipeline_parallel.py, so every stage holds
l / (p v) layers, as in the explorer); [training] local_batch_size ("per-device batch
size"), global_batch_size (more than local x data-parallel degree means gradient accumulation), seq_len,
mixed_precision_param ("bfloat16" or "float32"); [activation_checkpoint] mode ("selective", "full", "none")
with selective_ac_option ("op": per-operator selective recomputation).

The model itself is chosen by [model] name/flavor; this file sets how it is parallelised and batched.
"""
from __future__ import annotations

from explorer.codegen.common import check_rank_order, check_uniform_split, layers_per_model_chunk, refuse, title
from explorer.io.quoting import toml_string

NAME = "torchtitan"
SCHEDULE_NAMES = {"1f1b": "1F1B", "gpipe": "GPipe", "interleaved": "Interleaved1F1B",
                  "zb-h1": "InterleavedZeroBubble"}
"""Our schedule -> torch.distributed.pipelining's name. ZB-H1 (Qi et al., ICLR 2024) with one stage per rank
is torch's InterleavedZeroBubble schedule (ZB-H1 ideas over looped stages) run with one stage per rank."""
MIXED = {"bf16": "bfloat16", "fp32": "float32"}


def torchtitan_toml(model, strategy) -> str:
    s = strategy
    if not model.is_transformer:
        raise refuse(NAME, f"it trains transformer language models; {model.name} is a {model.family} model")
    check_uniform_split(NAME, model, s)
    if s.zero in (1, 2):
        raise refuse(NAME, f"ZeRO-{s.zero}: FSDP (data_parallel_shard_degree) keeps parameters sharded between "
                           "steps (fsdp_reshard_after_forward='never' only keeps them gathered from a forward to "
                           "its backward); it has no optimizer-only or optimizer-and-gradient sharding")
    if s.dtype not in MIXED:
        raise refuse(NAME, f"{s.dtype}: its mixed_precision_param is bfloat16 or float32")
    if s.tp > 1 and not s.sequence_parallel:
        raise refuse(NAME, f"t={s.tp} without sequence parallelism: its tensor parallelism always shards "
                           "the norms by sequence (SequenceParallel, torchtitan/models/llama3/infra/parallelize.py)")
    check_rank_order(NAME, s)
    per_chunk = layers_per_model_chunk(model, s)
    if s.pp > 1 and per_chunk is None:
        raise refuse(NAME, f"uneven stages: pipeline_parallel_layers_per_stage gives every stage the same "
                           f"number of layers, and {model.layers} layers do not split into "
                           f"{s.pp * s.chunks} equal stages as this strategy does")
    if s.pp > 1 and s.schedule not in SCHEDULE_NAMES:
        raise refuse(NAME, f"the {s.schedule} schedule has no torch.distributed.pipelining counterpart")
    # overlapped pipeline sends (overlap_p2p) need no switch: torch.distributed.pipelining's schedules
    # issue every send asynchronously and wait on it later ("Delay send waits" in schedules.py)
    replicate, shard = (s.dp, 1) if s.zero == 0 else (1, s.dp)
    par = [("data_parallel_replicate_degree", replicate), ("data_parallel_shard_degree", shard)]
    par += [("tensor_parallel_degree", s.tp), ("pipeline_parallel_degree", s.pp), ("context_parallel_degree", 1)]
    if s.overlap_tp:      # TP communication under the GEMMs: torchtitan's async TP (needs torch.compile)
        par.append(("enable_async_tensor_parallel", True))
    if s.pp > 1:
        par += [("pipeline_parallel_schedule", SCHEDULE_NAMES[s.schedule]),
                ("pipeline_parallel_microbatch_size", s.micro_batch),
                ("pipeline_parallel_layers_per_stage", per_chunk),
                ("pipeline_parallel_first_stage_less_layers", 0), ("pipeline_parallel_last_stage_less_layers", 0)]
    # with a pipeline the per-device batch holds the m micro-batches; without one, torchtitan accumulates
    # gradients over global / (local x d) steps of local_batch_size each
    local = s.micro_batch * s.micro_batches if s.pp > 1 else s.micro_batch
    train = [("local_batch_size", local), ("global_batch_size", s.global_batch), ("seq_len", model.seq_len),
             ("mixed_precision_param", MIXED[s.dtype])]
    act = [("mode", s.recompute)] + ([("selective_ac_option", "op")] if s.recompute == "selective" else [])
    lines = [f"# torchtitan job config for {title(model, s)}"]
    sections = [("parallelism", par), ("training", train), ("activation_checkpoint", act)]
    if s.overlap_tp:
        sections.append(("compile", [("enable", True), ("components", ["model"])]))
    for section, items in sections:
        lines += ["", f"[{section}]"] + [f"{key} = {_toml(value)}" for key, value in items]
    return "\n".join(lines) + "\n"


def _toml(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join(_toml(x) for x in value) + "]"
    return toml_string(value) if isinstance(value, str) else str(value)

