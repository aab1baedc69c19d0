"""Strategy: how a model is split across devices (global degrees + per-layer choices).

`Strategy` checks itself on construction; `check_fits(model, gpus)` checks it
against a model and a device count. Every refusal names the offending value.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from explorer.errors import ExplorerError

SCHEDULES = ("gpipe", "1f1b", "interleaved")
RECOMPUTE = ("none", "selective", "full")
DTYPES = ("bf16", "fp16", "fp32")
LAYER_PRESETS = ("megatron", "column", "row", "batch", "replicated")
"""Per-layer operator splits (see ops_split.py):
megatron: Megatron-LM's column->row pairing (QKV/FC1 by column, proj/FC2 by row);
column: every MatMul split by output column; row: every MatMul split by its
reduction dim; batch: the micro-batch split inside the group (weights replicated);
replicated: every device of the group computes the whole layer."""
OP_SPLITS = ("replicated", "column", "row", "batch", "heads", "seq")


def _int_at_least(name: str, value, low: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ExplorerError(f"strategy field '{name}' must be an integer >= {low}, got {value!r}")


@dataclass(frozen=True)
class LayerSplit:
    """One layer's operator-parallel choice: its degree and each operator's split dim."""

    degree: int = 1                  # devices the layer's operators are split over (divides tp)
    preset: str = "megatron"         # one of LAYER_PRESETS
    overrides: tuple = ()            # ((operator name, split dim), ...) on top of the preset

    def __post_init__(self):
        _int_at_least("layer degree", self.degree, 1)
        if self.preset not in LAYER_PRESETS:
            raise ExplorerError(
                f"layer split preset {self.preset!r} is unknown; use one of {', '.join(LAYER_PRESETS)}")
        pairs = tuple(tuple(pair) for pair in (self.overrides.items() if isinstance(self.overrides, dict) else self.overrides))
        for pair in pairs:
            if len(pair) != 2 or pair[1] not in OP_SPLITS:
                raise ExplorerError(
                    f"operator split {pair!r} is invalid; the split must be one of {', '.join(OP_SPLITS)}")
        object.__setattr__(self, "overrides", tuple(sorted(pairs)))
        if self.preset == "replicated" and self.degree != 1:
            raise ExplorerError(f"a 'replicated' layer is not split: its degree is 1, not {self.degree}")

    @property
    def effective_preset(self) -> str:
        return "replicated" if self.degree == 1 else self.preset

    def to_dict(self) -> dict:
        return {"degree": self.degree, "preset": self.preset,
                "overrides": {name: split for name, split in self.overrides}}


@dataclass(frozen=True)
class Strategy:
    """Global choices plus optional per-layer splits and a layer->stage map."""

    dp: int = 1                      # d
    tp: int = 1                      # t: size of each stage's operator-parallel group
    pp: int = 1                      # p
    micro_batch: int = 1             # b, sequences
    global_batch: int = 1            # B, sequences
    schedule: str = "1f1b"
    chunks: int = 1                  # v, interleaved model chunks per stage
    zero: int = 0                    # ZeRO stage 0-3
    recompute: str = "none"
    sequence_parallel: bool = False
    overlap_dp: bool = False         # overlap gradient sync with the last backward
    scatter_gather: bool = True      # Megatron's scatter/gather of p2p sends (bsh/t)
    dtype: str = "bf16"
    layer_splits: tuple = ()         # LayerSplit per layer; () = LayerSplit(tp, 'megatron') everywhere
    stage_map: tuple = ()            # pipeline stage of each layer; () = even split

    def __post_init__(self):
        for name in ("dp", "tp", "pp", "micro_batch", "global_batch", "chunks"):
            _int_at_least(name, getattr(self, name), 1)
        if self.schedule not in SCHEDULES:
            raise ExplorerError(f"schedule {self.schedule!r} is unknown; use one of {', '.join(SCHEDULES)}")
        if self.recompute not in RECOMPUTE:
            raise ExplorerError(f"recompute {self.recompute!r} is unknown; use one of {', '.join(RECOMPUTE)}")
        if self.dtype not in DTYPES:
            raise ExplorerError(f"dtype {self.dtype!r} is unknown; use one of {', '.join(DTYPES)}")
        if isinstance(self.zero, bool) or not isinstance(self.zero, int) or self.zero not in (0, 1, 2, 3):
            raise ExplorerError(f"zero stage must be 0, 1, 2 or 3, got {self.zero!r}")
        for name in ("sequence_parallel", "overlap_dp", "scatter_gather"):
            if not isinstance(getattr(self, name), bool):
                raise ExplorerError(f"strategy field '{name}' must be true or false, got {getattr(self, name)!r}")
        if self.schedule != "interleaved" and self.chunks != 1:
            raise ExplorerError(f"chunks={self.chunks} needs the 'interleaved' schedule (got {self.schedule!r})")
        if self.schedule == "interleaved" and self.pp < 2:
            raise ExplorerError("the 'interleaved' schedule needs pp >= 2")
        if self.zero >= 2 and self.pp > 1:
            raise ExplorerError(
                f"zero={self.zero} cannot be combined with pp={self.pp}: gradients and parameters "
                "sharded across data-parallel ranks conflict with pipeline micro-batch accumulation "
                "(DeepSpeed refuses it too); use zero 0 or 1 with pipelining")
        per_step = self.micro_batch * self.dp
        if self.global_batch % per_step:
            raise ExplorerError(
                f"global batch {self.global_batch} is not divisible by micro-batch x dp = "
                f"{self.micro_batch} x {self.dp} = {per_step}")
        if self.schedule == "interleaved" and self.micro_batches % self.pp:
            raise ExplorerError(
                f"the interleaved schedule needs the micro-batches per iteration "
                f"({self.micro_batches}) to be a multiple of pp={self.pp}")
        splits = tuple(s if isinstance(s, LayerSplit) else LayerSplit(**s) for s in self.layer_splits)
        object.__setattr__(self, "layer_splits", splits)
        for i, split in enumerate(splits):
            if self.tp % split.degree:
                raise ExplorerError(
                    f"layer {i}: operator-parallel degree {split.degree} does not divide tp={self.tp}")
        object.__setattr__(self, "stage_map", tuple(self.stage_map))
        for i, stage in enumerate(self.stage_map):
            if isinstance(stage, bool) or not isinstance(stage, int) or not 0 <= stage < self.pp:
                raise ExplorerError(f"layer {i} is mapped to stage {stage!r}, outside 0..{self.pp - 1}")
        if any(later < earlier for earlier, later in zip(self.stage_map, self.stage_map[1:])):
            raise ExplorerError("the layer->stage map must not decrease (stages hold consecutive layers)")

    @property
    def devices(self) -> int:
        return self.dp * self.tp * self.pp

    @property
    def micro_batches(self) -> int:
        """m = B / (b d) (Narayanan et al. SC'21, Sec 2.2.1)."""
        return self.global_batch // (self.micro_batch * self.dp)

    def split_of(self, layer: int) -> LayerSplit:
        if self.layer_splits:
            return self.layer_splits[layer]
        return LayerSplit(degree=self.tp, preset="megatron")

    def stages(self, layers: int) -> tuple:
        """Stage of each layer: the given map, or an even split (first stages take the remainder)."""
        if self.stage_map:
            return self.stage_map
        base, extra = divmod(layers, self.pp)
        out = []
        for stage in range(self.pp):
            out += [stage] * (base + (1 if stage < extra else 0))
        return tuple(out)

    def check_fits(self, layers: int, heads: int | None, gpus: int | None, is_transformer: bool,
                   kv_heads: int | None = None) -> None:
        """Refuse a strategy that does not fit this model and device count."""
        if gpus is not None and self.devices != gpus:
            raise ExplorerError(
                f"dp x tp x pp = {self.dp} x {self.tp} x {self.pp} = {self.devices} "
                f"does not equal the {gpus} GPUs")
        if self.pp > layers:
            raise ExplorerError(f"pp={self.pp} stages is more than the model's {layers} layers")
        if self.schedule == "interleaved" and self.pp * self.chunks > layers:
            raise ExplorerError(
                f"pp x chunks = {self.pp * self.chunks} model chunks is more than the {layers} layers")
        if self.layer_splits and len(self.layer_splits) != layers:
            raise ExplorerError(
                f"layer_splits has {len(self.layer_splits)} entries but the model has {layers} layers")
        if self.stage_map:
            if len(self.stage_map) != layers:
                raise ExplorerError(
                    f"stage_map has {len(self.stage_map)} entries but the model has {layers} layers")
            empty = sorted(set(range(self.pp)) - set(self.stage_map))
            if empty:
                raise ExplorerError(f"stage {empty[0]} has no layers in the stage_map")
        for i, split in (enumerate(self.layer_splits) if self.layer_splits else [(0, self.split_of(0))]):
            where = f" (layer {i})" if self.layer_splits else ""
            if is_transformer and heads is not None and heads % split.degree and split.effective_preset != "batch":
                raise ExplorerError(
                    f"operator-parallel degree {split.degree}{where} does not divide the {heads} attention heads")
            if is_transformer and kv_heads and kv_heads % split.degree and split.effective_preset != "batch":
                raise ExplorerError(
                    f"operator-parallel degree {split.degree}{where} does not divide the {kv_heads} key/value "
                    "heads (grouped-query attention splits whole KV heads, as in Megatron-LM)")
            if split.effective_preset == "batch" and self.micro_batch % split.degree:
                raise ExplorerError(
                    f"layer {i} splits the batch {split.degree} ways but the micro-batch is {self.micro_batch}")
        if self.sequence_parallel and self.tp == 1:
            raise ExplorerError("sequence parallelism needs tp > 1")

    def with_(self, **changes) -> "Strategy":
        return replace(self, **changes)
