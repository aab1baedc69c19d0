"""The search tries Megatron-LM's uneven first/last pipeline stages (issue 26 item 7, the search's part):
--decoder-first-pipeline-num-layers / --decoder-last-pipeline-num-layers (explorer.strategy.pipeline_layout.
first_last_choices), as layout families of the space (explorer.search.space.layouts), priced by the sweep
exactly as evaluate() prices the strategy it reports."""
import numpy as np
import pytest

from explorer import ModelSpec, evaluate, load_cluster, load_model
from explorer.errors import ExplorerError
from explorer.search.search import point_strategy
from explorer.search.space import enumerate_space, layouts
from explorer.search.sweep import settle, sweep
from explorer.strategy.pipeline_layout import first_last_choices, first_last_counts, parse

CLUSTER = load_cluster("classroom")
AGREE = 1e-9
HEAVY_HEAD = ModelSpec(name="heavy-head", family="gpt", layers=8, hidden=1024, heads=1, seq_len=256, vocab=100000)
"""An output layer of 100k x 1,024 weights next to 8 layers of 12.6M: the last stage is the critical one, and
one head (heads=1) keeps t = 1 so that the pipelines are the search's way to split it."""


def test_first_last_choices_follow_megatrons_rule():
    """Llama 3.1 405B's 126 layers on p = 8 (one chunk): the last rank sheds 2 layers, or both end ranks 1 (the other
    ranks 16 each);
    at v = 8 no first/last pair splits 126 layers (126 is not a multiple of 8): Megatron-Bridge counts the embedding
    and the loss as layers instead (even_layout)."""
    choices = dict(first_last_choices(126, 0, 8, 1))
    assert set(choices) == {(None, 14), (15, 15)}
    assert choices[(15, 15)] == "Et*15|(t*16|)*6t*15L"
    for (first, last), text in choices.items():
        counts = first_last_counts(126, 8, first, last)
        assert sum(counts) == 126 and len(set(counts)) > 1          # never the even split
        assert parse(text, 8).counts() == counts
    assert first_last_choices(126, 0, 8, 8) == ()
    assert first_last_choices(126, 0, 1, 1) == ()
    # DeepSeek-V3's 61 layers and its MTP layer: the MTP layer and the loss on the last chunk
    assert all(text.endswith("mL") for _, text in first_last_choices(61, 1, 8, 1))
    # 3 layers on 2 ranks: (2, 1) is the default split already; only (1, 2) is new
    assert [pair for pair, _ in first_last_choices(3, 0, 2, 1)] == [(1, None)]


def test_layers_that_split_evenly_still_get_shorter_end_ranks_where_the_output_layer_outweighs_one():
    """Llama 3 8B (32 layers, an output layer of 1.47 layers: space.output_layers) on 4 ranks: the ends hold fewer
    than the even 8 and the middle ranks take the rest (8, 9, 9, 6 and 7, 9, 9, 7); before, a pair had to shed a
    multiple of p layers off the ends, so no 4-rank pipeline of evenly split layers got one."""
    llama = load_model("llama3-8b")
    choices = dict(first_last_choices(32, 0, 4, 1))
    assert {first_last_counts(32, 4, *pair) for pair in choices} == {(8, 9, 9, 6), (7, 9, 9, 7)}
    assert layouts(llama, 4, "1f1b", 1) == tuple(choices.values())
    assert layouts(llama, 4, "gpipe", 1) == ()


def test_a_bad_first_last_pair_names_the_flag():
    with pytest.raises(ExplorerError, match="do not split evenly"):
        first_last_counts(126, 8, 13, None)


def test_the_space_has_layout_families_and_its_counts_add_up():
    space = enumerate_space(HEAVY_HEAD, 8, 64)
    assert space.kept + sum(space.pruned.values()) == space.total
    with_layout = [f for f in space.families if f.pipeline_layout]
    assert with_layout and all(f.pp > 1 for f in with_layout)
    assert {f.schedule for f in with_layout} == {"1f1b", "interleaved"}     # the schedules Megatron runs them with
    assert layouts(HEAVY_HEAD, 2, "dualpipev", 2) == () and layouts(HEAVY_HEAD, 2, "gpipe", 1) == ()
    for f in with_layout:
        layout = parse(f.pipeline_layout, f.pp * f.chunks)
        assert layout.layers == HEAVY_HEAD.layers
        assert f.pipeline_layout in layouts(HEAVY_HEAD, f.pp, f.schedule, f.chunks)


@pytest.fixture(scope="module")
def swept():
    space = enumerate_space(HEAVY_HEAD, 8, 64)
    points = sweep(HEAVY_HEAD, CLUSTER, space.families, 64)
    settle(points, np.arange(points.time_s.size))
    return space, points


def test_every_swept_layout_point_is_priced_as_evaluate_prices_it(swept):
    space, points = swept
    uneven = np.flatnonzero([bool(space.families[f].pipeline_layout) for f in points.family])
    assert uneven.size
    for k in uneven[:: max(1, uneven.size // 25)]:
        s = point_strategy(space, points, int(k), 64)
        assert s.pipeline_layout
        r = evaluate(HEAVY_HEAD, s, CLUSTER, 8)
        assert r.iteration_time_s == pytest.approx(points.time_s[k], rel=AGREE), s
        assert r.memory_bytes_per_device["total"] == pytest.approx(points.memory_bytes[k], rel=AGREE), s


def test_the_chosen_uneven_layout_evaluates_to_its_own_time_and_beats_the_even_split(swept):
    """The search's pick among the layout points (the fastest) is the interleaved pipeline whose last rank
    sheds layers to the heavy output layer; evaluate() gives it the sweep's time, and it is faster than the
    same global choice with the default split."""
    space, points = swept
    uneven = np.array([bool(space.families[f].pipeline_layout) for f in points.family])
    best = int(np.flatnonzero(uneven)[np.argmin(points.time_s[uneven])])
    chosen = point_strategy(space, points, best, 64)
    counts = parse(chosen.pipeline_layout).counts()
    last_rank = sum(c for k, c in enumerate(counts) if k % chosen.pp == chosen.pp - 1)
    assert last_rank < HEAVY_HEAD.layers / chosen.pp                  # the head's rank holds fewer layers
    r = evaluate(HEAVY_HEAD, chosen, CLUSTER, 8)
    assert r.iteration_time_s == pytest.approx(points.time_s[best], rel=AGREE)
    even = chosen.with_(pipeline_layout="")
    assert evaluate(HEAVY_HEAD, even, CLUSTER, 8).iteration_time_s > 1.05 * r.iteration_time_s
