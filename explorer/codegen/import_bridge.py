"""Megatron-Bridge recipes back into model and strategy fields (explorer.codegen.imports): the recipe is parsed with
`ast` and read by explorer.codegen.megatron_bridge.read_recipe (a literal reader: no eval, no exec); what it does not
set is what Megatron-Bridge sets (its defaults cited where used)."""
from __future__ import annotations

import ast

from explorer.codegen.import_fields import choice, divide, flag, number, whole
from explorer.codegen.megatron import BACKEND_ATTENTION, _stage_map, layout_fields
from explorer.codegen.megatron_bridge import read_recipe
from explorer.codegen.megatron_moe import skip_freq, whole_base, window_keys, yarn_field
from explorer.errors import ExplorerError
from explorer.limits import check_count
from explorer.strategy.pipeline_layout import parse as parse_layout
from explorer.strategy.strategy import RECOMPUTE_MODULES, Strategy

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


def read_bridge(text: str, world_size):
    """(model fields, Strategy fields) of a Megatron-Bridge recipe, read by ast (read_recipe), never run."""
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
    world = whole(world, "WORLD_SIZE")
    check_count("WORLD_SIZE", world, "MAX_DEVICES")
    m = {key: get("model", key) for key in ("num_layers", "hidden_size", "num_attention_heads", "seq_length")}
    for key, value in m.items():
        whole(value, f"cfg.model.{key}")
    tp = whole(get("model", "tensor_model_parallel_size", 1), "tensor_model_parallel_size")
    pp = whole(get("model", "pipeline_model_parallel_size", 1), "pipeline_model_parallel_size")
    cp = whole(get("model", "context_parallel_size", 1), "context_parallel_size")
    vp = get("model", "virtual_pipeline_model_parallel_size")
    dp = divide(world, tp * cp * pp, "WORLD_SIZE over t x cp x p")
    seq = get("dataset", "seq_length", m["seq_length"])
    if seq != m["seq_length"]:
        raise ExplorerError(f"cfg.dataset.seq_length {str(seq)[:20]} differs from cfg.model.seq_length "
                            f"{m['seq_length']} (ConfigContainer asserts they match)")
    model = {"layers": m["num_layers"], "hidden": m["hidden_size"], "heads": m["num_attention_heads"],
             "seq_len": m["seq_length"],
             "kv_heads": whole(get("model", "num_query_groups") or m["num_attention_heads"], "num_query_groups"),
             "ffn_hidden": whole(get("model", "ffn_hidden_size") or 4 * m["hidden_size"], "ffn_hidden_size"),
             "family": "llama" if get("model", "gated_linear_unit", False) is True else "gpt"}
    vocab = get("model", "vocab_size") or get("tokenizer", "vocab_size")
    if vocab is not None:
        model["vocab"] = whole(vocab, "vocab_size")
    if isinstance(recipe["model_name"], str):
        model["name"] = recipe["model_name"]
    attention = get("model", "attention_backend")
    if attention is not None:
        model["attention"] = choice(attention, "attention_backend",
                                     {f"AttnBackend.{b}": a for b, a in BACKEND_ATTENTION.items()})
    _bridge_moe(get, model)
    _bridge_attention(get, model)
    precision = recipe["precision"]
    if precision == "MixedPrecisionConfig" and recipe["precision_kw"].get("fp32") is True:
        dtype = "fp32"
    else:
        dtype = choice(precision or "bf16_mixed", "cfg.mixed_precision", BRIDGE_DTYPE)
    fsdp = get("ddp", "use_megatron_fsdp") is True
    dist_opt = get("ddp", "use_distributed_optimizer") is True or get("optimizer", "use_distributed_optimizer") is True
    if fsdp:
        zero = choice(get("ddp", "data_parallel_sharding_strategy"), "ddp.data_parallel_sharding_strategy",
                       {"optim_grads": 2, "optim_grads_params": 3})
        comm = get("ddp", "megatron_fsdp_grad_comm_dtype") or get("ddp", "megatron_fsdp_main_grads_dtype")
        # an fp32 model's gradients are fp32 either way: then grad_reduce_in_fp32 says which was meant
        fp32 = comm == "torch.float32" and (dtype != "fp32" or
                                            got.get(("mixed_precision", "grad_reduce_in_fp32")) is True)
        grad = "fp32" if fp32 else "model"
    else:
        zero = 1 if dist_opt else 0
        fp32 = got.get(("mixed_precision", "grad_reduce_in_fp32"), BRIDGE_GRAD_FP32[dtype])
        grad = "fp32" if flag(fp32, "grad_reduce_in_fp32") else "model"
    overlap = recipe["comm_overlap"]
    virtual = vp is not None and whole(vp, "virtual_pipeline_model_parallel_size") > 1 and pp > 1

    def overlapped(key, default):
        """CommOverlapConfig's value, else its default (comm_overlap.py), else the DDP config's."""
        if overlap is not None and overlap.get(key) is not None:
            return flag(overlap[key], f"CommOverlapConfig {key}")
        return default

    grad_reduce = overlapped("overlap_grad_reduce", dp > 1 if overlap is not None and dist_opt
                             else get("ddp", "overlap_grad_reduce") is True)
    param_gather = overlapped("overlap_param_gather", dp > 1 if overlap is not None and dist_opt
                              else get("ddp", "overlap_param_gather") is True)
    p2p = overlapped("overlap_p2p_comm", virtual if overlap is not None else get("model", "overlap_p2p_comm") is True)
    granularity = get("model", "recompute_granularity")
    recompute = choice(granularity, "recompute_granularity", {None: "none", "selective": "selective",
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
    cp_algo = choice(get("model", "cp_comm_type") or "p2p", "cp_comm_type", {"p2p": "ring", "a2a": "ulysses"})
    fields = {"framework": "megatron-bridge",  # priced as Megatron-Core runs it (explorer/strategy/frameworks.py)
              "dp": dp, "tp": tp, "pp": pp, "cp": cp, "cp_algo": cp_algo,
              "micro_batch": get("train", "micro_batch_size"), "global_batch": get("train", "global_batch_size"),
              "sequence_parallel": flag(get("model", "sequence_parallel", False), "sequence_parallel"),
              "zero": zero, "overlap_dp": grad_reduce or zero >= 2,
              "overlap_param_gather": param_gather and zero in (1, 2),
              "overlap_tp": overlapped("tp_comm_overlap", False) and tp > 1,
              "dtype": dtype, "grad_dtype": grad, "recompute": recompute,
              "ep": whole(get("model", "expert_model_parallel_size", 1), "expert_model_parallel_size")}
    if recompute == "selective" and modules:
        fields["recompute_modules"] = tuple(modules)
    if dtype == "fp8":
        fields["fp8_recipe"] = BRIDGE_FP8[precision]
        # FP8 parameters: the file's, else its recipe's (BRIDGE_FP8_PARAMS) where the distributed optimizer gathers them
        gather = got.get(("mixed_precision", "fp8_param_gather"), BRIDGE_FP8_PARAMS[precision] and zero >= 1)
        fields["fp8_param_gather"] = flag(gather, "fp8_param_gather")
    moments = {get("optimizer", "exp_avg_dtype", "torch.float32"), get("optimizer", "exp_avg_sq_dtype", "torch.float32")}
    if get("optimizer", "use_precision_aware_optimizer") is True and moments != {"torch.float32"}:
        fields["adam_moments"] = choice(moments.pop() if len(moments) == 1 else "", "cfg.optimizer.exp_avg_dtype",
                                         {"torch.bfloat16": "bf16"})
    etp = get("model", "expert_tensor_parallel_size")
    if etp is not None and etp != tp:
        fields["expert_tp"] = whole(etp, "expert_tensor_parallel_size")
    if virtual:
        fields.update(schedule="interleaved", chunks=vp, overlap_p2p=p2p)
    fields.update(_bridge_host(get, overlapped, bool(get("model", "num_moe_experts"))))
    mtp = get("model", "mtp_num_layers")
    if mtp:
        model["mtp_layers"] = whole(mtp, "mtp_num_layers")
    layout = get("model", "pipeline_model_parallel_layout")
    first, last = get("model", "num_layers_in_first_pipeline_stage"), get("model", "num_layers_in_last_pipeline_stage")
    if layout is not None:          # as the Megatron-LM importer reads --pipeline-model-parallel-layout
        if not isinstance(layout, str):
            raise ExplorerError("cfg.model.pipeline_model_parallel_layout must be a string")
        virtual = len(parse_layout(layout).stages)
        if virtual % pp:
            raise ExplorerError(f"cfg.model.pipeline_model_parallel_layout has {virtual} virtual stages, not a "
                                f"multiple of the {pp} pipeline stages")
        fields.update(layout_fields(layout, pp, model.get("mtp_layers", 0), model["layers"], first, last))
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
    impl = choice(get("model", "cuda_graph_impl") or "none", "cuda_graph_impl",
                   {"none": "none", "local": "layer", "transformer_engine": "layer", "full_iteration": "full"})
    scope = get("model", "cuda_graph_scope") or []
    if impl == "layer" and isinstance(scope, list) and sorted(scope) == ["moe_preprocess", "moe_router"]:
        impl = "router"
    if impl != "none":
        out["cuda_graphs"] = impl
    if moe:
        kind = choice(get("model", "moe_token_dispatcher_type") or "allgather", "moe_token_dispatcher_type",
                       {"alltoall": "alltoall", "allgather": "allgather", "flex": "flex"})
        if kind == "flex":
            kind = choice(get("model", "moe_flex_dispatcher_backend") or "deepep", "moe_flex_dispatcher_backend",
                           {"deepep": "deepep", "hybridep": "hybridep"})
        if kind != "alltoall":
            out["moe_dispatcher"] = kind
    if overlapped("overlap_moe_expert_parallel_comm", False):
        out["overlap_ep"] = True
    return out


BRIDGE_MOE = {"num_moe_experts": "experts", "moe_router_topk": "experts_per_token",
              "moe_ffn_hidden_size": "moe_ffn_hidden", "moe_shared_expert_intermediate_size": "shared_ffn_hidden",
              "kv_channels": "head_dim"}


def _bridge_attention(get, model: dict) -> None:
    """gpt-oss's fields from cfg.model as explorer/codegen/megatron_bridge.py writes them (Megatron-Bridge
    gpt_oss_bridge.py at v0.4.1; Megatron-Core TransformerConfig window_size (w - 1, 0), window_attn_skip_freq,
    softmax_type, add_bias_linear), as the Megatron-LM reader reads their flags (megatron_moe.attention_fields)."""
    window = get("model", "window_size")
    if window is not None:
        pair = tuple(window) if isinstance(window, (tuple, list)) and len(window) == 2 else (None, None)
        model["sliding_window_tokens"] = window_keys(*pair, "window_size", window)
    freq = get("model", "window_attn_skip_freq")
    if freq is not None:
        model["window_attn_skip_freq"] = skip_freq(freq, window is not None, "window_attn_skip_freq", freq)
    softmax = get("model", "softmax_type")
    if softmax is not None and choice(softmax, "softmax_type", ("vanilla", "learnable")) == "learnable":
        model["attention_sinks"] = True
    if get("model", "qk_layernorm") is not None and flag(get("model", "qk_layernorm"), "qk_layernorm"):
        model["qk_layernorm"] = True
    act = get("model", "activation_func")
    if act is not None and choice(act, "activation_func", ("F.silu", "quick_gelu")) == "quick_gelu":
        model["quick_geglu"] = True
    base = get("model", "rotary_base")
    if base is not None and model.get("family") == "llama":
        model["rotary_base"] = whole_base(base, "rotary_base")
    offset = get("model", "glu_linear_offset")
    if offset:
        model["glu_linear_offset"] = number(offset, "glu_linear_offset")
    clamp = get("model", "activation_func_clamp_value")
    if clamp is not None:
        model["glu_clamp"] = number(clamp, "activation_func_clamp_value")
    model.update(yarn_field(get("model", "position_embedding_type"), get("model", "yarn_rotary_scaling_factor"),
                            "yarn_rotary_scaling_factor"))
    if model.get("family") == "llama" and get("model", "add_bias_linear") is not None and \
            flag(get("model", "add_bias_linear"), "add_bias_linear"):
        model["linear_bias"] = True


def _bridge_moe(get, model: dict) -> None:
    for key, name in BRIDGE_MOE.items():
        if get("model", key) is not None:
            model[name] = whole(get("model", key), key)
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
