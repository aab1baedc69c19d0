"""The global choices of a search, with the reason each pruned family was dropped.

The raw grid, for N devices and global batch B: every t dividing N, every p
dividing N/t (d = N/(t p)), every micro-batch b dividing B, every registered
schedule (the chunked ones with v = 2..l chunks) with the default split of the layers and, for
Megatron's 1F1B and interleaved schedules where one can be faster (layouts()), each of its
--decoder-first/last-pipeline-num-layers splits that sheds a little of the end ranks' layers, ZeRO 0-3, the three
recomputation modes, sequence parallelism off/on and gradient-sync overlap
off/on. Each raw point is either kept or counted under the first rule of
explorer.strategy.rules it breaks -- the same table that refuses a Strategy --
so the counts add up to the grid size. Each rule is checked at the loop level
where all the fields it reads are fixed, and its count multiplied out.

>>> from explorer import load_model
>>> sp = enumerate_space(load_model("tiny-gpt"), gpus=8, global_batch=8)
>>> sp.kept + sum(sp.pruned.values()) == sp.total
True
"""
from __future__ import annotations

import itertools
from collections import Counter
from dataclasses import dataclass, field, replace

from explorer.errors import ExplorerError
from explorer.schedules import SCHEDULES
from explorer.strategy import rules as R
from explorer.strategy.pipeline_layout import first_last_choices
from explorer.strategy.strategy import RECOMPUTE, LayerSplit
from explorer.strategy.options import option, searched

ZEROS, OVERLAPS, SEQ_PAR = (0, 1, 2, 3), (False, True), (False, True)
HEADS, KV_HEADS, STAGES, MEMORY = R.HEADS, R.KV_HEADS, R.STAGES, R.MEMORY
RULES = R.REASONS
"""The search's pruning reasons, in the order a raw choice is checked (explorer.strategy.rules)."""
LAYER_PRESETS = ("megatron", "column", "row", "batch")
"""Per-layer presets searched at each degree > 1 ('replicated' at degree > 1 is degree 1's
cost with a larger group; per-operator overrides are left to the editor)."""
ALWAYS = {"layer_splits", "stage_map"}       # a family has none: the rules read their defaults
LEVELS = ({"tp", "pp", "cp", "cp_algo"}, {"micro_batch", "dp", "global_batch"}, {"schedule", "chunks"}, {"zero"},
          {"sequence_parallel"})
"""Fields fixed at each loop level of the enumeration, outermost first."""


def _level_rules() -> list:
    """The searched rules that become checkable at each loop level, in table order."""
    bound, out = set(ALWAYS), []
    for fields in LEVELS:
        before = set(bound)
        bound |= fields
        out.append([rule for rule in R.RULES if rule.searched
                     and set(rule.fields) <= bound and not set(rule.fields) <= before])
    return out


AT_LEVEL = _level_rules()
SCHEDULE_FIRST = tuple(itertools.takewhile(lambda rule: "micro_batch" not in rule.fields, AT_LEVEL[2]))
SCHEDULE_THEN = tuple(AT_LEVEL[2][len(SCHEDULE_FIRST):])
"""The schedule level's rules (AT_LEVEL[2], in table order) split where the first that reads the
micro-batch comes: those before it are asked once per schedule, the rest once per micro-batch --
the first broken rule of the level either way."""


def _broken(level: int, v, model):
    """The reason of the first rule of this level `v` breaks, or None."""
    return _first_broken(AT_LEVEL[level], v, model)


def _first_broken(rules, v, model):
    """The reason of the first of `rules` that `v` breaks, or None."""
    for rule in rules:
        if rule.broken(v, model):
            return rule.reason
    return None


def divisors(n: int) -> list:
    return [k for k in range(1, n + 1) if n % k == 0]


def expert_degrees(model, dp: int, tp: int = 1, sequence_parallel: bool = False) -> list:
    """(ep, expert_tp) to explore: (1, 0), and for a model with experts every divisor of d that
    divides the experts with the experts split over tp (expert_tp 0), and -- with tp > 1 and
    sequence parallelism -- every divisor of tp d that divides the experts with whole experts
    (expert_tp 1, Megatron-Bridge's MoE recipes). explorer.strategy.rules: ep is carved out of the
    data-parallel ranks (and the tp ranks when expert_tp = 1)."""
    if not getattr(model, "is_moe", False):
        return [(1, 0)]
    out = [(e, 0) for e in divisors(dp) if model.experts % e == 0]
    if tp > 1 and sequence_parallel:
        out += [(e, 1) for e in divisors(tp * dp) if e > 1 and model.experts % e == 0]
    return out


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
    cp: int = 1                 # context parallelism (explorer.cost.context_parallel)
    cp_algo: str = "ring"
    ep: int = 1            # expert-parallel degree (MoE models: divisors of dp that divide the experts)
    expert_tp: int = 0     # 0: the experts split over tp; 1: whole experts, ep over tp x dp (needs SP)
    options: tuple = ()         # fixed for a search: (name, value) of each option it carries (explorer/strategy/
    #                             options.py: cuda_graphs, moe_dispatcher, fp8_recipe, ...) when not the default
    pipeline_layout: str = ""   # Megatron's uneven first/last stages (layouts()); "" = the default split

    @property
    def size(self) -> int:
        return len(self.micro_batches) * len(self.zeros) * len(self.overlaps)

    def __getattr__(self, name: str):
        """An option the family carries (family.cuda_graphs, family.fp8_recipe, ...): its value, else the
        option's default."""
        if name.startswith("__") or name == "options":
            raise AttributeError(name)
        try:
            default = option(name).default
        except KeyError:
            raise AttributeError(name) from None
        return dict(self.options).get(name, default)

    def carried(self, dtype: str, structure_only: bool = False) -> dict:
        """The Strategy options of the family's candidates at training dtype `dtype`: those it carries that
        apply to its fields (recompute modules only with selective recomputation, say: Option.when);
        `structure_only`: those that change the blocks (the sweep's probe; the objective prices the others)."""
        fields = {"dtype": dtype, "recompute": self.recompute, "ep": self.ep, "tp": self.tp, "pp": self.pp,
                  "cp": self.cp, "schedule": self.schedule, "chunks": self.chunks,
                  "sequence_parallel": self.sequence_parallel}
        return {k: v for k, v in self.options
                if (option(k).structure or not structure_only) and option(k).applies(fields)}


@dataclass
class Space:
    families: list
    pruned: Counter = field(default_factory=Counter)   # reason -> raw points
    total: int = 0

    @property
    def kept(self) -> int:
        return sum(f.size for f in self.families)


def _schedules(layers: int):
    """(schedule, chunks) of every registered schedule; chunked ones with the chunk counts they take
    (Schedule.chunk_choices: v = 2..layers, or their one v)."""
    for name, sched in list(SCHEDULES.items()):
        for v in sched.chunk_choices(layers):
            yield name, v


CP_FROM_SEQ_LEN = 8192
"""Context parallelism is searched from this sequence length on (Megatron-Core's parallelism guide:
CP is for "long sequences (8K+ tokens)"); below it the space keeps cp = 1 and its size."""


def cp_degrees(model, devices: int) -> list:
    """The cp a search tries on `devices` (after t): divisors with seq_len % (2 cp) == 0 (the
    load-balanced ring's 2cp chunks), from CP_FROM_SEQ_LEN tokens; ring attention only."""
    if not model.is_transformer or model.seq_len < CP_FROM_SEQ_LEN:
        return [1]
    return [c for c in divisors(devices) if model.seq_len % (2 * c) == 0 or c == 1]


def enumerate_space(model, gpus: int, global_batch: int, cp: int | None = None, cp_algo: str = "ring",
                    ep: int | None = None, **options) -> Space:
    """Every global choice for `model` on `gpus` devices at global batch `global_batch` (with `cp`
    given, only that context-parallel degree; `cp_algo` the algorithm of cp > 1; with `ep`, only
    that expert-parallel degree). `options`: the strategy options every family carries (Family.options;
    explorer/strategy/options.py): `cuda_graphs` and `moe_dispatcher` are the host side every family
    runs with (the objective prices each micro-batch's max(GPU, host issue time), so the micro-batches
    the search prefers grow exactly where the host binds, explorer/model/kernels.py), the precision options
    what every candidate keeps."""
    if gpus < 1 or global_batch < 1:
        raise ExplorerError(f"gpus and global batch must be positive, got {gpus} and {global_batch}")
    space = Space([])
    batches = divisors(global_batch)
    schedules = list(_schedules(model.layers))
    grids = {}      # pp -> (schedule, chunks, pipeline layout) of the grid: the default split and Megatron's first/last
    inner = len(ZEROS) * len(RECOMPUTE) * len(SEQ_PAR) * len(OVERLAPS)   # raw points per (t, p, b, schedule)
    for tp in divisors(gpus):
        fixed = [cp] if cp is not None and (gpus // tp) % cp == 0 else []
        for c in (cp_degrees(model, gpus // tp) if cp is None else fixed):
            for pp in divisors(gpus // (tp * c)):
                if pp not in grids:
                    grids[pp] = [(name, v, layout) for name, v in schedules
                                 for layout in ("",) + layouts(model, pp, name, v)]
                raw = len(batches) * len(grids[pp]) * inner
                space.total += raw
                reason = _broken(0, R.view(tp=tp, pp=pp, cp=c, cp_algo=cp_algo), model)
                if reason:
                    space.pruned[reason] += raw
                    continue
                _add_families(space, model, tp, pp, gpus // (tp * c * pp), global_batch, batches, grids[pp],
                              inner, c, cp_algo)
    unknown = sorted(set(options) - {o.name for o in searched()})
    if unknown:
        raise ExplorerError(f"the search does not carry the option {unknown[0][:40]!r}")
    carried = tuple((o.name, options[o.name]) for o in searched()
                    if o.name in options and options[o.name] != o.default)
    if carried:
        _with_options(space, carried)
    _with_ep_overlap(space, model)
    if ep is not None:      # one expert-parallel degree asked for: the other families are not searched
        dropped = sum(f.size for f in space.families if f.ep != ep)
        if dropped:
            space.pruned[OTHER_EP] += dropped
        space.families = [f for f in space.families if f.ep == ep]
    return space


def _with_ep_overlap(space, model) -> None:
    """Each family with experts over ep > 1 devices once more with expert-parallel overlap (Strategy.overlap_ep:
    the MoE all-to-alls under the partner micro-batch's compute, Megatron-LM --overlap-moe-expert-parallel-comm)
    where Megatron-Core runs it -- the option record's blocker (explorer/strategy/moe_rules.py ep_overlap_blocker:
    not with the all-gather dispatcher, full recomputation, or p > 1 without a chunked schedule); like the ep
    degrees, these are more raw points, all kept. Both settings stay: the overlap leaves max(sigma E, E - C) <= E
    of a pass's all-to-alls exposed (explorer/cost/numeric.py exposed_all_to_alls), never more in the model, but
    only Megatron-LM and Megatron-Bridge's exporters write it (a framework filter keeps the others' strategies)."""
    o = option("overlap_ep")
    out = []
    for f in space.families:
        out.append(f)
        fields = {"ep": f.ep, "moe_dispatcher": f.moe_dispatcher, "recompute": f.recompute, "pp": f.pp,
                  "schedule": f.schedule}
        if getattr(model, "is_moe", False) and o.applies(fields) and o.blocked(fields, model) is None:
            out.append(replace(f, options=f.options + ((o.name, True),)))
            space.total += f.size
    space.families = out


def _with_options(space, carried: tuple) -> None:
    """Every family with the search's options (`carried`: (name, value) pairs off their defaults); an option
    that needs the distributed optimizer (Option.needs_zero: lower-precision Adam moments, explorer.strategy.rules
    _precision) prunes the ZeRO stages below it, under the option's zero_reason."""
    out = []
    for f in space.families:
        f = replace(f, options=carried)
        for name, _ in carried:
            o = option(name)
            if o.needs_zero and any(z < o.needs_zero for z in f.zeros):
                kept = tuple(z for z in f.zeros if z >= o.needs_zero)
                space.pruned[o.zero_reason] += f.size - len(f.micro_batches) * len(kept) * len(f.overlaps)
                f = replace(f, zeros=kept)
        if f.zeros:
            out.append(f)
    space.families = out


OTHER_EP = "another ep than asked for"


def _add_families(space, model, tp, pp, dp, global_batch, batches, schedules, inner, cp=1, cp_algo="ring"):
    ok_b = []
    for b in batches:
        reason = _broken(1, R.view(tp=tp, pp=pp, micro_batch=b, dp=dp, global_batch=global_batch), model)
        if reason:
            space.pruned[reason] += len(schedules) * inner
        else:
            ok_b.append(b)
    if not ok_b:
        return
    # the ZeRO and sequence-parallel rules read (t, p) and their own field only: asked once here,
    # counted per schedule as the nested loops would
    zero_reasons = [(zero, _broken(3, R.view(tp=tp, pp=pp, zero=zero), model)) for zero in ZEROS]
    seq_reasons = [(seq, _broken(4, R.view(tp=tp, pp=pp, sequence_parallel=seq), model)) for seq in SEQ_PAR]
    for schedule, chunks, layout in schedules:
        micro = _schedule_micro(space, model, tp, pp, dp, global_batch, schedule, chunks, layout, ok_b, inner)
        if micro:
            _add_layout_families(space, model, tp, pp, dp, schedule, chunks, layout, micro, zero_reasons,
                                 seq_reasons, cp, cp_algo)


LAYOUT_SCHEDULES = ("1f1b", "interleaved")
"""The schedules Megatron-LM runs with --decoder-first/last-pipeline-num-layers (its 1F1B and interleaved 1F1B,
megatron/core/pipeline_parallel/schedules.py), whose chunks sit round robin as the flags place them."""


def output_layers(model) -> float:
    """The output layer's training FLOPs in transformer layers: V / (16 h + 8 s / 3), the ratio of the terms of
    Narayanan et al. 2021 Eq. 3 (96 B s l h^2 (1 + s / 6h + V / 16 l h): per layer 96 B s h^2 + 16 B s^2 h, the
    logits 6 B s h V); 0 for a model without a vocabulary (no output layer to shed layers for)."""
    if not model.is_transformer or model.vocab <= 1:
        return 0.0
    return model.vocab / (16 * model.hidden + 8 * model.seq_len / 3)


def layouts(model, pp: int, schedule: str, chunks: int) -> tuple:
    """The pipeline layouts a family also tries beside the default split: Megatron-LM's
    --decoder-first/last-pipeline-num-layers choices (explorer.strategy.pipeline_layout.first_last_choices:
    the end ranks, which also run the embedding and the output layer, hold fewer layers), for the schedules
    Megatron runs them with (LAYOUT_SCHEDULES; not GPipe, ZB-H1 or DualPipeV's V) -- where one can be faster
    than the default split: the layers do not split evenly over the p v chunks, the model has MTP layers (the
    last stage's), or the output layer costs more than a layer (output_layers > 1). With layers that split
    evenly, shedding whole layers from an end stage hands one to another stage, whose time then exceeds the end
    stage's unless the end's own block outweighs a layer; the first stage's smaller activation peak alone is
    not searched for (it only helps a strategy fit)."""
    if pp < 2 or schedule not in LAYOUT_SCHEDULES:
        return ()
    mtp = getattr(model, "mtp_layers", 0)
    if model.layers % (pp * chunks) == 0 and not mtp and output_layers(model) <= 1:
        return ()
    return tuple(text for _, text in first_last_choices(model.layers, getattr(model, "mtp_layers", 0), pp, chunks))


def _schedule_micro(space, model, tp, pp, dp, global_batch, schedule, chunks, layout, ok_b, inner) -> list:
    """The micro-batches of `ok_b` the schedule's rules keep (the pruned counted by reason)."""
    # the schedule's rules that do not read the micro-batch come first in the table (SCHEDULE_FIRST):
    # asked once per schedule, they prune its every micro-batch at once
    v = R.view(tp=tp, pp=pp, dp=dp, global_batch=global_batch, schedule=schedule, chunks=chunks,
               pipeline_layout=layout)
    reason = _first_broken(SCHEDULE_FIRST, v, model)
    if reason:
        space.pruned[reason] += len(ok_b) * inner
        return []
    micro = []
    for b in ok_b:
        v = R.view(tp=tp, pp=pp, micro_batch=b, dp=dp, global_batch=global_batch, schedule=schedule,
                   chunks=chunks, pipeline_layout=layout)
        reason = _first_broken(SCHEDULE_THEN, v, model)
        if reason:
            space.pruned[reason] += inner
        else:
            micro.append(b)
    return micro


def _add_layout_families(space, model, tp, pp, dp, schedule, chunks, layout, micro, zero_reasons, seq_reasons,
                         cp, cp_algo):
    """One family per recompute mode, sequence parallelism and expert degrees of a (schedule, layout)."""
    zeros = []
    for zero, reason in zero_reasons:
        if reason:
            space.pruned[reason] += len(micro) * len(OVERLAPS) * len(RECOMPUTE) * len(SEQ_PAR)
        else:
            zeros.append(zero)
    seqs = []
    for seq, reason in seq_reasons:
        if reason:
            space.pruned[reason] += len(micro) * len(OVERLAPS) * len(RECOMPUTE) * len(zeros)
        else:
            seqs.append(seq)
    for recompute in RECOMPUTE:
        for seq in seqs:
            for ep, etp in expert_degrees(model, dp, tp, seq):
                space.families.append(Family(tp, pp, dp, schedule, chunks, recompute, seq, tuple(micro),
                                             tuple(zeros), cp=cp, cp_algo=cp_algo if cp > 1 else "ring",
                                             ep=ep, expert_tp=etp, pipeline_layout=layout))
                if ep > 1:     # the ep choices are more raw points, all kept
                    space.total += space.families[-1].size
