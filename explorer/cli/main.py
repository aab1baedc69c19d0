"""Entry point: dispatch to a command; bad input -> one line on stderr, exit 2."""
from __future__ import annotations

import sys

from explorer.errors import ExplorerError
from explorer.cli import evaluate_cmd, export_config_cmd, lesson_cmd, presets_cmd, search_cmd, timeline_cmd, validate_cmd
from explorer.cli.args import Parser
from explorer.cli import calibrate_cmd, run_cmd

COMMANDS = (presets_cmd, evaluate_cmd, validate_cmd, timeline_cmd, search_cmd, lesson_cmd, export_config_cmd,
            run_cmd, calibrate_cmd)


def build_parser() -> Parser:
    parser = Parser(prog="python -m explorer", description="Bridging DL Explorer: cost of hybrid parallelism")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    for module in COMMANDS:
        module.register(sub)
    return parser


def main(argv=None) -> int:
    try:
        args = build_parser().parse_args(argv)
        return args.run(args)
    except ExplorerError as err:      # one line, however long or multi-line the names in it are
        text = " ".join(str(err).split())
        print(f"error: {text if len(text) <= 1000 else text[:999] + '…'}", file=sys.stderr)
        return 2
    except Exception as err:          # anything else: one line and exit 2, never a traceback
        text = " ".join(str(err).split())[:300] if not isinstance(err, RecursionError) else "nested too deeply"
        print(f"error: {type(err).__name__}: {text}", file=sys.stderr)
        return 2
