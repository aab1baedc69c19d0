"""Budgeted loading of untrusted files (explorer/safe_load.py): alias bombs, deep nesting, size caps.

"Refused quickly" is asserted as work (tests/work.py): the calls, peak memory and garbage-collector
passes of a refusal, which do not depend on the machine; benchmarks/bench_limits.py times them."""
import re

import pytest
import yaml

from explorer.cli.main import main
from explorer.errors import ExplorerError
from explorer.io.models import load_model, short_repr
from explorer.io.safe_load import MAX_ALIASES, MAX_DEPTH, MAX_FILE_BYTES, MAX_NODES, parse_text, read_capped
from explorer.io.uploads import cluster_from_upload, model_from_upload, strategy_from_upload
from tests.work import measure


def alias_bomb(levels: int = 9, width: int = 9) -> str:
    """The "billion laughs": each anchor lists the previous one `width` times (width**levels leaves)."""
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, levels):
        lines.append(f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * width) + "]")
    return "\n".join(lines) + "\nfamily: gpt\n"


BOMB = alias_bomb()
UPLOADERS = (model_from_upload, cluster_from_upload, strategy_from_upload)


def test_the_bomb_is_small():
    assert 400 <= len(BOMB.encode()) <= 500       # the issue's bomb was 427 bytes


@pytest.mark.parametrize("upload", UPLOADERS, ids=lambda f: f.__name__)
def test_alias_bomb_is_refused_before_it_expands_by_every_uploader(upload):
    work = measure(upload, "bomb.yaml", BOMB.encode(), memory=True)
    assert isinstance(work.error, ExplorerError) and "alias" in str(work.error)
    assert work.calls <= 50_000 and work.peak_bytes < 1_000_000, work     # 7,700 calls, < 0.1 MB; 9^9 leaves if expanded


def test_many_aliases_are_refused_even_if_small():
    text = "x: &x 1\nl: [" + ",".join(["*x"] * (MAX_ALIASES + 1)) + "]\n"
    with pytest.raises(ExplorerError, match=f"more than {MAX_ALIASES} YAML aliases"):
        parse_text(text, ".yaml", "f.yaml")


def test_a_few_aliases_are_fine():
    assert parse_text("base: &b {x: 1}\nother: *b\n", ".yaml", "f") == {"base": {"x": 1}, "other": {"x": 1}}


def test_recursive_alias_is_refused():
    with pytest.raises(ExplorerError, match="nested"):
        parse_text("a: &a [*a]\n", ".yaml", "f.yaml")


@pytest.mark.parametrize("suffix,text", [
    (".yaml", "[" * 200_000), (".yaml", "a:\n" + "".join(" " * i + "b:\n" for i in range(1, 60))),
    (".json", "[" * 200_000), (".json", '{"a":' * (MAX_DEPTH + 1) + "1" + "}" * (MAX_DEPTH + 1))])
def test_deep_nesting_is_refused_naming_the_depth(suffix, text):
    work = measure(parse_text, text, suffix, "f" + suffix, memory=True)
    assert isinstance(work.error, ExplorerError) and f"nested more than {MAX_DEPTH} levels" in str(work.error)
    assert work.calls <= 100_000 and work.peak_bytes < 4_000_000, work    # at most 32,000 calls and 1.1 MB


def test_cli_model_file_bomb_exits_2_before_any_evaluation(tmp_path, capsys):
    path = tmp_path / "bomb.yaml"
    path.write_text(BOMB)
    work = measure(main, ["evaluate", "--model", str(path), "--cluster", "classroom", "--gpus", "1"], memory=True)
    assert work.value == 2, work.error
    assert work.compiled == 0 and work.calls <= 100_000 and work.peak_bytes < 5_000_000, work   # 21,000 calls
    err = capsys.readouterr().err
    assert "alias" in err and "Traceback" not in err and err.count("\n") == 1


@pytest.mark.parametrize("flag", ["--cluster", "--strategy"])
def test_cli_cluster_and_strategy_bombs(tmp_path, capsys, flag):
    path = tmp_path / "bomb.yaml"
    path.write_text(BOMB)
    argv = ["evaluate", "--model", "tiny-gpt", "--cluster", "classroom", "--gpus", "1", flag, str(path)]
    assert main(argv) == 2
    assert "alias" in capsys.readouterr().err


def test_big_file_is_refused_without_reading_it_all(tmp_path):
    path = tmp_path / "big.yaml"
    path.write_bytes(b"#" * (MAX_FILE_BYTES + 10))
    with pytest.raises(ExplorerError, match="more than 1,000,000 bytes"):
        load_model(str(path))


def test_dev_zero_is_refused_unread():
    work = measure(read_capped, "/dev/zero", memory=True)
    assert isinstance(work.error, ExplorerError) and "not a regular file" in str(work.error)  # a device (issue 31)
    assert work.calls <= 100 and work.peak_bytes < 100_000, work      # reading MAX_FILE_BYTES would hold 1 MB


def test_upload_over_the_cap_is_refused():
    with pytest.raises(ExplorerError, match="1,000,000"):
        model_from_upload("m.json", b" " * (MAX_FILE_BYTES + 1))


@pytest.mark.parametrize("value,expected_start", [
    (list(range(10 ** 6)), "[0, 1, 2"), ("x" * 10 ** 6, "'xxx"), (10 ** 5000, "<an integer of about"),
    ({str(i): [i] * 1000 for i in range(10 ** 4)}, "{'0': [0, 0"), (1.5, "1.5")],
    ids=["list", "str", "int", "dict", "float"])
def test_short_repr_is_short_and_does_bounded_work(value, expected_start):
    work = measure(short_repr, value, memory=True)
    text = work.value
    assert work.calls <= 1_000 and work.peak_bytes < 64_000, work       # <= 140 calls; a full repr: megabytes
    assert len(text) <= 40 and text.startswith(expected_start)


def test_short_repr_of_a_shared_graph_is_fast():
    value = ["lol"]
    for _ in range(30):                       # 2**30 leaves if walked in full
        value = [value, value]
    work = measure(short_repr, value, memory=True)
    assert len(work.value) <= 40
    assert work.calls <= 1_000 and work.peak_bytes < 64_000, work       # 126 calls; walked in full: 2^31


@pytest.mark.parametrize("key", ["w_model_file", "w_cluster_file"])
def test_app_upload_of_a_bomb_is_refused_quickly_and_shown(key):
    """The rerun that refuses the bomb does no more work than a rerun without an upload (plus the
    refusal's few thousand calls): the script thread's calls are counted."""
    from tests.app_util import errors, open_page
    plain = measure(open_page("model").run, threads=True)
    at = open_page("model")
    at.file_uploader(key=key).set_value(("bomb.yaml", BOMB.encode(), "application/yaml"))
    work = measure(at.run, threads=True, memory=True)
    assert plain.error is None and work.error is None
    assert work.compiled == 0 and work.calls <= plain.calls + 100_000, (work, plain)
    assert not at.exception
    assert any("Upload refused" in e and "alias" in e for e in errors(at))


def test_app_strategy_upload_of_a_deep_file_is_refused():
    from tests.app_util import errors, open_page
    at = open_page("export")
    at.file_uploader(key="w_strategy_file").set_value(("deep.json", b"[" * 100_000, "application/json"))
    at.run()
    assert not at.exception
    assert any("nested more than" in e for e in errors(at))


@pytest.mark.parametrize("suffix,text", [(".yaml", "[" + "1," * 499_000 + "1]"), (".yaml", "[" + "[]," * 330_000 + "1]"),
                                         (".json", "[" + "1," * 499_000 + "1]"), (".json", "[" + "[]," * 330_000 + "1]")],
                         ids=["yaml-flat", "yaml-lists", "json-flat", "json-lists"])
def test_a_megabyte_of_values_is_refused_early(suffix, text):
    """YAML: refused on libyaml's event stream after MAX_NODES values (~5 calls each), not after
    PyYAML's composer has built them (~200 calls a value: ~85 M calls to compose it all, ~18 s);
    JSON: refused on the parsed value's top-level size. Neither runs the garbage collector over the
    megabyte of lists it builds (explorer.io.safe_load._gc_paused: once 1.7 s instead of 0.15 s)."""
    work = measure(parse_text, text, suffix, "f" + suffix)
    assert isinstance(work.error, ExplorerError) and re.search("more than .* values", str(work.error))
    per_value = 20 if suffix == ".json" or yaml.__with_libyaml__ else 250
    assert work.calls <= per_value * MAX_NODES and work.collections <= 2, work


def test_without_libyaml_a_megabyte_is_refused_after_max_nodes(monkeypatch):
    """PyYAML's pure-Python composer alone (BudgetLoader) stops at MAX_NODES values, not at the end."""
    monkeypatch.setattr(yaml, "__with_libyaml__", False)
    work = measure(parse_text, "[" + "1," * 499_000 + "1]", ".yaml", "f.yaml")
    assert isinstance(work.error, ExplorerError) and "values" in str(work.error)
    assert work.calls <= 250 * MAX_NODES, work          # ~170 calls a value composed; all 499,001: ~85 M


def test_an_exported_strategy_of_the_largest_model_is_accepted():
    from explorer.limits import MAX_LAYERS
    from explorer.strategy import LayerSplit, Strategy
    from explorer.io.strategies import strategy_to_dict
    import json
    splits = tuple(LayerSplit(8, "megatron", (("qkv", "column"), ("fc1", "row"), ("fc2", "seq")))
                   for _ in range(MAX_LAYERS))
    strategy = Strategy(tp=8, pp=8, global_batch=8, layer_splits=splits, stage_map=tuple(i * 8 // MAX_LAYERS
                                                                                          for i in range(MAX_LAYERS)))
    assert strategy_from_upload("s.json", json.dumps(strategy_to_dict(strategy)).encode()) == strategy


@pytest.mark.parametrize("text", ["[" + "1," * 30_000 + "1]", "a: &x [1, 2]\nb: *x\n", "[" * 40, "a: [1,\n",
                                  "x: " + "[*a, " * 3 + "]"])
def test_libyaml_prescan_refuses_as_the_composer_does(monkeypatch, text):
    """The C pre-scan (explorer.io.safe_load._prescan) only makes a refusal faster: with it and without
    it (PyYAML's pure-Python composer alone) the same text gives the same value or the same message."""
    def outcome():
        try:
            return parse_text(text, ".yaml", "f.yaml")
        except ExplorerError as err:
            return str(err)
    with_prescan = outcome()
    monkeypatch.setattr(yaml, "__with_libyaml__", False)
    assert outcome() == with_prescan
