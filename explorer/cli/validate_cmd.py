"""python -m explorer validate [--group G ...] [--cases FILE] [--cluster C] [--json]"""
from __future__ import annotations

from explorer.cli.output import dumps
from explorer.io.clusters import load_cluster
from explorer.limits import CASE_CPU_S, MAX_ACTION_CPU_S, MAX_BATCH_CPU_S, batch_budget

GROUPS = ("megatron_table1", "korthikanti_table4", "megatron_bridge", "bf16_h100", "moe_ab_h100")
"""explorer.validation.GROUPS, repeated so that registering the command imports no sympy (a test
checks they agree)."""


def register(sub) -> None:
    cmd = sub.add_parser("validate", help="predict published runs and compare")
    cmd.add_argument("--group", action="append", choices=GROUPS,
                     help="validation group (repeatable; default: all). megatron_bridge = the Megatron-Bridge "
                          "2025-26 runs on DGX H100, DGX B200 and GB200 NVL72, each on its own preset; bf16_h100 = "
                          "the dense BF16 H100 runs the BF16 GEMM efficiency is fitted on; moe_ab_h100 = NVIDIA's "
                          "matched Qwen3-30B-A3B A/B runs on 16 H100 (dispatcher, EP overlap, CUDA graphs)")
    cmd.add_argument("--cases", help="published.json-style file (default: assets/validation/published.json)")
    cmd.add_argument("--cluster", default="dgx-a100-80gb",
                     help="cluster of the cases that name none (default dgx-a100-80gb, the A100 groups)")
    cmd.add_argument("--json", action="store_true")
    cmd.set_defaults(run=run)


def _validated(args, cases, cluster, validate) -> list:
    """validate(cases, cluster) under a budget of CASE_CPU_S per case (at least one action's, at most MAX_BATCH_CPU_S)
    unless --max-cpu-s was given (explorer.limits.CASE_CPU_S: a cold batch compiles every case's structure)."""
    if getattr(args, "max_cpu_s", None) is not None:
        return validate(cases, cluster)
    cpu_s = max(MAX_ACTION_CPU_S, min(CASE_CPU_S * len(cases), MAX_BATCH_CPU_S))
    with batch_budget(f"explorer validate ({len(cases)} cases; --max-cpu-s sets another limit)", cpu_s):
        return validate(cases, cluster)


def run(args) -> int:
    from explorer.validation import (TARGETS, load_all_cases, load_cases, load_megatron_bridge,  # (sympy: only
                                     summarize, validate)                                       # when run)
    cluster = load_cluster(args.cluster)
    if args.cases:
        cases = load_cases(args.cases)
    else:
        cases = load_all_cases(args.group or GROUPS)
    skipped = load_megatron_bridge()[1] if not args.cases and "megatron_bridge" in (args.group or GROUPS) else []
    rows = _validated(args, cases, cluster, validate)
    summary = summarize(rows)
    if args.json:
        print(dumps({"cases": [dict(id=r.id, group=r.group, source=r.source, metric=r.metric,
                                         predicted=r.predicted, expected=r.expected,
                                         relative_error=r.relative_error, assumptions=r.assumptions,
                                         **({"subset": r.subset} if r.subset else {}),
                                         **({"flops_convention": r.convention} if r.convention else {}))
                                    for r in rows], "summary": summary,
                     **({"skipped": [dict(id=i, system=s, reason=why) for i, s, why in skipped]} if skipped else {})}))
        return 0
    print(f"{'case':<52}{'predicted':>11}{'published':>11}{'error':>8}")
    for r in rows:
        print(f"{r.id:<52}{r.predicted:>11.4g}{r.expected:>11.4g}{100 * r.relative_error:>7.1f}%"
              f"{'  ' + r.subset if r.subset else ''}")
    print()
    for group, s in summary.items():
        mean_t, max_t = TARGETS.get(group, (None, None))
        target = f"  (targets: mean <= {100 * mean_t:.0f}%, max <= {100 * max_t:.0f}%)" if mean_t else ""
        print(f"{group}: {s['cases']} cases, mean |error| {100 * s['mean_abs_error']:.1f}%, "
              f"max {100 * s['max_abs_error']:.1f}%{target}")
        for subset in ("fitted", "held out"):
            if subset in s:
                part = s[subset]
                print(f"  {subset}: {part['cases']} cases, mean |error| {100 * part['mean_abs_error']:.1f}%, "
                      f"max {100 * part['max_abs_error']:.1f}%")
    if skipped:
        print(f"\nMegatron-Bridge rows not compared ({len(skipped)}), each with its reason:")
        reasons = {}
        for _, system, why in skipped:
            reasons[(system, why)] = reasons.get((system, why), 0) + 1
        for (system, why), count in sorted(reasons.items()):
            print(f"  {system}: {count} x {why}")
    conventions = sorted({(r.group, r.convention) for r in rows if r.convention})
    if conventions:
        print("\nTFLOP/s counted as (predicted and published alike):")
        for group, convention in conventions:
            print(f"  {group}: {convention}")
    print("\nassumptions:")
    for assumption in sorted({(r.group, r.assumptions) for r in rows}):
        print(f"  {assumption[0]}: {assumption[1]}")
    return 0
