"""Save and load a Strategy as versioned JSON.

The file holds `"version": 1` and every Strategy field under its own name;
`layer_splits` is a list of {"degree", "preset", "overrides": {operator: split}}
and `stage_map` a list of stage numbers; `pipeline_layout` is Megatron-LM's layout string
("Et|(tt|)*30mL", explorer/strategy/pipeline_layout.py). Missing fields take the Strategy
defaults; unknown fields, wrong types and other versions are refused.

>>> plan = Strategy(dp=2, global_batch=8)
>>> strategy_from_dict(strategy_to_dict(plan)) == plan
True
"""
from __future__ import annotations

import json
from dataclasses import fields
from pathlib import Path

from explorer.errors import ExplorerError
from explorer.limits import check_count
from explorer.io.models import check_keys, field, is_int, load_file, short_repr
from explorer.strategy.strategy import LayerSplit, Strategy

VERSION = 1
SPLIT_KEYS = ("degree", "preset", "overrides")


def _kind(default) -> str:
    """The KINDS entry for a Strategy field, from the type of its default."""
    if isinstance(default, bool):
        return "bool"
    return {int: "int", str: "text", tuple: "list"}[type(default)]


FIELD_KINDS = {f.name: _kind(f.default) for f in fields(Strategy)}


def strategy_to_dict(strategy: Strategy) -> dict:
    out = {"version": VERSION}
    for name in FIELD_KINDS:
        out[name] = getattr(strategy, name)
    out["layer_splits"] = [split.to_dict() for split in strategy.layer_splits]
    out["stage_map"] = list(strategy.stage_map)
    out["recompute_modules"] = list(strategy.recompute_modules)
    return out


def strategy_json(strategy: Strategy) -> str:
    """Versioned strategy JSON (strategy_to_dict), loadable with --strategy FILE."""
    return json.dumps(strategy_to_dict(strategy), indent=2) + "\n"


def _layer_split(d, where: str) -> LayerSplit:
    if not isinstance(d, dict):
        raise ExplorerError(f"{where}must be a mapping, got {short_repr(d)}")
    check_keys(d, SPLIT_KEYS, where)
    overrides = field(d, "overrides", "mapping", where, default={})
    for op, split in overrides.items():
        if not isinstance(op, str) or not isinstance(split, str):
            raise ExplorerError(
                f"{where}override {short_repr(op)}: {short_repr(split)} must map an operator name to a split name")
    return LayerSplit(degree=field(d, "degree", "int", where, default=1),
                      preset=field(d, "preset", "text", where, default="megatron"),
                      overrides=tuple(overrides.items()))


OTHER_FILES = ((("num_hidden_layers", "hidden_size", "model_type", "family", "layers", "hidden", "heads"),
                "a model spec: upload it on the Model & cluster page (python -m explorer evaluate --model FILE)"),
               (("device", "levels", "nodes", "gpus_per_node"),
                "a cluster spec: upload it on the Model & cluster page (--cluster FILE)"))
"""What an uploaded file that is not a strategy looks like, by its keys, and where it goes (a lecturer's walk: a
model config in the strategy uploader read "strategy: missing field 'version'")."""


def strategy_from_dict(d: dict) -> Strategy:
    """A Strategy from a version-1 dict (as written by strategy_to_dict)."""
    if not isinstance(d, dict):
        raise ExplorerError(f"a strategy must be a mapping of fields, got {type(d).__name__}")
    if "version" not in d:          # a model or cluster file (a HuggingFace config may hold 'dtype', a strategy field)
        kind = next((what for keys, what in OTHER_FILES if set(d) & set(keys)), "")
        if kind or not set(d) & set(FIELD_KINDS):
            raise ExplorerError("this is not a strategy file (no 'version'"
                                + (f"): it looks like {kind}" if kind else " and none of its fields)"))
    version = field(d, "version", "int", "strategy: ")
    if version != VERSION:
        raise ExplorerError(f"strategy version {version} is not supported; this explorer reads version {VERSION}")
    values = {key: value for key, value in d.items() if key != "version"}
    check_keys(values, tuple(FIELD_KINDS), "strategy: ")
    for key in values:
        field(values, key, FIELD_KINDS[key], "strategy: ")
    for key in ("layer_splits", "stage_map"):
        check_count(f"strategy: entries of {key}", len(values.get(key, ())), "MAX_LAYERS")
    for i, stage in enumerate(values.get("stage_map", [])):
        if not is_int(stage):
            raise ExplorerError(f"strategy: stage_map[{i}] must be an integer, got {short_repr(stage)}")
    if "layer_splits" in values:
        values["layer_splits"] = tuple(
            _layer_split(s, f"strategy: layer_splits[{i}]: ") for i, s in enumerate(values["layer_splits"]))
    return Strategy(**values)


def save_strategy(strategy: Strategy, path) -> None:
    path = Path(path)
    try:
        path.write_text(json.dumps(strategy_to_dict(strategy), indent=2) + "\n", encoding="utf-8")
    except OSError as e:
        raise ExplorerError(f"{path}: cannot be written ({e.strerror or type(e).__name__})") from None


def load_strategy(path) -> Strategy:
    return load_file(Path(path), strategy_from_dict)
