"""The global space: counts add up, every kept choice is a valid strategy, reasons are right."""
import pytest
from hypothesis import given, settings, strategies as st

from explorer.strategy import rules
from explorer import ExplorerError, Strategy, load_model
from explorer.search.space import (HEADS, KV_HEADS, RULES, STAGES, divisors, enumerate_space, layer_options, layouts,
                                   output_layers)

TINY = load_model("tiny-gpt")        # 4 layers, 4 heads
GPT3 = load_model("gpt3-175b")


@settings(max_examples=40, deadline=None)
@given(model=st.sampled_from(["tiny-gpt", "tiny-mlp", "bert-large"]),
       gpus=st.sampled_from([1, 2, 4, 6, 8, 12, 16, 64]), batch=st.integers(1, 96))
def test_counts_add_up(model, gpus, batch):
    space = enumerate_space(load_model(model), gpus, batch)
    assert space.kept + sum(space.pruned.values()) == space.total
    assert set(space.pruned) <= set(RULES)


def test_every_kept_choice_is_a_valid_strategy():
    space = enumerate_space(TINY, 8, 16)
    for fam in space.families:
        for b in fam.micro_batches:
            for zero in fam.zeros:
                s = Strategy(dp=fam.dp, tp=fam.tp, pp=fam.pp, micro_batch=b, global_batch=16,
                             schedule=fam.schedule, chunks=fam.chunks, zero=zero, recompute=fam.recompute,
                             sequence_parallel=fam.sequence_parallel)
                rules.check(TINY, s, 8)
                if s.schedule == "interleaved" and TINY.layers % (s.pp * s.chunks):
                    # uneven chunks only where Megatron-Bridge's default layout (the embedding and the
                    # loss counted as stage members) splits evenly: l + 2 slots over p v virtual stages
                    assert (TINY.layers + 2) % (s.pp * s.chunks) == 0


def test_tensor_degree_must_divide_the_heads():
    space = enumerate_space(TINY, 8, 8)
    n_sched = 4 + (TINY.layers - 1)            # gpipe, 1f1b, zb-h1, dualpipev (v = 2), interleaved v = 2..l
    per_point = 4 * 3 * 2 * 2                  # zero x recompute x sp x overlap
    # t = 8 does not divide 4 heads: its only p is 1, with every b dividing B = 8
    assert space.pruned[HEADS] == len(divisors(8)) * n_sched * per_point
    assert all(fam.tp in (1, 2, 4) for fam in space.families)


def test_pipeline_rules():
    space = enumerate_space(TINY, 8, 8)
    assert space.pruned[STAGES] > 0                        # p = 8 > 4 layers
    assert all(fam.zeros == (0, 1) for fam in space.families if fam.pp > 1)
    assert all(not fam.sequence_parallel for fam in space.families if fam.tp == 1)
    for fam in space.families:
        if fam.schedule == "interleaved":
            assert fam.pp >= 2 and all((8 // (b * fam.dp)) % fam.pp == 0 for b in fam.micro_batches)


def test_gpt3_space_size():
    """The issue's problem: 1024 GPUs, B = 1536 -- 39,552 global choices survived the rules with
    gpipe, 1f1b and interleaved; ZB-H1 adds the 1f1b families with at least p micro-batches, DualPipeV
    (two chunks) those with at least 2p micro-batches and 2p chunks that divide the layers; the
    uneven default layout (issue 26 item 7: the embedding and the loss as members of the first and last
    virtual stages, 96 + 2 = 98 slots) adds the interleaved families p = 2, v in (7, 49); Megatron's
    --decoder-first/last-pipeline-num-layers (issue 26 item 7, the search: space.layouts) add families whose
    first or last rank holds fewer layers only where one can be faster than the default split: GPT-3's output
    layer costs a quarter of a layer (space.output_layers), so only where 96 layers do not split evenly over
    the p v chunks and a split within one layer per chunk off the first rank and two off the last exists:
    interleaved p = 2, v = 32 and p = 4, v = 16."""
    space = enumerate_space(GPT3, 1024, 1536)
    zb = sum(f.size for f in space.families if f.schedule == "zb-h1")
    dv = sum(f.size for f in space.families if f.schedule == "dualpipev")
    laid = [f for f in space.families if f.pipeline_layout]
    uneven = [f for f in space.families if f.schedule == "interleaved" and GPT3.layers % (f.pp * f.chunks)
              and not f.pipeline_layout]
    assert {(f.pp, f.chunks) for f in uneven} == {(2, 7), (2, 49)}
    assert {(f.pp, f.chunks) for f in laid} == {(2, 32), (4, 16)} and {f.schedule for f in laid} == {"interleaved"}
    assert output_layers(GPT3) == pytest.approx(51200 / (16 * 12288 + 8 * 2048 / 3))
    assert layouts(GPT3, 8, "1f1b", 1) == () and layouts(GPT3, 4, "interleaved", 16)
    assert space.kept - zb - dv - sum(f.size for f in uneven) - sum(f.size for f in laid) == 39552
    assert 0 < zb <= sum(f.size for f in space.families if f.schedule == "1f1b")
    assert 0 < dv <= zb
    assert space.kept + sum(space.pruned.values()) == space.total


def test_layer_options():
    opts = layer_options(4)
    assert opts[0].degree == 1 and opts[0].effective_preset == "replicated"
    assert {(o.degree, o.preset) for o in opts[1:]} == {(k, p) for k in (2, 4)
                                                         for p in ("megatron", "column", "row", "batch")}
    assert len(layer_options(1)) == 1


@pytest.mark.parametrize("gpus,batch", [(0, 8), (8, 0)])
def test_bad_input(gpus, batch):
    with pytest.raises(ExplorerError):
        enumerate_space(TINY, gpus, batch)


def test_grouped_query_attention_needs_t_to_divide_the_kv_heads():
    llama = load_model("llama2-70b")                        # 64 heads, 8 key/value heads
    space = enumerate_space(llama, 64, 64)
    assert space.pruned[KV_HEADS] > 0
    assert all(llama.kv_heads % fam.tp == 0 for fam in space.families)


@pytest.mark.parametrize("model, gpus, batch", [("tiny-gpt", 8, 16), ("tiny-gpt", 12, 24), ("bert-large", 16, 64)])
def test_pruning_reasons_are_each_points_first_broken_rule(model, gpus, batch):
    """The enumeration asks some rules once for many points (explorer.search.space.SCHEDULE_FIRST, the
    ZeRO and sequence-parallel rules once per (t, p)); its counts are still, point by point, the first
    rule each raw choice breaks, level by level in table order."""
    from collections import Counter
    from explorer.search.space import AT_LEVEL, OVERLAPS, SEQ_PAR, ZEROS, _schedules, layouts
    from explorer.strategy.strategy import RECOMPUTE
    m = load_model(model)
    want = Counter()
    ordered = [rule for level in AT_LEVEL for rule in level]
    for tp in divisors(gpus):
        for pp in divisors(gpus // tp):
            for b in divisors(batch):
                for schedule, chunks, layout in [(s, c, x) for s, c in _schedules(m.layers)
                                                 for x in ("",) + layouts(m, pp, s, c)]:
                    for zero in ZEROS:
                        for seq in SEQ_PAR:
                            v = rules.view(tp=tp, pp=pp, cp=1, cp_algo="ring", micro_batch=b, dp=gpus // (tp * pp),
                                           global_batch=batch, schedule=schedule, chunks=chunks, zero=zero,
                                           sequence_parallel=seq, pipeline_layout=layout)
                            reason = next((r.reason for r in ordered if r.broken(v, m)), None)
                            if reason:
                                want[reason] += len(RECOMPUTE) * len(OVERLAPS)
    assert +enumerate_space(m, gpus, batch).pruned == want
