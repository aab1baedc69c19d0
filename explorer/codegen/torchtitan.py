"""torchtitan job configuration (TOML: [model], [parallelism], [training], [activation_checkpoint]).

Written for torchtitan 0.2.2 (pytorch/torchtitan tag v0.2.2, commit 73a0e697, 2026-02-20), the last release
whose ConfigManager reads TOML job files (`--job.config_file`, torchtitan/config/manager.py); later releases
read Python configs instead. Every section and key is one of its JobConfig
(tests/data/frameworks/torchtitan_config.json is read from torchtitan/config/job_config.py at that tag):
data_parallel_replicate_degree (DDP; "1 means disabled"), data_parallel_shard_degree (FSDP, i.e. ZeRO-3;
HSDP when both exceed 1), tensor_parallel_degree, pipeline_parallel_degree, context_parallel_degree,
pipeline_parallel_schedule (a name from torch.distributed.pipelining's get_schedule_class: "1F1B", "GPipe",
"Interleaved1F1B", "InterleavedZeroBubble", ...), pipeline_parallel_microbatch_size (microbatches =
local_batch_size / it), pipeline_parallel_layers_per_stage with pipeline_parallel_first/last_stage_less_layers
= 0 (the embedding and the output then weigh nothing in torchtitan's split,
torchtitan/distributed/pipeline_parallel.py, so every stage holds l / (p v) layers, as in the explorer);
[training] local_batch_size ("per-device batch size"), global_batch_size (more than local x data-parallel
degree means gradient accumulation), seq_len, mixed_precision_param ("bfloat16" or "float32");
[activation_checkpoint] mode ("full", "none"); [model] name and flavor.

What torchtitan does, and so what is refused (tests/data/frameworks/rules.json cites each):
* Its models are Llama-style (llama3: RMSNorm, SwiGLU, rotary positions, SDPA attention, untied output);
  a GPT or BERT model, or a Llama with the standard (unfused) attention, would be another model.
  [model] names the llama3 flavor of the same shape, or a flavor to register (its TransformerModelArgs
  are written in a comment).
* Data parallelism by replication only (DDP) with TP or PP raises "DDP has not supported > 1D parallelism"
  (torchtitan/models/llama3/infra/parallelize.py); ZeRO-1/2 have no counterpart (FSDP keeps parameters
  sharded).
* Mixed precision: FSDP's MixedPrecisionPolicy when data_parallel_shard_degree > 1, torch.autocast under DDP
  or on one device, and none at all with TP or PP without FSDP ("Mixed precision training with TP or PP is
  only supported when FSDP/HSDP/CP is enabled", torchtitan/distributed/utils.py maybe_enable_amp): a bf16
  strategy there would train in fp32. Gradients are reduced in float32 in every case (mixed_precision_reduce
  accepts only "float32"; DDP's gradients are fp32), so a bf16 strategy must cost fp32 gradients
  (grad_dtype fp32).
* Its selective activation checkpointing is per layer ("2": every second layer) or per operator ("op": keep
  the outputs of matmuls, SDPA and reduce-scatters except every second matmul,
  torchtitan/distributed/activation_checkpoint.py), not the attention-core recomputation the explorer costs
  (Korthikanti et al.): refused.
"""
from __future__ import annotations

from explorer.codegen.common import check_host_options, check_pipeline_layout, check_rank_order, check_uniform_split, layers_per_model_chunk, refuse, title
from explorer.io.quoting import comment_text, toml_string

NAME = "torchtitan"
SCHEDULE_NAMES = {"1f1b": "1F1B", "gpipe": "GPipe", "interleaved": "Interleaved1F1B",
                  "zb-h1": "InterleavedZeroBubble"}
"""Our schedule -> torch.distributed.pipelining's name. ZB-H1 (Qi et al., ICLR 2024) with one stage per rank
is torch's InterleavedZeroBubble schedule (ZB-H1 ideas over looped stages) run with one stage per rank."""
MIXED = {"bf16": "bfloat16", "fp32": "float32"}
VERSION = "0.2.2"
LLAMA3_FLAVORS = {
    "8B": dict(dim=4096, n_layers=32, n_heads=32, n_kv_heads=8, ffn_dim_multiplier=1.3, multiple_of=1024),
    "70B": dict(dim=8192, n_layers=80, n_heads=64, n_kv_heads=8, ffn_dim_multiplier=1.3, multiple_of=4096),
    "405B": dict(dim=16384, n_layers=126, n_heads=128, n_kv_heads=8, ffn_dim_multiplier=1.2, multiple_of=4096),
}
"""torchtitan 0.2.2's llama3 flavors (torchtitan/models/llama3/__init__.py llama3_args; vocab_size 128256,
the TransformerModelArgs default); tests/test_codegen_frameworks.py checks them against the source's table."""
LLAMA3_VOCAB = 128256


def ffn_dim(dim: int, multiple_of: int, ffn_dim_multiplier) -> int:
    """torchtitan's FeedForward hidden size (torchtitan/models/llama3/model/model.py FeedForward)."""
    hidden = int(2 * (4 * dim) / 3)
    if ffn_dim_multiplier is not None:
        hidden = int(ffn_dim_multiplier * hidden)
    return multiple_of * ((hidden + multiple_of - 1) // multiple_of)


def model_args(model) -> dict:
    """TransformerModelArgs of the same shape as `model`: dim, layers, heads, kv heads, FFN, vocabulary."""
    out = dict(dim=model.hidden, n_layers=model.layers, n_heads=model.heads, n_kv_heads=model.kv_heads)
    base = int(2 * (4 * model.hidden) / 3)
    if ffn_dim(model.hidden, 256, None) == model.ffn_hidden:
        out.update(ffn_dim_multiplier=None, multiple_of=256)
    elif base <= model.ffn_hidden:
        out.update(ffn_dim_multiplier=None, multiple_of=model.ffn_hidden)
    else:
        out.update(ffn_dim_multiplier=model.ffn_hidden / base, multiple_of=model.ffn_hidden)
    out["vocab_size"] = model.vocab
    return out


def custom_flavor(model) -> str:
    """A flavor name for a shape none of llama3's has, from the shape alone (never from the model's name)."""
    return (f"h{model.hidden}-l{model.layers}-a{model.heads}-kv{model.kv_heads}-f{model.ffn_hidden}"
            f"-v{model.vocab}")


def flavor_of(model):
    """The llama3 flavor of the same shape as `model`, or None."""
    for name, args in LLAMA3_FLAVORS.items():
        if (args["dim"], args["n_layers"], args["n_heads"], args["n_kv_heads"], LLAMA3_VOCAB) == \
                (model.hidden, model.layers, model.heads, model.kv_heads, model.vocab) and \
                ffn_dim(args["dim"], args["multiple_of"], args["ffn_dim_multiplier"]) == model.ffn_hidden:
            return name
    return None


def torchtitan_toml(model, strategy) -> str:
    s = strategy
    if model.family != "llama":
        raise refuse(NAME, f"its models are Llama-style (llama3: RMSNorm, SwiGLU, rotary positions, untied "
                           f"output; torchtitan/models); {model.name} is a {model.family} model")
    if model.attention != "flash":
        raise refuse(NAME, "the standard (unfused) attention: its llama3 attends with SDPA (fused, no s x s "
                           "scores kept)")
    check_uniform_split(NAME, model, s)
    if s.zero in (1, 2):
        raise refuse(NAME, f"ZeRO-{s.zero}: FSDP (data_parallel_shard_degree) keeps parameters sharded between "
                           "steps (fsdp_reshard_after_forward='never' only keeps them gathered from a forward to "
                           "its backward); it has no optimizer-only or optimizer-and-gradient sharding")
    if s.dtype not in MIXED:
        raise refuse(NAME, f"{s.dtype}: its mixed_precision_param is bfloat16 or float32")
    fsdp = s.zero == 3 and s.dp > 1
    if s.zero == 0 and s.dp > 1 and (s.tp > 1 or s.pp > 1):
        raise refuse(NAME, f"data parallelism by replication (ZeRO-0, d={s.dp}) with tensor or pipeline "
                           "parallelism: it raises 'DDP has not supported > 1D parallelism' (use ZeRO-3: FSDP)")
    if s.dtype == "bf16" and not fsdp and (s.tp > 1 or s.pp > 1):
        raise refuse(NAME, "bf16 with tensor or pipeline parallelism but no FSDP: it then trains in fp32 "
                           "('Mixed precision training with TP or PP is only supported when FSDP/HSDP/CP is "
                           "enabled')")
    if s.dtype == "bf16" and s.grad_dtype != "fp32":
        raise refuse(NAME, "bf16 gradient reduction: it reduces gradients in float32 (mixed_precision_reduce "
                           "accepts only 'float32'; under DDP they are fp32); cost it with fp32 gradients (the sidebar's "
                           "Gradients: fp32 or framework with Framework torchtitan; --grad-dtype fp32 or --framework "
                           "torchtitan)")
    if s.recompute == "selective":
        raise refuse(NAME, "selective recomputation: its selective activation checkpointing keeps every "
                           "second layer or, per operator, the matmul and SDPA outputs (recomputing every "
                           "second matmul), not the attention-core recomputation the explorer costs")
    if s.tp > 1 and not s.sequence_parallel:
        raise refuse(NAME, f"t={s.tp} without sequence parallelism: its tensor parallelism always shards "
                           "the norms by sequence (SequenceParallel, torchtitan/models/llama3/infra/parallelize.py)")
    check_rank_order(NAME, s)
    check_host_options(NAME, s)
    check_pipeline_layout(NAME, model, s)
    if s.dp > 1 and not s.overlap_dp:
        raise refuse(NAME, f"d={s.dp} without overlapped gradient reduction: FSDP2 and DDP always reduce "
                           "gradients under the backward")
    if s.dp == 1 and s.overlap_dp:     # nothing in the file could say it: its reader gives overlap_dp = (d > 1)
        raise refuse(NAME, "overlapped gradient reduction at d=1: it has no data-parallel reduction to overlap "
                           "there; cost the strategy without it (overlap_dp false)")
    if s.zero == 3 and not s.zero_prefetch:
        raise refuse(NAME, "ZeRO-3 without prefetching: FSDP2 always gathers the next layer's parameters under "
                           "the current compute")
    if s.pp > 1 and s.schedule == "interleaved" and not s.overlap_p2p:
        raise refuse(NAME, "the interleaved schedule without overlapped sends: torch.distributed.pipelining "
                           "issues every send asynchronously and waits for it later (schedules.py)")
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
    act = [("mode", s.recompute)]
    flavor = flavor_of(model)
    lines = [f"# torchtitan job config for {title(model, s)}",
             f"# torchtitan {VERSION} (pytorch/torchtitan v{VERSION}, the last release that reads TOML job files): "
             "torchrun ... -m torchtitan.train --job.config_file <this file>"]
    if flavor is None:
        flavor = custom_flavor(model)
        args = ", ".join(f"{k}={v!r}" for k, v in model_args(model).items())
        lines.append(comment_text(f"# {model.name} is none of llama3's flavors: register {flavor!r} in "
                                  f"torchtitan/models/llama3/__init__.py llama3_args as TransformerModelArgs("
                                  f"{args})", limit=1000))
    sections = [("model", [("name", "llama3"), ("flavor", flavor)]), ("parallelism", par),
                ("training", train), ("activation_checkpoint", act)]
    if s.overlap_tp:
        sections.append(("compile", [("enable", True), ("components", ["model"])]))
    lines.append(comment_text(f"# torchtitan {CURRENT} reads Python configs, not this file: "
                              + current_command(sections), limit=2000))
    for section, items in sections:
        lines += ["", f"[{section}]"] + [f"{key} = {_toml(value)}" for key, value in items]
    return "\n".join(lines) + "\n"


CURRENT = "0.3.0"
"""The current torchtitan release (pytorch/torchtitan v0.3.0): its ConfigManager (torchtitan/config/manager.py)
reads no TOML; it builds the Trainer.Config of a config_registry function (--module M --config F) and applies
command-line overrides, --<section>.<field> VALUE (tyro: a bool as --<section>.<field> or
--<section>.no-<field>, a list[str] comma-separated, the activation checkpointing as a subcommand)."""
CURRENT_CONFIGS = {"8B": "llama3_8b", "70B": "llama3_70b"}
"""Flavor -> the llama3 config_registry function of torchtitan 0.3.0 (torchtitan/models/llama3/config_registry.py)
whose model_spec is that flavor and nothing else: llama3_405b adds Float8 converters (FP8 linears), so a 405B
strategy gets no 0.3.0 command."""
CURRENT_MOVED = {("parallelism", "enable_async_tensor_parallel"): "compile"}
"""Keys 0.3.0 keeps in another section (CompileConfig.enable_async_tensor_parallel, torchtitan/config/configs.py)."""


def current_command(sections) -> str:
    """The torchtitan 0.3.0 command for the same settings (the TOML's sections as command-line overrides), or
    why there is none. Every cost-changing field is written, also where 0.3.0's base config differs (its
    llama3_70b sets t=8 and full recomputation, llama3_8b selective recomputation; TrainingConfig captures CUDA
    graphs unless disable_cuda_graphs, which the explorer costs as eager layers: check_host_options refuses the
    others)."""
    fields = dict(sections)
    flavor = dict(fields["model"])["flavor"]
    if flavor not in CURRENT_CONFIGS:
        return (f"it has no config_registry function for flavor {flavor!r} (only "
                f"{', '.join(CURRENT_CONFIGS)} train that model alone; register one to run this strategy)")
    argv = ["--module", "llama3", "--config", CURRENT_CONFIGS[flavor]]
    overlap_tp = False
    for section, items in sections:
        if section in ("model", "activation_checkpoint", "compile"):
            continue
        for key, value in items:
            if CURRENT_MOVED.get((section, key)) == "compile":
                overlap_tp = bool(value)
                continue
            argv += _override(section, key, value)
    compile_items = dict(fields.get("compile", [("enable", False)]))
    argv += _override("compile", "enable", compile_items["enable"])
    if "components" in compile_items:
        argv += _override("compile", "components", compile_items["components"])
    argv += _override("compile", "enable_async_tensor_parallel", overlap_tp)
    argv += _override("training", "disable_cuda_graphs", True)     # 0.3.0 captures CUDA graphs unless told
    argv.append(f"activation-checkpoint:{dict(fields['activation_checkpoint'])['mode']}")
    return "torchrun ... -m torchtitan.train " + " ".join(argv)


def _override(section: str, key: str, value) -> list:
    if isinstance(value, bool):
        return [f"--{section}.{key}" if value else f"--{section}.no-{key}"]
    if isinstance(value, list):
        return [f"--{section}.{key}", ",".join(str(x) for x in value)]
    return [f"--{section}.{key}", str(value)]


def _toml(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join(_toml(x) for x in value) + "]"
    return toml_string(value) if isinstance(value, str) else str(value)



def notes(model, strategy) -> list:
    """What torchtitan would do differently from what was costed, and how the file pins it."""
    s = strategy
    out = ["torchtitan reduces gradients in float32 in every case (FSDP's mixed_precision_reduce, DDP's fp32 "
           "gradients): costed with fp32 gradients.",
           f"This file is read by torchtitan {VERSION}; {CURRENT} reads Python configs instead, and the file's "
           f"comment gives the {CURRENT} command for the same settings (with CUDA graphs off, as costed) where a "
           "llama3 config of that shape exists."]
    if s.dp > 1:
        out.append("FSDP2 and DDP always reduce gradients under the backward (costed overlapped)"
                   + ("; FSDP2 prefetches the next layer's parameters (costed prefetched)." if s.zero == 3 else "."))
    if s.pp > 1 and s.schedule == "interleaved":
        out.append("torch.distributed.pipelining sends asynchronously and waits later: the sends are costed "
                   "overlapped.")
    if flavor_of(model) is None:
        out.append(f"{custom_flavor(model)} is not one of llama3's flavors: register it (its TransformerModelArgs "
                   "are in the file's comment).")
    return out
