"""Framework configs back into a strategy: Megatron-LM arguments, a Megatron-Bridge recipe, a DeepSpeed JSON, a
torchtitan TOML (the exporters' output, and hand-written files of the same form).

`import_config(text, framework=None, name="")` returns an `Imported` (framework, model fields, Strategy). The
files are parsed, never run: shlex/argparse for Megatron-LM, `ast.parse` and a literal reader for the Python
recipe (explorer.codegen.megatron_bridge.read_recipe: no eval, no exec), json and tomllib for the others. Every
size goes through explorer/limits.py before a Strategy is built, and every problem is one ExplorerError line
naming the file and what is wrong. What a file does not say is what the framework does by default (its source
cited where it is used), so that export -> import gives back the strategy that was exported
(tests/test_codegen_imports.py).
"""
from __future__ import annotations

import ast
import json
import tomllib
from dataclasses import dataclass
from pathlib import PurePath

from explorer.codegen.megatron import BACKEND_ATTENTION, _stage_map, parse_megatron_args
from explorer.codegen.megatron_bridge import RecipeError, read_recipe
from explorer.codegen.torchtitan import LLAMA3_FLAVORS, LLAMA3_VOCAB, SCHEDULE_NAMES, ffn_dim
from explorer.errors import ExplorerError
from explorer.io.safe_load import MAX_FILE_BYTES
from explorer.io.uploads import utf8_text
from explorer.limits import check_count, check_strategy
from explorer.strategy.strategy import RECOMPUTE_MODULES, Strategy
from explorer.strategy.pipeline_layout import parse as parse_layout

IMPORTERS = ("megatron", "megatron-bridge", "deepspeed", "torchtitan")
SUFFIXES = {".sh": "megatron", ".txt": "megatron", ".args": "megatron", ".py": "megatron-bridge",
            ".json": "deepspeed", ".toml": "torchtitan"}
INT_LIMITS = {"dp": "MAX_DEVICES", "tp": "MAX_TP", "pp": "MAX_LAYERS", "cp": "MAX_DEVICES", "ep": "MAX_DEVICES",
              "chunks": "MAX_LAYERS", "micro_batch": "MAX_GLOBAL_BATCH", "global_batch": "MAX_GLOBAL_BATCH",
              "expert_tp": "MAX_TP"}
MODEL_LIMITS = {"layers": "MAX_LAYERS", "hidden": "MAX_HIDDEN", "heads": "MAX_HEADS", "kv_heads": "MAX_HEADS",
                "seq_len": "MAX_SEQ_LEN", "vocab": "MAX_VOCAB", "ffn_hidden": "MAX_FFN"}


@dataclass(frozen=True)
class Imported:
    framework: str
    model: dict          # the ModelSpec fields the file states (shape, family, experts); {} for DeepSpeed
    strategy: Strategy


def detect(text: str, name: str = "") -> str:
    """The framework a file is for: from its suffix, else from its first characters."""
    suffix = PurePath(name).suffix.lower()
    if suffix in SUFFIXES:
        return SUFFIXES[suffix]
    head = text.lstrip()[:1]
    if head == "{":
        return "deepspeed"
    if "--num-layers" in text or "--tensor-model-parallel-size" in text:
        return "megatron"
    if "def " in text and "cfg." in text:
        return "megatron-bridge"
    if head == "[" or "[parallelism]" in text:
        return "torchtitan"
    raise ExplorerError(f"{name or 'the file'}: cannot tell which framework it is for; name it .sh (Megatron-LM), "
                        ".py (Megatron-Bridge), .json (DeepSpeed) or .toml (torchtitan)")


def import_config(text, framework: str | None = None, name: str = "", world_size: int | None = None) -> Imported:
    """(framework, model fields, Strategy) from a framework config's text (str or UTF-8 bytes)."""
    where = name or "the file"
    if isinstance(text, bytes):
        text = utf8_text(text, where, MAX_FILE_BYTES, "a config")
    if not isinstance(text, str):
        raise ExplorerError(f"{where}: expected text, got {type(text).__name__}")
    if len(text) > MAX_FILE_BYTES:
        raise ExplorerError(f"{where}: {len(text):,} characters is more than the {MAX_FILE_BYTES:,} a config may have")
    framework = framework or detect(text, name)
    if framework not in READERS:
        raise ExplorerError(f"cannot import a {str(framework)[:40]!r} config; use one of {', '.join(IMPORTERS)}")
    try:
        model, fields = READERS[framework](text, world_size)
        for key, limit in MODEL_LIMITS.items():
            if key in model:
                check_count(f"model field '{key}'", model[key], limit)
        for key, limit in INT_LIMITS.items():
            if key in fields:
                check_count(key, fields[key], limit)
        strategy = Strategy(**fields)
        check_strategy(strategy)
    except ExplorerError as err:
        raise ExplorerError(f"{where} ({framework}): {' '.join(str(err).split())}") from None
    except (RecipeError, ValueError, TypeError, KeyError, AttributeError, RecursionError, MemoryError) as err:
        text = "nested too deeply" if isinstance(err, RecursionError) else " ".join(str(err).split())[:200]
        raise ExplorerError(f"{where} ({framework}): {text or type(err).__name__}") from None
    return Imported(framework, model, strategy)


def _int(value, what: str, low: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ExplorerError(f"{what} must be a whole number >= {low}, got {str(value)[:40]!r}")
    return value


def _bool(value, what: str) -> bool:
    if not isinstance(value, bool):
        raise ExplorerError(f"{what} must be true or false, got {str(value)[:40]!r}")
    return value


def _choice(value, what: str, choices):
    if value not in choices:
        raise ExplorerError(f"{what} = {str(value)[:40]!r}: the explorer reads {', '.join(map(str, choices))}")
    return choices[value] if isinstance(choices, dict) else value


def _divide(total: int, part: int, what: str) -> int:
    if part <= 0 or total % part:
        raise ExplorerError(f"{what}: {total} is not divisible by {part}")
    return total // part


# ---- Megatron-LM ---------------------------------------------------------------------------------------------

def _megatron(text: str, world_size):
    model, strategy = parse_megatron_args(text, world_size)
    check_strategy(strategy)
    return model, {f: getattr(strategy, f) for f in strategy.__dataclass_fields__}


# ---- Megatron-Bridge -----------------------------------------------------------------------------------------

BRIDGE_FP8 = {"bf16_with_fp8_current_scaling_mixed": "tensorwise", "bf16_with_fp8_delayed_scaling_mixed": "delayed",
              "bf16_with_fp8_subchannel_scaling_mixed": "blockwise", "bf16_with_mxfp8_mixed": "mxfp8"}
"""Megatron-Bridge's FP8 mixed-precision recipes and the fp8_recipe each sets (training/mixed_precision.py)."""
BRIDGE_FP8_PARAMS = {"bf16_with_fp8_current_scaling_mixed": True, "bf16_with_fp8_delayed_scaling_mixed": True,
                     "bf16_with_fp8_subchannel_scaling_mixed": False, "bf16_with_mxfp8_mixed": True}
"""fp8_param_gather of each FP8 mixed-precision recipe when the file does not set it (training/mixed_precision.py,
NVIDIA-NeMo/Megatron-Bridge at 05097809: the subchannel (blockwise) recipe sets False, the others True); read only
with the distributed optimizer (the explorer models FP8 parameters where it gathers them: Strategy.fp8_param_gather)."""
BRIDGE_DTYPE = {"bf16_mixed": "bf16", "fp16_mixed": "fp16", **{name: "fp8" for name in BRIDGE_FP8}}
BRIDGE_GRAD_FP32 = {"bf16": True, "fp8": True, "fp16": False, "fp32": True}
"""grad_reduce_in_fp32 of each mixed-precision recipe when the file does not set it (training/mixed_precision.py:
bf16_mixed True, the FP8 recipes start from bf16_mixed, fp16_mixed False)."""
PRETRAIN_COMMON = {("ddp", "use_distributed_optimizer"): True, ("ddp", "overlap_grad_reduce"): True,
                   ("ddp", "overlap_param_gather"): True, ("ddp", "use_megatron_fsdp"): False}
"""What recipes/common.py _pretrain_common() sets, for a recipe that does not override it."""


def _bridge(text: str, world_size):
    try:
        tree = ast.parse(text)
    except SyntaxError as err:
        raise ExplorerError(f"not Python: line {err.lineno}: {err.msg}") from None
    recipe = read_recipe(tree)
    got = recipe["fields"]

    def get(section, key, default=None):
        return got.get((section, key), PRETRAIN_COMMON.get((section, key), default))

    world = world_size if world_size is not None else recipe["world_size"]
    if world is None:
        raise ExplorerError("the recipe does not say its world size (a module-level WORLD_SIZE = N)")
    world = _int(world, "WORLD_SIZE")
    check_count("WORLD_SIZE", world, "MAX_DEVICES")
    m = {key: get("model", key) for key in ("num_layers", "hidden_size", "num_attention_heads", "seq_length")}
    for key, value in m.items():
        _int(value, f"cfg.model.{key}")
    tp = _int(get("model", "tensor_model_parallel_size", 1), "tensor_model_parallel_size")
    pp = _int(get("model", "pipeline_model_parallel_size", 1), "pipeline_model_parallel_size")
    cp = _int(get("model", "context_parallel_size", 1), "context_parallel_size")
    vp = get("model", "virtual_pipeline_model_parallel_size")
    dp = _divide(world, tp * cp * pp, "WORLD_SIZE over t x cp x p")
    seq = get("dataset", "seq_length", m["seq_length"])
    if seq != m["seq_length"]:
        raise ExplorerError(f"cfg.dataset.seq_length {str(seq)[:20]} differs from cfg.model.seq_length "
                            f"{m['seq_length']} (ConfigContainer asserts they match)")
    model = {"layers": m["num_layers"], "hidden": m["hidden_size"], "heads": m["num_attention_heads"],
             "seq_len": m["seq_length"],
             "kv_heads": _int(get("model", "num_query_groups") or m["num_attention_heads"], "num_query_groups"),
             "ffn_hidden": _int(get("model", "ffn_hidden_size") or 4 * m["hidden_size"], "ffn_hidden_size"),
             "family": "llama" if get("model", "gated_linear_unit", False) is True else "gpt"}
    vocab = get("model", "vocab_size") or get("tokenizer", "vocab_size")
    if vocab is not None:
        model["vocab"] = _int(vocab, "vocab_size")
    if isinstance(recipe["model_name"], str):
        model["name"] = recipe["model_name"]
    attention = get("model", "attention_backend")
    if attention is not None:
        model["attention"] = _choice(attention, "attention_backend",
                                     {f"AttnBackend.{b}": a for b, a in BACKEND_ATTENTION.items()})
    _bridge_moe(get, model)
    precision = recipe["precision"]
    if precision == "MixedPrecisionConfig" and recipe["precision_kw"].get("fp32") is True:
        dtype = "fp32"
    else:
        dtype = _choice(precision or "bf16_mixed", "cfg.mixed_precision", BRIDGE_DTYPE)
    fsdp = get("ddp", "use_megatron_fsdp") is True
    dist_opt = get("ddp", "use_distributed_optimizer") is True or get("optimizer", "use_distributed_optimizer") is True
    if fsdp:
        zero = _choice(get("ddp", "data_parallel_sharding_strategy"), "ddp.data_parallel_sharding_strategy",
                       {"optim_grads": 2, "optim_grads_params": 3})
        comm = get("ddp", "megatron_fsdp_grad_comm_dtype") or get("ddp", "megatron_fsdp_main_grads_dtype")
        # an fp32 model's gradients are fp32 either way: then grad_reduce_in_fp32 says which was meant
        fp32 = comm == "torch.float32" and (dtype != "fp32" or
                                            got.get(("mixed_precision", "grad_reduce_in_fp32")) is True)
        grad = "fp32" if fp32 else "model"
    else:
        zero = 1 if dist_opt else 0
        fp32 = got.get(("mixed_precision", "grad_reduce_in_fp32"), BRIDGE_GRAD_FP32[dtype])
        grad = "fp32" if _bool(fp32, "grad_reduce_in_fp32") else "model"
    overlap = recipe["comm_overlap"]
    virtual = vp is not None and _int(vp, "virtual_pipeline_model_parallel_size") > 1 and pp > 1

    def overlapped(key, default):
        """CommOverlapConfig's value, else its default (comm_overlap.py), else the DDP config's."""
        if overlap is not None and overlap.get(key) is not None:
            return _bool(overlap[key], f"CommOverlapConfig {key}")
        return default

    grad_reduce = overlapped("overlap_grad_reduce", dp > 1 if overlap is not None and dist_opt
                             else get("ddp", "overlap_grad_reduce") is True)
    param_gather = overlapped("overlap_param_gather", dp > 1 if overlap is not None and dist_opt
                              else get("ddp", "overlap_param_gather") is True)
    p2p = overlapped("overlap_p2p_comm", virtual if overlap is not None else get("model", "overlap_p2p_comm") is True)
    granularity = get("model", "recompute_granularity")
    recompute = _choice(granularity, "recompute_granularity", {None: "none", "selective": "selective",
                                                               "full": "full"})
    modules = get("model", "recompute_modules")
    if recompute == "selective" and modules is not None and (not isinstance(modules, list) or not modules or
                                                             not set(modules) <= set(RECOMPUTE_MODULES)):
        raise ExplorerError(f"recompute_modules {str(modules)[:60]}: the explorer models "
                            f"{', '.join(RECOMPUTE_MODULES)} (explorer/model/recompute.py)")
    if recompute == "full" and (get("model", "recompute_method"), get("model", "recompute_num_layers")) != \
            ("uniform", 1):
        raise ExplorerError("full recomputation other than recompute_method 'uniform' with recompute_num_layers 1: "
                            "the explorer models every layer recomputed")
    cp_algo = _choice(get("model", "cp_comm_type") or "p2p", "cp_comm_type", {"p2p": "ring", "a2a": "ulysses"})
    fields = {"dp": dp, "tp": tp, "pp": pp, "cp": cp, "cp_algo": cp_algo,
              "micro_batch": get("train", "micro_batch_size"), "global_batch": get("train", "global_batch_size"),
              "sequence_parallel": _bool(get("model", "sequence_parallel", False), "sequence_parallel"),
              "zero": zero, "overlap_dp": grad_reduce or zero >= 2,
              "overlap_param_gather": param_gather and zero in (1, 2),
              "overlap_tp": overlapped("tp_comm_overlap", False) and tp > 1,
              "dtype": dtype, "grad_dtype": grad, "recompute": recompute,
              "ep": _int(get("model", "expert_model_parallel_size", 1), "expert_model_parallel_size")}
    if recompute == "selective" and modules:
        fields["recompute_modules"] = tuple(modules)
    if dtype == "fp8":
        fields["fp8_recipe"] = BRIDGE_FP8[precision]
        # FP8 parameters: the file's, else its recipe's (BRIDGE_FP8_PARAMS) where the distributed optimizer gathers them
        gather = got.get(("mixed_precision", "fp8_param_gather"), BRIDGE_FP8_PARAMS[precision] and zero >= 1)
        fields["fp8_param_gather"] = _bool(gather, "fp8_param_gather")
    moments = {get("optimizer", "exp_avg_dtype", "torch.float32"), get("optimizer", "exp_avg_sq_dtype", "torch.float32")}
    if get("optimizer", "use_precision_aware_optimizer") is True and moments != {"torch.float32"}:
        fields["adam_moments"] = _choice(moments.pop() if len(moments) == 1 else "", "cfg.optimizer.exp_avg_dtype",
                                         {"torch.bfloat16": "bf16"})
    etp = get("model", "expert_tensor_parallel_size")
    if etp is not None and etp != tp:
        fields["expert_tp"] = _int(etp, "expert_tensor_parallel_size")
    if virtual:
        fields.update(schedule="interleaved", chunks=vp, overlap_p2p=p2p)
    fields.update(_bridge_host(get, overlapped, bool(get("model", "num_moe_experts"))))
    mtp = get("model", "mtp_num_layers")
    if mtp:
        model["mtp_layers"] = _int(mtp, "mtp_num_layers")
    layout = get("model", "pipeline_model_parallel_layout")
    first, last = get("model", "num_layers_in_first_pipeline_stage"), get("model", "num_layers_in_last_pipeline_stage")
    if layout is not None:          # as the Megatron-LM importer reads --pipeline-model-parallel-layout
        if not isinstance(layout, str):
            raise ExplorerError("cfg.model.pipeline_model_parallel_layout must be a string")
        virtual = len(parse_layout(layout).stages)
        if virtual % pp:
            raise ExplorerError(f"cfg.model.pipeline_model_parallel_layout has {virtual} virtual stages, not a "
                                f"multiple of the {pp} pipeline stages")
        fields["pipeline_layout"] = layout
        if virtual > pp:
            fields.update(schedule="interleaved", chunks=virtual // pp,
                          overlap_p2p=overlapped("overlap_p2p_comm", True if overlap is not None else
                                                 get("model", "overlap_p2p_comm") is True))
    elif pp > 1 and (first is not None or last is not None):
        stage_map = _stage_map(model["layers"], pp, first, last)
        if stage_map != Strategy(pp=pp).stages(model["layers"]):
            fields["stage_map"] = stage_map
    return model, fields


def _bridge_host(get, overlapped, moe: bool) -> dict:
    """cuda_graphs, moe_dispatcher and overlap_ep from the fields explorer/codegen/megatron_bridge.py writes:
    cfg.model.cuda_graph_impl / cuda_graph_scope, moe_token_dispatcher_type / moe_flex_dispatcher_backend and
    CommOverlapConfig's overlap_moe_expert_parallel_comm (the defaults left out)."""
    out = {}
    impl = _choice(get("model", "cuda_graph_impl") or "none", "cuda_graph_impl",
                   {"none": "none", "local": "layer", "transformer_engine": "layer", "full_iteration": "full"})
    scope = get("model", "cuda_graph_scope") or []
    if impl == "layer" and isinstance(scope, list) and sorted(scope) == ["moe_preprocess", "moe_router"]:
        impl = "router"
    if impl != "none":
        out["cuda_graphs"] = impl
    if moe:
        kind = _choice(get("model", "moe_token_dispatcher_type") or "allgather", "moe_token_dispatcher_type",
                       {"alltoall": "alltoall", "allgather": "allgather", "flex": "flex"})
        if kind == "flex":
            kind = _choice(get("model", "moe_flex_dispatcher_backend") or "deepep", "moe_flex_dispatcher_backend",
                           {"deepep": "deepep", "hybridep": "hybridep"})
        if kind != "alltoall":
            out["moe_dispatcher"] = kind
    if overlapped("overlap_moe_expert_parallel_comm", False):
        out["overlap_ep"] = True
    return out


BRIDGE_MOE = {"num_moe_experts": "experts", "moe_router_topk": "experts_per_token",
              "moe_ffn_hidden_size": "moe_ffn_hidden", "moe_shared_expert_intermediate_size": "shared_ffn_hidden",
              "kv_channels": "head_dim"}


def _bridge_moe(get, model: dict) -> None:
    for key, name in BRIDGE_MOE.items():
        if get("model", key) is not None:
            model[name] = _int(get("model", key), key)
    if not model.get("experts"):
        return
    freq = get("model", "moe_layer_freq", 1)
    if freq == 1:
        model["first_dense_layers"] = 0
    elif isinstance(freq, list) and len(freq) == model["layers"] and set(freq) <= {0, 1} and \
            freq == sorted(freq) and freq[-1] == 1:
        model["first_dense_layers"] = freq.index(1)
    else:
        raise ExplorerError(f"moe_layer_freq {str(freq)[:40]}: the explorer models dense layers first, then MoE "
                            "layers (1, or [0] * n + [1] * m over the layers)")
    if get("model", "moe_expert_capacity_factor") is not None:
        model["moe_capacity_factor"] = float(get("model", "moe_expert_capacity_factor"))


# ---- DeepSpeed -----------------------------------------------------------------------------------------------

def _deepspeed(text: str, world_size):
    try:
        config = json.loads(text)
    except json.JSONDecodeError as err:
        raise ExplorerError(f"malformed JSON at line {err.lineno} column {err.colno}: {err.msg}") from None
    if not isinstance(config, dict):
        raise ExplorerError("a DeepSpeed config is a JSON object")
    batch = _int(config.get("train_batch_size"), "train_batch_size")
    micro = _int(config.get("train_micro_batch_size_per_gpu"), "train_micro_batch_size_per_gpu")
    steps = _int(config.get("gradient_accumulation_steps", 1), "gradient_accumulation_steps")
    dp = _divide(batch, micro * steps, "train_batch_size over micro-batch x gradient_accumulation_steps")
    zero_cfg = config.get("zero_optimization", {})
    if not isinstance(zero_cfg, dict):
        raise ExplorerError("zero_optimization must be an object")
    zero = _choice(zero_cfg.get("stage", 0), "zero_optimization.stage", (0, 1, 2, 3))
    # overlap_comm: DeepSpeed's default is false, true for ZeRO-3 (deepspeed/runtime/zero/config.py)
    overlap = _bool(zero_cfg.get("overlap_comm", zero == 3), "zero_optimization.overlap_comm")
    bf16 = _bool(config.get("bf16", {}).get("enabled", False), "bf16.enabled")
    fp16 = _bool(config.get("fp16", {}).get("enabled", False), "fp16.enabled")
    if bf16 and fp16:
        raise ExplorerError("bf16 and fp16 are both enabled")
    dtype = "bf16" if bf16 else ("fp16" if fp16 else "fp32")
    comm = config.get("communication_data_type", dtype)     # engine.communication_data_type: the model dtype
    _choice(comm, "communication_data_type", ("fp32", "bf16", "fp16"))
    accum = config.get("data_types", {}).get("grad_accum_dtype", comm)
    if accum != comm:
        raise ExplorerError(f"data_types.grad_accum_dtype {str(accum)[:20]!r} differs from communication_data_type "
                            f"{comm!r}: the explorer accumulates and reduces gradients in one dtype")
    pipe = config.get("pipeline", {})
    if not isinstance(pipe, dict):
        raise ExplorerError("pipeline must be an object")
    pp = _int(pipe.get("stages", 1), "pipeline.stages")
    if pipe.get("partition", "uniform") != "uniform":
        raise ExplorerError(f"pipeline.partition {str(pipe.get('partition'))[:40]!r}: the explorer reads 'uniform'")
    recompute = "full" if config.get("activation_checkpointing") else "none"
    fields = {"dp": dp, "tp": 1, "pp": pp, "micro_batch": micro, "global_batch": batch, "zero": zero,
              "overlap_dp": overlap, "dtype": dtype, "grad_dtype": "fp32" if comm == "fp32" and dtype != "fp32"
              else "model", "recompute": recompute}
    if zero == 3 and zero_cfg.get("stage3_prefetch_bucket_size") == 0:
        fields["zero_prefetch"] = False
    return {}, fields


# ---- torchtitan ----------------------------------------------------------------------------------------------

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


def _torchtitan(text: str, world_size):
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
    replicate = _int(par.get("data_parallel_replicate_degree", 1), "data_parallel_replicate_degree")
    tp = _int(par.get("tensor_parallel_degree", 1), "tensor_parallel_degree")
    pp = _int(par.get("pipeline_parallel_degree", 1), "pipeline_parallel_degree")
    cp = _int(par.get("context_parallel_degree", 1), "context_parallel_degree")
    shard = par.get("data_parallel_shard_degree", -1)
    if shard == -1:      # JobConfig: -1 = the devices left over
        if world_size is None:
            raise ExplorerError("data_parallel_shard_degree -1 (the devices left over) needs the world size")
        shard = _divide(_int(world_size, "world size"), replicate * tp * pp * cp, "world size over the other degrees")
    shard = _int(shard, "data_parallel_shard_degree")
    if replicate > 1 and shard > 1:
        raise ExplorerError("HSDP (replicate and shard degrees both above 1): the explorer has one data-parallel axis")
    dp = replicate * shard
    seq = _int(train.get("seq_len"), "[training] seq_len")
    model["seq_len"] = seq
    dtype = _choice(train.get("mixed_precision_param", "bfloat16"), "mixed_precision_param",
                    {"bfloat16": "bf16", "float32": "fp32"})
    local = _int(train.get("local_batch_size"), "local_batch_size")
    batch = _int(train.get("global_batch_size", local * dp), "global_batch_size")
    fields = {"dp": dp, "tp": tp, "pp": pp, "cp": cp, "global_batch": batch, "zero": 3 if shard > 1 else 0,
              "sequence_parallel": tp > 1,          # its TP always shards the norms by sequence
              "overlap_dp": dp > 1,                 # FSDP2 and DDP both reduce under the backward
              "overlap_tp": _bool(par.get("enable_async_tensor_parallel", False), "enable_async_tensor_parallel"),
              "dtype": dtype, "grad_dtype": "fp32" if dtype != "fp32" else "model",   # always reduced in float32
              "recompute": _choice(act.get("mode", "none"), "[activation_checkpoint] mode",
                                   {"none": "none", "full": "full"})}
    if pp > 1:
        names = {v: k for k, v in SCHEDULE_NAMES.items()}
        schedule = _choice(par.get("pipeline_parallel_schedule", "1F1B"), "pipeline_parallel_schedule", names)
        micro = _int(par.get("pipeline_parallel_microbatch_size", 1), "pipeline_parallel_microbatch_size")
        per_stage = _int(par.get("pipeline_parallel_layers_per_stage"), "pipeline_parallel_layers_per_stage")
        chunks = _divide(model["layers"], pp * per_stage, "layers over p x pipeline_parallel_layers_per_stage")
        if local != micro * _divide(batch, micro * dp, "global_batch_size over microbatch size x d"):
            raise ExplorerError(f"local_batch_size {local} is not the {batch // dp} sequences each of the d = {dp} "
                                "replicas takes per step")
        fields.update(micro_batch=micro, schedule=schedule, chunks=chunks)
        if schedule == "interleaved":      # torch.distributed.pipelining sends asynchronously, waits later
            fields["overlap_p2p"] = True
    else:
        fields["micro_batch"] = local
    return model, fields


READERS = {"megatron": _megatron, "megatron-bridge": _bridge, "deepspeed": _deepspeed, "torchtitan": _torchtitan}
