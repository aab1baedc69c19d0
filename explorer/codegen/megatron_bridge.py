"""Megatron-Bridge recipe overrides (Python) for a (model, strategy), and the reader back (`ast` only).

Written for Megatron-Bridge (NVIDIA-NeMo/Megatron-Bridge at commit 067f987d, 2026-08-22), in the form of its
flat performance recipes (src/megatron/bridge/perf_recipes/llama/h100/llama3.py: a function that builds a
ConfigContainer, overrides its fields and returns it). The names used, all read from that commit:
* src/megatron/bridge/recipes/common.py `_pretrain_common()` (the base every pre-training recipe starts from,
  as recipes/gpt/h100/gpt3_175b.py does) and models/gpt_provider.py `GPTModelProvider` (Megatron-Core's
  TransformerConfig and ModelParallelConfig: tensor_model_parallel_size, pipeline_model_parallel_size,
  virtual_pipeline_model_parallel_size, context_parallel_size, cp_comm_type, expert_model_parallel_size,
  expert_tensor_parallel_size, sequence_parallel, num_layers_in_first/last_pipeline_stage,
  recompute_granularity/method/num_layers/modules, the shape, the MoE fields, attention_backend);
* training/config.py ConfigContainer: train.micro_batch_size / global_batch_size, dataset.seq_length (asserted
  equal to model.seq_length), ddp.* and optimizer.* (use_distributed_optimizer, overlap_param_gather: both are
  written, _validate_and_sync_distributed_optimizer_settings turns both on when either is), Megatron-FSDP
  (ddp.use_megatron_fsdp, data_parallel_sharding_strategy, checkpoint.ckpt_format "fsdp_dtensor",
  CUDA_DEVICE_MAX_CONNECTIONS not 1);
* training/mixed_precision.py: bf16_mixed (grad_reduce_in_fp32=True by default), fp16_mixed,
  the FP8 recipe of Strategy.fp8_recipe (FP8_PRECISION: bf16_with_fp8_delayed_scaling_mixed,
  bf16_with_fp8_current_scaling_mixed -- the perf recipes' "fp8_cs" --, bf16_with_fp8_subchannel_scaling_mixed,
  bf16_with_mxfp8_mixed; first_last_layers_bf16 written False: the explorer costs every layer in FP8;
  fp8_param_gather written as Strategy.fp8_param_gather, and with MXFP8 reuse_grad_buf_for_mxfp8_param_ag with it,
  as bf16_with_mxfp8_mixed pairs them and MixedPrecisionConfig.finalize asserts); its setup() copies
  grad_reduce_in_fp32 onto the DDP config, so that is where the gradient reduction dtype is written;
* training/comm_overlap.py CommOverlapConfig: without values of its own it turns overlap_grad_reduce and
  overlap_param_gather on whenever d > 1 with the distributed optimizer, and overlap_p2p_comm on with a virtual
  pipeline (batch_p2p_comm otherwise): every one is written as costed.

The refusals are Megatron-Core's (explorer.codegen.megatron._check: Megatron-Bridge trains with it), plus:
decoder-only GPT/Llama models only (GPTModelProvider), no multi-latent attention (that needs an
MLA provider), and a world size: Megatron-Bridge derives d = world size / (t cp p)
(ConfigContainer.get_data_parallel_size), written as WORLD_SIZE for the launcher and the reader.
"""
from __future__ import annotations

import ast

from explorer.codegen.common import megatron_layout_text, refuse, stage_counts, title
from explorer.codegen.megatron import FSDP_DTYPE, FSDP_SHARDING, _check, _virtual, attention_backend_of, llama_style
from explorer.codegen.megatron_moe import DISPATCHER_TYPE, GRAPH_IMPL, YARN_FIXED, graph_modules, layer_pattern
from explorer.io.quoting import comment_text, python_string
from explorer.schedules import chunked

NAME = "Megatron-Bridge"
COMMIT = "067f987df03b8355b03192d88d70f1709fedf51a"
SOURCE = f"NVIDIA-NeMo/Megatron-Bridge at {COMMIT[:8]} (2026-08-22)"
FUNCTION = "explorer_pretrain_config"
PRECISION = {"bf16": "bf16_mixed", "fp16": "fp16_mixed", "fp8": "bf16_with_fp8_current_scaling_mixed",
             "fp32": "MixedPrecisionConfig"}
"""Training dtype -> the mixed-precision recipe (training/mixed_precision.py) the file calls."""
FP8_PRECISION = {"delayed": "bf16_with_fp8_delayed_scaling_mixed", "tensorwise": "bf16_with_fp8_current_scaling_mixed",
                 "blockwise": "bf16_with_fp8_subchannel_scaling_mixed", "mxfp8": "bf16_with_mxfp8_mixed"}
"""Strategy.fp8_recipe -> its mixed-precision recipe (training/mixed_precision.py: each sets fp8_recipe
'delayed', 'tensorwise', 'blockwise', 'mxfp8'; explorer/hardware/precision.py)."""
TORCH_DTYPE = {"bf16": "torch.bfloat16", "fp16": "torch.float16", "fp32": "torch.float32"}


def _check_bridge(model, strategy) -> None:
    _check(model, strategy, NAME)
    if model.family not in ("gpt", "llama"):
        raise refuse(NAME, f"its GPTModelProvider builds decoder-only GPT and Llama models; {model.name} is a "
                           f"{model.family} model")
    if model.kv_lora_rank:
        raise refuse(NAME, "multi-latent attention: GPTModelProvider has no latent ranks (DeepSeek's MLA needs "
                           "an MLA model provider)")


def _moe_list(model) -> str:
    """moe_layer_freq as a Python list expression: 1, or [0] * n + [1] * m."""
    pattern = layer_pattern(model)
    return pattern if pattern == "1" else pattern.strip("()").replace("]*", "] * ").replace("+", " + ")


def _model_fields(model, s) -> list:
    """(field, Python source) of cfg.model, in the order written."""
    out = [("num_layers", model.layers), ("hidden_size", model.hidden), ("num_attention_heads", model.heads),
           ("num_query_groups", model.kv_heads), ("ffn_hidden_size", model.ffn_hidden),
           ("seq_length", model.seq_len), ("vocab_size", model.vocab)]
    if llama_style(model):   # as Megatron-LM's exporter: RMSNorm, SwiGLU, rotary, no biases, untied, no dropout
        act = "quick_gelu" if getattr(model, "quick_geglu", False) else "F.silu"    # gpt_oss_bridge.py: quick_gelu
        out += [("normalization", '"RMSNorm"'), ("activation_func", act), ("gated_linear_unit", True),
                ("position_embedding_type", '"yarn"' if getattr(model, "yarn_scaling_factor", 0) else '"rope"'),
                ("add_bias_linear", bool(getattr(model, "linear_bias", False))),
                ("share_embeddings_and_output_weights", False), ("hidden_dropout", 0.0),
                ("attention_dropout", 0.0)]
    out.append(("attention_backend", f"AttnBackend.{attention_backend_of(model)}"))   # as Megatron-LM's
    if model.head_dim:
        out.append(("kv_channels", model.head_dim))
    if getattr(model, "sliding_window_tokens", 0):   # gpt-oss (Megatron-Bridge gpt_oss_bridge.py at v0.4.1)
        out.append(("window_size", f"({model.sliding_window_tokens - 1}, 0)"))
        if model.window_attn_skip_freq:
            out.append(("window_attn_skip_freq", model.window_attn_skip_freq))
    if getattr(model, "attention_sinks", False):
        out.append(("softmax_type", '"learnable"'))
    if getattr(model, "glu_linear_offset", 0):         # gpt_oss_bridge.py: glu_linear_offset = 1.0
        out.append(("glu_linear_offset", float(model.glu_linear_offset)))
    if getattr(model, "glu_clamp", 0):                 # gpt_oss_bridge.py: the experts' clamp
        out.append(("activation_func_clamp_value", float(model.glu_clamp)))
    if getattr(model, "rotary_base", 0):               # GPTModelProvider.rotary_base (default 10000)
        out.append(("rotary_base", int(model.rotary_base)))
    if getattr(model, "yarn_scaling_factor", 0):       # gpt_oss_bridge.py: yarn_rotary_scaling_factor = 32.0
        out.append(("yarn_rotary_scaling_factor", float(model.yarn_scaling_factor)))
        out += [(f"yarn_{name}", value) for name, value in YARN_FIXED]   # the others, as gpt_oss_bridge.py
    if getattr(model, "qk_layernorm", False):          # qwen3_moe_bridge.py: qk_layernorm=True
        out.append(("qk_layernorm", True))
    if model.is_moe:
        out += [("num_moe_experts", model.experts), ("moe_router_topk", model.experts_per_token),
                ("moe_ffn_hidden_size", model.moe_ffn_hidden), ("moe_layer_freq", _moe_list(model)),
                ("moe_token_dispatcher_type", f'"{DISPATCHER_TYPE[s.moe_dispatcher]}"'), ("moe_grouped_gemm", True)]
        if DISPATCHER_TYPE[s.moe_dispatcher] == "flex":     # perf_recipes/qwen/gb200/qwen3_moe.py writes the pair
            out.append(("moe_flex_dispatcher_backend", f'"{s.moe_dispatcher}"'))
        if model.shared_ffn_hidden:
            out.append(("moe_shared_expert_intermediate_size", model.shared_ffn_hidden))
        if model.moe_capacity_factor:
            out += [("moe_expert_capacity_factor", model.moe_capacity_factor),
                    ("moe_pad_expert_input_to_capacity", True)]
        elif not model.expert_load_share:
            out.append(("moe_router_force_load_balancing", True))
    out += [("tensor_model_parallel_size", s.tp), ("pipeline_model_parallel_size", s.pp),
            ("virtual_pipeline_model_parallel_size", s.chunks if _virtual(s) else None),
            ("context_parallel_size", s.cp), ("sequence_parallel", s.sequence_parallel),
            ("expert_model_parallel_size", s.ep)]
    if model.is_moe:
        out.append(("expert_tensor_parallel_size", s.etp))
    if s.cp > 1:
        out.append(("cp_comm_type", '"p2p"' if s.cp_algo == "ring" else '"a2a"'))
    counts, layout = stage_counts(model, s), megatron_layout_text(model, s)
    if layout:         # TransformerConfig.pipeline_model_parallel_layout (Megatron-Core parses the string)
        out.append(("pipeline_model_parallel_layout", repr(layout)))
    elif s.pp > 1 and len(set(counts)) > 1:
        out += [("num_layers_in_first_pipeline_stage", counts[0]),
                ("num_layers_in_last_pipeline_stage", counts[-1])]
    if model.mtp_layers:   # TransformerConfig.mtp_num_layers (DeepSeek-V3's recipes set 1)
        out.append(("mtp_num_layers", model.mtp_layers))
    if s.cuda_graphs != "none":   # TransformerConfig.cuda_graph_impl / cuda_graph_scope, as the perf recipes set them
        scope = "[]" if s.cuda_graphs == "full" else repr(graph_modules(model, s.cuda_graphs))
        out += [("cuda_graph_impl", f'"{GRAPH_IMPL[s.cuda_graphs]}"'), ("cuda_graph_scope", scope),
                ("use_te_rng_tracker", True)]    # ConfigContainer turns rng.te_rng_tracker on with it
    granularity = {"none": None, "selective": '"selective"', "full": '"full"'}[s.recompute]
    out.append(("recompute_granularity", granularity))
    if s.recompute == "selective":         # the attention core (Korthikanti et al.) by default, else the modules chosen
        out.append(("recompute_modules", repr(list(s.recompute_modules or ("core_attn",))).replace("'", '"')))
    elif s.recompute == "full":
        out += [("recompute_method", '"uniform"'), ("recompute_num_layers", 1)]
    return out


def _source(value) -> str:
    return str(value) if not isinstance(value, str) else value


def megatron_bridge_recipe(model, strategy) -> str:
    """The recipe file: a function `explorer_pretrain_config()` returning the ConfigContainer."""
    _check_bridge(model, strategy)
    s = strategy
    precision = FP8_PRECISION[s.fp8_recipe] if s.dtype == "fp8" else PRECISION[s.dtype]
    fp32_grads = s.grad_dtype == "fp32"
    lines = ["# -*- coding: utf-8 -*-",     # first: a name on line 1 or 2 could otherwise be read as a PEP 263 cookie
             f"# Megatron-Bridge recipe for {title(model, s)}",
             comment_text(f"# Megatron-Bridge ({SOURCE}): a flat performance recipe like "
                          "src/megatron/bridge/perf_recipes/llama/h100/llama3.py; run it on WORLD_SIZE GPUs with "
                          f"scripts/training/train.sh --recipe {FUNCTION} (the function must be importable)", 1000),
             "import torch",
             "import torch.nn.functional as F",
             *(["from megatron.core.fusions.fused_bias_geglu import quick_gelu"]       # gpt-oss' activation only
               if getattr(model, "quick_geglu", False) else []),
             "from megatron.core.transformer.enums import AttnBackend",
             "",
             "from megatron.bridge.models.gpt_provider import GPTModelProvider",
             "from megatron.bridge.recipes.common import _pretrain_common",
             "from megatron.bridge.training.comm_overlap import CommOverlapConfig",
             "from megatron.bridge.training.config import ConfigContainer",
             f"from megatron.bridge.training.mixed_precision import {precision}",
             "",
             f"WORLD_SIZE = {s.devices}  # d {s.dp} x t {s.tp} x cp {s.cp} x p {s.pp}: Megatron-Bridge derives d "
             "= world size / (t cp p)",
             f"MODEL_NAME = {python_string(model.name)}",
             "",
             "",
             f"def {FUNCTION}() -> ConfigContainer:",
             "    cfg = _pretrain_common()",
             "    cfg.model = GPTModelProvider()"]
    body = [("model", name, value) for name, value in _model_fields(model, s)]
    body += [("tokenizer", "tokenizer_type", '"NullTokenizer"'), ("tokenizer", "tokenizer_model", None),
             ("tokenizer", "vocab_size", model.vocab), ("dataset", "seq_length", model.seq_len),
             ("train", "micro_batch_size", s.micro_batch), ("train", "global_batch_size", s.global_batch)]
    lines += [f"    cfg.{section}.{name} = {_source(value)}" for section, name, value in body]
    if s.dtype == "fp32":
        lines.append("    cfg.mixed_precision = MixedPrecisionConfig(fp32=True, params_dtype=torch.float32, "
                     "pipeline_dtype=torch.float32, autocast_enabled=False)")
    else:
        lines.append(f"    cfg.mixed_precision = {precision}()")
    if s.dtype == "fp8":   # every layer in FP8, parameters gathered in FP8 or bf16 as costed (fp8_param_gather)
        lines += ["    cfg.mixed_precision.first_last_layers_bf16 = False",
                  "    cfg.mixed_precision.num_layers_at_start_in_bf16 = 0",
                  "    cfg.mixed_precision.num_layers_at_end_in_bf16 = 0",
                  f"    cfg.mixed_precision.fp8_param_gather = {s.fp8_param_gather}"]
        if s.fp8_recipe == "mxfp8":   # bf16_with_mxfp8_mixed reuses the gradient buffer for the FP8 gather
            lines.append(f"    cfg.mixed_precision.reuse_grad_buf_for_mxfp8_param_ag = {s.fp8_param_gather}")
    lines.append(f"    cfg.mixed_precision.grad_reduce_in_fp32 = {fp32_grads}   # setup() copies it to cfg.ddp")
    dist_opt = s.zero >= 1
    param_gather = s.overlap_param_gather and s.zero in (1, 2)
    ddp = [("use_distributed_optimizer", dist_opt), ("overlap_grad_reduce", s.overlap_dp),
           ("overlap_param_gather", param_gather), ("grad_reduce_in_fp32", fp32_grads),
           ("use_megatron_fsdp", s.zero >= 2),
           ("data_parallel_sharding_strategy", python_string(FSDP_SHARDING.get(s.zero, "no_shard")))]
    if s.zero >= 2:
        dtype = "torch.float32" if fp32_grads else TORCH_DTYPE[FSDP_DTYPE[s.dtype]]
        ddp += [("megatron_fsdp_main_grads_dtype", dtype), ("megatron_fsdp_grad_comm_dtype", dtype)]
    lines += [f"    cfg.ddp.{name} = {_source(value)}" for name, value in ddp]
    lines += [f"    cfg.optimizer.use_distributed_optimizer = {dist_opt}",
              f"    cfg.optimizer.overlap_param_gather = {param_gather}"]
    if s.adam_moments != "fp32":   # Megatron-Core OptimizerConfig: TE's FusedAdam keeps the moments in bf16
        lines += ["    cfg.optimizer.use_precision_aware_optimizer = True",
                  f"    cfg.optimizer.exp_avg_dtype = {TORCH_DTYPE[s.adam_moments]}",
                  f"    cfg.optimizer.exp_avg_sq_dtype = {TORCH_DTYPE[s.adam_moments]}"]
    if s.zero >= 2:
        lines.append('    cfg.checkpoint.ckpt_format = "fsdp_dtensor"')
    overlap_p2p = _virtual(s) and s.overlap_p2p
    ep_overlap = (", overlap_moe_expert_parallel_comm=True, delay_wgrad_compute=True"   # moe_a2a_overlap's pair
                  if s.overlap_ep else "")
    lines.append(f"    cfg.comm_overlap = CommOverlapConfig(tp_comm_overlap={s.overlap_tp}, "
                 f"overlap_p2p_comm={overlap_p2p}, batch_p2p_comm={s.pp > 1 and not overlap_p2p}, "
                 f"overlap_grad_reduce={s.overlap_dp}, overlap_param_gather={param_gather}{ep_overlap})")
    if s.zero >= 2:    # _validate_and_apply_megatron_fsdp_v1_configs asserts it is not 1
        lines.append('    cfg.env_vars["CUDA_DEVICE_MAX_CONNECTIONS"] = 8')
    elif s.tp > 1 or s.cp > 1:
        lines.append('    cfg.env_vars["CUDA_DEVICE_MAX_CONNECTIONS"] = 1')
    lines.append("    return cfg")
    return "\n".join(lines) + "\n"


# ---- differences: what Megatron-Bridge would do on its own --------------------------------------------

def notes(model, strategy) -> list:
    """What Megatron-Bridge would do differently from what was costed, and how the file pins it."""
    s = strategy
    out = [f"Megatron-Bridge has no data-parallel field: d = world size / (t cp p); launch on WORLD_SIZE = "
           f"{s.devices} GPUs."]
    if s.dtype in ("bf16", "fp8"):
        out.append("bf16_mixed reduces gradients in fp32 (grad_reduce_in_fp32=True): written "
                   f"{s.grad_dtype == 'fp32'}, costed in {'fp32' if s.grad_dtype == 'fp32' else 'bf16'}.")
    if s.dtype == "fp8":
        out.append(f"Its FP8 recipe ({FP8_PRECISION[s.fp8_recipe]}) may keep the first and last layers in bf16 and "
                   "gathers parameters in FP8: both turned off, as the explorer costs every layer in FP8 with bf16 "
                   "gathers.")
    if s.dp > 1:
        out.append("CommOverlapConfig turns on overlap_grad_reduce and overlap_param_gather with d > 1 and the "
                   f"distributed optimizer: written {s.overlap_dp} and "
                   f"{s.overlap_param_gather and s.zero in (1, 2)}, as costed.")
    if _virtual(s):
        out.append(f"A virtual pipeline overlaps its sends by default: written overlap_p2p_comm={s.overlap_p2p}.")
    out.append("_pretrain_common() starts from the distributed optimizer with both overlaps on; every one is "
               "overridden as costed.")
    out.append(f"GPTModelProvider pads the vocabulary to a multiple of 128 x t (make_vocab_size_divisible_by) "
               f"only with should_pad_vocab; the explorer costs V = {model.vocab}.")
    return out


# ---- the reader: a recipe file back into (model fields, Strategy), with ast only ---------------------------

class RecipeError(ValueError):
    """A recipe line the reader does not take (turned into one ExplorerError line by explorer.codegen.imports)."""


def _value(node):
    """The value of a literal node: numbers, strings, True/False/None, lists, a list times an int, lists added,
    and dotted names (F.silu, torch.float32, AttnBackend.flash) as their text. Nothing is evaluated."""
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float, str, bool, type(None))):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant) \
            and isinstance(node.operand.value, (int, float)) and not isinstance(node.operand.value, bool):
        return -node.operand.value
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_value(x) for x in node.elts]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _value(node.left), _value(node.right)
        if isinstance(left, list) and isinstance(right, list):
            return left + right
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
        items, count = _value(node.left), _value(node.right)
        if isinstance(items, list) and isinstance(count, int) and not isinstance(count, bool) and \
                0 <= count * max(1, len(items)) <= 1 << 12:
            return items * count
    dotted = _dotted(node)
    if dotted:
        return dotted
    raise RecipeError(f"line {getattr(node, 'lineno', '?')}: {ast.dump(node)[:60]} is not a literal")


def _dotted(node) -> str:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return ".".join([node.id] + parts[::-1])
    return ""


def read_recipe(tree: ast.Module) -> dict:
    """{"world_size", "model_name", "fields": {(section, field): value}, "precision", "comm_overlap"} from a
    parsed recipe file: module-level WORLD_SIZE / MODEL_NAME, and every `cfg.<section>.<field> = <literal>`,
    `cfg.mixed_precision = <recipe>()` and `cfg.comm_overlap = CommOverlapConfig(...)` in its functions."""
    out = {"world_size": None, "model_name": None, "fields": {}, "precision": None, "precision_kw": {},
           "comm_overlap": None}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            if name in ("WORLD_SIZE", "MODEL_NAME"):
                out["world_size" if name == "WORLD_SIZE" else "model_name"] = _value(node.value)
    for fn in (n for n in tree.body if isinstance(n, ast.FunctionDef)):
        for node in ast.walk(fn):
            if not (isinstance(node, ast.Assign) and len(node.targets) == 1):
                continue
            target = _dotted(node.targets[0]).split(".")
            if len(target) == 3 and target[0] == "cfg":
                out["fields"][(target[1], target[2])] = _value(node.value)
            elif len(target) == 2 and target[0] == "cfg" and target[1] in ("mixed_precision", "comm_overlap"):
                call = node.value
                if not isinstance(call, ast.Call) or call.args:
                    raise RecipeError(f"line {node.lineno}: cfg.{target[1]} must be set by a call with keywords")
                keywords = {kw.arg: _value(kw.value) for kw in call.keywords if kw.arg}
                if target[1] == "mixed_precision":
                    out["precision"], out["precision_kw"] = _dotted(call.func), keywords
                else:
                    out["comm_overlap"] = keywords
    return out
