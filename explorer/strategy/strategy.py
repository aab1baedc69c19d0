"""Strategy: how a model is split across devices (global degrees + per-layer choices).

`Strategy` checks its field types and then the rules of its own fields
(explorer.strategy.rules, one table shared with the search) once, on
construction; `rules.check(model, strategy, gpus, cluster)` checks it against a
model and a device count. Every refusal names the offending value.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property

from explorer.errors import ExplorerError
from explorer.schedules import NAMES as SCHEDULES
from explorer.hardware.precision import optimizer_options
from explorer.schedules import SCHEDULES as REGISTERED
from explorer.strategy.frameworks import GRAD_FROM_FRAMEWORK, check_framework, default_grad_dtype, scatters_sends
from explorer.strategy.mesh import AXES, DEFAULT_ORDER, Mesh
from explorer.strategy.options import CUDA_GRAPHS, MOE_DISPATCHERS, OPTIONS, RECOMPUTE_MODULES  # noqa: F401
from explorer.strategy.options import superstep_options
from explorer.strategy.pipeline_layout import MAX_LAYOUT_CHARS, parse as parse_layout
from explorer.strategy.rules import check_strategy

RECOMPUTE = ("none", "selective", "full")
DTYPES = ("bf16", "fp16", "fp32", "fp8")
"""fp8: Transformer Engine-style FP8 training (FP8 GEMMs, BF16 weights/gradients/activations,
fp32 master weights and Adam states; explorer.hardware.cluster.BYTES_PER_ELEMENT)."""
GRAD_DTYPES = ("model", "fp32")
GRAD_BYTES = {"fp32": 4}             # grad_dtype -> bytes per reduced gradient element ("model": beta)
"""Gradient accumulation and data-parallel reduction dtype: "model" = the training dtype's bytes
(beta); "fp32" = 4 B, Megatron-LM's --accumulate-allreduce-grads-in-fp32 (on by default with
--bf16, megatron/training/arguments.py; 18 B/param with Adam: Megatron-LM
docs/user-guide/features/dist_optimizer.md). A Strategy given neither takes its framework's default
(Strategy.framework, explorer/strategy/frameworks.py: GRAD_FROM_FRAMEWORK, resolved on construction)."""
CP_ALGOS = ("ring", "ulysses")   # explorer.cost.context_parallel
LAYER_PRESETS = ("megatron", "column", "row", "batch", "replicated")
"""Per-layer operator splits (see ops_split.py):
megatron: Megatron-LM's column->row pairing (QKV/FC1 by column, proj/FC2 by row);
column: every MatMul split by output column; row: every MatMul split by its
reduction dim; batch: the micro-batch split inside the group (weights replicated);
replicated: every device of the group computes the whole layer."""
OP_SPLITS = ("replicated", "column", "row", "batch", "heads", "seq")


DECLARED = tuple(OPTIONS)
"""The option records whose fields Strategy declares (the table when this module was imported)."""


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
    scatter_gather: bool = True      # SC'21 Megatron's scatter/gather of p2p sends (bsh/t), as asked; what is
    #                                  priced: scatters_sends (Megatron-Core never scatters: frameworks.SENDS_WHOLE)
    dtype: str = "bf16"
    layer_splits: tuple = ()         # LayerSplit per layer; () = LayerSplit(tp, 'megatron') everywhere
    stage_map: tuple = ()            # pipeline stage of each layer; () = even split
    rank_order: str = DEFAULT_ORDER  # mesh axes, fastest-varying first (Megatron-LM's tp-cp-ep-dp-pp)
    grad_dtype: str = GRAD_FROM_FRAMEWORK  # GRAD_DTYPES: gradients accumulated and reduced in the model dtype or
    #                                   fp32; "framework" (default) = the framework's own (frameworks.py), resolved once
    cp: int = 1                      # context-parallel degree: the sequence split over cp devices
    cp_algo: str = "ring"            # 'ring' (Megatron-LM CP, K/V around a ring) or 'ulysses' (all-to-all)
    overlap_tp: bool = False         # tensor-parallel collectives under the GEMMs (Megatron --tp-comm-overlap)
    overlap_param_gather: bool = False  # ZeRO-1/2 parameter all-gather under the next forward (Megatron
    #                                     --overlap-param-gather, off by default there)
    zero_prefetch: bool = True       # ZeRO-3 gathers under the previous layer's compute (DeepSpeed prefetch, on by default)
    ep: int = 1                      # e: expert-parallel degree, carved out of dp (MoE models only)
    expert_tp: int = 0               # expert tensor-parallel degree: 0 = tp (Megatron's default) or 1
    overlap_p2p: bool = False        # pipeline sends under computation (Megatron overlap_p2p_comm; interleaved)
    pipeline_layout: str = ""        # Megatron-LM --pipeline-model-parallel-layout (pipeline_layout.py); "" = even
    framework: str = "generic"       # FRAMEWORKS: the framework targeted, whose defaults apply (frameworks.py)
    # the option table's fields (explorer/strategy/options.py: cuda_graphs, moe_dispatcher, overlap_ep, fp8_recipe,
    # adam_moments, recompute_modules, ...), each declared there once with its default, meaning and source
    for _option in OPTIONS:
        __annotations__[_option.name] = _option.annotation
        vars()[_option.name] = _option.default
    del _option
    # (the records are read once, here: a record appended to the table later has no field in this class)

    @property
    def scatters_sends(self) -> bool:
        """Whether the pipeline sends are scattered over the tensor-parallel ranks as this strategy's framework runs
        them: scatter_gather, except under Megatron-Core (frameworks.SENDS_WHOLE)."""
        return scatters_sends(self.framework, self.scatter_gather)

    def __post_init__(self):
        for name in ("dp", "tp", "pp", "micro_batch", "global_batch", "chunks", "cp", "ep"):
            _int_at_least(name, getattr(self, name), 1)
        if self.schedule not in REGISTERED:          # the registry now (a test may register one)
            raise ExplorerError(f"schedule {self.schedule!r} is unknown; use one of {', '.join(REGISTERED)}")
        if self.recompute not in RECOMPUTE:
            raise ExplorerError(f"recompute {self.recompute!r} is unknown; use one of {', '.join(RECOMPUTE)}")
        if self.cp_algo not in CP_ALGOS:
            raise ExplorerError(f"cp_algo {self.cp_algo!r} is unknown; use one of {', '.join(CP_ALGOS)}")
        if isinstance(self.expert_tp, bool) or not isinstance(self.expert_tp, int) or \
                self.expert_tp not in (0, 1, self.tp):
            raise ExplorerError(f"strategy field 'expert_tp' must be 1 or tp = {self.tp} (0 = tp), "
                                f"got {self.expert_tp!r}")
        if self.dtype not in DTYPES:
            raise ExplorerError(f"dtype {self.dtype!r} is unknown; use one of {', '.join(DTYPES)}")
        for option in DECLARED:       # each option's value checked (and kept in one spelling: one cost key)
            object.__setattr__(self, option.name, option.checked(getattr(self, option.name)))
        if isinstance(self.zero, bool) or not isinstance(self.zero, int) or self.zero not in (0, 1, 2, 3):
            raise ExplorerError(f"zero stage must be 0, 1, 2 or 3, got {self.zero!r}")
        object.__setattr__(self, "framework", check_framework(self.framework))
        if self.grad_dtype == GRAD_FROM_FRAMEWORK:  # the framework's default, once
            object.__setattr__(self, "grad_dtype", default_grad_dtype(self.framework, self.dtype, self.zero))
        if self.grad_dtype not in GRAD_DTYPES:
            raise ExplorerError(f"grad_dtype {self.grad_dtype!r} is unknown; use one of {', '.join(GRAD_DTYPES)}")
        for name in ("sequence_parallel", "overlap_dp", "scatter_gather", "overlap_tp", "overlap_param_gather",
                     "zero_prefetch", "overlap_p2p"):
            if not isinstance(getattr(self, name), bool):
                raise ExplorerError(f"strategy field '{name}' must be true or false, got {getattr(self, name)!r}")
        splits = tuple(s if isinstance(s, LayerSplit) else LayerSplit(**s) for s in self.layer_splits)
        object.__setattr__(self, "layer_splits", splits)
        object.__setattr__(self, "stage_map", tuple(self.stage_map))
        if self.pipeline_layout:     # parsed once, kept in its canonical spelling (one key per layout)
            if self.stage_map:
                raise ExplorerError("a strategy takes a pipeline layout or a stage_map, not both")
            layout = parse_layout(self.pipeline_layout, self.pp * self.chunks)
            canonical = layout.text()
            if len(canonical) > MAX_LAYOUT_CHARS:      # a repeat of more stages than text() groups: kept as given,
                canonical = self.pipeline_layout.strip()   # which parse accepted (a review: 20 characters became 2,705)
            object.__setattr__(self, "pipeline_layout", canonical)
        if not isinstance(self.rank_order, str) or sorted(self.rank_order.split("-")) != sorted(AXES):
            raise ExplorerError(f"rank_order must name each mesh axis once ({'-'.join(AXES)} in some order), "
                                f"got {self.rank_order!r}")
        check_strategy(self)

    @property
    def devices(self) -> int:
        return self.dp * self.tp * self.cp * self.pp

    @property
    def micro_batches(self) -> int:
        """m = B / (b d) (Narayanan et al. SC'21, Sec 2.2.1)."""
        return self.global_batch // (self.micro_batch * self.dp)

    def split_of(self, layer: int) -> LayerSplit:
        if self.layer_splits:
            return self.layer_splits[layer]
        return LayerSplit(degree=self.tp, preset="megatron")

    def stages(self, layers: int) -> tuple:
        """Stage of each layer: the given map, the pipeline layout's, or an even split (first stages take
        the remainder)."""
        if self.stage_map:
            return self.stage_map
        if self.pipeline_layout:     # virtual stage k where the schedule places model chunk k (rank k mod p)
            place = REGISTERED[self.schedule].place
            return tuple(place(k, self.pp, self.chunks)[0] for k in self.layout.layer_stages())
        base, extra = divmod(layers, self.pp)
        out = []
        for stage in range(self.pp):
            out += [stage] * (base + (1 if stage < extra else 0))
        return tuple(out)

    @cached_property
    def layout(self):
        """The parsed pipeline layout (pipeline_layout.PipelineLayout), or None without one."""
        return parse_layout(self.pipeline_layout) if self.pipeline_layout else None

    @cached_property
    def mesh(self) -> Mesh:
        """The device mesh: named axes with their sizes, in rank order."""
        return Mesh.of(self.rank_order, tp=self.tp, dp=self.dp, pp=self.pp, cp=self.cp)

    @cached_property
    def expert_mesh(self) -> Mesh:
        """The mesh of the expert layers (Megatron-Core's expert RankGenerator): the same devices with
        ep carved out of dp -- tp (the expert tensor-parallel size, = tp as Megatron's default),
        ep, then the expert-data-parallel tp dp / (etp ep) replicas of each expert's weights, then pp.
        With expert_tp = 1 the ep group takes the tp ranks too (Megatron-Bridge's MoE recipes).
        Context parallelism folds into the expert data-parallel axis: the experts see tokens, not
        sequences, so the expert-DP group is tp cp dp / (etp ep) (Megatron-Core parallel_state
        initialize_model_parallel: expert_data_parallel_size = world / (pp etp ep), no cp axis)."""
        etp = self.etp
        return Mesh.of(self.rank_order, tp=etp, ep=self.ep, dp=self.tp * self.cp * self.dp // (etp * self.ep),
                       pp=self.pp)

    @property
    def etp(self) -> int:
        """The expert layers' tensor-parallel degree (Megatron-Core expert_tensor_parallel_size)."""
        return self.expert_tp or self.tp

    def with_(self, **changes) -> "Strategy":
        """The strategy with `changes`; a gradient dtype that was its framework's default follows the new
        framework, dtype or ZeRO stage (the user chose no other), unless `changes` names one."""
        if "grad_dtype" not in changes and {"framework", "dtype", "zero"} & set(changes) and \
                self.grad_dtype == default_grad_dtype(self.framework, self.dtype, self.zero):
            changes = {**changes, "grad_dtype": GRAD_FROM_FRAMEWORK}
        return replace(self, **changes)


def options_of(strategy) -> dict:
    """A Strategy's keyword options of variant() / terms(): gradient bytes and the overlaps of the
    parameter gathers (only those that are on, so that the keys of the defaults stay as they were)."""
    options = {"grad_bytes": GRAD_BYTES.get(strategy.grad_dtype)}
    if getattr(strategy, "overlap_param_gather", False) and strategy.zero in (1, 2):
        options["param_gather_overlap"] = True
    if getattr(strategy, "zero_prefetch", False) and strategy.zero == 3:
        options["zero_prefetch"] = True
    if getattr(strategy, "overlap_p2p", False) and strategy.pp > 1:
        options["p2p_overlap"] = True
    return {**options, **memory_options(strategy)}


def memory_options(strategy) -> dict:
    """The super-step options of what a strategy's precision recipe keeps (explorer/hardware/precision.py):
    the FP8 recipe whose weight copies Transformer Engine caches ("fp8_weights", dtype fp8) and the
    precision-aware optimizer's bytes (optimizer_options); {} for bf16 with fp32 moments. Read by
    options_of and by the search's objective (plain values: they key the compiled functions)."""
    recipe = getattr(strategy, "fp8_recipe", "delayed")
    out = {"fp8_weights": recipe} if strategy.dtype == "fp8" else {}
    return {**out, **optimizer_options(strategy.dtype, recipe, getattr(strategy, "adam_moments", "fp32")),
            **superstep_options(strategy)}      # the option table's terms() keywords (explorer/strategy/options.py)
