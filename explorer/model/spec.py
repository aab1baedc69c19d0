"""ModelSpec: the few numbers that define a model; the graph is built from it."""
from __future__ import annotations

from dataclasses import asdict, dataclass

from explorer.errors import ExplorerError
from explorer.limits import check_model
from explorer.strategy.pipeline_layout import MAX_MTP_LAYERS

FAMILIES = ("gpt", "bert", "llama", "mlp", "cnn")
ATTENTION = ("standard", "flash")
"""Attention implementations: 'standard' materialises the s x s scores (Megatron-LM's unfused core
attention, Korthikanti et al. 2022 Table 2); 'flash' is FlashAttention (Dao et al. NeurIPS 2022,
FlashAttention-2, Dao 2023): one fused kernel, no s x s tensor kept, recomputed in the backward."""
DEFAULT_ATTENTION = {"llama": "flash"}
"""The attention a family gets when its model names none: the LLaMA family is trained with a fused,
memory-efficient attention (Touvron et al. 2023, LLaMA, Sec 2.4: the causal multi-head attention of the
xformers library, "achieved by not storing the attention weights", after Rabe & Staats 2021 and Dao et
al. 2022); the others keep the standard attention of the published runs they are validated against
(Megatron-LM SC'21, Korthikanti et al. 2022)."""


def _positive_int(name: str, value) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ExplorerError(f"model field '{name}' must be a positive integer, got {value!r}")


MOE_INT_FIELDS = ("experts", "experts_per_token", "moe_ffn_hidden", "shared_experts", "shared_ffn_hidden",
                  "first_dense_layers", "head_dim", "q_lora_rank", "kv_lora_rank", "qk_nope_head_dim",
                  "qk_rope_head_dim", "v_head_dim", "sliding_window_tokens", "window_attn_skip_freq")
MOE_FLOAT_FIELDS = ("moe_capacity_factor", "expert_load_share", "glu_clamp")
FLOAT_FIELDS = MOE_FLOAT_FIELDS + ("yarn_scaling_factor", "glu_linear_offset")   # numbers a model file may write
#                                                                                   with a fraction
BOOL_FIELDS = ("linear_bias", "attention_sinks", "qk_layernorm", "quick_geglu")
MAX_EXPERTS = 4096   # well above the largest published router (DeepSeek-V3: 256, Qwen3: 128)


MAX_YARN_FACTOR = 1e6   # far above any published YaRN factor (gpt-oss 32, DeepSeek-V3 40, Qwen3 4)


def _check_yarn(spec) -> None:
    """yarn_scaling_factor: 0 (plain RoPE) or YaRN's factor, from 1 (no stretch; Megatron-LM's default
    --rotary-scaling-factor) to MAX_YARN_FACTOR, on grouped-query attention of the llama family (latent attention
    applies its rotary part in its own fused path, explorer/model/graph/moe.py yarn_rope)."""
    value = spec.yarn_scaling_factor
    if isinstance(value, bool) or not isinstance(value, (int, float)) or \
            not (value == 0 or 1 <= value <= MAX_YARN_FACTOR):
        raise ExplorerError(f"model field 'yarn_scaling_factor' must be 0 (plain RoPE) or a number from 1 to "
                            f"{MAX_YARN_FACTOR:g}, got {value!r}")
    if value and spec.family != "llama":
        raise ExplorerError(f"'yarn_scaling_factor' is for the llama family (rotary positions), not {spec.family!r}")
    if value and spec.kv_lora_rank:
        raise ExplorerError("'yarn_scaling_factor' is for grouped-query attention; latent attention (kv_lora_rank > 0) "
                            "applies its rotary part in its own kernel")


def _check_glu(spec) -> None:
    """quick_geglu and its linear offset (gpt-oss): the llama family's gated MLP with another activation; the
    offset only with it (Megatron-Core TransformerConfig: a non-zero glu_linear_offset under the fused bias
    activation needs quick_gelu)."""
    offset = spec.glu_linear_offset
    if isinstance(offset, bool) or not isinstance(offset, (int, float)) or not 0 <= offset < float("inf"):
        raise ExplorerError(f"model field 'glu_linear_offset' must be a non-negative number, got {offset!r}")
    if spec.quick_geglu and spec.family != "llama":
        raise ExplorerError(f"'quick_geglu' is for the llama family's gated MLP (gpt-oss), not {spec.family!r}")
    if offset and not spec.quick_geglu:
        raise ExplorerError("model field 'glu_linear_offset' needs 'quick_geglu' (Megatron-Core offsets the linear "
                            "half only in its quick-GEGLU)")


MAX_ROTARY_BASE = 10 ** 9   # far above any published RoPE base (Qwen3 and Mixtral 1e6, Llama 3 5e5)


def _check_rotary_base(spec) -> None:
    """rotary_base: 0 (the frameworks' default, 10000: Megatron-LM --rotary-base, Megatron-Core rotary_base) or a
    whole number up to MAX_ROTARY_BASE, on the rotary families (llama)."""
    value = spec.rotary_base
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_ROTARY_BASE:
        raise ExplorerError(f"model field 'rotary_base' must be a whole number from 0 (the default, 10000) to "
                            f"{MAX_ROTARY_BASE:,}, got {value!r}")
    if value and spec.family != "llama":
        raise ExplorerError(f"'rotary_base' is for the llama family (rotary positions), not {spec.family!r}")


def _check_moe(spec) -> None:
    """The MoE and attention-variant fields: defaults leave a dense model as it was."""
    for name in MOE_FLOAT_FIELDS:
        value = getattr(spec, name)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < float("inf"):
            raise ExplorerError(f"model field '{name}' must be a non-negative number, got {value!r}")
    if isinstance(spec.moe_layer_frequency, bool) or not isinstance(spec.moe_layer_frequency, int) \
            or spec.moe_layer_frequency < 1:
        raise ExplorerError(f"model field 'moe_layer_frequency' must be a positive integer, "
                            f"got {spec.moe_layer_frequency!r}")
    if spec.kv_lora_rank and not (spec.qk_nope_head_dim and spec.qk_rope_head_dim and spec.v_head_dim):
        raise ExplorerError("latent attention (kv_lora_rank > 0) needs qk_nope_head_dim, qk_rope_head_dim "
                            "and v_head_dim")
    for name in BOOL_FIELDS:
        if not isinstance(getattr(spec, name), bool):
            raise ExplorerError(f"model field '{name}' must be true or false, got {getattr(spec, name)!r}")
    if spec.qk_layernorm and spec.family != "llama":
        raise ExplorerError(f"'qk_layernorm' is for the llama family (Qwen3), not {spec.family!r}")
    if spec.qk_layernorm and spec.kv_lora_rank:
        raise ExplorerError("'qk_layernorm' is for grouped-query attention; latent attention (kv_lora_rank > 0) "
                            "normalises its latents")
    _check_yarn(spec)
    _check_glu(spec)
    _check_rotary_base(spec)
    if (spec.linear_bias or spec.sliding_window_tokens or spec.attention_sinks) and spec.family != "llama":
        raise ExplorerError(f"'linear_bias', 'sliding_window_tokens' and 'attention_sinks' are for the llama family "
                            f"(gpt-oss), not {spec.family!r} (whose layers carry biases and attend fully already)")
    if spec.window_attn_skip_freq and not spec.sliding_window_tokens:
        raise ExplorerError("model field 'window_attn_skip_freq' needs 'sliding_window_tokens' (the window) > 0")
    if spec.sliding_window_tokens > spec.seq_len:
        raise ExplorerError(f"model field 'sliding_window_tokens' ({spec.sliding_window_tokens}) is longer than the "
                            f"sequence ({spec.seq_len}); 0 = no window")
    moe_set = [n for n in MOE_INT_FIELDS[1:6] + MOE_FLOAT_FIELDS if getattr(spec, n)]
    if not spec.experts:
        if moe_set:
            raise ExplorerError(f"model field '{moe_set[0]}' needs 'experts' (routed experts) > 0")
        return
    if not spec.is_transformer:
        raise ExplorerError(f"experts are for transformer families (gpt, bert, llama), not {spec.family!r}")
    if spec.experts > MAX_EXPERTS:
        raise ExplorerError(f"model field 'experts' is {spec.experts}, more than the {MAX_EXPERTS} accepted")
    if not 1 <= spec.experts_per_token <= spec.experts:
        raise ExplorerError(f"model field 'experts_per_token' (top-k) must be between 1 and experts = "
                            f"{spec.experts}, got {spec.experts_per_token}")
    if spec.expert_load_share and not 1 / spec.experts <= spec.expert_load_share <= 1:
        raise ExplorerError(f"model field 'expert_load_share' must be between 1/experts = {1 / spec.experts:.4g} "
                            f"and 1 (0 = balanced), got {spec.expert_load_share}")
    if spec.moe_capacity_factor and spec.moe_capacity_factor < 1:
        raise ExplorerError(f"model field 'moe_capacity_factor' must be at least 1 (0 = dropless), "
                            f"got {spec.moe_capacity_factor}")
    if spec.first_dense_layers >= spec.layers:
        raise ExplorerError(f"model field 'first_dense_layers' ({spec.first_dense_layers}) leaves no MoE layer "
                            f"among the {spec.layers} layers")


@dataclass(frozen=True)
class ModelSpec:
    """A model in the DESIGN.md vocabulary.

    Transformers (gpt, bert, llama) use layers/hidden/heads/seq_len/vocab and
    optionally ffn_hidden (default 4*hidden) and kv_heads (default heads).
    mlp uses layers/hidden (tokens per sample = seq_len, classes = vocab).
    cnn uses image_size, in_channels, num_classes, stage_blocks, base_width
    (a ResNet-style bottleneck network); `layers` counts its blocks.
    """

    name: str
    family: str
    layers: int                  # l: transformer layers / MLP layers / CNN blocks
    hidden: int = 1              # h
    heads: int = 1               # a
    seq_len: int = 1             # s (tokens per sample)
    vocab: int = 1               # V (vocabulary, or output classes)
    ffn_hidden: int = 0          # f; 0 means the family default
    kv_heads: int = 0            # key/value heads; 0 means = heads
    image_size: int = 224        # cnn: input height = width, pixels
    in_channels: int = 3         # cnn: input channels
    stage_blocks: tuple = ()     # cnn: bottleneck blocks per stage
    base_width: int = 64         # cnn: channels of the stem / first stage
    source: str = ""             # where the numbers come from
    attention: str = ""          # 'standard' or 'flash'; '' means the family default (DEFAULT_ATTENTION)
    # ---- Mixture-of-Experts and attention variants (explorer/model/graph/moe.py); all off by default
    experts: int = 0             # E: routed experts per MoE layer; 0 = a dense model
    experts_per_token: int = 0   # k: experts each token is routed to (top-k)
    moe_ffn_hidden: int = 0      # f_e: FFN hidden size of one expert; 0 = ffn_hidden
    shared_experts: int = 0      # experts every token goes through (DeepSeek: 1)
    shared_ffn_hidden: int = 0   # FFN hidden size of all shared experts together; 0 = shared_experts * f_e
    first_dense_layers: int = 0  # leading layers with a dense FFN (DeepSeek-V3 first_k_dense_replace: 3)
    moe_layer_frequency: int = 1  # after those, layer i is MoE when (i + 1) % this == 0 (Qwen decoder_sparse_step)
    moe_capacity_factor: float = 0.0  # tokens an expert takes, x its fair share (padded); 0 = dropless
    expert_load_share: float = 0.0    # what-if: the most-loaded expert's share of routed tokens; 0 = balanced
    head_dim: int = 0            # attention head size; 0 = hidden / heads
    q_lora_rank: int = 0         # MLA (DeepSeek-V2/V3): query latent rank; 0 = queries not compressed
    kv_lora_rank: int = 0        # MLA key/value latent rank; > 0 turns multi-head latent attention on
    qk_nope_head_dim: int = 0    # MLA per-head query/key size without rotary embedding
    qk_rope_head_dim: int = 0    # MLA per-head query/key size with rotary embedding (keys share it)
    v_head_dim: int = 0          # MLA per-head value size
    mtp_layers: int = 0          # multi-token-prediction modules (DeepSeek-V3: 1; explorer/model/graph/mtp.py)
    # ---- gpt-oss (explorer/model/graph/moe.py; Megatron-Core TransformerConfig's fields of the same meaning)
    sliding_window_tokens: int = 0   # keys a windowed layer's query attends, itself included (gpt-oss: 128); 0 = none
    window_attn_skip_freq: int = 0   # layer n (1-based) is windowed when n % this != 0 (gpt-oss: 2); 0 = all layers
    linear_bias: bool = False        # the linear layers carry biases (Megatron add_bias_linear; gpt-oss: true)
    attention_sinks: bool = False    # a learnable sink logit per head (Megatron softmax_type "learnable"; gpt-oss)
    glu_clamp: float = 0.0           # the experts' GLU halves clamped to this before the activation (Megatron
    #                                  activation_func_clamp_value; gpt-oss: 7.0); 0 = none
    qk_layernorm: bool = False       # an RMSNorm over each head's queries and keys (Megatron qk_layernorm; Qwen3)
    quick_geglu: bool = False        # the gated MLP's activation is quick-GELU, x sigmoid(1.702 x), not SiLU (Megatron
    #                                  activation_func quick_gelu, --quick-geglu; gpt-oss); the same bytes and kernels
    glu_linear_offset: float = 0.0   # added to the GLU's linear half (Megatron glu_linear_offset; gpt-oss: 1.0)
    rotary_base: int = 0             # RoPE's base theta (Megatron --rotary-base, HF rope_theta; Llama 3: 500000); 0 =
    #                                  the frameworks' default, 10000. Not a cost: the exports write it so that an
    #                                  exported run trains the model's positions
    yarn_scaling_factor: float = 0.0  # YaRN rotary embedding's scaling factor (Megatron yarn_rotary_scaling_factor,
    #                                   HF rope_scaling.factor with rope_type 'yarn'; gpt-oss: 32.0; >= 1);
    #                                   0 = plain RoPE

    def __post_init__(self):
        check_model(self)                # sizes within explorer/limits.py, before anything else
        if self.family not in FAMILIES:
            raise ExplorerError(
                f"model family {str(self.family)[:40]!r} is unknown; use one of {', '.join(FAMILIES)}")
        if not isinstance(self.name, str) or not self.name:
            raise ExplorerError("model field 'name' must be a non-empty string")
        if self.attention == "":
            object.__setattr__(self, "attention", DEFAULT_ATTENTION.get(self.family, "standard"))
        if self.attention not in ATTENTION:
            raise ExplorerError(
                f"model field 'attention' is {str(self.attention)[:40]!r}; use one of {', '.join(ATTENTION)}")
        if self.family == "cnn":
            object.__setattr__(self, "stage_blocks", tuple(self.stage_blocks))
            if not self.stage_blocks:
                raise ExplorerError("a cnn model needs 'stage_blocks', e.g. [3, 4, 6, 3]")
            for i, n in enumerate(self.stage_blocks):
                _positive_int(f"stage_blocks[{i}]", n)
            object.__setattr__(self, "layers", sum(self.stage_blocks))
            for name in ("image_size", "in_channels", "base_width", "vocab"):
                _positive_int(name, getattr(self, name))
            if self.image_size < 32:
                raise ExplorerError(f"model field 'image_size' must be at least 32, got {self.image_size}")
            return
        for name in ("layers", "hidden", "heads", "seq_len", "vocab"):
            _positive_int(name, getattr(self, name))
        for name in ("ffn_hidden", "kv_heads") + MOE_INT_FIELDS:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ExplorerError(f"model field '{name}' must be a non-negative integer, got {value!r}")
        if self.ffn_hidden == 0:
            object.__setattr__(self, "ffn_hidden", 4 * self.hidden)
        if self.kv_heads == 0:
            object.__setattr__(self, "kv_heads", self.heads)
        if self.experts and self.moe_ffn_hidden == 0:
            object.__setattr__(self, "moe_ffn_hidden", self.ffn_hidden)
        if self.shared_experts and self.shared_ffn_hidden == 0:
            object.__setattr__(self, "shared_ffn_hidden", self.shared_experts * self.moe_ffn_hidden)
        _check_moe(self)
        if isinstance(self.mtp_layers, bool) or not isinstance(self.mtp_layers, int) or \
                not 0 <= self.mtp_layers <= MAX_MTP_LAYERS:
            raise ExplorerError(f"model field 'mtp_layers' must be an integer from 0 to {MAX_MTP_LAYERS}, "
                                f"got {self.mtp_layers!r}")
        if self.mtp_layers and self.family not in ("gpt", "llama"):
            raise ExplorerError(f"multi-token prediction (mtp_layers) is for decoder families (gpt, llama), "
                                f"not {self.family!r}")
        if self.family in ("gpt", "bert", "llama"):
            if self.hidden % self.heads and not (self.head_dim or self.kv_lora_rank):
                raise ExplorerError(
                    f"hidden size {self.hidden} is not divisible by heads {self.heads}")
            if self.heads % self.kv_heads:
                raise ExplorerError(
                    f"heads {self.heads} is not divisible by kv_heads {self.kv_heads}")

    @property
    def is_moe(self) -> bool:
        """True when some layer routes tokens to experts."""
        return self.experts > 0

    @property
    def uses_moe_graph(self) -> bool:
        """Experts, a head size of its own or latent attention: built by explorer/model/graph/moe.py."""
        return self.is_moe or self.head_dim > 0 or self.kv_lora_rank > 0 or self.sliding_window_tokens > 0 \
            or self.linear_bias or self.qk_layernorm or self.yarn_scaling_factor > 0

    @property
    def softmax_type(self) -> str:
        """The attention softmax as Transformer Engine names it (explorer/hardware/attention.py kernel_for)."""
        return "learnable" if self.attention_sinks else "vanilla"

    def is_window_layer(self, index: int) -> bool:
        """Layer `index` (0-based) attends within the sliding window: Megatron-Core is_layer_window_attention
        (megatron/core/transformer/utils.py at d7288711, the Megatron-LM of Megatron-Bridge v0.4.x):
        layer_number % window_attn_skip_freq != 0, layer_number 1-based; every layer without a skip frequency."""
        if not self.sliding_window_tokens:
            return False
        return not self.window_attn_skip_freq or (index + 1) % self.window_attn_skip_freq != 0

    def is_moe_layer(self, index: int) -> bool:
        return self.is_moe and index >= self.first_dense_layers and (index + 1) % self.moe_layer_frequency == 0

    @property
    def is_transformer(self) -> bool:
        return self.family in ("gpt", "bert", "llama")

    def with_seq_len(self, seq_len: int) -> "ModelSpec":
        """The same model at another sequence length (the --seq-len flag)."""
        fields = asdict(self)
        fields["seq_len"] = seq_len
        return ModelSpec(**fields)

    def with_attention(self, attention: str) -> "ModelSpec":
        """The same model with another attention implementation (the --attention flag)."""
        fields = asdict(self)
        fields["attention"] = attention
        return ModelSpec(**fields)

    def to_dict(self) -> dict:
        out = asdict(self)
        out["stage_blocks"] = list(self.stage_blocks)
        return out
