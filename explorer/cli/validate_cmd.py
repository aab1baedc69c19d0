"""python -m explorer validate [--cases FILE] [--cluster C] [--json]"""
from __future__ import annotations

from explorer.cli.output import dumps
from explorer.io.clusters import load_cluster


def register(sub) -> None:
    cmd = sub.add_parser("validate", help="predict published runs and compare")
    cmd.add_argument("--cases", help="published.json-style file (default: assets/validation/published.json)")
    cmd.add_argument("--cluster", default="dgx-a100-80gb", help="cluster the runs used (default dgx-a100-80gb)")
    cmd.add_argument("--json", action="store_true")
    cmd.set_defaults(run=run)


def run(args) -> int:
    from explorer.validation import TARGETS, load_cases, summarize, validate   # (sympy: only when run)
    cluster = load_cluster(args.cluster)
    rows = validate(load_cases(args.cases), cluster)
    summary = summarize(rows)
    if args.json:
        print(dumps({"cases": [dict(id=r.id, group=r.group, source=r.source, metric=r.metric,
                                         predicted=r.predicted, expected=r.expected,
                                         relative_error=r.relative_error, assumptions=r.assumptions)
                                    for r in rows], "summary": summary}))
        return 0
    print(f"{'case':<52}{'predicted':>11}{'published':>11}{'error':>8}")
    for r in rows:
        print(f"{r.id:<52}{r.predicted:>11.4g}{r.expected:>11.4g}{100 * r.relative_error:>7.1f}%")
    print()
    for group, s in summary.items():
        mean_t, max_t = TARGETS.get(group, (None, None))
        target = f"  (targets: mean <= {100 * mean_t:.0f}%, max <= {100 * max_t:.0f}%)" if mean_t else ""
        print(f"{group}: {s['cases']} cases, mean |error| {100 * s['mean_abs_error']:.1f}%, "
              f"max {100 * s['max_abs_error']:.1f}%{target}")
    print("\nassumptions:")
    for assumption in sorted({(r.group, r.assumptions) for r in rows}):
        print(f"  {assumption[0]}: {assumption[1]}")
    return 0
