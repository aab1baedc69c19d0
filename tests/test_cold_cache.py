"""The cold path: compiled cost-tree functions cached on disk (explorer.cost.cold, explorer.cost.cache).

A process that finds a strategy's tree on disk evaluates it from the stored lambdify source without
building expressions -- to the same numbers (1e-12) as the freshly built tree; a damaged, foreign or
unverifiable entry is ignored and rebuilt; the directory is bounded and must be private; and
`python -m explorer evaluate --json` with a warm cache never imports sympy."""
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from explorer import Strategy, evaluate, load_cluster, load_model
from explorer.cost import cache, cold, generated
from explorer.strategy.strategy import LayerSplit

ROOT = Path(__file__).resolve().parents[1]
STRATEGIES = [
    dict(dp=16, tp=8, pp=8, micro_batch=1, global_batch=1536, sequence_parallel=True, recompute="selective"),
    dict(dp=16, tp=8, pp=8, micro_batch=2, global_batch=1536, schedule="interleaved", chunks=2),
    dict(dp=16, tp=4, pp=16, micro_batch=1, global_batch=1536, schedule="zb-h1", zero=1),
    dict(dp=128, tp=8, pp=1, micro_batch=1, global_batch=1536, schedule="gpipe", zero=3, overlap_dp=True,
         recompute="full"),
    dict(dp=32, tp=4, pp=8, micro_batch=1, global_batch=1536, overlap_dp=True, dtype="fp16"),
]


@pytest.fixture
def disk(tmp_path, monkeypatch):
    monkeypatch.setenv("BRIDGING_DL_CACHE", str(tmp_path / "cache"))
    cold.clear_memory()
    yield tmp_path / "cache"
    cold.clear_memory()


def _numbers(r) -> list:
    out = [r.iteration_time_s, r.params, r.mfu, r.model_flops_per_iteration, r.hardware_flops_per_iteration]
    out += [r.breakdown_s[k] for k in sorted(r.breakdown_s)]
    out += [v for row in r.memory_by_stage for v in row.values()]
    out += [v for row in r.stage_times_s for v in row.values()]
    out += [row[k] for row in r.comm_by_kind for k in ("time_s", "hidden_s", "bytes")]
    return out


def _forbid_building(monkeypatch):
    """From here on, building a tree or a super-step variant with sympy fails the test."""
    import explorer.cost.superstep as superstep
    import explorer.cost.tree as tree

    def refuse(*args, **kwargs):
        raise AssertionError("built with sympy although the disk cache holds it")
    monkeypatch.setattr(tree, "cost_tree", refuse)
    monkeypatch.setattr(superstep, "variant", refuse)


@pytest.mark.parametrize("fields", STRATEGIES)
def test_evaluated_from_disk_equals_freshly_built(disk, monkeypatch, fields):
    model, cluster = load_model("gpt3-175b"), load_cluster("dgx-a100-80gb")
    strategy = Strategy(**fields)
    fresh = evaluate(model, strategy, cluster)
    assert any(disk.glob("tree-*.json")) and any(disk.glob("superstep-*.json"))
    cold.clear_memory()
    _forbid_building(monkeypatch)
    loaded = evaluate(model, strategy, cluster)
    np.testing.assert_allclose(_numbers(loaded), _numbers(fresh), rtol=1e-12, atol=0)
    assert [(r["category"], r["kind"], r["level"]) for r in loaded.comm_by_kind] == \
        [(r["category"], r["kind"], r["level"]) for r in fresh.comm_by_kind]
    assert loaded.critical_stage == fresh.critical_stage and loaded.extra == fresh.extra


def test_a_layer_split_strategy_round_trips(disk, monkeypatch):
    model, cluster = load_model("gpt3-175b"), load_cluster("dgx-a100-80gb")
    splits = tuple(LayerSplit(8) if i % 2 else LayerSplit(4) for i in range(model.layers))
    strategy = Strategy(dp=16, tp=8, pp=8, micro_batch=1, global_batch=1536, layer_splits=splits)
    fresh = evaluate(model, strategy, cluster)
    cold.clear_memory()
    _forbid_building(monkeypatch)
    np.testing.assert_allclose(_numbers(evaluate(model, strategy, cluster)), _numbers(fresh), rtol=1e-12, atol=0)


def test_damaged_or_foreign_entries_are_ignored_and_rebuilt(disk):
    model, cluster = load_model("gpt3-175b"), load_cluster("dgx-a100-80gb")
    strategy = Strategy(**STRATEGIES[0])
    fresh = evaluate(model, strategy, cluster)
    entries = sorted(disk.glob("*-*.json"))
    assert entries
    for path in entries:                      # flip the source of every function: the HMAC no longer matches
        data = path.read_bytes()
        path.write_bytes(data.replace(b"return", b"raise SystemExit(3) or", 1) if b"return" in data
                         else data[:-2] + b"}}")
    cold.clear_memory()
    again = evaluate(model, strategy, cluster)
    np.testing.assert_allclose(_numbers(again), _numbers(fresh), rtol=1e-12, atol=0)
    for path in entries:                      # rebuilt: each entry verifies again
        mac, _, body = path.read_bytes().partition(b"\n")
        assert cache.load(path.name.split("-")[0], json.loads(body)["key"]) is not None
    path = entries[0]                         # a foreign entry (valid JSON, someone else's MAC) is refused
    body = path.read_bytes().partition(b"\n")[2]
    path.write_bytes(b"0" * 64 + b"\n" + body)
    assert cache.load(path.name.split("-")[0], json.loads(body)["key"]) is None
    path.write_bytes(b"\x00garbage")
    assert cache.load(path.name.split("-")[0], json.loads(body)["key"]) is None


def test_an_entry_for_another_key_is_refused(disk):
    assert cache.store("tree", "key A", {"x": 1})
    good = next(disk.glob("tree-*.json"))
    other = cache._entry_path(disk, "tree", "key B")
    other.write_bytes(good.read_bytes())      # right MAC, wrong key text (a collision or a copy)
    assert cache.load("tree", "key A") == {"x": 1}
    assert cache.load("tree", "key B") is None


def test_the_cache_is_bounded(disk, monkeypatch):
    monkeypatch.setattr(cache, "MAX_ENTRIES", 5)
    for i in range(20):
        assert cache.store("latex", f"key {i}", ["x", {}, {}])
    assert len(list(disk.glob("*.json"))) <= 5
    assert cache.load("latex", "key 19") == ["x", {}, {}]
    assert not cache.store("latex", "huge", "x" * cache.MAX_ENTRY_BYTES)


def test_a_directory_others_can_write_is_not_used(tmp_path, monkeypatch):
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o777)
    os.chmod(shared, 0o777)
    monkeypatch.setenv("BRIDGING_DL_CACHE", str(shared))
    assert cache.directory() is None
    assert not cache.store("tree", "k", {"x": 1}) and cache.load("tree", "k") is None
    monkeypatch.setenv("BRIDGING_DL_CACHE", "off")
    assert cache.directory() is None
    cold.clear_memory()
    r = evaluate(load_model("tiny-gpt"), Strategy(dp=2, tp=2, pp=2, micro_batch=1, global_batch=8),
                 load_cluster("classroom"))
    assert r.iteration_time_s > 0


ARGS = ["evaluate", "--model", "gpt3-175b", "--cluster", "dgx-a100-80gb", "--gpus", "1024", "--tp", "8",
        "--pp", "8", "--micro-batch", "1", "--global-batch", "1536", "--schedule", "1f1b",
        "--sequence-parallel", "--recompute", "selective", "--json"]
PROBE = """
import contextlib, io, json, sys
from explorer.cli.main import main
out = io.StringIO()
with contextlib.redirect_stdout(out):
    code = main(sys.argv[1:])
heavy = sorted(m for m in ("sympy", "networkx", "pandas") if m in sys.modules)
print(json.dumps([code, heavy, out.getvalue()]))
"""


def test_evaluate_json_with_a_warm_cache_imports_no_sympy(tmp_path):
    env = dict(os.environ, BRIDGING_DL_CACHE=str(tmp_path / "cache"), PYTHONPATH=str(ROOT))
    run = lambda: json.loads(subprocess.run([sys.executable, "-c", PROBE] + ARGS, env=env, cwd=ROOT, check=True,
                                            capture_output=True, text=True, timeout=300).stdout)
    code, heavy, first = run()                # cold: builds (sympy) and stores
    assert code == 0 and "sympy" in heavy
    code, heavy, second = run()               # warm: from disk
    assert code == 0 and heavy == []
    assert json.loads(second) == json.loads(first)
    assert json.loads(second)["formula_latex"].startswith("T_{iter}")


@pytest.mark.parametrize("model", ["tiny-gpt", "llama3-8b"])
def test_search_with_a_warm_cache_imports_no_sympy(tmp_path, model):
    """Issue 14: the search reads the model's block outlines and the blocks' summaries, never its
    operator graph, so networkx and pandas stay out of its process; and with the disk cache warm it
    builds no expression, so sympy stays out too -- with the same answer."""
    env = dict(os.environ, BRIDGING_DL_CACHE=str(tmp_path / "cache"), PYTHONPATH=str(ROOT))
    args = ["search", "--model", model, "--cluster", "classroom", "--gpus", "4", "--global-batch", "16",
            "--top", "2", "--json"]
    runs = [json.loads(subprocess.run([sys.executable, "-c", PROBE] + args, env=env, cwd=ROOT, check=True,
                                      capture_output=True, text=True, timeout=300).stdout) for _ in range(2)]
    (code, heavy, first), (code_again, heavy_again, again) = runs
    assert code == code_again == 0
    assert heavy == ["sympy"] and heavy_again == []           # cold: built with sympy; warm: from disk
    first, again = json.loads(first), json.loads(again)
    assert again["top"] and again["top"] == first["top"]


def test_only_plain_keys_reach_the_disk():
    import sympy as sp
    assert generated.plain_key((("gpt-layer",), "layer", "megatron", (), False, "none", "R")) == \
        "(('gpt-layer',), 'layer', 'megatron', (), False, 'none', 'R')"
    assert generated.plain_key(("sizes", (sp.Symbol("b") * 2,))) is None
    assert generated.plain_key((object(),)) is None


def test_a_block_function_from_disk_is_the_lambdified_one(disk):
    from explorer.cost import compile as comp
    from explorer.cost.tree import BLOCK_ARGS, block_exprs, cost_tree
    model, cluster = load_model("gpt3-175b"), load_cluster("dgx-a100-80gb")
    kind = cost_tree(model, Strategy(**STRATEGIES[0]), cluster).kinds[1]
    comp._COMPILED.clear()
    fresh = comp.compile_exprs(("block", kind.cost.key), BLOCK_ARGS, lambda: block_exprs(kind.cost))
    comp._COMPILED.clear()
    loaded = comp.compile_exprs(("block", kind.cost.key), BLOCK_ARGS, lambda: pytest.fail("rebuilt"))
    assert loaded is not fresh and loaded.cached_source["source"] == generated.source_of(fresh)["source"]
    args = [1.0 + 0.37 * i for i in range(len(BLOCK_ARGS))]
    np.testing.assert_allclose(np.array(loaded(*args), dtype=float), np.array(fresh(*args), dtype=float),
                               rtol=1e-12, atol=0)


def test_what_json_cannot_hold_is_not_stored(disk):
    assert not cache.store("tree", "k", {"x": np.int64(3)})
    assert cache.load("tree", "k") is None


def test_the_glossary_is_part_of_the_disk_caches_key(monkeypatch):
    """Stored formulas carry the glossary's legend (explorer/runtime/explanation.py): an edit of the glossary alone
    must change the fingerprint every entry is keyed by, or a restarted server serves the old legend (review)."""
    from pathlib import Path
    from explorer.cost import cache as disk
    from explorer.io.glossary import GLOSSARY
    monkeypatch.setattr(disk, "_STATE", {})
    before = disk.fingerprint()
    real = Path.read_bytes
    monkeypatch.setattr(Path, "read_bytes",
                        lambda self: real(self) + (b" " if self.resolve() == GLOSSARY.resolve() else b""))
    monkeypatch.setattr(disk, "_STATE", {})
    assert before is not None and disk.fingerprint() != before
