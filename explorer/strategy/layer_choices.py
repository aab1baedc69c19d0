"""Per-layer choices as the app shows them: stage columns, split columns, a table.

The app lets people drag layers between pipeline-stage columns and between
operator-split columns ("replicated", "TP column->row x2", ...). This module
turns a Strategy into those columns and the columns back into `stage_map` and
`layer_splits`, refusing (with a message) what a Strategy cannot hold: stages
must keep consecutive layers and none may be empty.

>>> cols = stage_columns((0, 0, 1, 1), 2)
>>> [c["items"] for c in cols]
[['L0', 'L1'], ['L2', 'L3']]
>>> cols[1]["items"].insert(0, cols[0]["items"].pop())   # drag L1 into stage 1
>>> stage_map_from_columns(cols, 4)
(0, 1, 1, 1)
"""
from __future__ import annotations

import re

import pandas as pd

from explorer.errors import ExplorerError
from explorer.strategy.pipeline_layout import layout_from_text, resolve as resolve_layout, rows  # noqa: F401
from explorer.schedules import get as schedule_of
from explorer.strategy.strategy import LAYER_PRESETS, LayerSplit, Strategy

ITEM = re.compile(r"^L([0-9]{1,5})$")
PRESET_NAMES = {"megatron": "TP column→row", "column": "TP column", "row": "TP row", "batch": "batch split"}
DRAG_PRESETS = ("megatron",)             # the presets offered as drag columns (others: in the table)


def item(layer: int) -> str:
    return f"L{layer}"


def _layer(text, layers: int) -> int:
    match = ITEM.match(str(text))
    if not match or int(match.group(1)) >= layers:
        raise ExplorerError(f"unknown layer item {str(text)[:20]!r}")
    return int(match.group(1))


def split_label(split: LayerSplit) -> str:
    """'replicated' or e.g. 'TP column→row ×8'."""
    if split.effective_preset == "replicated":
        return "replicated"
    return f"{PRESET_NAMES[split.preset]} ×{split.degree}"


def split_options(tp: int, presets=tuple(PRESET_NAMES)) -> list:
    """Labels of the splits a layer may take under global tp (degrees dividing tp)."""
    degrees = [k for k in range(2, tp + 1) if tp % k == 0]
    return ["replicated"] + [f"{PRESET_NAMES[p]} ×{k}" for p in presets for k in degrees]


def split_from_label(label: str) -> LayerSplit:
    if label == "replicated":
        return LayerSplit(degree=1, preset="replicated")
    for preset, name in PRESET_NAMES.items():
        prefix = f"{name} ×"
        if str(label).startswith(prefix) and str(label)[len(prefix):].isdigit():
            return LayerSplit(degree=int(str(label)[len(prefix):]), preset=preset)
    raise ExplorerError(f"unknown operator split {str(label)[:40]!r}")


# ---- pipeline stages --------------------------------------------------------------

def layer_stages(stage_map: tuple, pp: int, layers: int) -> tuple:
    """The stage of every layer: the map if it fits (pp stages, one entry per layer), else an even split."""
    if len(stage_map) == layers and stage_map and max(stage_map) < pp:
        return tuple(stage_map)
    return Strategy(pp=pp).stages(layers)


def layout_table(model, strategy) -> pd.DataFrame | None:
    """The pipeline layout `strategy` runs `model` with, one row per pipeline stage and one column per model
    chunk ('E t×7', 'm L'; explorer/strategy/pipeline_layout.py), or None for the even split (the drag columns)."""
    layout = resolve_layout(model.layers, getattr(model, "mtp_layers", 0), strategy)
    if layout is None:
        return None
    table = rows(layout, strategy.pp, schedule_of(strategy.schedule).place)
    return pd.DataFrame([[r] + chunks for r, chunks in table],
                        columns=["stage"] + [f"chunk {c}" for c in range(len(table[0][1]))])


def layer_splits(splits: tuple, tp: int, layers: int) -> tuple:
    """Every layer's split: the given ones if one per layer, else Megatron over all tp devices."""
    if len(splits) == layers:
        return tuple(splits)
    return (LayerSplit(degree=tp, preset="megatron"),) * layers


def stage_columns(stages: tuple, pp: int) -> list:
    """[{'header': 'stage i', 'items': ['L..', ...]}, ...] for the sortables component."""
    return [{"header": f"stage {r}", "items": [item(i) for i, s in enumerate(stages) if s == r]}
            for r in range(pp)]


def _placed(columns, layers: int, what: str) -> dict:
    """layer -> column index; every layer must appear exactly once."""
    where = [(_layer(text, layers), i) for i, column in enumerate(columns) for text in column["items"]]
    if sorted(layer for layer, _ in where) != list(range(layers)):
        raise ExplorerError(f"the {what} columns must hold every layer exactly once")
    return dict(where)


def stage_map_from_columns(columns, layers: int) -> tuple:
    """The layer->stage map the columns describe; ExplorerError if it is not a valid map."""
    stage_of = _placed(columns, layers, "stage")
    stage_map = tuple(stage_of[i] for i in range(layers))
    for r, column in enumerate(columns):
        if not column["items"]:
            raise ExplorerError(f"stage {r} would have no layers; every stage needs at least one")
    for i in range(1, layers):
        if stage_map[i] < stage_map[i - 1]:
            raise ExplorerError(
                f"layer {i - 1} in stage {stage_map[i - 1]} would come before layer {i} in stage {stage_map[i]}: "
                "stages hold consecutive layers, so move a stage's first or last layer to the neighbouring stage")
    return stage_map


# ---- operator splits -----------------------------------------------------------------

def split_columns(splits: tuple, tp: int) -> list:
    """One column per drag split label (plus any other label in use), layers in order."""
    labels = split_options(tp, DRAG_PRESETS)
    current = [split_label(split) for split in splits]
    labels += [lab for lab in dict.fromkeys(current) if lab not in labels]
    return [{"header": lab, "items": [item(i) for i, c in enumerate(current) if c == lab]} for lab in labels]


def splits_from_columns(columns, layers: int) -> tuple:
    """layer_splits from the split columns; ExplorerError for an unknown label or item."""
    splits = [split_from_label(column["header"]) for column in columns]
    column_of = _placed(columns, layers, "split")
    return tuple(splits[column_of[i]] for i in range(layers))


# ---- the table --------------------------------------------------------------------------

def layer_table(stages: tuple, splits: tuple) -> pd.DataFrame:
    return pd.DataFrame({"layer": range(len(stages)), "stage": list(stages),
                         "split": [split_label(split) for split in splits]})


def choices_from_table(table: pd.DataFrame, layers: int) -> tuple:
    """(layer_splits, stage_map) from an edited table; ExplorerError naming the bad row."""
    if len(table) != layers:
        raise ExplorerError(f"the table must have one row per layer ({layers}), it has {len(table)}")
    splits, stages = [], []
    for i, (stage, label) in enumerate(zip(table["stage"], table["split"])):
        try:
            stages.append(int(stage))
        except (TypeError, ValueError):
            raise ExplorerError(f"layer {i}: stage {stage!r} is not a whole number") from None
        try:
            splits.append(split_from_label(label))
        except ExplorerError as err:
            raise ExplorerError(f"layer {i}: {err}") from None
    return tuple(splits), tuple(stages)


def uniform(splits: tuple, tp: int) -> bool:
    """True when every layer takes the default split (Megatron over all tp devices)."""
    default = LayerSplit(degree=tp, preset="megatron")
    return all(s == default for s in splits)


__all__ = ["LAYER_PRESETS", "choices_from_table", "layer_splits", "layer_stages", "layer_table",
           "split_columns", "split_from_label",
           "split_label", "split_options", "splits_from_columns", "stage_columns", "stage_map_from_columns",
           "layout_table",
           "uniform"]
