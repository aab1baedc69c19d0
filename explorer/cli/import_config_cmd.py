"""python -m explorer import-config FILE [--framework F] [--world-size N] [--out S.json]

A framework config (Megatron-LM arguments, a Megatron-Bridge recipe, a DeepSpeed JSON, a torchtitan TOML) back
into a strategy file (explorer/codegen/imports.py; the file is parsed, never run). It prints the model fields the
config states and the strategy JSON; `evaluate --strategy S.json` then costs it."""
from __future__ import annotations

import json
from pathlib import Path

from explorer.cli.output import write_or_print
from explorer.codegen.imports import IMPORTERS, import_config
from explorer.errors import ExplorerError
from explorer.io.strategies import strategy_json
from explorer.io.safe_load import MAX_FILE_BYTES


def register(sub) -> None:
    cmd = sub.add_parser("import-config", help="a framework config (Megatron-LM, Megatron-Bridge, DeepSpeed, "
                                               "torchtitan) back into a strategy JSON")
    cmd.add_argument("file", help="the config: .sh (Megatron-LM), .py (Megatron-Bridge), .json, .toml")
    cmd.add_argument("--framework", choices=IMPORTERS, help="default: from the file's suffix and text")
    cmd.add_argument("--world-size", type=int, help="GPUs, when the file does not say (Megatron-LM)")
    cmd.add_argument("--out", help="write the strategy JSON to this file")
    cmd.set_defaults(run=run)


def run(args) -> int:
    path = Path(args.file)
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            raise ExplorerError(f"{args.file}: more than the {MAX_FILE_BYTES:,} bytes a config may have")
        data = path.read_bytes()
    except OSError as err:
        raise ExplorerError(f"cannot read {args.file}: {err.strerror or err}") from None
    imported = import_config(data, args.framework, name=path.name, world_size=args.world_size)
    text = strategy_json(imported.strategy)
    print(f"# {imported.framework}; model fields: {json.dumps(imported.model)}")
    write_or_print(text, args.out)
    return 0
