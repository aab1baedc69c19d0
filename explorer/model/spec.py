"""ModelSpec: the few numbers that define a model; the graph is built from it."""
from __future__ import annotations

from dataclasses import asdict, dataclass

from explorer.errors import ExplorerError
from explorer.limits import check_model

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
        for name in ("ffn_hidden", "kv_heads"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ExplorerError(f"model field '{name}' must be a non-negative integer, got {value!r}")
        if self.ffn_hidden == 0:
            object.__setattr__(self, "ffn_hidden", 4 * self.hidden)
        if self.kv_heads == 0:
            object.__setattr__(self, "kv_heads", self.heads)
        if self.family in ("gpt", "bert", "llama"):
            if self.hidden % self.heads:
                raise ExplorerError(
                    f"hidden size {self.hidden} is not divisible by heads {self.heads}")
            if self.heads % self.kv_heads:
                raise ExplorerError(
                    f"heads {self.heads} is not divisible by kv_heads {self.kv_heads}")

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
