"""Named strategies for a model and a GPU count: the starting points the app offers.

Each preset is built for the chosen model, cluster and device count and is
checked by `evaluate`; a preset that cannot work (e.g. ZeRO-3 memory still too
large is fine, but tp not dividing the heads is not) comes back with the reason
instead of a strategy.

>>> from explorer import load_model, load_cluster
>>> found = strategy_presets(load_model("tiny-gpt"), load_cluster("classroom"), 8, 16)
>>> found["Pure DP"].strategy.dp
8
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

from explorer.hardware.cluster import Cluster
from explorer.errors import ExplorerError
from explorer.limits import WorkCancelled
from explorer.cost.evaluate import evaluate
from explorer.model.spec import ModelSpec
from explorer.schedules import chunked
from explorer.strategy.strategy import Strategy

DEFAULT_MODEL = "gpt3-175b"
DEFAULT_CLUSTER = "dgx-a100-80gb"
# Narayanan et al. SC'21 Table 1 row for GPT-3 175B (t=8, p=8, 1024 GPUs, B=1536), with
# Korthikanti et al. MLSys'23's sequence parallelism + selective recomputation so it fits 80 GB.
DEFAULT_STRATEGY = Strategy(dp=16, tp=8, pp=8, micro_batch=1, global_batch=1536, schedule="1f1b",
                            sequence_parallel=True, recompute="selective")


@dataclass(frozen=True)
class Preset:
    name: str
    description: str
    strategy: Strategy | None     # None when the preset does not fit; see `reason`
    reason: str = ""


def _powers_of_two(limit: int) -> list:
    out, x = [], 1
    while x <= limit:
        out.append(x)
        x *= 2
    return out


def round_batch(global_batch: int, multiple: int) -> int:
    """The smallest multiple of `multiple` that is >= global_batch (and >= multiple)."""
    return max(multiple, -(-global_batch // multiple) * multiple)


def node_tp(model: ModelSpec, cluster: Cluster, gpus: int) -> int:
    """Largest power of two within one node that divides the heads, the key/value heads (GQA splits
    whole KV heads, Megatron-LM) and the GPU count (Megatron's rule)."""
    heads = model.heads if model.is_transformer else 1
    kv = model.kv_heads if model.is_transformer else 1
    fits = [t for t in _powers_of_two(cluster.devices_per_node) if heads % t == 0 and kv % t == 0
            and gpus % t == 0]
    return max(fits)


def _fits_memory(model, strategy, cluster) -> bool:
    result = evaluate(model, strategy, cluster)
    return result.memory_bytes_per_device["total"] <= cluster.device.memory_bytes


def expert_parallel_choices(model: ModelSpec, dp: int, devices_per_node: int) -> list:
    """ep values for an MoE model, in the order the presets try them: powers of two dividing both the routed
    experts and dp (ep is carved out of dp), from the largest whose all-to-all stays inside one NVLink domain
    (ep <= the cluster's devices per node: Qwen3-30B-A3B runs e 8 on DGX H100 and B200, GPT-OSS 120B e 8 on
    H100) up to the largest, for models whose experts fit only spread wider (DeepSeek-V3 e 64, Qwen3-235B e 32
    on H100; NVIDIA-NeMo/Megatron-Bridge docs/performance-summary.md). [1] for a dense model. The Megatron 3D
    presets take the first whose device fits its memory (_build): on 1,024 A100s Qwen3-30B-A3B at e 128 ran
    14 % MFU, at e 8 22 % (its all-to-all over the network against NVLink)."""
    if not model.is_moe:
        return [1]
    fitting = [e for e in _powers_of_two(dp) if dp % e == 0 and model.experts % e == 0]   # 8 <= 9 divides no 9
    inside = [e for e in fitting if e <= devices_per_node]
    start = inside[-1] if inside else fitting[0]
    return [e for e in fitting if e >= start]


def _build(model, cluster, gpus, global_batch, micro_batch, tp, pp, **extra) -> Strategy:
    if gpus % (tp * pp):
        raise ExplorerError(f"{gpus} GPUs are not divisible by tp x pp = {tp} x {pp}")
    dp = gpus // (tp * pp)
    choices = [None]
    if extra.pop("expert_parallel", False):     # the experts unsplit (expert_tp 1), as the MoE recipes run them
        choices = expert_parallel_choices(model, dp, cluster.devices_per_node)
        if tp > 1:
            extra["expert_tp"] = 1
    multiple = micro_batch * dp * (pp if chunked(extra.get("schedule", "1f1b")) else 1)

    built = {}

    def made(ep) -> Strategy:
        if ep not in built:
            fields = dict(extra, ep=ep) if ep is not None else extra
            strategy = Strategy(dp=dp, tp=tp, pp=pp, micro_batch=micro_batch,
                                global_batch=round_batch(global_batch, multiple), **fields)
            evaluate(model, strategy, cluster)  # refuses what cannot run, naming the value
            built[ep] = strategy
        return built[ep]
    return made(first_fitting(choices, lambda ep: _fits_memory(model, made(ep), cluster)))


def first_fitting(choices: list, fits) -> object:
    """The first of `choices` for which fits(choice) holds, else the last: by bisection, since a device's memory
    only falls along them (more expert-parallel devices shard the experts, more stages the layers), so a choice
    that fits is followed by choices that fit. A choice whose strategy cannot run (ExplorerError) counts as not
    fitting. log2 of the choices' evaluations, not one each: a hostile review's 2,048-layer, 4,096-expert upload on
    a 1 GiB cluster, where nothing fits, made the presets try every size (204 evaluations, 41 s of CPU)."""
    def ok(i: int) -> bool:
        try:
            return fits(choices[i])
        except WorkCancelled:
            raise
        except ExplorerError:
            return False
    if len(choices) == 1 or ok(0):       # one choice (a dense model's): nothing to compare
        return choices[0]
    lo, hi = 0, len(choices) - 1          # choices[lo] does not fit; the answer is in (lo, hi]
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if ok(mid) else (mid, hi)
    return choices[hi]


def _smallest_fitting_pp(model, cluster, gpus, global_batch, micro_batch, tp, **extra) -> int:
    """Fewest pipeline stages (a power of two) whose most loaded device fits in memory."""
    candidates = [p for p in _powers_of_two(model.layers) if (gpus // tp) % p == 0]
    return first_fitting(candidates, lambda pp: _fits_memory(
        model, _build(model, cluster, gpus, global_batch, micro_batch, tp, pp, **dict(extra)), cluster))


def _recipes(model, cluster, gpus, global_batch, micro_batch) -> list:
    tp = node_tp(model, cluster, gpus)
    # Megatron-LM's recipe flags: sequence parallelism with t > 1, selective recomputation, and the gradient reduce
    # under the backward (--overlap-grad-reduce: Megatron-Bridge's common pretraining config, src/megatron/bridge/recipes/
    # common.py at 067f987d, sets overlap_grad_reduce=True)
    mega = dict(sequence_parallel=tp > 1, recompute="selective", overlap_dp=True)
    if model.is_moe:    # experts spread over ep devices, Megatron's distributed optimizer (ZeRO-1), as
        mega.update(expert_parallel=True, zero=1)     # every Megatron-Bridge MoE recipe runs them
    pp = _smallest_fitting_pp(model, cluster, gpus, global_batch, micro_batch, tp, **mega)
    return [
        ("Pure DP", "every GPU holds the whole model; gradients all-reduced", dict(tp=1, pp=1)),
        ("ZeRO-3", "data parallel with parameters, gradients and optimizer states sharded",
         dict(tp=1, pp=1, zero=3, overlap_dp=True)),
        ("TP in node + DP", f"t={tp} inside a node, ZeRO-1 across nodes",
         dict(tp=tp, pp=1, zero=1, sequence_parallel=model.is_moe and tp > 1)),
        ("Pipeline + DP (GPipe)", "8 stages (or fewer), no operator parallelism",
         dict(tp=1, pp=min(8, model.layers), schedule="gpipe")),
        ("Megatron 3D", f"t={tp} in a node, fewest stages that fit memory (p={pp}), 1F1B, SP + selective, DP sync under the backward"
                        + (", experts over e GPUs of one node (more where memory needs)" if model.is_moe else ""),
         dict(tp=tp, pp=pp, **mega)),
        ("Megatron 3D interleaved", f"as Megatron 3D with 2 chunks per stage (p={max(pp, 2)})",
         dict(tp=tp, pp=max(pp, 2), schedule="interleaved", chunks=2, **mega)),
    ]


def strategy_presets(model: ModelSpec, cluster: Cluster, gpus: int, global_batch: int,
                     micro_batch: int = 1) -> dict:
    """name -> Preset for this model on `gpus` devices (global batch rounded up where needed)."""
    out = {}
    for name, description, fields in _recipes(model, cluster, gpus, global_batch, micro_batch):
        fields = dict(fields)
        tp, pp = fields.pop("tp"), fields.pop("pp")
        try:
            strategy = _build(model, cluster, gpus, global_batch, micro_batch, tp, pp, **fields)
            out[name] = Preset(name, description, strategy)
        except WorkCancelled:
            raise                   # a cancelled run, not a preset that does not fit (nor one to cache)
        except ExplorerError as err:
            out[name] = Preset(name, description, None, str(err))
    return out


@functools.lru_cache(maxsize=64)        # every share link decodes it; ~10 evaluations each time
def fallback_strategy(model: ModelSpec, cluster: Cluster, gpus: int | None = None) -> Strategy:
    """The default strategy if it runs on this model and cluster and fits its memory, else the first
    preset that fits (for an MoE model the Megatron 3D presets with expert parallelism), else the
    default or the first preset that runs at all."""
    gpus = min(gpus or DEFAULT_STRATEGY.devices, cluster.max_devices)
    runs = []
    if gpus == DEFAULT_STRATEGY.devices:
        try:
            evaluate(model, DEFAULT_STRATEGY, cluster)
            runs.append(DEFAULT_STRATEGY)
        except WorkCancelled:
            raise
        except ExplorerError:
            pass
        if runs and _fits_memory(model, DEFAULT_STRATEGY, cluster):
            return DEFAULT_STRATEGY
    presets = list(strategy_presets(model, cluster, gpus, DEFAULT_STRATEGY.global_batch).values())
    if model.is_moe:    # the Megatron presets (with ep) first: how the published MoE runs train
        presets.sort(key=lambda p: not p.name.startswith("Megatron 3D"))
    candidates = [p.strategy for p in presets if p.strategy is not None]
    for strategy in candidates:
        if _fits_memory(model, strategy, cluster):
            return strategy
    runs += candidates
    return runs[0] if runs else Strategy()
