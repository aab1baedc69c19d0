"""Fidelity fixes (issue "Fidelity: ... ten measured errors"), each with the issue's number and its source.

Done here: E1 (collectives over several machine levels), E2 (ZeRO-2/3 gradient reduce-scatter per
micro-batch), E4 (softmax output kept once without dropout), E6 (full recomputation keeps the
sequence-parallel layer input).
"""
from fractions import Fraction

import pytest

from explorer import Strategy, evaluate, load_cluster, load_model
from explorer.cost import collectives as coll
from explorer.strategy.mesh import Mesh, group_route

A100 = load_cluster("dgx-a100-80gb")


@pytest.mark.parametrize("zero,gb", [(2, 14.46), (3, 34.7)])
def test_e2_zero_2_and_3_reduce_scatter_after_every_micro_batch(zero, gb):
    """DeepSpeed stage 2/3 reduce-scatter the gradients after every backward
    (deepspeedai/DeepSpeed#2252): ZeRO-2 (m+1)(d-1)/d beta Psi, ZeRO-3 3m(d-1)/d beta Psi.
    gpt-1.7b, t = 1, d = 8, b = 1, B = 32 (m = 4): 14.46 and 34.7 GB (before: 5.78 and 26.0)."""
    s = Strategy(dp=8, tp=1, pp=1, micro_batch=1, global_batch=32, zero=zero)
    r = evaluate(load_model("gpt-1.7b"), s, A100)
    sent = r.comm_bytes_per_device["dp_comm"] + r.comm_bytes_per_device["zero_comm"]
    assert sent / 1e9 == pytest.approx(gb, abs=0.01)
    one = evaluate(load_model("gpt-1.7b"), s.with_(global_batch=8), A100)     # m = 1: the ZeRO paper's volumes
    psi_bytes = 2 * one.params                                              # bf16, no tensor parallelism
    factor = (2 if zero == 2 else 3) * 7 / 8
    assert one.comm_bytes_per_device["dp_comm"] + one.comm_bytes_per_device["zero_comm"] == \
        pytest.approx(factor * psi_bytes, rel=1e-3)


def test_e4_without_dropout_the_softmax_output_is_kept_once():
    """LLaMA has no attention dropout: the context GEMM's input is the softmax output already
    kept for the softmax backward (Korthikanti et al. 2022 Sec 4.1 counts 2as^2b for it once).
    llama2-70b on H200, t = 8, p = 4, d = 4, b = 1, B = 64, SP: stage 0 keeps ~30.5 GiB (was 50.5).
    The standard attention core (LLaMA's default is FlashAttention, which keeps no s x s tensor)."""
    s = Strategy(dp=4, tp=8, pp=4, micro_batch=1, global_batch=64, sequence_parallel=True)
    r = evaluate(load_model("llama2-70b").with_attention("standard"), s, load_cluster("h200"))
    assert r.memory_by_stage[0]["activations"] / 2 ** 30 == pytest.approx(30.5, abs=0.1)


def test_e6_full_recompute_with_sequence_parallelism_keeps_2sbh_over_t():
    """Korthikanti et al. 2022 Sec 5: with sequence parallelism the checkpointed layer input is the
    sequence-sharded one, 2sbh/t per layer. GPT-3 175B, t = 8, p = 8: stage 0 ~0.63 GB (was 4.86)."""
    s = Strategy(dp=8, tp=8, pp=8, micro_batch=1, global_batch=64, recompute="full", sequence_parallel=True)
    r = evaluate(load_model("gpt3-175b"), s, A100)
    assert r.memory_by_stage[0]["activations"] / 1e9 == pytest.approx(0.63, abs=0.01)


# ---- E1: collectives over several machine levels -------------------------------------------------

def test_e1_group_routes_count_ranks_per_node_and_nodes():
    """A group's route is its fan-in per level: 16 data-parallel ranks with t = 1 sit 8 per
    DGX node on 2 nodes; with t = 8 each node holds one rank of a dp group."""
    assert group_route(A100, Mesh.of(tp=1, dp=16), "dp") == (8, 2)
    assert group_route(A100, Mesh.of(tp=8, dp=2, pp=4), "dp", pp=0) == (1, 2)
    assert group_route(A100, Mesh.of(tp=8, dp=2, pp=4), "tp", pp=3) == (8, 1)
    assert group_route(A100, Mesh.of(tp=16, dp=2), "tp") == (8, 2)


@pytest.mark.parametrize("kind", ["all_reduce", "all_gather", "reduce_scatter", "all_to_all", "p2p"])
@pytest.mark.parametrize("route", [(8, 1), (1, 4), (8, 2), (4, 8), (2, 2, 2)])
def test_e1_level_shares_sum_to_one_and_keep_single_level_groups_on_their_level(kind, route):
    shares = coll.level_shares(kind, route)
    assert sum(shares) == 1 and all(w >= 0 for w in shares)
    crossed = [i for i, c in enumerate(route) if c > 1]
    if len(crossed) == 1:
        assert shares[crossed[0]] == 1


def test_e1_ring_channels_put_one_kth_of_the_bytes_on_the_network():
    """NCCL rings over k channels: each of the k ranks of a node sends 1/k of its ring bytes over
    its own NIC, the rest over NVLink (NVIDIA/nccl#812)."""
    assert coll.level_shares("all_reduce", (8, 2)) == (Fraction(7, 8), Fraction(1, 8))
    assert coll.level_shares("all_to_all", (8, 2)) == (Fraction(7, 15), Fraction(8, 15))


def test_e1_data_parallel_all_reduce_over_two_dgx_nodes_runs_at_8_nics():
    """gpt-1.7b, t = 1, d = 16 on DGX-A100, b = 1, B = 64: the 16-rank group (8 per node) drives all
    8 NICs; NVIDIA measures 192 GB/s all-reduce bus bandwidth across DGX-A100 nodes
    (NVIDIA/nccl#812). dp_comm was 0.258 s (24 GB/s, one NIC); now ~0.03 s for the same 6.20 GB,
    split per level in comm_by_kind."""
    r = evaluate(load_model("gpt-1.7b"), Strategy(dp=16, tp=1, pp=1, micro_batch=1, global_batch=64), A100)
    sent = r.comm_bytes_per_device["dp_comm"]
    assert sent / 1e9 == pytest.approx(6.20, abs=0.01)
    assert r.breakdown_s["dp_comm"] == pytest.approx(0.03, abs=0.005)
    bus_bw = sent / r.breakdown_s["dp_comm"]
    assert bus_bw / 1e9 == pytest.approx(192, rel=0.02)
    rows = [row for row in r.comm_by_kind if row["category"] == "dp_comm"]
    assert {row["level"] for row in rows} == {"node", "cluster"}
    assert sum(row["bytes"] for row in rows) == pytest.approx(sent, rel=1e-12)
    assert sum(row["time_s"] for row in rows) == pytest.approx(r.breakdown_s["dp_comm"], rel=1e-12)
    assert [row["bytes"] for row in rows if row["level"] == "cluster"][0] == pytest.approx(sent / 8, rel=1e-12)


def test_e1_ranking_of_tensor_parallel_degrees_on_64_gpus():
    """gpt-7.5b on 64 A100s (ZeRO-1, selective recomputation, b = 4, B = 512): with the
    slowest-level rule t = 2 (5.31 s) ranked ahead of t = 1 (5.62 s); with the dp all-reduce over
    8 NICs per node t = 1 is fastest, ~4.5 s (the issue's expectation)."""
    model = load_model("gpt-7.5b")
    times = {t: evaluate(model, Strategy(dp=64 // t, tp=t, pp=1, micro_batch=4, global_batch=512, zero=1,
                                         recompute="selective"), A100).iteration_time_s for t in (1, 2, 4, 8)}
    assert min(times, key=times.get) == 1
    assert times[1] == pytest.approx(4.5, abs=0.15)


def test_e1_tensor_parallel_group_wider_than_a_node_uses_both_levels():
    """A tp group of 16 over 2 DGX nodes: its collectives split 7/8 NVLink, 1/8 network."""
    r = evaluate(load_model("gpt-7.5b"), Strategy(dp=4, tp=16, pp=1, micro_batch=1, global_batch=64), A100)
    rows = [row for row in r.comm_by_kind if row["category"] == "op_comm"]
    by_level = {}
    for row in rows:
        by_level[row["level"]] = by_level.get(row["level"], 0.0) + row["bytes"]
    assert by_level["cluster"] == pytest.approx(sum(by_level.values()) / 8, rel=1e-9)
    flat = r.comm_bytes_per_device["op_comm"] * A100.levels[1].seconds_per_byte     # the old rule
    assert r.breakdown_s["op_comm"] < flat


# ---- E10: a redistribution moves what the new layout lacks ---------------------------------------

def test_e10_changing_the_sequence_parallel_degree_moves_only_the_missing_shard():
    """gpt-1.7b with sequence parallelism, layers alternating degree 8 and 4 inside t = 8: between a
    degree-8 and a degree-4 layer each device needs its 1/4 of the sequence and holds 1/8 (at best
    overlapping): at most S/4 = 2.36 MB forward and S/8 = 1.18 MB backward per device (S = b s h x 2 B),
    where gathering to replicated and slicing charged 8.26 and 7.08 MB."""
    from explorer import LayerSplit
    from explorer.cost.tree import cost_tree
    from explorer.timeline.numbers import boundary_numbers, context
    model = load_model("gpt-1.7b")
    splits = tuple(LayerSplit(8 if i % 2 == 0 else 4, "megatron") for i in range(model.layers))
    s = Strategy(tp=8, pp=1, dp=1, micro_batch=1, global_batch=8, sequence_parallel=True, layer_splits=splits)
    tree = cost_tree(model, s, A100)
    nums = context(model, s, A100)
    S = 2 * 2048 * model.hidden
    down = [cn for cn in boundary_numbers(tree.plan.boundaries[1], nums)]      # layer0 (8) -> layer1 (4)
    sent = {cn.coll.phase: cn.bytes for cn in down}
    assert {cn.coll.kind for cn in down} == {"reshard"}
    assert sent["fwd"] == pytest.approx(S / 4) and sent["fwd"] / 1e6 == pytest.approx(2.36, abs=0.01)
    assert sent["bwd"] == pytest.approx(S / 8) and sent["bwd"] / 1e6 == pytest.approx(1.18, abs=0.01)


def test_e10_all_to_all_sends_n_minus_1_over_n_of_a_devices_buffer():
    """nccl-tests PERFORMANCE.md: an all-to-all's bus bytes are (n-1)/n of a rank's buffer, here its
    1/n of the tensor: (n-1)/n^2 of the whole array."""
    from explorer.cost import layouts as lay
    kind, fraction, n = lay.reshard(lay.FEAT, 4, lay.SEQ, 4, 4)
    assert (kind, fraction, n) == ("all_to_all", Fraction(1, 4), 4)
    assert coll.bytes_per_device(kind, 1.0 * fraction, n) == pytest.approx(3 / 16)


# ---- E3: the last stage's copy of a tied embedding ------------------------------------------------

def test_e3_tied_embedding_copy_and_its_gradient_all_reduce_on_the_last_stage():
    """Megatron-LM keeps the word embedding on stage 0 and a copy for the output layer on the last
    stage, and all-reduces their gradients each iteration (finalize_model_grads ->
    _allreduce_word_embedding_grads). gpt3-175b, t = 8, p = 8: V h / t = 51200 x 12288 / 8 = 78.6 M
    parameters more on the last stage (+16 B each with Adam), and 157 MB more traffic on stage 0."""
    model = load_model("gpt3-175b")
    s = Strategy(tp=8, pp=8, dp=16, micro_batch=1, global_batch=1536)
    r = evaluate(model, s, A100)
    copy = model.vocab * model.hidden / 8
    assert copy / 1e6 == pytest.approx(78.6, abs=0.05)
    first = r.stage_times_s[0]
    middle = r.stage_times_s[1]
    embedding_only = 2 * 15 / 16 * 2 * (model.vocab * model.hidden + model.seq_len * model.hidden) / 8
    assert first["dp_bytes"] - middle["dp_bytes"] == pytest.approx(embedding_only + 2 * copy, rel=1e-3)
    assert 2 * copy / 1e6 == pytest.approx(157.3, abs=0.1)
    llama = evaluate(load_model("llama2-70b"), Strategy(tp=8, pp=4, dp=1, micro_batch=1, global_batch=8), A100)
    untied = [row["dp_bytes"] for row in llama.stage_times_s]
    assert untied[0] == 0 and untied[-1] == 0          # d = 1, no tied copy: nothing to synchronise
    mem_last = r.memory_by_stage[-1]
    no_copy = evaluate(model, s.with_(pp=1, dp=128, global_batch=1536), A100)   # p = 1: no copy
    assert mem_last["params"] > 0 and no_copy.params == r.params               # the copy is not a new parameter


# ---- E5: sequence parallelism re-gathers a linear's input for the weight gradient -----------------

def test_e5_sequence_parallel_backward_regathers_inputs_hidden_under_the_input_gradient_gemm():
    """Megatron-LM's LinearWithGradAccumulationAndAsyncCommunication keeps the 1/t sequence shard
    of a column-parallel linear's input and all-gathers it again in the backward for dW, overlapped
    with the dX GEMM: +2 all-gathers of b s h per layer per micro-batch. gpt3-175b, t = 8, p = 8,
    SP + selective: op_comm bytes 414.3 GB -> 515.8 GB; the time is hidden (shown as hidden_s)."""
    s = Strategy(tp=8, pp=8, dp=16, micro_batch=1, global_batch=1536, sequence_parallel=True,
                 recompute="selective")
    r = evaluate(load_model("gpt3-175b"), s, A100)
    assert r.comm_bytes_per_device["op_comm"] / 1e9 == pytest.approx(515.8, abs=0.1)
    layers_on_stage, m = 96 // 8, 1536 // 16
    regather = 2 * m * layers_on_stage * 7 / 8 * 2 * 2048 * 12288       # 2 all-gathers of bsh, 2 B
    assert r.hidden_s["op_comm"] > 0
    rows = [row for row in r.comm_by_kind if row["category"] == "op_comm" and row["kind"] == "all_gather"]
    assert sum(row["hidden_s"] for row in rows) == pytest.approx(r.hidden_s["op_comm"], rel=1e-9)
    no_sp = evaluate(load_model("gpt3-175b"), s.with_(sequence_parallel=False), A100)
    assert no_sp.hidden_s["op_comm"] == 0
    assert regather / 1e9 == pytest.approx(515.8 - 414.3, abs=0.1)


# ---- Overlaps: tensor-parallel communication under the GEMMs -------------------------------------

def test_overlap_tp_hides_sequence_parallel_collectives_under_gemms_and_keeps_bytes():
    """Megatron-LM --tp-comm-overlap (Transformer Engine userbuffers; Wang et al. ASPLOS'23): the
    sequence-parallel all-gathers and reduce-scatters run under the GEMMs next to them. Same bytes,
    less exposed op_comm, the difference shown as hidden; categories still sum to the total."""
    model = load_model("gpt3-175b")
    s = Strategy(tp=8, pp=8, dp=16, micro_batch=1, global_batch=1536, sequence_parallel=True,
                 recompute="selective")
    off, on = evaluate(model, s, A100), evaluate(model, s.with_(overlap_tp=True), A100)
    assert on.comm_bytes_per_device == off.comm_bytes_per_device
    assert on.breakdown_s["op_comm"] < 0.5 * off.breakdown_s["op_comm"]
    assert on.hidden_s["op_comm"] == pytest.approx(
        off.hidden_s["op_comm"] + off.breakdown_s["op_comm"] - on.breakdown_s["op_comm"], rel=1e-9)
    assert on.iteration_time_s < off.iteration_time_s
    assert sum(on.breakdown_s.values()) == pytest.approx(on.iteration_time_s, rel=1e-12)


def test_overlap_tp_needs_sequence_parallelism():
    from explorer import ExplorerError
    with pytest.raises(ExplorerError, match="sequence parallelism"):
        Strategy(tp=8, overlap_tp=True)
