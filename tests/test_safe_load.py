"""Budgeted loading of untrusted files (explorer/safe_load.py): alias bombs, deep nesting, size caps."""
import time

import pytest
import yaml

from explorer.cli.main import main
from explorer.errors import ExplorerError
from explorer.io.models import load_model, short_repr
from explorer.io.safe_load import MAX_ALIASES, MAX_DEPTH, MAX_FILE_BYTES, parse_text, read_capped
from explorer.io.uploads import cluster_from_upload, model_from_upload, strategy_from_upload


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
def test_alias_bomb_is_refused_in_milliseconds_by_every_uploader(upload):
    start = time.perf_counter()
    with pytest.raises(ExplorerError, match="alias"):
        upload("bomb.yaml", BOMB.encode())
    assert time.perf_counter() - start < 0.5


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
    start = time.perf_counter()
    with pytest.raises(ExplorerError, match=f"nested more than {MAX_DEPTH} levels"):
        parse_text(text, suffix, "f" + suffix)
    assert time.perf_counter() - start < 1.0


def test_cli_model_file_bomb_exits_2_quickly(tmp_path, capsys):
    path = tmp_path / "bomb.yaml"
    path.write_text(BOMB)
    start = time.perf_counter()
    code = main(["evaluate", "--model", str(path), "--cluster", "classroom", "--gpus", "1"])
    assert code == 2 and time.perf_counter() - start < 1.0
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


def test_dev_zero_is_read_with_a_cap():
    start = time.perf_counter()
    with pytest.raises(ExplorerError, match="more than"):
        read_capped("/dev/zero")
    assert time.perf_counter() - start < 1.0


def test_upload_over_the_cap_is_refused():
    with pytest.raises(ExplorerError, match="1,000,000"):
        model_from_upload("m.json", b" " * (MAX_FILE_BYTES + 1))


@pytest.mark.parametrize("value,expected_start", [
    (list(range(10 ** 6)), "[0, 1, 2"), ("x" * 10 ** 6, "'xxx"), (10 ** 5000, "<an integer of about"),
    ({str(i): [i] * 1000 for i in range(10 ** 4)}, "{'0': [0, 0"), (1.5, "1.5")],
    ids=["list", "str", "int", "dict", "float"])
def test_short_repr_is_short_and_fast(value, expected_start):
    start = time.perf_counter()
    text = short_repr(value)
    assert time.perf_counter() - start < 0.01
    assert len(text) <= 40 and text.startswith(expected_start)


def test_short_repr_of_a_shared_graph_is_fast():
    value = ["lol"]
    for _ in range(30):                       # 2**30 leaves if walked in full
        value = [value, value]
    start = time.perf_counter()
    assert len(short_repr(value)) <= 40
    assert time.perf_counter() - start < 0.01


@pytest.mark.parametrize("key", ["w_model_file", "w_cluster_file"])
def test_app_upload_of_a_bomb_is_refused_quickly_and_shown(key):
    from tests.app_util import errors, open_page
    at = open_page("model")
    start = time.perf_counter()
    at.file_uploader(key=key).set_value(("bomb.yaml", BOMB.encode(), "application/yaml"))
    at.run()
    assert time.perf_counter() - start < 5
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
def test_a_megabyte_of_values_is_refused_within_a_second(suffix, text):
    start = time.thread_time()
    with pytest.raises(ExplorerError, match="more than .* values"):
        parse_text(text, suffix, "f" + suffix)
    assert time.thread_time() - start < 1.5      # PyYAML alone would take ~18 s to compose it all


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
