"""Megatron-LM's Mixture-of-Experts and attention-variant arguments (issue 11), both ways.

Flag names and meanings: Megatron-LM `megatron/training/arguments.py` (_add_moe_args,
_add_mla_args, --kv-channels) and Megatron-Core `TransformerConfig`: --num-experts,
--moe-router-topk, --moe-ffn-hidden-size, --moe-shared-expert-intermediate-size (all shared
experts together), --moe-layer-freq (an int k: every k-th layer, or a Python list of 0/1 per
layer, e.g. "([0]*3+[1]*58)" for DeepSeek-V3), --expert-model-parallel-size,
--expert-tensor-parallel-size, --moe-token-dispatcher-type alltoall, --moe-grouped-gemm,
--moe-expert-capacity-factor with --moe-pad-expert-input-to-capacity, --moe-router-force-load-balancing
(the benchmarks' force-balanced routing), --multi-latent-attention with --q-lora-rank,
--kv-lora-rank, --qk-head-dim, --qk-pos-emb-head-dim, --v-head-dim.

The host side and the dispatchers (issue 27 item 5; flags of NVIDIA/Megatron-LM d98e8a64, the parser's table
tests/data/frameworks/megatron_arguments.json): --moe-token-dispatcher-type alltoall|allgather|flex with
--moe-flex-dispatcher-backend deepep|hybridep (Strategy.moe_dispatcher); --cuda-graph-impl transformer_engine with
--cuda-graph-modules (Strategy.cuda_graphs 'router': moe_router moe_preprocess; 'layer': attn mlp and, for a
dropless MoE layer, moe_router moe_preprocess, for a token-drop one moe: the whole layer, explorer/model/kernels.py)
or --cuda-graph-impl full_iteration ('full', with --no-check-for-nan-in-loss-and-grad, which validate_args asserts
for it; the older --enable-cuda-graph / --external-cuda-graph are read back as 'layer');
--overlap-moe-expert-parallel-comm with --delay-wgrad-compute (Strategy.overlap_ep, the pair Megatron-Bridge's
moe_a2a_overlap sets).
"""
from __future__ import annotations

from explorer.codegen.import_fields import number
from explorer.errors import ExplorerError
from explorer.model.spec import MAX_ROTARY_BASE, MAX_YARN_FACTOR

INT_FLAGS = {"--num-experts": "experts", "--moe-router-topk": "experts_per_token",
             "--moe-ffn-hidden-size": "moe_ffn_hidden", "--moe-shared-expert-intermediate-size": "shared_ffn_hidden",
             "--kv-channels": "head_dim", "--q-lora-rank": "q_lora_rank", "--kv-lora-rank": "kv_lora_rank",
             "--qk-head-dim": "qk_nope_head_dim", "--qk-pos-emb-head-dim": "qk_rope_head_dim",
             "--v-head-dim": "v_head_dim"}


def layer_pattern(model) -> str:
    """--moe-layer-freq: 1 when every layer is MoE, else the per-layer 0/1 list as runs."""
    flags = [int(model.is_moe_layer(i)) for i in range(model.layers)]
    if all(flags):
        return "1"
    runs, out = [], []
    for x in flags:
        if runs and runs[-1][0] == x:
            runs[-1][1] += 1
        else:
            runs.append([x, 1])
    out = "+".join(f"[{x}]*{n}" for x, n in runs)
    return f"({out})"    # shell quoting: megatron_args quotes every word


YARN_FIXED = (("original_max_position_embeddings", 4096), ("beta_fast", 32.0), ("beta_slow", 1.0),
              ("correction_range_round_to_int", False))
"""YaRN's other settings, as Megatron-Bridge's gpt-oss bridge sets them (src/megatron/bridge/models/gpt_oss/
gpt_oss_bridge.py at v0.4.1: yarn_original_max_position_embeddings 4096, yarn_beta_fast 32.0, yarn_beta_slow 1.0,
yarn_correction_range_round_to_int False): they shape the frequencies, not the cost, and are no model field; both
exporters write them because Megatron-Core's YarnRotaryEmbedding needs every one (None fails in
_yarn_find_correction_range)."""


def yarn_flags(factor: float) -> list:
    """Megatron-LM's YaRN flags: --rotary-scaling-factor and YARN_FIXED (argument_utils.py
    _apply_yarn_config_from_args maps them to TransformerConfig.yarn_*: Megatron-LM core_v0.19.0 on; an older
    Megatron-LM has no --yarn-* flags)."""
    out = [("--rotary-scaling-factor", float(factor))]
    for name, value in YARN_FIXED:
        flag = "--yarn-" + name.replace("_", "-")
        out.append((flag, value) if not isinstance(value, bool) else (("--" if value else "--no-") + flag[2:],))
    return out


def moe_flags(model, strategy) -> list:
    """The MoE / attention flags of (model, strategy), as (flag, value...) tuples."""
    out = []
    if model.head_dim and not model.kv_lora_rank:
        out.append(("--kv-channels", model.head_dim))
    if model.kv_lora_rank:
        out += [("--multi-latent-attention",), ("--kv-lora-rank", model.kv_lora_rank),
                ("--qk-head-dim", model.qk_nope_head_dim), ("--qk-pos-emb-head-dim", model.qk_rope_head_dim),
                ("--v-head-dim", model.v_head_dim)]
        if model.q_lora_rank:
            out.append(("--q-lora-rank", model.q_lora_rank))
    if getattr(model, "sliding_window_tokens", 0):     # gpt-oss: TE window_size (w - 1, 0) on windowed layers
        out.append(("--window-size", f"{model.sliding_window_tokens - 1},0"))
        if model.window_attn_skip_freq:
            out.append(("--window-attn-skip-freq", model.window_attn_skip_freq))
    if getattr(model, "attention_sinks", False):
        out.append(("--softmax-type", "learnable"))
    if getattr(model, "qk_layernorm", False):         # Qwen3 (TransformerConfig.qk_layernorm, a generated flag)
        out.append(("--qk-layernorm",))
    if getattr(model, "glu_linear_offset", 0):        # gpt-oss' quick-GEGLU (TransformerConfig.glu_linear_offset)
        out.append(("--glu-linear-offset", float(model.glu_linear_offset)))
    if getattr(model, "glu_clamp", 0):                # gpt-oss (TransformerConfig.activation_func_clamp_value)
        out.append(("--activation-func-clamp-value", float(model.glu_clamp)))
    if getattr(model, "rotary_base", 0):              # RoPE's base (Llama 3: 500000); Megatron-LM's default 10000
        out.append(("--rotary-base", int(model.rotary_base)))
    if getattr(model, "yarn_scaling_factor", 0):      # gpt-oss: with --position-embedding-type yarn (megatron.py)
        out += yarn_flags(model.yarn_scaling_factor)
    if not model.is_moe:
        return out
    out += [("--num-experts", model.experts), ("--moe-router-topk", model.experts_per_token),
            ("--moe-ffn-hidden-size", model.moe_ffn_hidden), ("--moe-layer-freq", layer_pattern(model)),
            ("--expert-tensor-parallel-size", strategy.etp), *dispatcher_flags(strategy), ("--moe-grouped-gemm",)]
    if model.shared_ffn_hidden:
        out.append(("--moe-shared-expert-intermediate-size", model.shared_ffn_hidden))
    if model.moe_capacity_factor:
        out += [("--moe-expert-capacity-factor", model.moe_capacity_factor), ("--moe-pad-expert-input-to-capacity",)]
    elif not model.expert_load_share:
        out.append(("--moe-router-force-load-balancing",))
    return out


DISPATCHER_TYPE = {"alltoall": "alltoall", "allgather": "allgather", "deepep": "flex", "hybridep": "flex"}
GRAPH_IMPL = {"router": "transformer_engine", "layer": "transformer_engine", "full": "full_iteration"}


def dispatcher_flags(strategy) -> list:
    """--moe-token-dispatcher-type (and the flex backend) of Strategy.moe_dispatcher; the EP overlap pair."""
    d = getattr(strategy, "moe_dispatcher", "alltoall")
    out = [("--moe-token-dispatcher-type", DISPATCHER_TYPE[d])]
    if DISPATCHER_TYPE[d] == "flex":
        out.append(("--moe-flex-dispatcher-backend", d))
    if getattr(strategy, "overlap_ep", False):
        out += [("--overlap-moe-expert-parallel-comm",), ("--delay-wgrad-compute",)]
    return out


def graph_modules(model, scope: str) -> list:
    """--cuda-graph-modules of a per-layer scope (module docstring)."""
    if scope == "router":
        return ["moe_router", "moe_preprocess"]
    out = ["attn", "mlp"] if not model.is_moe or model.first_dense_layers else ["attn"]
    if model.is_moe:
        out += ["moe"] if model.moe_capacity_factor else ["moe_router", "moe_preprocess"]
    return out


def graph_flags(model, strategy) -> list:
    """The CUDA graph flags of Strategy.cuda_graphs (none when eager)."""
    scope = getattr(strategy, "cuda_graphs", "none")
    if scope == "none":
        return []
    if scope == "full":
        return [("--cuda-graph-impl", "full_iteration"), ("--no-check-for-nan-in-loss-and-grad",)]
    return [("--cuda-graph-impl", GRAPH_IMPL[scope]), ("--cuda-graph-modules", *graph_modules(model, scope))]


def host_fields(args) -> dict:
    """Strategy.cuda_graphs, moe_dispatcher and overlap_ep from the flags graph_flags and dispatcher_flags write
    (the defaults left out); a scope the explorer does not model is refused in one line."""
    out = {}
    impl = args.cuda_graph_impl or "none"
    modules = set(args.cuda_graph_modules or ()) | set(args.cuda_graph_scope or ())   # --cuda-graph-scope: the old name
    if impl == "full_iteration" or "full_iteration" in modules:       # a deprecated scope value validate_args migrates
        out["cuda_graphs"] = "full"
    elif impl in ("transformer_engine", "local") or args.enable_cuda_graph or args.external_cuda_graph:
        out["cuda_graphs"] = "router" if modules == {"moe_router", "moe_preprocess"} else "layer"
    elif impl != "none":
        raise ExplorerError(f"--cuda-graph-impl {impl[:40]!r}: the explorer models none, local, transformer_engine "
                            "and full_iteration")
    if not args.num_experts:
        return out
    kind = "flex" if args.moe_enable_deepep else args.moe_token_dispatcher_type or "allgather"   # Megatron-LM's default
    if kind == "flex":
        backend = args.moe_flex_dispatcher_backend or "deepep"   # Megatron-LM's default backend
        if backend not in ("deepep", "hybridep"):
            raise ExplorerError(f"--moe-flex-dispatcher-backend {backend[:40]!r}: the explorer models deepep and "
                                "hybridep")
        out["moe_dispatcher"] = backend
    elif kind in ("alltoall", "allgather"):
        if kind != "alltoall":
            out["moe_dispatcher"] = kind
    else:
        raise ExplorerError(f"--moe-token-dispatcher-type {kind[:40]!r}: the explorer models alltoall, allgather "
                            "and flex")
    if args.overlap_moe_expert_parallel_comm:
        out["overlap_ep"] = True
    return out


def add_arguments(parser) -> None:
    for flag in INT_FLAGS:
        parser.add_argument(flag, type=int)
    for flag in ("--expert-tensor-parallel-size",):
        parser.add_argument(flag, type=int)
    parser.add_argument("--moe-layer-freq")
    parser.add_argument("--moe-expert-capacity-factor", type=float)
    parser.add_argument("--multi-latent-attention", action="store_true")
    for flag in ("--moe-token-dispatcher-type", "--moe-flex-dispatcher-backend", "--cuda-graph-impl"):
        parser.add_argument(flag)
    for flag in ("--cuda-graph-modules", "--cuda-graph-scope"):
        parser.add_argument(flag, nargs="+")
    for flag in ("--moe-enable-deepep", "--overlap-moe-expert-parallel-comm", "--enable-cuda-graph",
                 "--external-cuda-graph", "--disable-bias-linear", "--qk-layernorm"):
        parser.add_argument(flag, action="store_true")
    for flag in ("--window-size", "--window-attn-skip-freq", "--softmax-type"):   # gpt-oss (moe_flags writes them)
        parser.add_argument(flag)
    parser.add_argument("--activation-func-clamp-value", type=float)
    parser.add_argument("--rotary-scaling-factor", type=float)
    parser.add_argument("--glu-linear-offset", type=float)
    parser.add_argument("--rotary-base")


def _first_dense(text: str, layers: int) -> int:
    """first_dense_layers from --moe-layer-freq: '1', or '([0]*n+[1]*m)' (the form moe_flags writes)."""
    text = (text or "1").strip().strip('"').strip("'")
    if text == "1":
        return 0
    body = text.removeprefix("(").removesuffix(")")
    runs = []
    for part in body.split("+"):
        head, _, count = part.partition("]*")
        value = head.removeprefix("[")
        if value not in ("0", "1") or not count.isdigit():
            raise ExplorerError(f"--moe-layer-freq {text[:40]!r}: the explorer reads 1 or ([0]*n+[1]*m)")
        runs.append((int(value), int(count)))
    if sum(n for _, n in runs) != layers or [v for v, _ in runs] not in ([1], [0, 1]):
        raise ExplorerError(f"--moe-layer-freq {text[:40]!r}: the explorer models dense layers first, then MoE "
                            f"layers, over the {layers} layers")
    return runs[0][1] if runs[0][0] == 0 else 0


def attention_fields(args) -> dict:
    """gpt-oss's ModelSpec fields from the flags moe_flags and megatron.py write (Megatron-Core TransformerConfig
    at d98e8a64: window_size, a (left, right) tuple read by arguments.py tuple_type, 'w-1,0' for a causal window
    of w keys; window_attn_skip_freq, an int or a list pattern -- the int only is read; softmax_type vanilla,
    off-by-one or learnable; add_bias_linear, on unless --disable-bias-linear). The biases are read only with
    --swiglu (the llama family, whose export writes --disable-bias-linear when the model has none); a value the
    explorer does not model is refused in one line naming the flag."""
    out = {}
    if args.window_size is not None:
        words = str(args.window_size).strip().strip("()").replace(" ", "").split(",")
        ok = len(words) == 2 and all(w.isdigit() and len(w) <= 9 for w in words)
        out["sliding_window_tokens"] = window_keys(int(words[0]) if ok else -1, int(words[1]) if ok else -1,
                                                   "--window-size", args.window_size)
    if args.window_attn_skip_freq is not None:
        freq = str(args.window_attn_skip_freq).strip()
        out["window_attn_skip_freq"] = skip_freq(int(freq) if freq.isdigit() and len(freq) <= 9 else 0,
                                                 args.window_size is not None, "--window-attn-skip-freq", freq)
    if args.softmax_type not in (None, "vanilla", "learnable"):
        raise ExplorerError(f"--softmax-type {str(args.softmax_type)[:40]!r}: the explorer models vanilla and "
                            "learnable (attention sinks)")
    if args.softmax_type == "learnable":
        out["attention_sinks"] = True
    if (args.swiglu or args.quick_geglu) and not args.disable_bias_linear:
        out["linear_bias"] = True
    if args.quick_geglu:
        out["quick_geglu"] = True
    if args.rotary_base is not None and (args.swiglu or args.quick_geglu):     # rotary positions: the llama family
        out["rotary_base"] = whole_base(args.rotary_base, "--rotary-base")
    if args.glu_linear_offset:
        out["glu_linear_offset"] = number(args.glu_linear_offset, "--glu-linear-offset")
    if args.qk_layernorm:
        out["qk_layernorm"] = True
    if args.activation_func_clamp_value is not None:
        out["glu_clamp"] = number(args.activation_func_clamp_value, "--activation-func-clamp-value")
    if not args.multi_latent_attention:     # latent attention's YaRN runs in its own path (ModelSpec refuses it)
        out.update(yarn_field(args.position_embedding_type, args.rotary_scaling_factor, "--rotary-scaling-factor"))
    return out


def whole_base(value, name: str) -> int:
    """RoPE's base from a flag or field (`name`): a whole number in MAX_ROTARY_BASE, else one line naming it."""
    text = str(value).strip()
    try:
        base = float(text)          # '500000', '5e5' and 500000.0 alike; exact below 2**53, and the bound is 1e9
    except ValueError:
        base = -1.0
    if not (base.is_integer() and 0 <= base <= MAX_ROTARY_BASE):
        raise ExplorerError(f"{name} must be RoPE's base, a whole number up to {MAX_ROTARY_BASE:,}, got {text[:40]!r}")
    return int(base)


def yarn_field(kind, factor, name: str) -> dict:
    """yarn_scaling_factor from a position embedding type and YaRN's scaling factor (`name`, the flag or field that
    gave it; absent: 1.0, Megatron-LM's --rotary-scaling-factor default): any 'yarn' runs the unfused RoPE, whatever
    its factor -- Megatron-LM turns the fusion off for every position embedding but rope (arguments.py at d98e8a64:
    "if args.position_embedding_type != 'rope': args.apply_rope_fusion = False"), Megatron-Bridge too
    (utils/fusions.py validate_rope_fusion_compatibility; explorer/model/graph/moe.py yarn_rope)."""
    if kind != "yarn":
        return {}
    value = 1.0 if factor is None else number(factor, name)
    if not 1 <= value <= MAX_YARN_FACTOR:
        raise ExplorerError(f"{name} must be YaRN's factor, a number from 1 to {MAX_YARN_FACTOR:g}, got {value!r}")
    return {"yarn_scaling_factor": value}


MAX_WINDOW = 1 << 24
"""The longest window read back (16M keys; the model's own check bounds it by its sequence length)."""


def window_keys(left, right, name: str, shown) -> int:
    """w from Megatron-Core's window_size (w - 1, 0), a causal window of w keys (TransformerConfig at d98e8a64),
    as both readers take it (the Megatron-LM flag and the Megatron-Bridge recipe's field): anything else, or w - 1
    past MAX_WINDOW, is refused in one line naming `name`."""
    if not (type(left) is int and type(right) is int and right == 0 and 0 <= left <= MAX_WINDOW):
        raise ExplorerError(f"{name} {str(shown)[:40]!r}: the explorer reads 'w-1,0' (a causal window of w keys, "
                            f"w - 1 up to {MAX_WINDOW:,})")
    return left + 1


def skip_freq(freq, has_window: bool, name: str, shown) -> int:
    """window_attn_skip_freq N (every Nth layer full attention), a whole number 1..MAX_WINDOW given with a window
    (both readers; Megatron-Core's list pattern is not read): anything else is refused in one line naming `name`."""
    if not (type(freq) is int and 0 < freq <= MAX_WINDOW and has_window):
        raise ExplorerError(f"{name} {str(shown)[:40]!r}: the explorer reads a whole number N >= 1 (every Nth layer "
                            "full attention), with a window size")
    return freq


def model_fields(args) -> dict:
    """The ModelSpec fields the MoE / attention flags give (the experts none for a dense model; attention_fields)."""
    out = {name: getattr(args, flag[2:].replace("-", "_")) for flag, name in INT_FLAGS.items()
           if getattr(args, flag[2:].replace("-", "_")) is not None}
    out.update(attention_fields(args))
    if not args.multi_latent_attention:
        for name in ("q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"):
            out.pop(name, None)
    if out.get("experts"):
        out["first_dense_layers"] = _first_dense(args.moe_layer_freq, args.num_layers)
        if args.moe_expert_capacity_factor:
            out["moe_capacity_factor"] = args.moe_expert_capacity_factor
    return out
