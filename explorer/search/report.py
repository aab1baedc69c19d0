"""A SearchResult as the CLI's JSON object, as text, and as rows for tables and charts."""
from __future__ import annotations

from explorer.cost.megatron_flops import CONVENTION as MEGATRON_CONVENTION
from explorer.cost.megatron_flops import EQ3_CONVENTION
from explorer.cost.numeric import CATEGORIES
from explorer.schedules import chunked
from explorer.io.strategies import strategy_to_dict
from explorer.hardware.units import GIB


def label(strategy) -> str:
    """Short text of a strategy's global choices (and whether it has per-layer choices)."""
    s = strategy
    sched = f"{s.schedule} v={s.chunks}" if chunked(s.schedule) else s.schedule
    gather = s.overlap_param_gather and s.zero in (1, 2)
    dp_overlap = ("DP overlap + param gather" if gather else "DP overlap") if s.overlap_dp else \
        ("param gather overlap" if gather else "")
    extras = [f"ZeRO-{s.zero}" if s.zero else "", f"recompute {s.recompute}" if s.recompute != "none" else "",
              "SP" if s.sequence_parallel else "", "TP overlap" if getattr(s, "overlap_tp", False) else "",
              dp_overlap,
              "per-layer splits" if s.layer_splits else "", "stage map" if s.stage_map else "",
              f"layout {s.pipeline_layout}" if getattr(s, "pipeline_layout", "") else "",
              f"EP {s.ep}" + (f" (expert t={s.etp})" if s.etp != s.tp else "") +
              (" overlapped" if getattr(s, "overlap_ep", False) else "") if getattr(s, "ep", 1) > 1 else ""]
    cp = f" cp={s.cp}" + (" ulysses" if s.cp_algo == "ulysses" else "") if s.cp > 1 else ""
    return f"d={s.dp} t={s.tp}{cp} p={s.pp} b={s.micro_batch} {sched}" + "".join(f", {e}" for e in extras if e)


_MEGATRON = MEGATRON_CONVENTION + " (null for a model that is not a causal decoder)"
FLOPS_CONVENTIONS = {"mfu": EQ3_CONVENTION, "tflops_per_gpu": EQ3_CONVENTION,
                     "megatron_mfu": _MEGATRON, "megatron_tflops_per_gpu": _MEGATRON}
"""Which FLOPs count each throughput number of a candidate uses (issue 26 item 4; explorer/io/report.py for
evaluate --json): Eq. 3 counts the full attention core, Megatron-LM's log (and Megatron-Bridge's tables) half."""
MEGATRON_MFU_COLUMN = "Megatron MFU_%"
"""The tables' column of Megatron-LM's count (causal attention at half), beside "mfu_%" (Eq. 3)."""


def _megatron(c) -> tuple:
    """(megatron_tflops_per_gpu, megatron_mfu) of a candidate's evaluation (None for a non-causal model)."""
    result = getattr(c, "result", None)
    return (getattr(result, "megatron_tflops_per_gpu", None), getattr(result, "megatron_mfu", None))


def candidate_dict(c, rank: int | None = None) -> dict:
    meg_tflops, meg_mfu = _megatron(c)
    out = {"strategy": strategy_to_dict(c.strategy), "equivalent": [label(x) for x in c.equivalent],
           "iteration_time_s": c.iteration_time_s,
           "peak_memory_bytes": c.peak_memory_bytes, "mfu": c.mfu,
           "tflops_per_gpu": getattr(c.result, "tflops_per_gpu", None),
           "megatron_tflops_per_gpu": meg_tflops, "megatron_mfu": meg_mfu,
           "breakdown_s": {k: c.breakdown_s[k] for k in CATEGORIES}}
    if c.searched_s is not None:      # the search's own price: evaluate()'s to rounding (tests/test_search_moe.py)
        out["searched_s"] = c.searched_s
    return out if rank is None else {"rank": rank, **out}


def search_dict(result, model, cluster, gpus: int, global_batch: int) -> dict:
    """The stable JSON contract of `python -m explorer search --json`."""
    return {"model": model.name, "cluster": cluster.name, "gpus": gpus, "global_batch": global_batch,
            "memory_cap_bytes": result.memory_cap_bytes, "elapsed_s": result.elapsed_s,
            "total": result.total, "kept": result.kept, "evaluated": result.evaluated,
            "refined": result.refined, "pruned": dict(sorted(result.pruned.items(), key=lambda kv: -kv[1])),
            "flops_conventions": FLOPS_CONVENTIONS,
            "top": [candidate_dict(c, i + 1) for i, c in enumerate(result.top)],
            "pareto": [candidate_dict(c) for c in result.pareto]}


def rows(candidates) -> list:
    """One flat dict per candidate: label, time, memory, MFU (Eq. 3, and Megatron-LM's count: FLOPS_CONVENTIONS)
    and the breakdown by category."""
    out = []
    for i, c in enumerate(candidates):
        meg_mfu = _megatron(c)[1]
        row = {"rank": i + 1, "strategy": label(c.strategy), "iteration_time_s": c.iteration_time_s,
               "peak_memory_gib": c.peak_memory_bytes / GIB, "mfu_%": 100 * c.mfu,
               MEGATRON_MFU_COLUMN: None if meg_mfu is None else 100 * meg_mfu}
        row.update({f"{k}_s": c.breakdown_s[k] for k in CATEGORIES})
        out.append(row)
    return out


def search_text(result, title: str) -> str:
    lines = [title, f"searched {result.total:,} raw choices: {result.evaluated:,} evaluated, "
             f"{result.kept:,} within the {result.memory_cap_bytes / GIB:.1f} GiB cap, "
             f"{result.refined} refined by dynamic programming, in {result.elapsed_s:.2f} s", "",
             f"{'#':>3} {'time s':>10} {'mem GiB':>8} {'MFU %':>6} {'Meg. %':>6}  strategy"]
    for i, c in enumerate(result.top):
        meg_mfu = _megatron(c)[1]
        meg = "-" if meg_mfu is None else f"{100 * meg_mfu:.1f}"
        lines.append(f"{i + 1:>3} {c.iteration_time_s:>10.4f} {c.peak_memory_bytes / GIB:>8.1f} "
                     f"{100 * c.mfu:>6.1f} {meg:>6}  {label(c.strategy)}")
        if c.equivalent:
            lines.append(f"{'':>38}  same time and memory (within 0.1 %): "
                         + "; ".join(label(x) for x in c.equivalent[:3])
                         + (f"; +{len(c.equivalent) - 3} more" if len(c.equivalent) > 3 else ""))
    lines += ["", f"Pareto front (time vs memory): {len(result.pareto)} strategies"]
    for c in result.pareto:
        lines.append(f"    {c.iteration_time_s:>10.4f} {c.peak_memory_bytes / GIB:>8.1f}{'':16}{label(c.strategy)}")
    lines += ["", "MFU %: " + EQ3_CONVENTION + "; Meg. %: MFU in " + MEGATRON_CONVENTION,
              "", "pruned (raw choices, by the first rule broken)"]
    for reason, count in sorted(result.pruned.items(), key=lambda kv: -kv[1]):
        lines.append(f"  {count:>12,}  {reason}")
    return "\n".join(lines)
