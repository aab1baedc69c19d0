"""torchtitan TOML job configs back into model and strategy fields (explorer.codegen.imports): llama3 flavors (its own
or the shape-named ones the exporter writes); what a file does not set is torchtitan's JobConfig default."""
from __future__ import annotations

import tomllib

from explorer.codegen.import_fields import choice, divide, flag, whole
from explorer.codegen.torchtitan import LLAMA3_FLAVORS, LLAMA3_VOCAB, SCHEDULE_NAMES, ffn_dim
from explorer.errors import ExplorerError


def _flavor_model(flavor) -> dict:
    """The model of a [model] flavor: llama3's own, or the shape-named flavor the exporter writes."""
    if flavor in LLAMA3_FLAVORS:
        f = LLAMA3_FLAVORS[flavor]
        return {"layers": f["n_layers"], "hidden": f["dim"], "heads": f["n_heads"], "kv_heads": f["n_kv_heads"],
                "ffn_hidden": ffn_dim(f["dim"], f["multiple_of"], f["ffn_dim_multiplier"]), "vocab": LLAMA3_VOCAB}
    parts = str(flavor).split("-")
    keys = {"h": "hidden", "l": "layers", "a": "heads", "kv": "kv_heads", "f": "ffn_hidden", "v": "vocab"}
    out = {}
    for part in parts:
        key = part.rstrip("0123456789")
        digits = part[len(key):]
        if key not in keys or not digits.isdigit() or len(digits) > 9:
            raise ExplorerError(f"[model] flavor {str(flavor)[:40]!r}: neither one of llama3's "
                                f"({', '.join(LLAMA3_FLAVORS)}) nor a shape name like h4096-l32-a32-kv8-f14336-v128256")
        out[keys[key]] = int(digits)
    if set(out) != set(keys.values()):
        raise ExplorerError(f"[model] flavor {str(flavor)[:40]!r} does not name every dimension")
    return out


def read_torchtitan(text: str, world_size):
    """(model fields, Strategy fields) of a torchtitan TOML job config (llama3 flavors)."""
    try:
        config = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise ExplorerError(f"malformed TOML: {' '.join(str(err).split())}") from None
    sections = {key: config.get(key, {}) for key in ("model", "parallelism", "training", "activation_checkpoint")}
    for key, section in sections.items():
        if not isinstance(section, dict):
            raise ExplorerError(f"[{key}] must be a table")
    model_cfg, par, train, act = (sections[k] for k in ("model", "parallelism", "training", "activation_checkpoint"))
    if model_cfg.get("name", "llama3") != "llama3":
        raise ExplorerError(f"[model] name {str(model_cfg.get('name'))[:40]!r}: the explorer reads llama3")
    model = {**_flavor_model(model_cfg.get("flavor")), "family": "llama", "attention": "flash"}
    replicate = whole(par.get("data_parallel_replicate_degree", 1), "data_parallel_replicate_degree")
    tp = whole(par.get("tensor_parallel_degree", 1), "tensor_parallel_degree")
    pp = whole(par.get("pipeline_parallel_degree", 1), "pipeline_parallel_degree")
    cp = whole(par.get("context_parallel_degree", 1), "context_parallel_degree")
    shard = par.get("data_parallel_shard_degree", -1)
    if shard == -1:      # JobConfig: -1 = the devices left over
        if world_size is None:
            raise ExplorerError("data_parallel_shard_degree -1 (the devices left over) needs the world size")
        shard = divide(whole(world_size, "world size"), replicate * tp * pp * cp, "world size over the other degrees")
    shard = whole(shard, "data_parallel_shard_degree")
    if replicate > 1 and shard > 1:
        raise ExplorerError("HSDP (replicate and shard degrees both above 1): the explorer has one data-parallel axis")
    dp = replicate * shard
    seq = whole(train.get("seq_len"), "[training] seq_len")
    model["seq_len"] = seq
    dtype = choice(train.get("mixed_precision_param", "bfloat16"), "mixed_precision_param",
                    {"bfloat16": "bf16", "float32": "fp32"})
    local = whole(train.get("local_batch_size"), "local_batch_size")
    batch = whole(train.get("global_batch_size", local * dp), "global_batch_size")
    fields = {"dp": dp, "tp": tp, "pp": pp, "cp": cp, "global_batch": batch, "zero": 3 if shard > 1 else 0,
              "sequence_parallel": tp > 1,          # its TP always shards the norms by sequence
              "overlap_dp": dp > 1,                 # FSDP2 and DDP both reduce under the backward
              "overlap_tp": flag(par.get("enable_async_tensor_parallel", False), "enable_async_tensor_parallel"),
              "dtype": dtype, "grad_dtype": "fp32" if dtype != "fp32" else "model",   # always reduced in float32
              "recompute": choice(act.get("mode", "none"), "[activation_checkpoint] mode",
                                   {"none": "none", "full": "full"})}
    if pp > 1:
        names = {v: k for k, v in SCHEDULE_NAMES.items()}
        schedule = choice(par.get("pipeline_parallel_schedule", "1F1B"), "pipeline_parallel_schedule", names)
        micro = whole(par.get("pipeline_parallel_microbatch_size", 1), "pipeline_parallel_microbatch_size")
        per_stage = whole(par.get("pipeline_parallel_layers_per_stage"), "pipeline_parallel_layers_per_stage")
        chunks = divide(model["layers"], pp * per_stage, "layers over p x pipeline_parallel_layers_per_stage")
        if local != micro * divide(batch, micro * dp, "global_batch_size over microbatch size x d"):
            raise ExplorerError(f"local_batch_size {local} is not the {batch // dp} sequences each of the d = {dp} "
                                "replicas takes per step")
        fields.update(micro_batch=micro, schedule=schedule, chunks=chunks)
        if schedule == "interleaved":      # torch.distributed.pipelining sends asynchronously, waits later
            fields["overlap_p2p"] = True
    else:
        fields["micro_batch"] = local
    return model, fields
