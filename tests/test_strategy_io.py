"""Versioned strategy files (explorer/strategy_io.py)."""
import json
from dataclasses import fields
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings, strategies as st

from explorer.errors import ExplorerError
from explorer.strategy.strategy import LAYER_PRESETS, OP_SPLITS, RECOMPUTE, SCHEDULES, LayerSplit, Strategy
from explorer.io.strategies import (FIELD_KINDS, load_strategy, save_strategy, strategy_from_dict, strategy_to_dict)

ROOT = Path(__file__).resolve().parents[1]

EXAMPLE = Strategy(dp=2, tp=2, pp=2, micro_batch=1, global_batch=8, schedule="interleaved", chunks=2,
                   zero=1, recompute="selective", sequence_parallel=True,
                   layer_splits=(LayerSplit(2, "megatron", (("qkv", "column"),)), LayerSplit(1),
                                 LayerSplit(2, "row"), LayerSplit(2, "batch")),
                   stage_map=(0, 0, 1, 1))


def test_dict_has_version_and_every_field():
    d = strategy_to_dict(EXAMPLE)
    assert d["version"] == 1
    assert set(d) == {"version"} | {f.name for f in fields(Strategy)}
    assert d["layer_splits"][0] == {"degree": 2, "preset": "megatron", "overrides": {"qkv": "column"}}
    assert d["stage_map"] == [0, 0, 1, 1]


def test_save_and_load(tmp_path):
    path = tmp_path / "plan.json"
    save_strategy(EXAMPLE, path)
    assert json.loads(path.read_text())["version"] == 1
    assert load_strategy(path) == EXAMPLE


def test_missing_fields_take_the_defaults():
    assert strategy_from_dict({"version": 1, "dp": 4, "global_batch": 4}) == Strategy(dp=4, global_batch=4)


@pytest.mark.parametrize("change, message", [
    ({"version": 2}, "strategy version 2 is not supported; this explorer reads version 1"),
    ({"version": "1"}, "field 'version' must be an integer"),
    ({"dpp": 2}, "unknown field 'dpp'"),
    ({"dp": 2.0}, "field 'dp' must be an integer"),
    ({"zero": True}, "field 'zero' must be an integer"),
    ({"sequence_parallel": 1}, "field 'sequence_parallel' must be true or false"),
    ({"schedule": "zigzag"}, "schedule 'zigzag' is unknown"),
    ({"stage_map": [0, 0.5]}, r"stage_map\[1\] must be an integer"),
    ({"stage_map": {"0": 0}}, "field 'stage_map' must be a list"),
    ({"layer_splits": [{"degree": 1, "split": "row"}]}, r"layer_splits\[0\]: unknown field 'split'"),
    ({"layer_splits": [{"overrides": {"qkv": 3}}]}, r"layer_splits\[0\]: override 'qkv': 3"),
    ({"layer_splits": [{"overrides": {"qkv": "diagonal"}}]}, "operator split .* is invalid"),
    ({"layer_splits": ["row"]}, r"layer_splits\[0\]: must be a mapping"),
])
def test_bad_files_are_refused_with_the_file_name(tmp_path, change, message):
    path = tmp_path / "plan.json"
    path.write_text(json.dumps({**strategy_to_dict(Strategy()), **change}))
    with pytest.raises(ExplorerError, match="plan.json: .*" + message):
        load_strategy(path)


def test_missing_version_and_malformed_file(tmp_path):
    with pytest.raises(ExplorerError, match="missing field 'version'"):
        strategy_from_dict({"dp": 1})
    # a model or cluster file in the strategy uploader is named as what it is (a lecturer's walk read only "missing
    # field 'version'" for a model config)
    with pytest.raises(ExplorerError, match="not a strategy file .*looks like a model spec: upload it on the Model"):
        strategy_from_dict({"model_type": "qwen2", "num_hidden_layers": 28, "hidden_size": 3584})
    with pytest.raises(ExplorerError, match="looks like a model spec"):      # newer configs write 'dtype' (a field)
        strategy_from_dict({"model_type": "qwen2", "num_hidden_layers": 28, "hidden_size": 3584, "dtype": "bfloat16"})
    with pytest.raises(ExplorerError, match="not a strategy file .*looks like a cluster spec"):
        strategy_from_dict(json.loads((ROOT / "assets" / "clusters" / "dgx-h100.json").read_text()))
    with pytest.raises(ExplorerError, match=r"not a strategy file \(no 'version' and none of its fields\)$"):
        strategy_from_dict({"foo": 1})
    path = tmp_path / "plan.json"
    path.write_text("{version: 1}")
    with pytest.raises(ExplorerError, match=r"plan\.json: malformed JSON"):
        load_strategy(path)
    with pytest.raises(ExplorerError, match="absent.json: no such file"):
        load_strategy(tmp_path / "absent.json")


def test_save_to_a_missing_directory(tmp_path):
    with pytest.raises(ExplorerError, match="cannot be written"):
        save_strategy(EXAMPLE, tmp_path / "no" / "such" / "dir.json")


def test_field_kinds_cover_the_dataclass():
    assert set(FIELD_KINDS) == {f.name for f in fields(Strategy)}


# ---- property tests -----------------------------------------------------------------

@st.composite
def strategies(draw):
    """Valid Strategy objects (invalid combinations are rejected by assume)."""
    dp, tp, pp = (draw(st.sampled_from([1, 2, 4])) for _ in range(3))
    micro_batch = draw(st.integers(1, 4))
    m = draw(st.integers(1, 4)) * pp
    schedule = draw(st.sampled_from(SCHEDULES)) if pp > 1 else draw(st.sampled_from(["gpipe", "1f1b"]))
    layers = draw(st.integers(pp, 6))
    split = st.builds(LayerSplit, degree=st.sampled_from([d for d in (1, 2, 4) if tp % d == 0]),
                      preset=st.sampled_from(LAYER_PRESETS),
                      overrides=st.dictionaries(st.sampled_from(["qkv", "proj", "fc1", "fc2"]),
                                                st.sampled_from(OP_SPLITS), max_size=2))
    stage_map = sorted(draw(st.lists(st.integers(0, pp - 1), min_size=layers, max_size=layers)))
    try:
        return Strategy(
            dp=dp, tp=tp, pp=pp, micro_batch=micro_batch, global_batch=micro_batch * dp * m,
            schedule=schedule, chunks=draw(st.integers(1, 3)) if schedule == "interleaved" else 1,
            zero=draw(st.integers(0, 3 if pp == 1 else 1)), recompute=draw(st.sampled_from(RECOMPUTE)),
            sequence_parallel=draw(st.booleans()), overlap_dp=draw(st.booleans()),
            scatter_gather=draw(st.booleans()), dtype=draw(st.sampled_from(["bf16", "fp16", "fp32"])),
            layer_splits=tuple(draw(st.lists(split, min_size=layers, max_size=layers))) if draw(st.booleans()) else (),
            stage_map=tuple(stage_map) if draw(st.booleans()) else ())
    except ExplorerError:
        assume(False)


@given(strategies())
def test_round_trip_through_json(strategy):
    text = json.dumps(strategy_to_dict(strategy))
    assert strategy_from_dict(json.loads(text)) == strategy


leaves = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=6) | st.integers(0, 8)
values = st.recursive(leaves, lambda inner: st.lists(inner, max_size=3)
                      | st.dictionaries(st.text(max_size=5), inner, max_size=3), max_leaves=10)


@given(st.dictionaries(st.sampled_from(tuple(FIELD_KINDS)) | st.text(max_size=6), values, max_size=4),
       st.sampled_from([{}, {"version": 1}]))
def test_random_dicts_load_or_raise_explorer_error(d, base):
    try:
        assert isinstance(strategy_from_dict({**base, **d}), Strategy)
    except ExplorerError as e:
        assert "\n" not in str(e)


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=200))
def test_random_bytes_load_or_raise_explorer_error(tmp_path, data):
    path = tmp_path / "random.json"
    path.write_bytes(data)
    try:
        load_strategy(path)
    except ExplorerError as e:
        assert "random.json" in str(e)
