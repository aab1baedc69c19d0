"""A block summary (explorer.cost.summary) says what its BlockCost says, and a block outline
(explorer.cost.outline) what its Block says, from memory or from disk; a search whose outlines and
summaries are on disk builds no Block and no BlockCost (issue 14: no sympy expressions in the search)
and finds the same strategies."""
import numpy as np
import pytest

from explorer import ExplorerError, load_cluster, load_model
from explorer.cost import block as block_module
from explorer.cost import cold, compile as comp, summary
from explorer.cost.numbers import Numbers
from explorer.cost.plan import returned_grad
from explorer.cost.tree import SIZE_ARGS
from explorer.cost.compile import lambdify
from explorer.cost import outline
from explorer.model.graph import build_blocks
from explorer.search import search
from explorer.search.space import layer_options

GPT3 = load_model("gpt3-175b")
CLUSTER = load_cluster("dgx-a100-80gb")


def _forget():
    cold.clear_memory()
    summary._SUMMARIES.clear()
    block_module._COSTS.clear()
    comp._COMPILED.clear()
    outline._OUTLINES.clear()
    outline._BLOCKS.clear()


@pytest.fixture
def disk(tmp_path, monkeypatch):
    monkeypatch.setenv("BRIDGING_DL_CACHE", str(tmp_path / "cache"))
    _forget()
    yield tmp_path / "cache"
    _forget()


CASES = [(split, seq, recompute, incoming)
         for split in layer_options(8) for seq, recompute, incoming in
         ((False, "none", "R"), (True, "selective", "R"), (False, "full", "S"))]


def _check(found, block, cost):
    assert (found.layout_in, found.layout_out) == (cost.layout_in, cost.layout_out)
    assert found.returned_grad == returned_grad(block, cost)
    args = Numbers.of(GPT3, np.array([1.0, 2.0, 4.0]), CLUSTER, "bf16").size_args()
    want = np.broadcast_to(np.asarray(lambdify(SIZE_ARGS, cost.out_elements)(*args), dtype=float), (3,))
    np.testing.assert_allclose(np.broadcast_to(np.asarray(found.out_elements(*args)[0], dtype=float), (3,)),
                               want, rtol=1e-12, atol=0)
    assert found.full() is cost


@pytest.mark.parametrize("split, seq, recompute, incoming", CASES[::3])
def test_a_summary_says_what_its_block_cost_says(disk, split, seq, recompute, incoming):
    block = build_blocks(GPT3)[1]
    args = (block, split.effective_preset, split.overrides, seq, recompute, incoming)
    cost = block_module.block_cost(*args)
    _check(summary.block_summary(*args), block, cost)


def test_a_summary_from_disk_builds_no_block_cost(disk, monkeypatch):
    block = build_blocks(GPT3)[1]
    args = (block, "megatron", (), True, "selective", "R")
    made = summary.block_summary(*args)
    _forget()
    built = []
    real = block_module.block_cost
    monkeypatch.setattr(block_module, "block_cost", lambda *a, **k: built.append(a) or real(*a, **k))
    loaded = summary.block_summary(*args)
    assert loaded is not made and built == []                  # from disk: nothing built
    _check(loaded, block, real(*args))                         # (built here, for the comparison)


def test_a_refusal_is_remembered_on_disk(disk, monkeypatch):
    block = build_blocks(GPT3)[1]
    args = (block, "column", (), False, "none", "R")

    def refuse(*a, **k):
        raise ExplorerError("this split does not apply here")
    monkeypatch.setattr(block_module, "block_cost", refuse)
    with pytest.raises(ExplorerError, match="does not apply here"):
        summary.block_summary(*args)
    _forget()
    monkeypatch.setattr(block_module, "block_cost", lambda *a, **k: pytest.fail("rebuilt"))
    with pytest.raises(ExplorerError, match="does not apply here"):
        summary.block_summary(*args)


def test_a_damaged_summary_is_rebuilt(disk, monkeypatch):
    from explorer.cost import cache
    from explorer.cost.generated import plain_key
    block = build_blocks(GPT3)[1]
    args = (block, "megatron", (), False, "none", "R")
    key = block_module.cost_key(*args)
    cache.store("summary", plain_key(("summary", key)), {"layouts": ["R", 3, "R"], "out_elements": {}})
    _forget()
    _check(summary.block_summary(*args), block, block_module.block_cost(*args))


def _top(result):
    return [(c.strategy, c.iteration_time_s, c.peak_memory_bytes) for c in result.top]


def test_a_search_with_its_summaries_on_disk_builds_no_block_cost(disk, monkeypatch):
    model, cluster = load_model("tiny-gpt"), load_cluster("classroom")
    first = search(model, cluster, 8, 32)
    _forget()
    monkeypatch.setattr(block_module, "_block_cost", lambda *a, **k: pytest.fail("a BlockCost was built"))
    monkeypatch.setattr(outline, "model_blocks", lambda *a, **k: pytest.fail("the blocks were built"))
    again = search(model, cluster, 8, 32)
    assert _top(again) == _top(first)


@pytest.mark.parametrize("name", ["gpt3-175b", "llama3-8b", "mixtral-8x7b", "resnet-50", "bert-large", "tiny-mlp"])
def test_an_outline_says_what_its_blocks_say_from_memory_and_from_disk(disk, name):
    model = load_model(name)
    blocks = build_blocks(model)
    for outlines in (outline.block_outlines(model), (_forget(), outline.block_outlines(model))[1]):
        assert len(outlines) == len(blocks)
        for o, b in zip(outlines, blocks):
            assert (o.name, o.kind, o.layer, o.key, o.routed, o.without_params) == \
                (b.name, b.kind, b.layer, b.key, b.routed, b.params == 0)
            assert o.block().key == b.key and o.block().name == b.name


def test_a_damaged_outline_is_rebuilt(disk):
    from explorer.cost import cache
    model = load_model("tiny-gpt")
    cache.store("outline", repr(model), [["layer0", "layer", "zero", ["gpt-layer"], False, False]])
    assert [o.name for o in outline.block_outlines(model)] == [b.name for b in build_blocks(model)]


def test_a_cancelled_build_is_not_remembered_as_a_refusal(disk):
    """WorkCancelled is an ExplorerError: a summary whose build was cancelled (a search stopped, a session gone) is
    neither kept in memory nor written to the disk cache as "the split does not apply", where every later search,
    in any process, would have skipped that split."""
    from explorer.limits import WorkCancelled, work_budget
    block = build_blocks(GPT3)[1]
    split = layer_options(8)[0]
    args = (block, split.effective_preset, split.overrides, False, "none", "R")
    with pytest.raises(WorkCancelled):
        with work_budget("the search", should_stop=lambda: True):
            summary.block_summary(*args)
    assert not any('"error"' in p.read_text(errors="replace") for p in disk.rglob("*") if p.is_file())
    found = summary.block_summary(*args)            # asked again, by anyone: built, not refused
    assert found.layout_in and found.full() is block_module.block_cost(*args)
