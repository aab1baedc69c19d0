"""How far a prediction can be trusted: the validated runs nearest to it and their errors (issue 28).

Every validation case (explorer.validation: published A100 tables, the Megatron-Bridge H100/B200/GB200
rows, dense and MoE, and the BF16 H100 runs) is predicted once and its residual kept in
assets/validation/residuals.json (`python -m explorer.validation.evidence` writes it;
tests/test_evidence.py checks it against a fresh validation). For a strategy the evidence is:

* its **regime**: accelerator x precision class x dense/MoE (the axes the residuals depend on most: one
  GEMM efficiency per accelerator and precision, and MoE's own costs);
* the regime's validated rows and their mean and max absolute error (the band shown with a number), each row's error
  signed as predicted over published speed - 1 (speed_error: a row that measured a time counts alike);
* the three **nearest rows** by `distance` (below), those of its own regime first (the rows its band is made of),
  with their errors and a label a person reads (model, GPUs, system, precision, publication:
  explorer.validation.run_labels);
* **extrapolating** when the nearest of them is farther than EXTRAPOLATING_BEYOND, with the reason: where its
  regime has validated rows, the feature that adds most to the distance from the nearest of them (with the range
  the regime's rows cover; an MLP or a CNN is told that every validated run is a transformer); where it has none,
  the first of accelerator, dense/MoE and precision that differs;
* its **direction** where the regime is weak (mean error above WIDE_BAND) and the model missed every one of its
  validated rows the same way (all too fast or all too slow): a band of "±47 %" reads as a spread around the
  truth, where "too fast on every one, by 31-85 %" says which way to correct;
* a **known gap** (KNOWN_GAPS) where the strategy has a feature whose validated rows the model misses in one
  direction for a cost it does not price, with those rows' errors and the sources that name the cost.

The distance adds, for each feature that differs: accelerator 2 (a different chip: peaks and fitted
efficiencies differ), precision 1 within 16-bit formats and 2 across (FP8 vs BF16: another peak and
efficiency), dense vs MoE 3 (MoE adds dispatch, expert GEMMs and host costs), context and expert
parallelism 1 each, expert-parallel overlap outside a full-iteration CUDA graph 1, and for scale |log2| of
the GPU count ratio x 0.25 (8x more GPUs: 0.75) and of the sequence length ratio x 0.5 (4x longer: 1). A row of the
same regime at most 8x away in scale and 4x in sequence (and within 2x of its local experts and width, below) is
within 1.75.

Two features count only where a prediction leaves what a row ran, and only beyond a factor 2 (EASY_FACTOR), by
|log2| x 0.5 past it, as the sequence length counts: **more routed experts a GPU** (experts / e, MoE): the host
launches each local expert's GEMMs (explorer/model/kernels.py) and each gets 1/local of the routed tokens, so many
local experts make a pass host-bound and its GEMMs small (Qwen3-30B-A3B at e 1 holds 128, the validated runs 2-32:
1.0 against 16); and **narrower GEMMs** (hidden / t, transformers only: the attention and dense layers' GEMMs; an
expert's own GEMMs are sized by the local experts above): a GEMM's efficiency falls with its size
(Efficiency.gemm_half_flops in explorer/hardware/cluster.py), validated from 768 to 8,192 wide (BERT-large at t 8,
128 wide, against 768: 0.8). Fewer local experts or wider GEMMs move a pass towards the large GEMMs every constant
was fitted on, and add nothing. The distance is one-sided for these two: `distance(prediction, row)`.
"""
from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from explorer.cost.evaluate import evaluate
from explorer.validation.run_labels import run_label, run_name

RESIDUALS = Path(__file__).resolve().parents[2] / "assets" / "validation" / "residuals.json"
EXTRAPOLATING_BEYOND = 2.0
"""A prediction whose nearest validated row is farther than this is extrapolating (see the distance)."""
NEAREST = 3
DEFAULT_CLUSTER = "dgx-a100-80gb"   # the cluster of the cases that name none (the A100 tables), as `validate` runs them
SIXTEEN_BIT = ("bf16", "fp16")


@dataclass(frozen=True)
class Features:
    """What the distance compares of a prediction or a validated row."""

    accelerator: str        # the cluster's device name
    precision: str          # the strategy's dtype
    moe: bool
    gpus: int
    seq_len: int
    cp: bool                # context parallelism (cp > 1)
    ep: bool                # expert parallelism (ep > 1)
    ep_overlap_eager: bool = False   # MoE all-to-alls under the partner pass, layers not in a full-iteration graph
    local_experts: int = 0           # routed experts a GPU holds (experts / e); 0 for a dense model
    width: int = 0                   # hidden / t: the GEMMs' hidden dimension on one GPU; 0: not a transformer

    @property
    def regime(self) -> str:
        precision = "16-bit" if self.precision in SIXTEEN_BIT else self.precision
        return f"{self.accelerator} · {precision} · {'MoE' if self.moe else 'dense'}"


def features_of(model, strategy, cluster) -> Features:
    return Features(cluster.device.name, strategy.dtype, bool(model.is_moe), int(strategy.devices),
                    int(model.seq_len), strategy.cp > 1, strategy.ep > 1, overlap_eager(model, strategy),
                    local_experts_of(model, strategy), width_of(model, strategy))


def width_of(model, strategy) -> int:
    """hidden / t, at least 1, for a transformer; 0 (not compared) for the MLP and CNN families, whose `hidden` is
    no GEMM width of this kind."""
    return max(1, int(model.hidden // max(strategy.tp, 1))) if model.is_transformer else 0


def local_experts_of(model, strategy) -> int:
    """The routed experts one GPU holds: experts / e (Megatron-Core places experts / EP on each expert-parallel
    rank); 0 for a dense model."""
    return int(model.experts // max(strategy.ep, 1)) if model.is_moe else 0


EASY_FACTOR = 2.0
"""How far (a factor) a prediction may hold more local experts, or run narrower GEMMs, than a row before it counts."""


def _beyond(more: float, less: float, weight: float) -> float:
    """|log2| x weight of how far `more` exceeds EASY_FACTOR x `less` (0 within it)."""
    return max(0.0, math.log2(more / less) - math.log2(EASY_FACTOR)) * weight if more > 0 and less > 0 else 0.0


def _experts_distance(a: "Features", b: "Features") -> float:
    """Prediction `a` holding more routed experts a GPU than row `b` (the module docstring)."""
    return _beyond(a.local_experts, b.local_experts, 0.5) if a.moe and b.moe else 0.0


def _width_distance(a: "Features", b: "Features") -> float:
    """Prediction `a` running narrower GEMMs than row `b` (the module docstring)."""
    return _beyond(b.width, a.width, 0.5)


def overlap_eager(model, strategy) -> bool:
    """Expert-parallel overlap (Strategy.overlap_ep, MoE with ep > 1) without a full-iteration CUDA graph
    (cuda_graphs other than 'full'): the host issues the merged schedule's nodes, whole or around partial graphs of
    some of their parts ('router', 'layer')."""
    return bool(model.is_moe and strategy.ep > 1 and strategy.overlap_ep and strategy.cuda_graphs != "full")


KNOWN_GAPS = (
    ("ep_overlap_eager",
     "Known gap: expert-parallel overlap without full-iteration CUDA graphs. Outside per-layer graphs the model hides "
     "only the share of the all-to-alls that NVIDIA measured hidden in such a step (36.55 %); it does not price the "
     "host work of the merged schedule, which Megatron-LM says \"brings extra cpu overhead and may cause GPU bubble\" "
     "(NVIDIA/Megatron-LM PR 2184). The {runs} validated runs with this feature took {low:.2f}-{high:.2f}x the "
     "predicted time."),
)
"""(Features field, text) of each known gap: a strategy with the field set is shown the text, filled with the
validated rows that have it (their errors, signed: the model too fast). Each gap is a cost the model does not price
and whose rows miss widely (tests/test_validation_misses.py names the families of the misses); since EAGER_HIDDEN
(2026-12-07) the EP overlap's rows straddle the prediction, most within 10 %, the rest too fast by up to 2.3x."""


def _precision_distance(a: str, b: str) -> float:
    if a == b:
        return 0.0
    return 1.0 if a in SIXTEEN_BIT and b in SIXTEEN_BIT else 2.0


def _terms(a: Features, b: Features) -> tuple:
    """(weight, words) of each feature the distance of prediction `a` from row `b` adds, in the order a tie is
    named; words(validated) says it, given the features of its regime's validated rows (for their range)."""
    scale = (abs(math.log2(max(a.gpus, 1) / max(b.gpus, 1))) * 0.25
             + abs(math.log2(max(a.seq_len, 1) / max(b.seq_len, 1))) * 0.5)
    return (
        ((a.accelerator != b.accelerator) * 2.0, lambda v: f"no validated run on {a.accelerator}"),
        ((a.moe != b.moe) * 3.0, lambda v: f"no validated {'MoE' if a.moe else 'dense'} run on {a.accelerator}"),
        (_precision_distance(a.precision, b.precision),
         lambda v: f"no validated {a.precision} run of this kind on {a.accelerator}"),
        ((a.cp != b.cp) * 1.0,
         lambda v: f"no validated run {'with' if a.cp else 'without'} context parallelism near this one"),
        (_experts_distance(a, b), lambda v: _experts_words(a, b, max(f.local_experts for f in v))),
        ((a.ep != b.ep) * 1.0,
         lambda v: f"no validated run {'with' if a.ep else 'without'} expert parallelism near this one"),
        (_width_distance(a, b), lambda v: _width_words(a, b, min(f.width for f in v if f.width))),
        ((a.ep_overlap_eager != b.ep_overlap_eager) * 1.0,
         lambda v: (f"no validated run {'with' if a.ep_overlap_eager else 'without'} expert-parallel overlap "
                    "outside a full-iteration CUDA graph near this one")),
        (scale, lambda v: (f"no validated run near {a.gpus:,} GPUs and {a.seq_len:,}-token sequences "
                           f"(nearest: {b.gpus:,} GPUs, {b.seq_len:,} tokens)")),
    )


REGIME_TERMS = 3
"""The first _terms: accelerator, dense/MoE and precision (what a regime is made of)."""


def distance(a: Features, b: Features) -> float:
    """The module docstring's distance of a prediction's features `a` from a validated row's `b` (one-sided in the
    local experts and the width: a prediction beyond the row counts, not the other way round)."""
    return sum(weight for weight, _ in _terms(a, b))


def _nearest(value: int, bound: int) -> str:
    """', the nearest N' where the nearest row's value is not the regime's bound itself."""
    return "" if value == bound else f", the nearest {value:,}"


def _experts_words(a: Features, b: Features, most: int) -> str:
    return (f"no validated run holds {a.local_experts:,} routed experts per GPU or near it (the validated runs on "
            f"{a.regime} hold at most {most:,}{_nearest(b.local_experts, most)}): with more experts per GPU the CPU "
            "launches more kernels and each expert's matrix products get smaller")


def _width_words(a: Features, b: Features, narrowest: int) -> str:
    return (f"no validated run has GEMMs this narrow or near it (hidden / t = {a.width:,}; the validated runs on "
            f"{a.regime} go down to {narrowest:,}{_nearest(b.width, narrowest)}): a matrix product's efficiency "
            "depends on its size")


def _differs(a: Features, b: Features, regime_rows=()) -> str:
    """In words, the largest difference of `a` (the prediction) from `b` (a validated row of its regime): the feature
    adding the most to their distance (the first of _terms' order on a tie), with the range `regime_rows` cover.
    With no `regime_rows` (no validated run in its regime), the first of accelerator, dense/MoE and precision that
    differs: the nearest row is of another regime, and that is what sets it apart."""
    validated = [r[3] for r in regime_rows]
    terms = _terms(a, b)
    if not validated:
        return next((words(validated) for weight, words in terms[:REGIME_TERMS] if weight),
                    f"no validated run in the regime {a.regime}")
    if not a.width and all(f.width for f in validated):     # an MLP or a CNN: every validated run is a transformer
        return f"no validated run of a model other than a transformer on {a.accelerator}"
    return max(terms, key=lambda term: term[0])[1](validated)    # max keeps the first of equal weights


@lru_cache(maxsize=1)
def published_hfus(path: str = str(RESIDUALS)) -> dict:
    """id -> the hardware FLOP utilisation the published run reached (recomputation counted, in this model's
    FLOPs count: hfu_of), for the whole-iteration rows (residual_rows: published_hfu)."""
    rows = json.loads(Path(path).read_text(encoding="utf-8"))["rows"]
    return {r["id"]: float(r["published_hfu"]) for r in rows if r.get("published_hfu") is not None}


def hfu_of(result) -> float:
    """A Result's hardware FLOP utilisation: its MFU with the recomputed FLOPs counted too (what the hardware
    did, whatever the recomputation chosen: the fair ceiling to compare runs of one regime by)."""
    return result.mfu * result.hardware_flops_per_iteration / result.model_flops_per_iteration \
        if result.model_flops_per_iteration else 0.0


def executed_hfu_of(result) -> float | None:
    """hfu_of in the FLOPs the GPUs execute: the causal attention core at half (Megatron-LM's count,
    explorer.cost.megatron_flops), recomputation counted alike; None where the model has no causal attention.
    Eq. 3 counts the attention whole, so at long sequences hfu_of passes 100 % (a lecturer's walk: Qwen2.5-7B at
    131,072 tokens read '108 % busy'), where this stays a fraction of the peak."""
    if not result.megatron_mfu or not result.model_flops_per_iteration:
        return None
    return result.megatron_mfu * result.hardware_flops_per_iteration / result.model_flops_per_iteration


@lru_cache(maxsize=1)
def residuals(path: str = str(RESIDUALS)) -> tuple:
    """(id, group, source, Features, speed error, subset) of every bundled validated row: the error signed as
    speed_error says (> 0: the model optimistic), whatever the row's metric."""
    rows = json.loads(Path(path).read_text(encoding="utf-8"))["rows"]
    return tuple((r["id"], r["group"], r["source"], Features(**r["features"]), float(r["speed_error"]),
                  r.get("subset", "")) for r in rows)


def evidence(model, strategy, cluster) -> dict:
    """The evidence of the module docstring, as plain JSON values."""
    mine = features_of(model, strategy, cluster)
    rows = residuals()
    # its own regime's rows first (its band is theirs), each group by distance
    scored = sorted(((r[3].regime != mine.regime, distance(mine, r[3]), r[0]), r) for r in rows)
    ranked = [r for _, r in scored]
    nearest = [{"id": r[0], "error": r[4], "distance": round(key[1], 3), "source": r[2],
                "label": run_label(r[0], r[3].accelerator, r[3].gpus, r[4])}      # what a person reads of it
               for key, r in scored[:NEAREST]]
    regime_rows = [r for r in rows if r[3].regime == mine.regime]
    held_out = [r for r in regime_rows if r[5] != "fitted"] or regime_rows
    errors = [abs(r[4]) for r in held_out]
    signed = sorted(r[4] for r in held_out)
    far = not ranked or scored[0][0][1] > EXTRAPOLATING_BEYOND
    reason = ""
    if far:
        reason = _differs(mine, ranked[0][3], regime_rows) if ranked else "no validated runs are bundled"
    elif not regime_rows:
        reason = f"no validated run in the regime {mine.regime}"
    hfus = published_hfus()
    reached = sorted((hfus[r[0]], r[0], run_name(r[0], r[3].accelerator, r[3].gpus)) for r in regime_rows
                     if r[0] in hfus)
    return {"regime": mine.regime, "validated_rows": len(held_out),
            "mean_abs_error": float(sum(errors) / len(errors)) if errors else None,
            "max_abs_error": float(max(errors)) if errors else None,
            "one_way": one_way(signed), "signed_range": [float(signed[0]), float(signed[-1])] if signed else None,
            "nearest_rows": nearest, "extrapolating": bool(far or not regime_rows), "reason": reason,
            "published_hfu_max": reached[-1][0] if reached else None,
            "published_hfu_row": reached[-1][1] if reached else None,
            "published_hfu_label": reached[-1][2] if reached else None, "published_hfu_runs": len(reached),
            "known_gaps": known_gaps(mine, rows)}


def one_way(signed) -> str:
    """'fast' where the model was too fast on every one of these (signed speed errors, at least ONE_WAY_ROWS of
    them), 'slow' where too slow on every one, '' otherwise."""
    if len(signed) < ONE_WAY_ROWS:
        return ""
    if all(e > 0 for e in signed):
        return "fast"
    return "slow" if all(e < 0 for e in signed) else ""


ONE_WAY_ROWS = 3
"""How many validated rows, all missed the same way, a regime needs before its band names the direction: two rows
of one sign are a coin tossed twice (one in two by chance); three, one in four."""


def known_gaps(mine: Features, rows) -> list:
    """KNOWN_GAPS' texts that apply to a prediction with features `mine`, each filled with the bundled validated
    rows of that feature: how many times the predicted time the published runs took (their speed errors e, so
    published over predicted time is 1 + e)."""
    out = []
    for field, text in KNOWN_GAPS:
        if not getattr(mine, field):
            continue
        same = [r for r in rows if getattr(r[3], field) and r[5] != "fitted"]
        if not same:
            continue
        took = sorted(1 + r[4] for r in same)          # published time over predicted time
        out.append(text.format(low=took[0], high=took[-1], runs=len(same)))
    return out


def mfu_warning(ev: dict, result) -> str:
    """A warning when a prediction uses the hardware more than every published run of its regime did (issue 30
    item 6: hardware FLOP utilisation, hfu_of, so that recomputation does not hide it), '' otherwise (or where the
    regime has no whole-iteration run)."""
    top, hfu = ev.get("published_hfu_max"), hfu_of(result)
    if top is None or hfu <= top:
        return ""
    busy = (f"keeps the GPUs {100 * hfu:.0f} % busy with FLOPs (MFU {100 * result.mfu:.0f} %, recomputation counted: "
            f"{100 * hfu:.0f} %)")
    executed = executed_hfu_of(result)
    if executed is not None and abs(executed - hfu) > 0.005:    # long causal sequences: Eq. 3 counts the attention whole
        busy += (f" in Eq. 3's count, which counts the causal attention whole, as the published runs it is compared "
                 f"with are counted ({100 * executed:.0f} % of the FLOPs the GPUs execute, the attention at half)")
    return (f"Optimistic? This strategy {busy}, more than any of the {ev['published_hfu_runs']} published runs "
            f"of this regime that time a whole iteration reached ({100 * top:.0f} %, {ev.get('published_hfu_label') or ev['published_hfu_row']}): see "
            "the evidence and the "
            "Validation page.")


WIDE_BAND = 0.15
"""A regime whose validated runs the model misses by more than this on average (issue 27's target for the MoE groups'
mean) has its band shown as a warning, as an extrapolation is: '±47 % typical' is not the caption '±4 %' is."""


def weak(ev: dict) -> bool:
    """Whether a prediction's evidence is shown as a warning: extrapolating, or a typical error above WIDE_BAND."""
    return bool(ev["extrapolating"]) or (ev.get("mean_abs_error") or 0.0) > WIDE_BAND


def band_text(ev: dict) -> str:
    """One line for a page or the CLI: the regime's validated error, or why there is none."""
    if ev["extrapolating"]:
        return f"extrapolating: {ev['reason']}"
    band = (f"±{100 * ev['mean_abs_error']:.0f} % typical, ±{100 * ev['max_abs_error']:.0f} % worst on "
            f"{ev['validated_rows']} validated runs ({ev['regime']})")
    if weak(ev) and ev.get("one_way"):
        low, high = sorted(abs(e) for e in ev["signed_range"])
        band += (f"; the model was too {ev['one_way']} on every one of them, by {100 * low:.0f}-{100 * high:.0f} % "
                 f"in speed")
    return band


THROUGHPUT_METRICS = ("model_tflops_per_gpu", "tokens_per_sec_per_gpu")
TIME_METRICS = ("iteration_time_s", "layer_fwd_s", "layer_bwd_s")


def speed_error(metric: str, relative_error: float) -> float:
    """A validated row's error as predicted over published speed - 1, whatever it measured: > 0 the model is
    optimistic. A throughput row's relative error (predicted / published - 1) is that already; a time row's is the
    inverse (predicted / published time - 1: -20 % of the time is +25 % of the speed), so that errors of rows that
    measured times and rows that measured throughputs are signed alike where they are listed, averaged and read as
    "took x times the predicted time" (known_gaps; explorer.validation.regimes mean_error)."""
    if metric in TIME_METRICS:
        return 1 / (1 + relative_error) - 1
    if metric in THROUGHPUT_METRICS:
        return relative_error
    raise ValueError(f"a validated row's metric {metric!r} is neither a time nor a throughput")


def published_utilisation(predicted: float, metric: str, relative_error: float) -> float | None:
    """The utilisation a published run reached, in this model's FLOPs count: the predicted one scaled by published
    over predicted speed (relative_error = predicted / published - 1; a throughput grows with speed, a time
    shrinks); None for per-layer rows (no whole iteration)."""
    if metric in THROUGHPUT_METRICS:
        return predicted / (1 + relative_error)
    if metric == "iteration_time_s":
        return predicted * (1 + relative_error)
    return None


def residual_rows(cases, validation_rows) -> list:
    """The JSON rows of residuals.json for `cases` and their ValidationRow predictions."""
    from explorer.io.clusters import load_cluster
    out = []
    for case, row in zip(cases, validation_rows):
        cluster = load_cluster(case.cluster or DEFAULT_CLUSTER)
        f = features_of(case.model, case.strategy, cluster)
        hfu = published_utilisation(hfu_of(evaluate(case.model, case.strategy, cluster)), row.metric,
                                    row.relative_error)
        out.append({"id": row.id, "group": row.group, "source": row.source[:200],
                    "features": dataclasses.asdict(f),
                    "relative_error": row.relative_error, "speed_error": speed_error(row.metric, row.relative_error),
                    "subset": row.subset,
                    "published_hfu": None if hfu is None else round(hfu, 6)})
    return out


def fresh_rows() -> list:
    """Every validation group predicted now (what residuals.json must hold)."""
    from explorer.io.clusters import load_cluster
    from explorer.validation import GROUPS, load_all_cases, validate
    cases = load_all_cases(GROUPS)
    return residual_rows(cases, validate(cases, load_cluster(DEFAULT_CLUSTER)))


def main() -> None:
    rows = fresh_rows()
    RESIDUALS.write_text(json.dumps({"about": "residuals of every validation case (explorer.validation); "
                                              "written by python -m explorer.validation.evidence",
                                     "rows": rows}, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {len(rows)} rows to {RESIDUALS}")


if __name__ == "__main__":
    main()
