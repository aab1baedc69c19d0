"""Load models: a preset name, a JSON/YAML file in our schema, or a HuggingFace config.json.

Our schema is the ModelSpec fields (plus "source"); it is told apart from a
HuggingFace config by its "family" field. Every failure is one ExplorerError
line naming the file and the field. Files are parsed with json or
a budgeted yaml.SafeLoader only (safe_load.py); nothing is ever evaluated.

>>> load_model("tiny-gpt").hidden
256

The helpers `read_mapping`, `check_keys` and `field` are shared with
cluster_io and strategy_io.
"""
from __future__ import annotations

import difflib
import math
from dataclasses import fields
from pathlib import Path

from explorer.errors import ExplorerError
from explorer.model.spec import BOOL_FIELDS, FAMILIES, FLOAT_FIELDS, ModelSpec
from explorer.io.safe_load import parse_text, read_text_capped, short_repr  # noqa: F401 (re-exported)
from explorer.io.safe_load import MAX_PATH_CHARS, is_regular_file, path_exists, shown_path

PRESET_DIR = Path(__file__).resolve().parents[2] / "assets" / "models"
SUFFIXES = (".json", ".yaml", ".yml")

MODEL_FIELDS = tuple(f.name for f in fields(ModelSpec))
_TRANSFORMER = ("layers", "hidden", "heads", "seq_len", "vocab")
REQUIRED = {"gpt": _TRANSFORMER, "bert": _TRANSFORMER, "llama": _TRANSFORMER,
            "mlp": ("layers", "hidden", "seq_len", "vocab"), "cnn": ("stage_blocks", "vocab")}

# HuggingFace spellings of our fields; the first one present wins (GPT-2 names second).
HF_KEYS = {
    "layers": ("num_hidden_layers", "n_layer"),
    "hidden": ("hidden_size", "n_embd"),
    "heads": ("num_attention_heads", "n_head"),
    "ffn_hidden": ("intermediate_size", "n_inner", "ffn_dim"),
    "kv_heads": ("num_key_value_heads",),
    "seq_len": ("max_position_embeddings", "n_positions", "n_ctx"),
    "vocab": ("vocab_size",),
}
# Mixture-of-Experts and attention fields (issue 11; assets/models_moe_sources/README.md lists who
# spells what: Mixtral/gpt-oss num_local_experts, Qwen num_experts, DeepSeek n_routed_experts; ...).
HF_MOE_KEYS = {
    "experts": ("num_local_experts", "num_experts", "n_routed_experts"),
    "experts_per_token": ("num_experts_per_tok", "experts_per_token"),
    "moe_ffn_hidden": ("moe_intermediate_size",),
    "shared_experts": ("n_shared_experts",),
    "shared_ffn_hidden": ("shared_expert_intermediate_size",),
    "first_dense_layers": ("first_k_dense_replace",),
    "moe_layer_frequency": ("decoder_sparse_step", "moe_layer_freq"),
    "q_lora_rank": ("q_lora_rank",),
    "kv_lora_rank": ("kv_lora_rank",),
    "qk_nope_head_dim": ("qk_nope_head_dim",),
    "qk_rope_head_dim": ("qk_rope_head_dim",),
    "v_head_dim": ("v_head_dim",),
    "mtp_layers": ("num_nextn_predict_layers",),      # DeepSeek-V3's config.json: 1 MTP module
}
QK_NORM_TYPES = ("qwen3", "qwen3_moe")
"""HuggingFace model types whose attention normalises each head's queries and keys (transformers'
modeling_qwen3.py / modeling_qwen3_moe.py Qwen3Attention q_norm, k_norm): ModelSpec.qk_layernorm."""

# HuggingFace model_type -> our family (the architecture, not the checkpoint).
HF_FAMILIES = {"llama": "llama", "mistral": "llama", "qwen2": "llama", "qwen3": "llama", "mixtral": "llama",
               "qwen2_moe": "llama", "qwen3_moe": "llama", "deepseek_v2": "llama", "deepseek_v3": "llama",
               "gpt_oss": "llama",
               "bert": "bert", "roberta": "bert", "xlm-roberta": "bert",
               "gpt2": "gpt", "gpt_bigcode": "gpt", "gpt_neox": "gpt", "gptj": "gpt", "opt": "gpt"}


# ---- helpers shared by the loaders -------------------------------------------------

def is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v) -> bool:
    if not (is_int(v) or isinstance(v, float)):
        return False
    try:
        return math.isfinite(float(v))
    except OverflowError:          # an integer too large for a float
        return False


KINDS = {  # kind -> (test, description for the error message)
    "text": (lambda v: isinstance(v, str), "a string"),
    "int": (is_int, "an integer"),
    "count": (lambda v: is_int(v) and v >= 1, "a positive integer"),
    "positive": (lambda v: _is_number(v) and v > 0, "a positive number"),
    "non-negative": (lambda v: _is_number(v) and v >= 0, "a non-negative number"),
    "bool": (lambda v: isinstance(v, bool), "true or false"),
    "mapping": (lambda v: isinstance(v, dict), "a mapping"),
    "list": (lambda v: isinstance(v, list), "a list"),
}
_REQUIRED = object()


def field(d: dict, key: str, kind: str, where: str, default=_REQUIRED):
    """d[key] checked to be of `kind` (see KINDS); `default` if absent, else an error."""
    if key not in d:
        if default is _REQUIRED:
            raise ExplorerError(f"{where}missing field '{key}'")
        return default
    test, description = KINDS[kind]
    if not test(d[key]):
        raise ExplorerError(f"{where}field '{key}' must be {description}, got {short_repr(d[key])}")
    return d[key]


def check_keys(d: dict, known, where: str) -> None:
    """Refuse a key outside `known`, suggesting the closest known one."""
    for key in d:
        if key not in known:
            close = difflib.get_close_matches(str(key), list(known), n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            raise ExplorerError(
                f"{where}unknown field {short_repr(key)}{hint}; known fields: {', '.join(known)}")


def read_mapping(path: Path) -> dict:
    """The top-level mapping of a .json, .yaml or .yml file."""
    path = Path(path)
    if not is_regular_file(path):
        raise ExplorerError(f"{shown_path(path)}: {'not a regular file' if path_exists(path) else 'no such file'}")
    suffix = path.suffix.lower()
    if suffix not in SUFFIXES:
        raise ExplorerError(f"{shown_path(path)}: unsupported file type {short_repr(suffix or '(none)')}; "
                            "use .json, .yaml or .yml")
    return parse_mapping(read_text_capped(path), suffix, shown_path(path))


def parse_mapping(text: str, suffix: str, where: str) -> dict:
    """The top-level mapping of JSON (suffix .json) or YAML text; never evaluates anything."""
    data = parse_text(text, suffix, where)      # size, alias, depth budgets (safe_load.py)
    if not isinstance(data, dict):
        raise ExplorerError(f"{where}: expected a mapping of fields at the top level, got {type(data).__name__}")
    return data


def resolve(name_or_path, preset_dir: Path, kind: str) -> Path:
    """The preset file for a name, or the path given; an unknown name lists the presets. A name longer
    than a path may be is refused first (the system's OSError would name the install folder)."""
    text = str(name_or_path)
    if len(text) > MAX_PATH_CHARS:
        raise ExplorerError(f"the {kind} name or path has {len(text):,} characters, more than the "
                            f"{MAX_PATH_CHARS:,} a file path may have")
    preset = preset_dir / f"{text}.json"
    if text and "/" not in text and "\\" not in text and is_regular_file(preset):
        return preset
    path = Path(text).expanduser()
    if text and (path.suffix.lower() in SUFFIXES or path_exists(path) or "/" in text or "\\" in text):
        return path
    known = sorted(p.stem for p in preset_dir.glob("*.json"))
    close = difflib.get_close_matches(text, known, n=3, cutoff=0.5)
    hint = f" (did you mean {', '.join(close)}?)" if close else ""
    raise ExplorerError(f"unknown {kind} preset {short_repr(text, 80)}{hint}; known presets: {', '.join(known)}")


def load_file(path: Path, build, *args):
    """build(read_mapping(path), *args), with any error prefixed by the file name."""
    data = read_mapping(path)
    try:
        return build(data, *args)
    except ExplorerError as e:
        raise ExplorerError(f"{shown_path(path)}: {e}") from None


# ---- models ---------------------------------------------------------------------------

def _from_our_schema(d: dict, name_hint: str) -> ModelSpec:
    check_keys(d, MODEL_FIELDS, "")
    family = field(d, "family", "text", "")
    if family not in FAMILIES:
        raise ExplorerError(f"field 'family' is {short_repr(family)}; use one of {', '.join(FAMILIES)}")
    for key in d:
        kind = "text" if key in ("name", "family", "source", "attention") else "list" if key == "stage_blocks" else \
            "non-negative" if key in FLOAT_FIELDS else "bool" if key in BOOL_FIELDS else "int"
        field(d, key, kind, "")
    missing = [key for key in REQUIRED[family] if key not in d]
    if missing:
        raise ExplorerError(
            f"missing field '{missing[0]}' (a {family} model needs {', '.join(REQUIRED[family])})")
    values = dict(d)
    values.setdefault("name", name_hint)
    values["stage_blocks"] = tuple(values.get("stage_blocks", ()))
    if family == "cnn":
        blocks = values["stage_blocks"]
        for i, n in enumerate(blocks):
            if not is_int(n):
                raise ExplorerError(f"field 'stage_blocks[{i}]' must be an integer, got {short_repr(n)}")
        values.setdefault("layers", sum(blocks))
        if values["layers"] != sum(blocks):
            raise ExplorerError(
                f"field 'layers' is {values['layers']} but stage_blocks {blocks} hold {sum(blocks)} blocks")
    return ModelSpec(**values)


def _hf_family(d: dict) -> str:
    model_type = field(d, "model_type", "text", "", default="")
    if model_type in HF_FAMILIES:
        return HF_FAMILIES[model_type]
    for arch in field(d, "architectures", "list", "", default=[]):
        squashed = str(arch).lower()
        for known, family in HF_FAMILIES.items():
            if squashed.startswith(known.replace("_", "").replace("-", "")):
                return family
    raise ExplorerError(
        f"cannot tell the model family from model_type {model_type!r} or architectures "
        f"{short_repr(d.get('architectures'))}; known model types: {', '.join(HF_FAMILIES)}")


def hf_name(d: dict) -> str:
    """A name for a HuggingFace config from its own fields: the last part of '_name_or_path'
    ('meta-llama/Llama-3.1-8B' -> 'Llama-3.1-8B'), else '<model_type>-config', else ''."""
    path = d.get("_name_or_path")
    if isinstance(path, str) and path.strip("/ "):
        return path.strip("/ ").rsplit("/", 1)[-1][:80]
    model_type = d.get("model_type")
    return f"{model_type[:40]}-config" if isinstance(model_type, str) and model_type else ""


def is_huggingface(d: dict) -> bool:
    """A HuggingFace config.json rather than our schema (which has 'family')."""
    return isinstance(d, dict) and "family" not in d and \
        any(key in d for key in ("model_type", "architectures", "num_hidden_layers", "n_layer"))


def hf_max_positions(d: dict):
    """The longest sequence a HuggingFace config supports (max_position_embeddings, n_positions, n_ctx),
    None when it names none: a suggestion for the training sequence length, which the config does not hold."""
    present = [key for key in HF_KEYS["seq_len"] if d.get(key) is not None]
    return field(d, present[0], "int", "") if present else None


def _from_huggingface(d: dict, name_hint: str, seq_len: int | None = None) -> ModelSpec:
    """`seq_len`: the training sequence length; without it the config's longest (max_position_embeddings),
    which the source field then says."""
    values = {"name": name_hint or hf_name(d) or "uploaded", "family": _hf_family(d),
              "source": f"HuggingFace config ({d.get('model_type', 'unknown model_type')})"}
    for ours, spellings in HF_KEYS.items():
        present = [key for key in spellings if d.get(key) is not None]
        if ours == "seq_len" and seq_len is not None:
            if not is_int(seq_len) or seq_len < 1:
                raise ExplorerError(f"sequence length must be a positive integer, got {short_repr(seq_len)}")
            values[ours] = seq_len
            values["source"] += f"; sequence length {seq_len} chosen" + (
                f" (the config supports up to {d[present[0]]})" if present else "")
            continue
        if not present:
            if ours in _TRANSFORMER:
                raise ExplorerError(f"HuggingFace config has no {' / '.join(repr(k) for k in spellings)}")
            continue
        values[ours] = field(d, present[0], "int", "")
        if ours == "seq_len":
            values["source"] += f"; sequence length = its {present[0]}, the longest it supports"
    values.update(_hf_moe(d, values))
    return ModelSpec(**values)


def _hf_moe(d: dict, values: dict) -> dict:
    """Our MoE / attention fields from a HuggingFace config (nulls, as DeepSeek-V2-Lite's q_lora_rank, skipped)."""
    out = {}
    for ours, spellings in HF_MOE_KEYS.items():
        present = [key for key in spellings if d.get(key) is not None]
        if present:
            out[ours] = field(d, present[0], "int", "")
    if not out.get("experts"):             # a dense model: the MoE fields mean nothing
        out = {k: v for k, v in out.items() if k not in ("experts", "experts_per_token", "moe_ffn_hidden",
                                                           "shared_experts", "shared_ffn_hidden",
                                                           "first_dense_layers", "moe_layer_frequency")}
    if not out.get("shared_ffn_hidden"):   # Qwen3 writes 0: no shared expert
        out.pop("shared_ffn_hidden", None)
    head_dim = d.get("head_dim")
    if head_dim is not None and field(d, "head_dim", "int", "") * values.get("heads", 0) != values.get("hidden"):
        out["head_dim"] = head_dim        # only a head size other than hidden / heads changes the graph
    if d.get("model_type") == "gpt_oss":
        out.update(_hf_gpt_oss(d))
    if d.get("model_type") in QK_NORM_TYPES:
        out["qk_layernorm"] = True
    out.update(_hf_yarn(d, out))
    out.update(_hf_rotary_base(d, values))
    if d.get("mlp_only_layers"):
        raise ExplorerError("HuggingFace config lists 'mlp_only_layers'; dense layers in between MoE layers "
                            "are read only as first_k_dense_replace or decoder_sparse_step")
    return out


def _hf_yarn(d: dict, out: dict) -> dict:
    """yarn_scaling_factor from rope_scaling (transformers v5 configs: rope_parameters) {rope_type (older configs:
    type) 'yarn', factor} on grouped-query attention (gpt-oss: factor 32; absent, 1.0: no stretch); another rope
    type (Llama 3's 'llama3') and latent attention's own YaRN (DeepSeek-V3) leave it 0: they run the fused kernels
    (explorer/model/graph/moe.py yarn_rope)."""
    key = "rope_scaling" if isinstance(d.get("rope_scaling"), dict) else "rope_parameters"
    scaling = d.get(key)
    if not isinstance(scaling, dict) or out.get("kv_lora_rank"):
        return {}
    if scaling.get("rope_type", scaling.get("type")) != "yarn":
        return {}
    return {"yarn_scaling_factor": float(field(scaling, "factor", "positive", f"{key}: ", default=1.0))}


def _hf_rotary_base(d: dict, values: dict) -> dict:
    """rotary_base from rope_theta (transformers v5 configs: rope_parameters.rope_theta), for the rotary family
    (llama), to the nearest whole number (Megatron-LM's --rotary-base is an integer); absent: the default, 10000."""
    source, where = (d, "") if d.get("rope_theta") is not None else (d.get("rope_parameters"), "rope_parameters: ")
    if not isinstance(source, dict) or source.get("rope_theta") is None or values.get("family") != "llama":
        return {}
    return {"rotary_base": round(field(source, "rope_theta", "positive", where))}


def _hf_gpt_oss(d: dict) -> dict:
    """gpt-oss' attention as our fields: biases on the linear layers (attention_bias, and the experts'), its
    quick-GEGLU activation with the linear half offset by 1, learnable sinks, and a sliding window on the layers
    layer_types calls 'sliding_attention' -- every layer n (1-based) with n % k != 0 for one k (Megatron-Core
    window_attn_skip_freq; gpt-oss: k = 2), else refused."""
    out = {"linear_bias": True, "attention_sinks": True, "quick_geglu": True, "glu_linear_offset": 1.0}
    # gpt-oss' activation: x sigmoid(1.702 x) (x_linear + 1) (openai/gpt-oss gpt_oss/torch/model.py swiglu; transformers
    # GptOssExperts alpha 1.702, (up + 1)), Megatron's quick_gelu with glu_linear_offset 1.0 (gpt_oss_bridge.py)
    # the experts' clamp (gpt_oss_bridge.py: activation_func_clamp_value 7.0); transformers' GptOssConfig defaults
    # swiglu_limit to 7.0 when a config leaves it out
    out["glu_clamp"] = field(d, "swiglu_limit", "positive", "", default=7.0)
    window, kinds = d.get("sliding_window"), d.get("layer_types")
    if not window:
        return out
    out["sliding_window_tokens"] = field(d, "sliding_window", "count", "")
    if not kinds:
        return out
    if not isinstance(kinds, list) or not all(k in ("sliding_attention", "full_attention") for k in kinds):
        raise ExplorerError("HuggingFace config's 'layer_types' must list 'sliding_attention' / 'full_attention'")
    full = [i + 1 for i, k in enumerate(kinds) if k == "full_attention"]
    if not full:
        return out
    freq = full[0]
    if full != list(range(freq, len(kinds) + 1, freq)):
        raise ExplorerError("HuggingFace config's 'layer_types': full attention on every k-th layer is the only "
                            "pattern read (Megatron-Core window_attn_skip_freq)")
    out["window_attn_skip_freq"] = freq
    return out


def model_from_dict(d: dict, name_hint: str = "", seq_len: int | None = None) -> ModelSpec:
    """A ModelSpec from our schema (it has 'family') or from a HuggingFace config dict (`seq_len`: the
    training sequence length, which a HuggingFace config does not hold)."""
    if not isinstance(d, dict):
        raise ExplorerError(f"a model must be a mapping of fields, got {type(d).__name__}")
    if "family" in d:
        return _from_our_schema(d, name_hint or "uploaded")
    if is_huggingface(d):
        return _from_huggingface(d, name_hint, seq_len)
    raise ExplorerError("not a model: no 'family' field (our schema) and no 'model_type', "
                        "'architectures' or 'num_hidden_layers' (HuggingFace config)")


def load_model(name_or_path) -> ModelSpec:
    """A preset by name (see list_models), or a .json/.yaml/.yml model or HuggingFace config file."""
    path = resolve(name_or_path, PRESET_DIR, "model")
    return load_file(path, model_from_dict, path.stem)


def list_models() -> list:
    """Every preset in assets/models, sorted by name."""
    models = [load_model(path) for path in PRESET_DIR.glob("*.json")]
    return sorted(models, key=lambda m: m.name)
