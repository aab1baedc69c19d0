"""python -m explorer timeline <evaluate flags> [--level super|micro] [--op NAME] [--layer K]
[--format csv|json|chrome-trace] [--out FILE]

Prints (or writes) the events of one iteration (super) or of one layer's / one
operator's micro-steps (micro). The comparison with the cost model goes to
stderr when the events go to stdout, so the CSV/JSON stays clean.
"""
from __future__ import annotations

import sys
from pathlib import Path

from explorer.errors import ExplorerError
from explorer.io.safe_load import shown_path
from explorer.cost.evaluate import evaluate
from explorer.cli.args import add_strategy_flags, resolve

FORMATS = ("csv", "json", "chrome-trace")   # = explorer.timeline.FORMATS (pandas loads only when run)


def register(sub) -> None:
    cmd = sub.add_parser("timeline", help="events of one iteration or one layer's micro-steps")
    add_strategy_flags(cmd)
    cmd.add_argument("--draw", choices=("zb-h1",), help="draw a 1f1b strategy as another schedule (what-if)")
    cmd.add_argument("--level", choices=("super", "micro"), default="super")
    cmd.add_argument("--op", help="operator name (micro level), e.g. qkv")
    cmd.add_argument("--layer", type=int, help="layer index (micro level; default 0)")
    cmd.add_argument("--format", choices=FORMATS, default="csv")
    cmd.add_argument("--out", help="write the events to FILE instead of stdout")
    cmd.set_defaults(run=run)


def run(args) -> int:
    from explorer.timeline import compare, export, summary_lines, superstep_table
    model, cluster, strategy, gpus = resolve(args)
    if args.level == "super" and (args.op is not None or args.layer is not None):
        raise ExplorerError("--op and --layer choose micro-steps: add --level micro")
    if args.level == "micro":
        from explorer.timeline import microstep_table    # the plan's operators (sympy)
        events = microstep_table(model, strategy, cluster, gpus, layer=args.layer, op=args.op)
        end = f"{events['end_s'].max():.6g}" if len(events) else "0"
        lines = [f"micro-steps of {'operator ' + args.op if args.op else 'layer'} "
                 f"on {len(set(events['row'].tolist()))} devices: {end} s"]
    else:
        result = evaluate(model, strategy, cluster, gpus)
        schedule = args.draw or strategy.schedule
        events = superstep_table(model, strategy, cluster, gpus, schedule=schedule, result=result)
        lines = summary_lines(compare(events, result, schedule, strategy.schedule))
    text = export(events, "json" if args.json else args.format)   # --json (shared flag) means --format json
    if args.out:
        try:
            Path(args.out).write_text(text, encoding="utf-8")
        except (OSError, ValueError) as err:        # as export-config and run say it
            raise ExplorerError(f"cannot write {shown_path(args.out)}: {getattr(err, 'strerror', None) or err}") \
                from None
        print("\n".join([f"{len(events)} events written to {args.out}"] + lines))
    else:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
        print("\n".join(lines), file=sys.stderr)
    return 0
