"""Framework configs back into a strategy: Megatron-LM arguments, a Megatron-Bridge recipe, a DeepSpeed JSON, a
torchtitan TOML (the exporters' output, and hand-written files of the same form).

`import_config(text, framework=None, name="")` returns an `Imported` (framework, model fields, Strategy). The
files are parsed, never run: shlex/argparse for Megatron-LM, `ast.parse` and a literal reader for the Python
recipe (explorer.codegen.megatron_bridge.read_recipe: no eval, no exec), json and tomllib for the others. Every
size goes through explorer/limits.py before a Strategy is built, and every problem is one ExplorerError line
naming the file and what is wrong. What a file does not say is what the framework does by default (its source
cited where it is used), so that export -> import gives back the strategy that was exported
(tests/test_codegen_imports.py). One reader per framework, each in its own module (READERS): Megatron-LM here
(explorer.codegen.megatron parses the arguments), import_bridge, import_deepspeed, import_torchtitan; the checked
field reads they share are in import_fields.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePath

from explorer.codegen.import_bridge import read_bridge
from explorer.codegen.import_deepspeed import read_deepspeed
from explorer.codegen.import_torchtitan import read_torchtitan
from explorer.codegen.megatron import parse_megatron_args
from explorer.codegen.megatron_bridge import RecipeError
from explorer.errors import ExplorerError
from explorer.io.safe_load import MAX_FILE_BYTES
from explorer.io.uploads import utf8_text
from explorer.limits import check_count, check_strategy
from explorer.strategy.strategy import Strategy

IMPORTERS = ("megatron", "megatron-bridge", "deepspeed", "torchtitan")
SUFFIXES = {".sh": "megatron", ".txt": "megatron", ".args": "megatron", ".py": "megatron-bridge",
            ".json": "deepspeed", ".toml": "torchtitan"}
INT_LIMITS = {"dp": "MAX_DEVICES", "tp": "MAX_TP", "pp": "MAX_LAYERS", "cp": "MAX_DEVICES", "ep": "MAX_DEVICES",
              "chunks": "MAX_LAYERS", "micro_batch": "MAX_GLOBAL_BATCH", "global_batch": "MAX_GLOBAL_BATCH",
              "expert_tp": "MAX_TP"}
MODEL_LIMITS = {"layers": "MAX_LAYERS", "hidden": "MAX_HIDDEN", "heads": "MAX_HEADS", "kv_heads": "MAX_HEADS",
                "seq_len": "MAX_SEQ_LEN", "vocab": "MAX_VOCAB", "ffn_hidden": "MAX_FFN"}


@dataclass(frozen=True)
class Imported:
    framework: str
    model: dict          # the ModelSpec fields the file states (shape, family, experts); {} for DeepSpeed
    strategy: Strategy


def detect(text: str, name: str = "") -> str:
    """The framework a file is for: from its suffix, else from its first characters."""
    suffix = PurePath(name).suffix.lower()
    if suffix in SUFFIXES:
        return SUFFIXES[suffix]
    head = text.lstrip()[:1]
    if head == "{":
        return "deepspeed"
    if "--num-layers" in text or "--tensor-model-parallel-size" in text:
        return "megatron"
    if "def " in text and "cfg." in text:
        return "megatron-bridge"
    if head == "[" or "[parallelism]" in text:
        return "torchtitan"
    raise ExplorerError(f"{name or 'the file'}: cannot tell which framework it is for; name it .sh (Megatron-LM), "
                        ".py (Megatron-Bridge), .json (DeepSpeed) or .toml (torchtitan)")


def import_config(text, framework: str | None = None, name: str = "", world_size: int | None = None) -> Imported:
    """(framework, model fields, Strategy) from a framework config's text (str or UTF-8 bytes)."""
    where = name or "the file"
    if isinstance(text, bytes):
        text = utf8_text(text, where, MAX_FILE_BYTES, "a config")
    if not isinstance(text, str):
        raise ExplorerError(f"{where}: expected text, got {type(text).__name__}")
    if len(text) > MAX_FILE_BYTES:
        raise ExplorerError(f"{where}: {len(text):,} characters is more than the {MAX_FILE_BYTES:,} a config may have")
    framework = framework or detect(text, name)
    if framework not in READERS:
        raise ExplorerError(f"cannot import a {str(framework)[:40]!r} config; use one of {', '.join(IMPORTERS)}")
    try:
        model, fields = READERS[framework](text, world_size)
        for key, limit in MODEL_LIMITS.items():
            if key in model:
                check_count(f"model field '{key}'", model[key], limit)
        for key, limit in INT_LIMITS.items():
            if key in fields:
                check_count(key, fields[key], limit)
        strategy = Strategy(**fields)
        check_strategy(strategy)
    except ExplorerError as err:
        raise ExplorerError(f"{where} ({framework}): {' '.join(str(err).split())}") from None
    except (RecipeError, ValueError, TypeError, KeyError, AttributeError, RecursionError, MemoryError) as err:
        text = "nested too deeply" if isinstance(err, RecursionError) else " ".join(str(err).split())[:200]
        raise ExplorerError(f"{where} ({framework}): {text or type(err).__name__}") from None
    return Imported(framework, model, strategy)


def read_megatron(text: str, world_size):
    """(model fields, Strategy fields) of Megatron-LM's command-line arguments (explorer.codegen.megatron)."""
    model, strategy = parse_megatron_args(text, world_size)
    check_strategy(strategy)
    return model, {f: getattr(strategy, f) for f in strategy.__dataclass_fields__}


READERS = {"megatron": read_megatron, "megatron-bridge": read_bridge, "deepspeed": read_deepspeed,
           "torchtitan": read_torchtitan}
"""One reader per framework (its own module: import_bridge, import_deepspeed, import_torchtitan)."""
