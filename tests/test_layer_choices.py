"""Per-layer choices as drag columns and as a table (explorer.layer_choices)."""
import pytest

from explorer import ExplorerError, LayerSplit
from explorer.strategy import layer_choices as lc


def test_stage_columns_round_trip_and_moving_a_boundary_layer():
    stages = (0, 0, 0, 1, 1, 2)
    cols = lc.stage_columns(stages, 3)
    assert lc.stage_map_from_columns(cols, 6) == stages
    cols[0]["items"].append(cols[1]["items"].pop(0))
    assert lc.stage_map_from_columns(cols, 6) == (0, 0, 0, 0, 1, 2)


@pytest.mark.parametrize("move, words", [
    (lambda c: c[2]["items"].append(c[0]["items"].pop(0)), "stages hold consecutive layers"),
    (lambda c: c[1]["items"].extend(c[2]["items"]) or c[2]["items"].clear(), "stage 2 would have no layers"),
    (lambda c: c[0]["items"].append("L99"), "unknown layer item"),
    (lambda c: c[0]["items"].append("L1"), "exactly once"),
])
def test_bad_stage_columns_are_refused(move, words):
    cols = lc.stage_columns((0, 0, 1, 1, 2, 2), 3)
    move(cols)
    with pytest.raises(ExplorerError, match=words):
        lc.stage_map_from_columns(cols, 6)


def test_split_columns_and_labels():
    splits = (LayerSplit(8),) * 2 + (LayerSplit(1, "replicated"), LayerSplit(4, "column"))
    cols = lc.split_columns(splits, 8)
    assert [c["header"] for c in cols] == ["replicated", "TP column→row ×2", "TP column→row ×4",
                                           "TP column→row ×8", "TP column ×4"]
    assert lc.splits_from_columns(cols, 4) == splits
    assert lc.split_from_label("replicated") == LayerSplit(1, "replicated")
    with pytest.raises(ExplorerError, match="unknown operator split"):
        lc.split_from_label("TP column→row ×eight")


def test_table_round_trip_and_refusals():
    stages, splits = (0, 0, 1), (LayerSplit(2),) * 3
    table = lc.layer_table(stages, splits)
    assert lc.choices_from_table(table, 3) == (splits, stages)
    table["stage"] = table["stage"].astype(object)
    table.loc[1, "stage"] = "x"
    with pytest.raises(ExplorerError, match="layer 1: stage 'x'"):
        lc.choices_from_table(table, 3)
    with pytest.raises(ExplorerError, match="one row per layer"):
        lc.choices_from_table(table.iloc[:2], 3)


def test_defaults_when_state_does_not_fit():
    assert lc.layer_stages((0, 1), 4, 4) == (0, 1, 2, 3)
    assert lc.layer_splits((), 4, 2) == (LayerSplit(4),) * 2
    assert lc.uniform((LayerSplit(4),) * 3, 4) and not lc.uniform((LayerSplit(2),), 4)
