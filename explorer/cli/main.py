"""Entry point: dispatch to a command; bad input -> one line on stderr, exit 2."""
from __future__ import annotations

import sys

from explorer.errors import ExplorerError
from explorer.cli import evaluate_cmd, lesson_cmd, presets_cmd, search_cmd, timeline_cmd, validate_cmd
from explorer.cli.args import Parser

COMMANDS = (presets_cmd, evaluate_cmd, validate_cmd, timeline_cmd, search_cmd, lesson_cmd)


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
    except ExplorerError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except (OSError, ValueError, KeyError, TypeError) as err:
        print(f"error: {type(err).__name__}: {err}", file=sys.stderr)
        return 2
