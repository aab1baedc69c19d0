"""Entry point: dispatch to a command; bad input -> one line on stderr, exit 2."""
from __future__ import annotations

import sys

from explorer.errors import ExplorerError
from explorer.cli import evaluate_cmd, export_config_cmd, lesson_cmd, presets_cmd, search_cmd, timeline_cmd, validate_cmd
from explorer.cli.args import Parser
from explorer.cli import calibrate_cmd, import_config_cmd, run_cmd
from explorer.io.quoting import comment_text
from explorer.limits import MAX_ACTION_CPU_S, work_budget

COMMANDS = (presets_cmd, evaluate_cmd, validate_cmd, timeline_cmd, search_cmd, lesson_cmd, export_config_cmd,
            import_config_cmd, run_cmd, calibrate_cmd)


def _cpu_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 < value <= 86_400:
        raise ExplorerError(f"--max-cpu-s {text[:40]!r}: give a number of seconds above 0 and at most a day")
    return value


def _notice(line: str) -> None:
    """What a long command is doing (explorer.limits.NOTICE_EVERY_CPU_S), on stderr: stdout stays its result."""
    print(comment_text(line, 1000), file=sys.stderr, flush=True)


def build_parser() -> Parser:
    parser = Parser(prog="python -m explorer", description="Bridging DL Explorer: cost of hybrid parallelism")
    parser.add_argument("--max-cpu-s", type=_cpu_seconds, default=MAX_ACTION_CPU_S, metavar="S",
                        help=f"CPU seconds the command's model work may take (default {MAX_ACTION_CPU_S:g}): "
                             "past them it stops and says what it was doing")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    for module in COMMANDS:
        module.register(sub)
    return parser


def main(argv=None) -> int:
    try:
        args = build_parser().parse_args(argv)
        with work_budget(f"explorer {args.command}", cpu_s=args.max_cpu_s, notify=_notice):
            return args.run(args)
    except ExplorerError as err:      # one line, however long or multi-line the names in it are
        text = comment_text(" ".join(str(err).split()), 1000)     # names from files: no terminal controls
        print(f"error: {text}", file=sys.stderr)
        return 2
    except Exception as err:          # anything else: one line and exit 2, never a traceback
        text = " ".join(str(err).split())[:300] if not isinstance(err, RecursionError) else "nested too deeply"
        print(f"error: {type(err).__name__}: {text}", file=sys.stderr)
        return 2
