"""One table of strategy rules: a reason and a predicate each (torchtitan's ParallelDims idea).

The same rules refuse a Strategy on construction (scope 'strategy'), refuse it
for a model or a device count (scopes 'model', 'devices'), and count the search's
pruned choices (the `reason` of the first rule a raw choice breaks). A predicate
reads a *view*: any object with the Strategy fields it names (`fields`), so the
search can check a whole family of choices at once. It returns the message
naming the offending values, or None when the view obeys the rule.
"""
from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace
from typing import Callable

from explorer.errors import ExplorerError
from explorer.hardware.precision import RECIPE_HARDWARE
from explorer.schedules import get as schedule_of
from explorer.strategy.moe_rules import (dispatcher_hardware, ep_divides_dp, ep_divides_experts, ep_overlap_refusal,
                                         moe_needs_sequence_parallel)
from explorer.strategy.options import refusal as option_refusal
from explorer.strategy.pipeline_layout import check_against, even_layout
from explorer.strategy.recompute_rules import recompute_module_absent


@dataclass(frozen=True)
class Rule:
    reason: str              # short, stable: the search's pruning key
    scope: str               # 'strategy' (fields only), 'model' (+ model), 'cluster' (+ the cluster: check())
    fields: tuple            # the view attributes the predicate reads
    broken: Callable         # (view, model) -> message naming the values, or None; scope 'cluster': (view, cluster)
    searched: bool = True    # the search's enumeration can break it (counted when pruning)


def micro_batches(v) -> int:
    """m = B / (b d) (Narayanan et al. SC'21, Sec 2.2.1)."""
    return v.global_batch // (v.micro_batch * v.dp)


def _heads(v, model, kv: bool):
    if not model.is_transformer:
        return None
    heads = model.kv_heads if kv else model.heads
    for i, split in _layer_splits(v):
        where = f" (layer {i})" if i is not None else ""
        if heads % split.degree and split.effective_preset != "batch":
            extra = (" (grouped-query attention splits whole KV heads, as in Megatron-LM)" if kv else "")
            what = f"{heads} key/value heads" if kv else f"{heads} attention heads"
            return f"operator-parallel degree {split.degree}{where} does not divide the {what}{extra}"
    return None


def _layer_splits(v):
    splits = getattr(v, "layer_splits", ())
    if splits:
        return list(enumerate(splits))
    return [(None, SimpleNamespace(degree=v.tp, effective_preset="megatron" if v.tp > 1 else "replicated"))]


def _batch_split(v, model):
    for i, split in enumerate(getattr(v, "layer_splits", ())):
        if split.effective_preset == "batch" and v.micro_batch % split.degree:
            return f"layer {i} splits the batch {split.degree} ways but the micro-batch is {v.micro_batch}"
    return None


def _stage_map_covers(v, model):
    stage_map = getattr(v, "stage_map", ())
    if not stage_map:
        return None
    if len(stage_map) != model.layers:
        return f"stage_map has {len(stage_map)} entries but the model has {model.layers} layers"
    empty = sorted(set(range(v.pp)) - set(stage_map))
    return f"stage {empty[0]} has no layers in the stage_map" if empty else None


def _layer_splits_length(v, model):
    splits = getattr(v, "layer_splits", ())
    if splits and len(splits) != model.layers:
        return f"layer_splits has {len(splits)} entries but the model has {model.layers} layers"
    return None


def _chunks(v, model):
    slots = model.layers + getattr(model, "mtp_layers", 0) + 2      # with the embedding and the loss (even_layout)
    if schedule_of(v.schedule).chunked and v.pp * v.chunks > slots:
        return (f"pp x chunks = {v.pp * v.chunks} model chunks is more than the {model.layers} layers, even with "
                "the embedding and the loss as chunk members")
    return None


def _uneven(v, model):
    if getattr(v, "pipeline_layout", "") or not schedule_of(v.schedule).chunked or \
            not model.layers % (v.pp * v.chunks):
        return None
    mtp = getattr(model, "mtp_layers", 0)
    if even_layout(model.layers, mtp, v.pp * v.chunks) is None:
        return (f"the {model.layers} layers do not split into pp x chunks = {v.pp * v.chunks} equal model "
                f"chunks, nor do they with the embedding{', the MTP layers' if mtp else ''} and the loss counted "
                f"as layers ({model.layers + mtp + 2} slots): give --pipeline-layout (Megatron-LM "
                "--pipeline-model-parallel-layout) or --decoder-first/last-pipeline-num-layers")
    return None


def _layout_fits(v, model):
    layout = getattr(v, "layout", None) if getattr(v, "pipeline_layout", "") else None
    if layout is None:
        return None
    return check_against(layout, model.layers, getattr(model, "mtp_layers", 0), v.pp)


def _min_stages(v, model):
    sched = schedule_of(v.schedule)
    if v.pp < sched.min_stages:
        return f"the '{v.schedule}' schedule needs pp >= {sched.min_stages}"
    return None


def _micro_multiple(v, model):
    if schedule_of(v.schedule).micro_batches_multiple_of_stages and micro_batches(v) % v.pp:
        return (f"the {v.schedule} schedule needs the micro-batches per iteration ({micro_batches(v)}) "
                f"to be a multiple of pp={v.pp}")
    return None


def _micro_at_least(v, model):
    sched = schedule_of(v.schedule)
    if micro_batches(v) < sched.min_micro_batches(v.pp):
        times = "as many" if sched.micro_batches_per_stage == 1 else f"{sched.micro_batches_per_stage} times as many"
        return (f"the {v.schedule} schedule needs at least {times} micro-batches per iteration as stages "
                f"({micro_batches(v)} < {sched.min_micro_batches(v.pp)}): {sched.micro_batches_reason}")
    return None


def _chunks_fixed(v, model):
    sched = schedule_of(v.schedule)
    if sched.chunks and v.chunks != sched.chunks:
        return f"the {v.schedule} schedule places exactly {sched.chunks} model chunks per stage, not chunks={v.chunks}"
    return None


def _chunks_need_schedule(v, model):
    if not schedule_of(v.schedule).chunked and v.chunks != 1:
        return f"chunks={v.chunks} needs a chunked schedule such as 'interleaved' (got {v.schedule!r})"
    return None


def _zero_pp(v, model):
    if v.zero >= 2 and v.pp > 1:
        return (f"zero={v.zero} cannot be combined with pp={v.pp}: gradients and parameters sharded across "
                "data-parallel ranks conflict with pipeline micro-batch accumulation (DeepSpeed refuses it "
                "too); use zero 0 or 1 with pipelining")
    return None


def _batch(v, model):
    per_step = v.micro_batch * v.dp
    if v.global_batch % per_step:
        return (f"global batch {v.global_batch} is not divisible by micro-batch x dp = "
                f"{v.micro_batch} x {v.dp} = {per_step}")
    return None


def _sequence_parallel(v, model):
    return "sequence parallelism needs tp > 1" if v.sequence_parallel and v.tp == 1 else None


def _degrees_divide_tp(v, model):
    for i, split in enumerate(getattr(v, "layer_splits", ())):
        if v.tp % split.degree:
            return f"layer {i}: operator-parallel degree {split.degree} does not divide tp={v.tp}"
    return None


def _stage_map_range(v, model):
    stage_map = getattr(v, "stage_map", ())
    for i, stage in enumerate(stage_map):
        if isinstance(stage, bool) or not isinstance(stage, int) or not 0 <= stage < v.pp:
            return f"layer {i} is mapped to stage {stage!r}, outside 0..{v.pp - 1}"
    if any(later < earlier for earlier, later in zip(stage_map, stage_map[1:])):
        return "the layer->stage map must not decrease (stages hold consecutive layers)"
    return None


def _stage_map_schedule(v, model):
    if getattr(v, "stage_map", ()) and schedule_of(v.schedule).chunked:
        return (f"a custom stage_map cannot be combined with the {v.schedule} schedule, whose stages hold several "
                "model chunks: give a pipeline layout (--pipeline-layout) instead")
    return None


def _stages(v, model):
    return f"pp={v.pp} stages is more than the model's {model.layers} layers" if v.pp > model.layers else None


def _gpus(v, model, gpus=None, cluster=None):
    cp = getattr(v, "cp", 1)
    devices = v.dp * v.tp * cp * v.pp
    if gpus is not None and devices != gpus and cp > 1:
        return (f"dp x tp x cp x pp = {v.dp} x {v.tp} x {cp} x {v.pp} = {devices} does not equal "
                f"the {gpus} GPUs")
    if gpus is not None and devices != gpus:
        return f"dp x tp x pp = {v.dp} x {v.tp} x {v.pp} = {devices} does not equal the {gpus} GPUs"
    return None   # any number of devices: the cluster's outermost level grows with the run (limits bound it)


def _cp_model(v, model):
    cp = getattr(v, "cp", 1)
    if cp == 1:
        return None
    if not model.is_transformer:
        return f"context parallelism (cp={cp}) splits a transformer's sequence; {model.name} is a {model.family}"
    if model.seq_len % (2 * cp):
        return (f"cp={cp} needs the sequence length {model.seq_len} to split into 2 x cp = {2 * cp} equal "
                "chunks (Megatron-LM's load-balanced causal split: device i holds chunks i and 2cp-1-i)")
    return None


def _overlap_tp(v):
    if getattr(v, "overlap_tp", False) and not (v.sequence_parallel and v.tp > 1):
        return ("overlapping tensor-parallel communication with the GEMMs needs sequence parallelism and t > 1 "
                "(Megatron-LM --tp-comm-overlap overlaps the sequence-parallel all-gathers and reduce-scatters)")
    return None


def _overlap_p2p(v):
    if getattr(v, "overlap_p2p", False) and not schedule_of(v.schedule).overlaps_sends:
        return (f"overlapping the pipeline's point-to-point sends with computation needs the interleaved schedule, "
                f"not {v.schedule!r} (Megatron-Core refuses overlap_p2p_comm without a virtual "
                "pipeline: 'Non-interleaved pipeline parallelism does not support overlapping p2p communication')")
    return None


def _cp_algo(v, model):
    cp, algo = getattr(v, "cp", 1), getattr(v, "cp_algo", "ring")
    if cp == 1 or not model.is_transformer:
        return None
    if algo == "ring" and model.attention != "flash":
        return (f"ring context parallelism (cp={cp}) needs FlashAttention: Megatron-LM's CP runs Transformer "
                "Engine's context-parallel attention, whose backends are the flash and fused attention kernels "
                "(use --attention flash, or --cp-algo ulysses)")
    if algo == "ring" and (getattr(model, "sliding_window_tokens", 0) or getattr(model, "attention_sinks", False)):
        what = "sliding-window attention" if getattr(model, "sliding_window_tokens", 0) else "learnable attention sinks"
        return (f"ring context parallelism (cp={cp}) cannot run {model.name}'s {what}: Transformer Engine's "
                "context-parallel attention takes a sliding window only with cp_comm_type a2a or all_gather and a "
                "sink softmax only with a2a (context_parallel.py attn_forward_func_with_cp @ d0067d0d); use "
                "--cp-algo ulysses")
    if algo == "ulysses":
        for what, heads in (("attention heads", model.heads), ("key/value heads", model.kv_heads)):
            if heads % (v.tp * cp):
                return (f"Ulysses (cp={cp}) splits the {heads} {what} over tp x cp = {v.tp * cp} devices, which "
                        "does not divide them (DeepSpeed-Ulysses, Jacobs et al. 2023 Sec 3.1)")
    return None


def graphs_refusal(v, model):
    """Why CUDA graphs of `v`'s scope cannot capture `model`'s MoE layers (None when they can)."""
    dispatcher = getattr(v, "moe_dispatcher", "alltoall")
    if getattr(v, "cuda_graphs", "none") == "full" and getattr(model, "is_moe", False) and \
            not getattr(model, "moe_capacity_factor", 0) and dispatcher != "hybridep":
        return (f"full-iteration CUDA graphs cannot capture {model.name}'s dropless {dispatcher} dispatcher: it "
                "synchronises with the host every MoE layer to size its all-to-all (use cuda_graphs 'layer', the "
                "hybridep dispatcher, or token-drop with a capacity factor)")
    return None


def _precision(v, model=None):
    """An FP8 recipe other than the default needs FP8 training; bf16 Adam moments need the distributed
    optimizer (explorer/hardware/precision.py)."""
    recipe = getattr(v, "fp8_recipe", "delayed")
    if recipe != "delayed" and v.dtype != "fp8":
        return f"fp8_recipe {recipe!r} needs dtype fp8, not {v.dtype} (a {v.dtype} run keeps nothing in FP8)"
    if getattr(v, "adam_moments", "fp32") != "fp32" and v.zero < 1:
        return (f"{v.adam_moments} Adam moments need ZeRO >= 1: Megatron's precision-aware optimizer runs only with "
                "its distributed optimizer ('--use-precision-aware-optimizer only supported with distributed "
                "optimizer', megatron/core/optimizer/__init__.py)")
    return None


def fp8_recipe_hardware(v, cluster=None):
    """An FP8 recipe the cluster's device does not run (Device.fp8_recipes, from Transformer Engine's support
    matrix: explorer.hardware.precision.RECIPE_HARDWARE), e.g. MXFP8 on Hopper: one line naming the device and the
    recipes that run there. A device that states no recipes takes every one."""
    device = getattr(cluster, "device", None)
    recipe = getattr(v, "fp8_recipe", "delayed")
    if device is None or v.dtype != "fp8" or not device.fp8_recipes or recipe in device.fp8_recipes:
        return None
    return (f"fp8_recipe {recipe!r} does not run on {device.name}: it needs {RECIPE_HARDWARE[recipe]} "
            f"(Transformer Engine's support matrix); {device.name} runs {', '.join(device.fp8_recipes)}")


def _options(v, model=None):
    """An option of the table (explorer/strategy/options.py) on where its record says it does not apply (its
    `when`, its ZeRO stage): the record's one-line refusal, naming the values."""
    return option_refusal(v)


def _recompute_modules(v, model):
    """What Megatron-Core's TransformerConfig refuses of --recompute-modules (transformer_config.py
    __post_init__ @ d98e8a64), for the modules the explorer models (explorer/model/recompute.py)."""
    modules = getattr(v, "recompute_modules", ())
    if not modules or v.recompute != "selective":
        return None
    absent = next((why for why in (recompute_module_absent(m, model) for m in modules) if why), None)
    if absent:       # the modules the model has (explorer/strategy/recompute_rules.py; the sidebar offers those)
        return absent
    if v.dtype == "fp8" and getattr(v, "fp8_recipe", "delayed") == "delayed" and \
            ({"moe_act", "layernorm"} & set(modules)):
        return ("FP8 delayed scaling cannot recompute moe_act or layernorm (Megatron-Core: 'Delayed scaling does not "
                "support moe_act and layernorm recompute for fp8'); use another fp8_recipe")
    return None


HEADS = "t does not divide the attention heads"
KV_HEADS = "t does not divide the key/value heads"
STAGES = "more pipeline stages than layers"
BATCH = "global batch not divisible by micro-batch x d"
MIN_STAGES = "interleaved schedule needs pp >= 2"
CHUNKS = "more model chunks (pp x v) than layers"
UNEVEN = "interleaved chunks of unequal size"
MICRO = "micro-batches not a multiple of pp (interleaved)"
MICRO_AT_LEAST = "fewer micro-batches than stages (zero bubble)"
ZERO_PP = "ZeRO >= 2 cannot combine with pipelining"
SEQ_TP = "sequence parallelism needs t > 1"
CP_SEQ = "cp does not split the sequence into 2cp chunks"
CP_ALGO = "context-parallel algorithm does not fit the attention"
MEMORY = "over the memory cap"          # counted by the search after evaluation

RULES = (
    # in the order a search meets them: degrees, micro-batch, schedule, ZeRO, sequence parallelism
    Rule(HEADS, "model", ("tp", "layer_splits"), lambda v, m: _heads(v, m, kv=False)),
    Rule(KV_HEADS, "model", ("tp", "layer_splits"), lambda v, m: _heads(v, m, kv=True)),
    Rule(STAGES, "model", ("pp",), _stages),
    Rule(BATCH, "strategy", ("micro_batch", "dp", "global_batch"), _batch),
    Rule(MIN_STAGES, "strategy", ("schedule", "pp"), _min_stages),
    Rule(CHUNKS, "model", ("schedule", "pp", "chunks"), _chunks),
    Rule(UNEVEN, "model", ("schedule", "pp", "chunks"), _uneven),
    Rule(MICRO, "strategy", ("schedule", "pp", "micro_batch", "dp", "global_batch"), _micro_multiple),
    Rule(MICRO_AT_LEAST, "strategy", ("schedule", "pp", "micro_batch", "dp", "global_batch"), _micro_at_least),
    Rule(ZERO_PP, "strategy", ("zero", "pp"), _zero_pp),
    Rule(SEQ_TP, "strategy", ("sequence_parallel", "tp"), _sequence_parallel),
    Rule(CP_SEQ, "model", ("cp",), _cp_model),
    Rule(CP_ALGO, "model", ("cp", "cp_algo", "tp"), _cp_algo),
    # structural rules the search never breaks (it builds maps and splits that obey them)
    Rule("chunks without a chunked schedule", "strategy", ("schedule", "chunks"), _chunks_need_schedule, False),
    Rule("chunks other than the schedule's", "strategy", ("schedule", "chunks"), _chunks_fixed, False),
    Rule("TP overlap without sequence parallelism", "strategy", ("overlap_tp", "sequence_parallel", "tp"),
         lambda v, m: _overlap_tp(v), False),
    Rule("p2p overlap without the interleaved schedule", "strategy", ("overlap_p2p", "schedule"),
         lambda v, m: _overlap_p2p(v), False),
    Rule("layer degree does not divide t", "strategy", ("tp", "layer_splits"), _degrees_divide_tp, False),
    Rule("stage map out of range or decreasing", "strategy", ("pp", "stage_map"), _stage_map_range, False),
    Rule("stage map with a chunked schedule", "model", ("schedule", "stage_map"), _stage_map_schedule, False),
    Rule("layer_splits of another length", "model", ("layer_splits",), _layer_splits_length, False),
    Rule("stage map of another length or with an empty stage", "model", ("pp", "stage_map"),
         _stage_map_covers, False),
    Rule("pipeline layout does not fit the model", "model", ("pp", "pipeline_layout"), _layout_fits, False),
    Rule("batch split of a micro-batch it does not divide", "model", ("micro_batch", "layer_splits"),
         _batch_split, False),
    Rule("MoE with t > 1 needs sequence parallelism", "model", ("tp", "sequence_parallel"),
         moe_needs_sequence_parallel),
    # expert parallelism (issue 11): the search enumerates only ep that obey these
    Rule("ep does not divide d", "strategy", ("ep", "dp", "tp", "expert_tp", "sequence_parallel"),
         ep_divides_dp, False),
    Rule("ep does not divide the experts", "model", ("ep",), ep_divides_experts, False),
    Rule("full CUDA graphs with a dropless MoE dispatcher", "model", ("cuda_graphs", "moe_dispatcher"),
         graphs_refusal, False),
    Rule("expert-parallel overlap Megatron-Core refuses", "model",
         ("overlap_ep", "ep", "moe_dispatcher", "recompute", "pp", "schedule"), ep_overlap_refusal, False),
    Rule("precision options the recipe does not allow", "strategy", ("fp8_recipe", "dtype", "adam_moments", "zero"),
         _precision, False),
    Rule("an option where its record says it does not apply", "strategy", ("dtype", "zero"), _options, False),
    Rule("recompute modules the model or recipe does not allow", "model",
         ("recompute", "recompute_modules", "dtype", "fp8_recipe"), _recompute_modules, False),
    # the cluster's device (check() with a cluster: evaluate, the CLI, links, files, the search's problem)
    Rule("FP8 recipe the device does not run", "cluster", ("dtype", "fp8_recipe"), fp8_recipe_hardware, False),
)
REASONS = tuple(rule.reason for rule in RULES if rule.searched) + (MEMORY,)
"""The search's pruning reasons, in the order a raw choice is checked."""


def first_broken(view, model=None, scopes=("strategy", "model")) -> tuple:
    """(rule, message) of the first rule `view` breaks among `scopes`, or (None, None)."""
    for rule in RULES:
        if rule.scope in scopes and (model is not None or rule.scope == "strategy"):
            message = rule.broken(view, model)
            if message:
                return rule, message
    return None, None


def check_strategy(strategy) -> None:
    """Refuse a strategy that breaks a rule of its own fields (Strategy.__post_init__)."""
    rule, message = first_broken(strategy, None, ("strategy",))
    if rule:
        raise ExplorerError(message)


def check(model, strategy, gpus: int | None = None, cluster=None) -> None:
    """Refuse a strategy that does not fit `model`, the device count and the cluster: the one
    check an evaluation makes (the strategy's own rules ran when it was built)."""
    message = _gpus(strategy, model, gpus, None)
    if message:
        raise ExplorerError(message)
    rule, message = first_broken(strategy, model, ("model",))
    if rule:
        raise ExplorerError(message)
    message = _gpus(strategy, model, None, cluster) or dispatcher_hardware(strategy, model, cluster)
    if message:
        raise ExplorerError(message)
    rule, message = first_broken_on(strategy, cluster)
    if rule:
        raise ExplorerError(message)


def first_broken_on(view, cluster) -> tuple:
    """(rule, message) of the first rule of scope 'cluster' `view` breaks on `cluster`, or (None, None)."""
    for rule in RULES:
        if rule.scope == "cluster" and cluster is not None:
            message = rule.broken(view, cluster)
            if message:
                return rule, message
    return None, None


def view(**fields) -> SimpleNamespace:
    """A partial strategy for the search: only the fields a family has fixed."""
    return SimpleNamespace(**fields)
