"""The global choices of a search, with the reason each pruned family was dropped.

The raw grid, for N devices and global batch B: every t dividing N, every p
dividing N/t (d = N/(t p)), every micro-batch b dividing B, the schedules
1f1b, gpipe and interleaved with v = 2..l chunks, ZeRO 0-3, the three
recomputation modes, sequence parallelism off/on and gradient-sync overlap
off/on. Each raw point is either kept or counted under the first rule it
breaks (RULES, in order), so the counts add up to the grid size.

>>> from explorer import load_model
>>> sp = enumerate_space(load_model("tiny-gpt"), gpus=8, global_batch=8)
>>> sp.kept + sum(sp.pruned.values()) == sp.total
True
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from explorer.errors import ExplorerError
from explorer.strategy.strategy import LayerSplit, RECOMPUTE

ZEROS, OVERLAPS, SEQ_PAR = (0, 1, 2, 3), (False, True), (False, True)
HEADS = "t does not divide the attention heads"
KV_HEADS = "t does not divide the key/value heads"     # grouped-query attention splits whole KV heads
STAGES = "more pipeline stages than layers"
BATCH = "global batch not divisible by micro-batch x d"
INTERLEAVE_PP = "interleaved schedule needs pp >= 2"
CHUNKS = "more model chunks (pp x v) than layers"
UNEVEN = "interleaved chunks of unequal size"          # Megatron-LM asserts layers % (p v) == 0
MICRO = "micro-batches not a multiple of pp (interleaved)"
ZERO_PP = "ZeRO >= 2 cannot combine with pipelining"
SEQ_TP = "sequence parallelism needs t > 1"
MEMORY = "over the memory cap"                          # counted by the search after evaluation
RULES = (HEADS, KV_HEADS, STAGES, BATCH, INTERLEAVE_PP, CHUNKS, UNEVEN, MICRO, ZERO_PP, SEQ_TP, MEMORY)
LAYER_PRESETS = ("megatron", "column", "row", "batch")
"""Per-layer presets searched at each degree > 1 ('replicated' at degree > 1 is degree 1's
cost with a larger group; per-operator overrides are left to the editor)."""


def divisors(n: int) -> list:
    return [k for k in range(1, n + 1) if n % k == 0]


def layer_options(tp: int) -> tuple:
    """Per-layer splits a layer may take inside a tp group: replicated, or a preset at a degree dividing tp."""
    out = [LayerSplit(1, "replicated")]
    out += [LayerSplit(k, preset) for k in divisors(tp) if k > 1 for preset in LAYER_PRESETS]
    return tuple(out)


@dataclass(frozen=True)
class Family:
    """Global choices evaluated together: one (t, p, schedule, chunks, recompute, sp)
    with every valid micro-batch, ZeRO stage and overlap setting."""

    tp: int
    pp: int
    dp: int
    schedule: str
    chunks: int
    recompute: str
    sequence_parallel: bool
    micro_batches: tuple
    zeros: tuple
    overlaps: tuple = OVERLAPS

    @property
    def size(self) -> int:
        return len(self.micro_batches) * len(self.zeros) * len(self.overlaps)


@dataclass
class Space:
    families: list
    pruned: Counter = field(default_factory=Counter)   # reason -> raw points
    total: int = 0

    @property
    def kept(self) -> int:
        return sum(f.size for f in self.families)


def _schedules(layers: int):
    yield "1f1b", 1
    yield "gpipe", 1
    for v in range(2, layers + 1):
        yield "interleaved", v


def _schedule_rule(layers, pp, chunks, schedule) -> str | None:
    if schedule != "interleaved":
        return None
    if pp < 2:
        return INTERLEAVE_PP
    if pp * chunks > layers:
        return CHUNKS
    if layers % (pp * chunks):
        return UNEVEN
    return None


def _degree_rule(model, tp: int, pp: int) -> str | None:
    if model.is_transformer and model.heads % tp:
        return HEADS
    if model.is_transformer and model.kv_heads % tp:
        return KV_HEADS
    return STAGES if pp > model.layers else None


def enumerate_space(model, gpus: int, global_batch: int) -> Space:
    """Every global choice for `model` on `gpus` devices at global batch `global_batch`."""
    if gpus < 1 or global_batch < 1:
        raise ExplorerError(f"gpus and global batch must be positive, got {gpus} and {global_batch}")
    space, layers = Space([]), model.layers
    batches = divisors(global_batch)
    inner = len(ZEROS) * len(RECOMPUTE) * len(SEQ_PAR) * len(OVERLAPS)   # raw points per (t, p, b, schedule)
    n_sched = len(list(_schedules(layers)))
    for tp in divisors(gpus):
        for pp in divisors(gpus // tp):
            raw = len(batches) * n_sched * inner
            space.total += raw
            rule = _degree_rule(model, tp, pp)
            if rule:
                space.pruned[rule] += raw
                continue
            _add_families(space, model, tp, pp, gpus // (tp * pp), global_batch, batches, inner)
    return space


def _add_families(space, model, tp, pp, dp, global_batch, batches, inner):
    ok_b = [b for b in batches if global_batch % (b * dp) == 0]
    space.pruned[BATCH] += (len(batches) - len(ok_b)) * len(list(_schedules(model.layers))) * inner
    for schedule, chunks in _schedules(model.layers):
        rule = _schedule_rule(model.layers, pp, chunks, schedule)
        if rule:
            space.pruned[rule] += len(ok_b) * inner
            continue
        micro = [b for b in ok_b if schedule != "interleaved" or (global_batch // (b * dp)) % pp == 0]
        space.pruned[MICRO] += (len(ok_b) - len(micro)) * inner
        if not micro:
            continue
        zeros = ZEROS if pp == 1 else (0, 1)
        for recompute in RECOMPUTE:
            for seq in SEQ_PAR:
                lost = len(micro) * len(OVERLAPS)
                space.pruned[ZERO_PP] += lost * (len(ZEROS) - len(zeros))
                if seq and tp == 1:
                    space.pruned[SEQ_TP] += lost * len(zeros)
                    continue
                space.families.append(Family(tp, pp, dp, schedule, chunks, recompute, seq,
                                             tuple(micro), zeros))
