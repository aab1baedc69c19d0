"""Entry point: dispatch to a command; bad input -> one line on stderr, exit 2."""
from __future__ import annotations

import importlib
import sys

from explorer.errors import ExplorerError
from explorer.cli.args import Parser
from explorer.io.quoting import comment_text
from explorer.limits import CASE_CPU_S, MAX_ACTION_CPU_S, MAX_BATCH_CPU_S, work_budget

COMMAND_MODULES = {"models": "presets_cmd", "clusters": "presets_cmd", "evaluate": "evaluate_cmd",
                   "validate": "validate_cmd", "timeline": "timeline_cmd", "search": "search_cmd",
                   "lesson": "lesson_cmd", "export-config": "export_config_cmd",
                   "import-config": "import_config_cmd", "run": "run_cmd", "calibrate": "calibrate_cmd"}
"""Each command's module in explorer/cli, in the order of the help. A command line that names one imports only
that module: the others pull in what it does not run (the exporters, the importers, the search, PyTorch's probe:
~0.05 s CPU of every `evaluate`, issue 31 item 5)."""


def _modules(argv) -> list:
    """The command modules to register for `argv`: the named command's alone, or all (help, or no command)."""
    args = list(sys.argv[1:] if argv is None else argv)
    while args[:1] == ["--max-cpu-s"] or (args[:1] and args[0].startswith("--max-cpu-s=")):
        args = args[2:] if args[0] == "--max-cpu-s" else args[1:]
    named = COMMAND_MODULES.get(args[0]) if args else None
    names = [named] if named else list(dict.fromkeys(COMMAND_MODULES.values()))
    return [importlib.import_module(f"explorer.cli.{name}") for name in names]


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


def build_parser(argv=None) -> Parser:
    parser = Parser(prog="python -m explorer", description="Bridging DL Explorer: cost of hybrid parallelism")
    parser.add_argument("--max-cpu-s", type=_cpu_seconds, default=None, metavar="S",
                        help=f"CPU seconds the command's model work may take (default {MAX_ACTION_CPU_S:g}; "
                             f"validate: {CASE_CPU_S:g} per case, {MAX_ACTION_CPU_S:g} to {MAX_BATCH_CPU_S:g}): past them it "
                             "stops and says what it was doing")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    for module in _modules(argv):
        module.register(sub)
    return parser


def main(argv=None) -> int:
    try:
        args = build_parser(argv).parse_args(argv)
        cpu_s = MAX_ACTION_CPU_S if args.max_cpu_s is None else args.max_cpu_s
        with work_budget(f"explorer {args.command}", cpu_s=cpu_s, notify=_notice):
            return args.run(args)
    except ExplorerError as err:      # one line, however long or multi-line the names in it are
        text = comment_text(" ".join(str(err).split()), 1000)     # names from files: no terminal controls
        print(f"error: {text}", file=sys.stderr)
        return 2
    except Exception as err:          # anything else: one line and exit 2, never a traceback
        text = " ".join(str(err).split())[:300] if not isinstance(err, RecursionError) else "nested too deeply"
        print(f"error: {type(err).__name__}: {text}", file=sys.stderr)
        return 2
