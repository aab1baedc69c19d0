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
"""
from __future__ import annotations

from explorer.errors import ExplorerError

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
    if not model.is_moe:
        return out
    out += [("--num-experts", model.experts), ("--moe-router-topk", model.experts_per_token),
            ("--moe-ffn-hidden-size", model.moe_ffn_hidden), ("--moe-layer-freq", layer_pattern(model)),
            ("--expert-tensor-parallel-size", strategy.etp), ("--moe-token-dispatcher-type", "alltoall"),
            ("--moe-grouped-gemm",)]
    if model.shared_ffn_hidden:
        out.append(("--moe-shared-expert-intermediate-size", model.shared_ffn_hidden))
    if model.moe_capacity_factor:
        out += [("--moe-expert-capacity-factor", model.moe_capacity_factor), ("--moe-pad-expert-input-to-capacity",)]
    elif not model.expert_load_share:
        out.append(("--moe-router-force-load-balancing",))
    return out


def add_arguments(parser) -> None:
    for flag in INT_FLAGS:
        parser.add_argument(flag, type=int)
    for flag in ("--expert-tensor-parallel-size",):
        parser.add_argument(flag, type=int)
    parser.add_argument("--moe-layer-freq")
    parser.add_argument("--moe-expert-capacity-factor", type=float)
    parser.add_argument("--multi-latent-attention", action="store_true")


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


def model_fields(args) -> dict:
    """The ModelSpec fields the MoE / attention flags give (none for a dense model)."""
    out = {name: getattr(args, flag[2:].replace("-", "_")) for flag, name in INT_FLAGS.items()
           if getattr(args, flag[2:].replace("-", "_")) is not None}
    if not args.multi_latent_attention:
        for name in ("q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"):
            out.pop(name, None)
    if out.get("experts"):
        out["first_dense_layers"] = _first_dense(args.moe_layer_freq, args.num_layers)
        if args.moe_expert_capacity_factor:
            out["moe_capacity_factor"] = args.moe_expert_capacity_factor
    return out
