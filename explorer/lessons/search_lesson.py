"""Lesson 8: searching systematically: the space, the pruning, the Pareto front."""
from __future__ import annotations

from functools import lru_cache

from explorer.errors import ExplorerError
from explorer.search import search
from explorer.search.search import MEMORY_RULE
from explorer.search.figure import log_time_axis, pareto_figure
from explorer.search.report import label
from explorer.lessons.base import Control, Lesson, Reveal, Setup, cluster, fmt_seconds, model
from explorer.hardware.units import GIB
from explorer.validation.regimes import regimes

REFINE_TOP = 1              # per-layer dynamic programming on the fastest global choice (live: <= 0.3 s a setting)


@lru_cache(maxsize=32)        # every setting of the three controls (2 x 3 x 4 = 24)
def run(gpus: int, global_batch: int, cap_gib: int):
    return search(model(), cluster(), gpus, global_batch, max_memory_bytes=cap_gib * GIB, top=5,
                  refine_top=REFINE_TOP)


def _run(values: dict):
    return run(values["gpus"], values["global_batch"], values["cap_gib"])


def build(values: dict) -> Setup:
    found = _run(values)
    if not found.top:
        raise ExplorerError(f"no strategy fits in {values['cap_gib']} GiB per GPU; raise the memory cap")
    return Setup(model(), cluster(), found.top[0].strategy, page="search",
                 search=(values["gpus"], values["global_batch"], values["cap_gib"]))


def picture(setup: Setup, values: dict):
    return pareto_figure(_run(values), f"{values['gpus']} GPUs, B = {values['global_batch']}: time vs memory")


def counts(found) -> dict:
    """The search's funnel, each stage a subset of the one before: total = ruled out + evaluated,
    evaluated = over the cap + within it (explorer.search.search.SearchResult)."""
    over = found.pruned.get(MEMORY_RULE, 0)
    return {"total": found.total, "ruled_out": sum(found.pruned.values()) - over, "evaluated": found.evaluated,
            "over_cap": over, "within_cap": found.kept, "refined": found.refined}


def explanation(values: dict, found) -> str:
    best, n = found.top[0], counts(found)
    refined = "the fastest one" if n["refined"] == 1 else f"the {n['refined']:,} fastest"
    cap = f"{values['cap_gib']} GiB per GPU"
    fit = (f"all of which fit in {cap}" if not n["over_cap"] else
           f"of which {n['over_cap']:,} need more than {cap} and {n['within_cap']:,} fit")
    return (f"Fastest: {label(best.strategy)}, {fmt_seconds(best.iteration_time_s)} per iteration. The search "
            f"looked at {n['total']:,} combinations: its rules ruled out {n['ruled_out']:,} that cannot run "
            f"(divisibility, schedule constraints) and it evaluated the other {n['evaluated']:,} in bulk, {fit}; "
            f"it then refined the per-layer splits of {refined}.")


def question(values: dict) -> Reveal:
    found = _run(values)
    best = found.top[0] if found.top else None
    if best is None:
        return Reveal("Predict: which strategy is fastest?", float("nan"), "s", "none fits",
                      f"No strategy fits in {values['cap_gib']} GiB per GPU.")
    s = best.strategy
    return Reveal(
        question=f"Predict: which d, t, p is fastest on {values['gpus']} GPUs with B = {values['global_batch']} "
                 f"and at most {values['cap_gib']} GiB per GPU, and how long is its iteration?",
        answer=best.iteration_time_s, unit="s", answer_text=fmt_seconds(best.iteration_time_s),
        now_text=f"{s.dp} · {s.tp} · {s.pp}", now_label="fastest d · t · p",
        explanation=explanation(values, found))


def error_bar_text() -> str:
    """Why a model's number has an error bar (issue 28 item 4), with the validated bands of the bundled residuals
    (explorer.validation.regimes): the best and the worst regime by mean |error|."""
    known = sorted(regimes(), key=lambda r: r.mean_abs_error)
    if not known:
        return ""
    best, worst = known[0], known[-1]
    band = lambda r: f"{r.name} ±{100 * r.mean_abs_error:.0f} %"
    return (" **Every number has an error bar**: its regime's typical error on published runs (Validation page), "
            f"from {band(best)} to {band(worst)}. Strategies of one regime share most of it, so their ranking is "
            "surer than either number. This lesson's cluster is made up: no run backs it.")


LESSON = Lesson(
    number=8, slug="search", title="Searching systematically: space, pruning, Pareto front",
    text=("With d·t·p = N fixed, the choices multiply: the factorisations of N, the micro-batch, the schedule "
          "and its chunks, the ZeRO stage, recomputation, sequence parallelism, overlap, then per-layer splits "
          "and stage boundaries. A **systematic search** enumerates the global choices, **prunes** those that "
          "cannot run (divisibility, a schedule's rules, memory above the cap), evaluates the rest in bulk "
          "with the cost model, and refines the best by dynamic programming over the layers. No strategy is "
          "best in both time and memory: the **Pareto front** keeps each strategy that no other beats on both."
          + error_bar_text()),
    formula_latex=r"\min_{d\,t\,p\,=\,N,\ \ldots} T_{\text{iter}} \quad \text{s.t.} \quad M_{\text{peak}} "
                  r"\le M_{\text{cap}}",
    formula_text="minimise T_iter over d·t·p = N and the other choices, subject to M_peak ≤ M_cap",
    source="Zheng et al., 'Alpa', OSDI 2022 (inter- and intra-operator search by dynamic programming); "
           "Narayanan et al., SC'21, Sec. 3 (the space of PTD-P configurations)",
    controls=(Control("gpus", "N — GPUs", (4, 8), 8),
              Control("global_batch", "B — global batch", (8, 16, 32), 16),
              Control("cap_gib", "Memory cap per GPU (GiB)", (4, 8, 16, 64), 64)),
    build=build, picture=picture, question=question,
    caption=lambda setup, values, palette="default": "Line: the Pareto front (fastest first); diamonds: the "
                                                     "five fastest." + (" Log scale in time." if log_time_axis(
                                                         _run(values)) else ""))
