"""Uneven pipeline layouts as Megatron-LM writes them: `--pipeline-model-parallel-layout` and
`--decoder-first/last-pipeline-num-layers`.

A layout lists the p x v virtual pipeline stages in model order, each as the pieces it holds:
E the embedding, t a transformer (decoder) layer, m a multi-token-prediction layer, L the loss
(with the output layer). Virtual stage k runs on pipeline rank k mod p as its model chunk k // p
(Megatron-LM megatron/core/transformer/pipeline_parallel_layer_layout.py,
PipelineParallelLayerLayout.__init__, NVIDIA/Megatron-LM at 00caa53a). The string grammar is that
file's parse_str_to_list: commas are cosmetic, "|" ends a virtual stage, "(X)*n" repeats X n times
(no nesting) and "c*n" repeats one character; e.g. DeepSeek-V3's published layout on H100 with
p = 8, v = 4 is "Et|(tt|)*30mL" (NVIDIA-NeMo/Megatron-Bridge scripts/performance/configs/deepseek/
deepseek_workload_base_configs.py at f0e2c37e, DEEPSEEK_V3_PRETRAIN_CONFIG_H100_V1 pp_layout).

This module parses by hand (never eval), in work bounded by MAX_LAYOUT_CHARS and the size of the
unrolled layout, and names the problem in one line. It knows no model: the checks against a model's
layers and MTP layers are `check_against` (the rule table calls it).
"""
from __future__ import annotations

from dataclasses import dataclass

from explorer.errors import ExplorerError
from explorer.limits import MAX_LAYERS
from explorer.schedules import chunked

MAX_LAYOUT_CHARS = 2000
"""A layout string's length: DeepSeek-V3's is 13 characters, a stage-by-stage layout of a 2,048-layer
model over 256 stages a few thousand; written compactly with repeats any real layout fits."""
MAX_PERIOD = 4
"""The most virtual stages a repeated group of the canonical text (PipelineLayout.text) holds."""
MAX_MTP_LAYERS = 16
"""Multi-token-prediction depth: DeepSeek-V3 trains with D = 1 (arXiv:2412.19437 Sec 2.2, 4.2)."""
MAX_UNROLLED = 2 * MAX_LAYERS + 4 * 1024
"""Pieces and stage separators of an unrolled layout: every layer, MTP layer, E and L, and up to
4,096 virtual stages (p <= 1,024 x v)."""
PIECES = "EtmL"
PIECE_NAMES = {"E": "the embedding", "t": "transformer layers", "m": "MTP layers", "L": "the loss"}


@dataclass(frozen=True)
class PipelineLayout:
    """Virtual stages in model order; each a string of pieces (E, t, m, L), e.g. ('Et', 'tt', 'mL')."""

    stages: tuple

    @property
    def layers(self) -> int:
        return sum(stage.count("t") for stage in self.stages)

    @property
    def mtp_layers(self) -> int:
        return sum(stage.count("m") for stage in self.stages)

    def stage_of(self, piece: str) -> int:
        """The virtual stage holding the first `piece`."""
        return next(k for k, stage in enumerate(self.stages) if piece in stage)

    def layer_stages(self, piece: str = "t") -> tuple:
        """The virtual stage of each transformer layer (or MTP layer), in order."""
        return tuple(k for k, stage in enumerate(self.stages) for c in stage if c == piece)

    def counts(self, piece: str = "t") -> tuple:
        """Pieces of one kind per virtual stage."""
        return tuple(stage.count(piece) for stage in self.stages)

    def text(self) -> str:
        """The canonical string (parse(text()) == self): runs of a piece as c*n, runs of a group of up to
        MAX_PERIOD virtual stages before the last as (S|)*n or (S|T|)*n -- the group that covers most stages, the
        shortest of those. A layout of alternating stages ('E(t|tt|)*499t|ttL', 17 characters) was written out
        stage by stage, 2,501 characters, and then refused as longer than MAX_LAYOUT_CHARS."""
        parts, k, n, stages = [], 0, len(self.stages), self.stages
        while k < n:
            best_q, best_r = 1, 1
            for q in range(1, MAX_PERIOD + 1):
                r = 1
                while k + (r + 1) * q <= n - 1 and stages[k + r * q:k + (r + 1) * q] == stages[k:k + q]:
                    r += 1
                if r > 1 and q * r > best_q * best_r:
                    best_q, best_r = q, r
            if best_r > 1:
                parts.append("(" + "".join(_runs(s) + "|" for s in stages[k:k + best_q]) + f")*{best_r}")
                k += best_q * best_r
            else:
                parts.append(_runs(stages[k]) + ("|" if k < n - 1 else ""))
                k += 1
        return "".join(parts)


def _runs(stage: str) -> str:
    out, i = [], 0
    while i < len(stage):
        j = i
        while j < len(stage) and stage[j] == stage[i]:
            j += 1
        out.append(stage[i] * (j - i) if j - i < 3 else f"{stage[i]}*{j - i}")
        i = j
    return "".join(out)


def _number(text: str, i: int) -> tuple:
    j = i
    while j < len(text) and text[j] in "0123456789":
        j += 1
    if j == i:
        raise ExplorerError(f"pipeline layout: '*' at character {i} must be followed by a repeat count")
    digits = text[i:j].lstrip("0") or "0"       # all the digits ('t*000000002' read six zeros: "repeat count 0")
    if len(digits) > 6:
        raise ExplorerError(f"pipeline layout: repeat count {text[i:j][:12]}... at character {i} is more than "
                            "999,999")
    count = int(digits)
    if count < 1:
        raise ExplorerError(f"pipeline layout: repeat count {count} at character {i} must be at least 1")
    return count, j


def _unroll(text: str) -> str:
    """Megatron's parse_str_to_list unrolling: (X)*n, then c*n; bounded by MAX_UNROLLED."""
    out, i = [], 0
    size = 0

    def grow(piece: str, times: int):
        nonlocal size
        size += len(piece) * times
        if size > MAX_UNROLLED:
            raise ExplorerError(f"pipeline layout: unrolled, it has more than {MAX_UNROLLED:,} pieces "
                                f"(more than {MAX_LAYERS:,} layers)")
        out.append(piece * times)

    while i < len(text):
        c = text[i]
        if c == "(":
            close = text.find(")", i)
            if close < 0:
                raise ExplorerError(f"pipeline layout: the '(' at character {i} is never closed")
            inner = text[i + 1:close]
            if "(" in inner:
                raise ExplorerError(f"pipeline layout: parentheses inside parentheses at character {i} "
                                    "(Megatron-LM does not nest them)")
            if not inner:
                raise ExplorerError(f"pipeline layout: empty parentheses at character {i}")
            if close + 1 >= len(text) or text[close + 1] != "*":
                raise ExplorerError(f"pipeline layout: '({inner[:20]})' at character {i} needs a repeat count, "
                                    "as in (tt|)*30")
            times, i = _number(text, close + 2)
            grow(_unroll(inner), times)
            continue
        if c == ")":
            raise ExplorerError(f"pipeline layout: ')' at character {i} closes nothing")
        if c == "*":
            raise ExplorerError(f"pipeline layout: '*' at character {i} repeats nothing")
        if c not in PIECES and c != "|":
            raise ExplorerError(f"pipeline layout: character {c[:1]!r} at {i} is not a layout piece: use E "
                                "(embedding), t (transformer layer), m (MTP layer), L (loss), '|' between "
                                "stages")
        if i + 1 < len(text) and text[i + 1] == "*":
            times, i = _number(text, i + 2)
            grow(c, times)
        else:
            grow(c, 1)
            i += 1
    return "".join(out)


def parse(text: str, virtual_stages: int | None = None) -> PipelineLayout:
    """A Megatron-LM layout string as a PipelineLayout; ExplorerError naming the problem when it is
    malformed, when it does not have `virtual_stages` stages (p x v), has an empty stage, or places the
    embedding or the loss other than once, first and last (Megatron's validate_layer_layout)."""
    if not isinstance(text, str):
        raise ExplorerError(f"pipeline layout must be a string, got {type(text).__name__}")
    if len(text) > MAX_LAYOUT_CHARS:
        raise ExplorerError(f"pipeline layout has {len(text):,} characters, more than the "
                            f"{MAX_LAYOUT_CHARS:,} accepted (write repeats as (tt|)*30)")
    flat = _unroll("".join(text.split()).replace(",", ""))
    stages = tuple(flat.split("|"))
    for k, stage in enumerate(stages):
        if not stage:
            raise ExplorerError(f"pipeline layout: virtual stage {k} is empty (every stage holds at least one of "
                                "E, t, m, L)")
    for piece, where in (("E", 0), ("L", len(stages) - 1)):
        n = flat.count(piece)
        if n != 1:
            raise ExplorerError(f"pipeline layout places {PIECE_NAMES[piece]} ({piece}) {n} times; "
                                "it must appear exactly once")
    if not stages[0].startswith("E"):
        raise ExplorerError("pipeline layout: the embedding (E) must come first, in virtual stage 0")
    if not stages[-1].endswith("L"):
        raise ExplorerError(f"pipeline layout: the loss (L) must come last, in the last virtual stage "
                            f"({len(stages) - 1})")
    if "m" in flat and "t" in flat[flat.index("m"):]:
        raise ExplorerError("pipeline layout: transformer layers (t) must come before the MTP layers (m)")
    if virtual_stages is not None and len(stages) != virtual_stages:
        raise ExplorerError(f"pipeline layout has {len(stages)} virtual stages; the strategy has pp x chunks = "
                            f"{virtual_stages}")
    return PipelineLayout(stages)


def check_against(layout: PipelineLayout, layers: int, mtp_layers: int, pp: int) -> str | None:
    """Why `layout` does not fit a model of `layers` transformer layers and `mtp_layers` MTP layers on
    pp ranks (None when it does)."""
    if layout.layers != layers:
        return (f"pipeline layout holds {layout.layers} transformer layers (t) but the model has {layers}")
    if layout.mtp_layers != mtp_layers:
        return (f"pipeline layout holds {layout.mtp_layers} MTP layers (m) but the model has {mtp_layers} "
                "(model field mtp_layers)")
    if mtp_layers:
        holder = {k % pp for k, stage in enumerate(layout.stages) if "m" in stage}
        if holder != {(len(layout.stages) - 1) % pp}:
            return ("pipeline layout: the explorer costs the MTP layers on the loss's pipeline stage (Megatron-LM's "
                    "default; a standalone MTP stage is not modelled)")
    return None


COUNTS_CHARS = set("0123456789, ")


def counts_layout(text: str, layers: int, mtp_layers: int, virtual_stages: int) -> PipelineLayout:
    """Transformer layers per virtual stage, in model order and comma separated ("11,12,12,13"), as a layout: the
    embedding with the first stage, the MTP layers and the loss with the last (Megatron-LM's placement of them,
    as first_last_layout). ExplorerError, one line, for a count that is not a whole number, the wrong number of
    stages, counts that do not add up to the model's layers, or a middle stage left empty."""
    if len(text) > MAX_LAYOUT_CHARS:
        raise ExplorerError(f"pipeline layout has {len(text):,} characters, more than the {MAX_LAYOUT_CHARS:,} "
                            "accepted")
    items = [item.strip() for item in text.split(",")]
    for k, item in enumerate(items):
        if not item.isdigit() or len(item) > 6:
            raise ExplorerError(f"pipeline layout: stage {k}'s layer count {item[:20]!r} is not a whole number")
    counts = [int(item) for item in items]
    if len(counts) != virtual_stages:
        raise ExplorerError(f"pipeline layout lists {len(counts)} stages; the strategy has p x v = {virtual_stages}")
    if sum(counts) != layers:
        raise ExplorerError(f"pipeline layout's layer counts add up to {sum(counts):,}; the model has {layers:,} "
                            "layers")
    for k, count in enumerate(counts[1:-1], start=1):
        if count == 0:
            raise ExplorerError(f"pipeline layout: stage {k} holds no layer (only the first stage, with the "
                                "embedding, and the last, with the loss, may hold none)")
    return layout_of_counts(counts, mtp_layers)


def layout_of_counts(counts, mtp_layers: int) -> PipelineLayout:
    """Transformer layers per virtual stage, in model order, as a layout: the embedding with the first stage, the
    MTP layers and the loss with the last (where Megatron-LM puts them without a layout, and where the explorer's
    plan puts them for a stage map: tests/test_codegen.py checks the two cost the same)."""
    stages = ["t" * n for n in counts]
    stages[0] = "E" + stages[0]
    stages[-1] = stages[-1] + "m" * mtp_layers + "L"
    return PipelineLayout(tuple(stages))


def stage_counts_of(layout: PipelineLayout, pp: int) -> tuple | None:
    """The layers of each pipeline stage when `layout` says no more than a stage map does (one model chunk a stage,
    layout_of_counts's form, a layer on every stage): an importer reads such a layout as the stage map it was
    exported from (explorer/codegen/common.py megatron_layout_text), so a dragged split comes back draggable.
    None for any other layout."""
    counts = layout.counts()
    if len(counts) != pp or min(counts) < 1 or layout_of_counts(counts, layout.mtp_layers) != layout:
        return None
    return counts


def stage_map_of(text: str, pp: int, mtp_layers: int) -> tuple | None:
    """The stage map (the pipeline stage of each layer) a layout string says when it says no more than one
    (stage_counts_of) and holds the model's `mtp_layers`; None otherwise. Read by the importers (explorer/codegen/
    megatron.py layout_fields), so that a dragged split exported as a layout comes back draggable."""
    layout = parse(text)
    counts = stage_counts_of(layout, pp) if layout.mtp_layers == mtp_layers else None
    return None if counts is None else tuple(stage for stage, n in enumerate(counts) for _ in range(n))


def layout_from_text(text: str, layers: int, mtp_layers: int, pp: int, virtual_stages: int) -> str:
    """What a person types for a pipeline layout (the Strategy page): layer counts per virtual stage
    (counts_layout) or a Megatron-LM layout string (parse); checked against the model (check_against) and returned
    in its canonical spelling. ExplorerError naming the one problem otherwise."""
    text = text.strip()
    if not text:
        raise ExplorerError("pipeline layout is empty: give layer counts per stage, e.g. 11,12,13, or a Megatron-LM "
                            "layout such as Et|(tt|)*30mL")
    if text[0].isdigit() and not set(text) <= COUNTS_CHARS:     # counts with a typo: name it, not the first digit
        bad = next(c for c in text if c not in COUNTS_CHARS)
        raise ExplorerError(f"pipeline layout {text[:40]!r}: character {bad!r} is neither a digit nor a comma; give "
                            "layer counts per stage, e.g. 8,9,9,6, or a Megatron-LM layout such as Et|(tt|)*30mL")
    layout = counts_layout(text, layers, mtp_layers, virtual_stages) if set(text) <= COUNTS_CHARS \
        else parse(text, virtual_stages)
    problem = check_against(layout, layers, mtp_layers, pp)
    if problem:
        raise ExplorerError(problem)
    return layout.text()


def even_layout(layers: int, mtp_layers: int, virtual_stages: int) -> PipelineLayout | None:
    """E, the layers, the MTP layers and L as equal slots over the virtual stages (Megatron-LM's
    account_for_embedding_in_pipeline_split / account_for_loss_in_pipeline_split, which count the
    embedding and the loss as one layer each; DeepSeek-V3's published "Et|(tt|)*30mL" is this split of
    61 + 1 + 2 = 64 slots over 32 stages), or None when the slots do not divide evenly."""
    slots = layers + mtp_layers + 2
    if slots % virtual_stages:
        return None
    each = slots // virtual_stages
    flat = "E" + "t" * layers + "m" * mtp_layers + "L"
    return PipelineLayout(tuple(flat[k * each:(k + 1) * each] for k in range(virtual_stages)))


def first_last_counts(layers: int, pp: int, first: int | None, last: int | None, chunks: int = 1) -> tuple:
    """Transformer layers per pipeline rank under --decoder-first-pipeline-num-layers /
    --decoder-last-pipeline-num-layers: the rest split evenly over the middle ranks; with v chunks each
    rank's count divides by v (Megatron-LM megatron/core/transformer/transformer_config.py
    __post_init__, "Uneven PP", at d98e8a64)."""
    for name, value in (("first", first), ("last", last)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise ExplorerError(f"--decoder-{name}-pipeline-num-layers must be a positive integer, got {value!r}")
        if value is not None and value % chunks:
            raise ExplorerError(f"--decoder-{name}-pipeline-num-layers {value} is not divisible by the "
                                f"{chunks} chunks per stage")
    middle = pp - (first is not None) - (last is not None)
    rest = layers - (first or 0) - (last or 0)
    if rest < 0 or middle < 0 or bool(rest) != bool(middle) or (middle and rest % middle) or \
            (middle and (rest // middle) % chunks):
        raise ExplorerError(f"--decoder-first/last-pipeline-num-layers leave {max(rest, 0)} layers that do not "
                            f"split evenly over the other {max(middle, 0)} stages"
                            + (f" in multiples of the {chunks} chunks" if chunks > 1 else ""))
    counts = [rest // middle if middle else 0] * pp
    if first is not None:
        counts[0] = first
    if last is not None:
        counts[-1] = last
    return tuple(counts)


def first_last_layout(layers: int, mtp_layers: int, pp: int, chunks: int, first: int | None,
                      last: int | None) -> PipelineLayout:
    """The layout Megatron-LM builds from the first/last flags: each rank's layers split evenly over its
    chunks, the embedding with the first chunk, the MTP layers and the loss with the last."""
    counts = first_last_counts(layers, pp, first, last, chunks)
    return layout_of_counts([counts[k % pp] // chunks for k in range(pp * chunks)], mtp_layers)


SHED_FIRST, SHED_LAST = 1, 2
"""Layers per model chunk the search takes off the first and the last pipeline rank (first_last_choices): the
first rank also runs the embedding (a lookup: one layer per chunk leaves room for a remainder or its memory), the
last the output layer and the loss (and the MTP layers), which Megatron-LM's --decoder-first/last-pipeline-num-
layers exist to offset: two per chunk covers an output layer worth up to about two layers per chunk (Llama 3 8B's,
V = 128,256 at h = 4,096 and s = 8,192, costs 1.47 of its layers in training FLOPs: explorer/search/space.py
output_layers). Bounded so that the search's space grows by a few families per (p, v), not by every split."""


def first_last_choices(layers: int, mtp_layers: int, pp: int, chunks: int = 1, shed: tuple = (SHED_FIRST, SHED_LAST)
                       ) -> tuple:
    """((first, last), layout text) of every --decoder-first/last-pipeline-num-layers pair whose first and last
    ranks hold 0..shed[0] and 0..shed[1] fewer layers per chunk than the middle ranks (not both 0: the even
    split) and which Megatron-LM accepts (first_last_counts: the rest splits evenly over the middle ranks, in
    multiples of the chunks); None = the flag not given. () for pp < 2. The search tries each
    (explorer/search/space.py), so a model whose layers do not split evenly over pp x chunks still gets Megatron's
    own uneven stages."""
    if pp < 2:
        return ()
    base, extra = divmod(layers, pp)
    seen = {tuple(base + (r < extra) for r in range(pp))}      # the default split of one chunk per rank
    out = []
    for shed_first in range(shed[0] + 1):
        for shed_last in range(shed[1] + 1):
            if not shed_first + shed_last:
                continue
            for first, last in _end_pairs(layers, pp, chunks, shed_first, shed_last):
                if min(x for x in (first, last) if x is not None) < chunks:
                    continue
                try:
                    counts = first_last_counts(layers, pp, first, last, chunks)
                except ExplorerError:
                    continue
                if len(set(counts)) == 1 or counts in seen:      # the even or default split, or listed already
                    continue
                seen.add(counts)
                out.append(((first, last), first_last_layout(layers, mtp_layers, pp, chunks, first, last).text()))
    return tuple(out)


def _end_pairs(layers: int, pp: int, chunks: int, shed_first: int, shed_last: int) -> list:
    """(first, last) flag values whose end ranks hold `shed_first` and `shed_last` fewer layers per chunk: fewer
    than the middle ranks (the rest then splits evenly over all ranks as if the ends held the middle count), and,
    where the layers split evenly over p x v, fewer than that even split, the middle ranks taking the rest (Llama 3
    8B's 32 layers over 4 ranks: 8, 9, 9, 6). None = the flag not given."""
    pairs = []
    total = layers + (shed_first + shed_last) * chunks
    if not total % (pp * chunks):
        middle = total // pp
        pairs.append((middle - shed_first * chunks if shed_first else None,
                      middle - shed_last * chunks if shed_last else None))
    if pp > 2 and not layers % (pp * chunks):
        even = layers // pp
        pairs.append((even - shed_first * chunks, even - shed_last * chunks))
    return pairs


def resolve(layers: int, mtp_layers: int, strategy) -> PipelineLayout | None:
    """The layout `strategy` runs a model of `layers` layers and `mtp_layers` MTP layers with: its own; for a
    chunked schedule whose layers do not split into p v equal chunks, the embedding, the layers, the MTP layers
    and the loss as equal slots (even_layout: Megatron-Bridge's account_for_embedding/loss_in_pipeline_split,
    set by its Llama 3 and Qwen3 MoE recipes, src/megatron/bridge/recipes/llama/llama3.py and qwen/qwen3_moe.py
    at 21b02e0c; DeepSeek-V3's published layout is this split too); else None (the even split)."""
    if strategy.pipeline_layout:
        return strategy.layout
    if chunked(strategy.schedule) and layers % (strategy.pp * strategy.chunks):
        return even_layout(layers, mtp_layers, strategy.pp * strategy.chunks)
    return None


def rows(layout: PipelineLayout, pp: int, place=None) -> list:
    """[(pipeline stage, [pieces of each of its chunks])] for a read-only table: 'E t×7', 'm L'. Virtual stage
    k sits where `place(k, p, v) -> (stage, chunk)` puts it -- the schedule's own placement (Schedule.place,
    the one the cost reads: V-shaped for DualPipeV) -- by default Megatron-LM's (rank k mod p, chunk k // p)."""
    v = len(layout.stages) // pp
    place = place or (lambda k, p, v: (k % p, k // p))
    word = lambda stage: " ".join(f"{c}×{stage.count(c)}" if stage.count(c) > 1 else c
                                  for c in PIECES if c in stage)
    table = [[""] * v for _ in range(pp)]
    for k, stage in enumerate(layout.stages):
        r, c = place(k, pp, v)
        table[r][c] = word(stage)
    return [(r, table[r]) for r in range(pp)]

