"""The expert weights' parameters and gradients per device (explorer/cost/block.py, explorer/cost/explain.py): which
group reduces their gradients, and how the dense rest reads. Moved out of tests/test_moe.py."""
import pytest

from explorer import Strategy, load_cluster, load_model


def test_experts_under_expert_tp_1_stay_out_of_the_tensor_parallel_gradient_all_reduce():
    """With expert_tp = 1 every device of a TP group holds whole experts (split 'seq' under SP), but Megatron-Core
    marks only the router's and the norms' weights `sequence_parallel` (transformer/moe/router.py): only those are
    all-reduced over the TP group (finalize_model_grads._allreduce_non_tensor_model_parallel_grads); the experts'
    gradients are reduced over their expert-data-parallel group, d / e replicas. A lecturer's walk saw 103 GB of DP
    traffic per device for Qwen3-30B-A3B (t 4, e 8) on 1,024 A100, with 8 GB of parameters per device: the experts'
    gradients, all 128 experts' of every layer, had been added to the TP all-reduce as well."""
    from explorer.cost.evaluation import build_evaluation
    model = load_model("qwen3-30b-a3b")
    s = Strategy(dp=256, tp=4, ep=8, expert_tp=1, sequence_parallel=True, micro_batch=1, global_batch=1536, zero=1)
    ev = build_evaluation(model, [s], load_cluster("dgx-a100-80gb"))
    grad_sync = ev.stage_inputs["GSB_r"][0, 0]            # the TP all-reduce of the replicated weights' gradients
    psi, psi_e = ev.stage_inputs["Psi_r"][0, 0], ev.stage_inputs["Psi^e_r"][0, 0]
    router_and_norms = model.layers * (model.experts * model.hidden + 4 * model.hidden) + model.hidden
    assert 0 < grad_sync <= 2 * (3 / 4) * 2 * router_and_norms          # all-reduce over t = 4, bf16
    d, n = 256, 256 * 4 // 8                                            # the experts' DP group: d t / (e etp)
    all_reduce = lambda x, k: 2 * (k - 1) / k * 2 * x                   # ZeRO-1: reduce-scatter + all-gather
    assert ev.outputs["dp_bytes"][0, 0] == pytest.approx(all_reduce(psi, d) + all_reduce(psi_e, n) + grad_sync)
    assert ev.outputs["dp_bytes"][0, 0] < 2.1 * 2 * (psi + psi_e)
    # experts split by batch over t with etp = t (the 'batch' layer preset) keep their sum over the t devices: their
    # expert-data-parallel group is d / e (a review: the first form of the fix dropped it too, 92.9 -> 2.7 GB)
    from explorer.strategy.strategy import LayerSplit
    mixtral = load_model("mixtral-8x7b")
    batch = Strategy(dp=4, tp=2, ep=2, micro_batch=1, global_batch=8, layer_splits=(LayerSplit(2, "batch"),) * 32)
    by_batch = build_evaluation(mixtral, [batch], load_cluster("dgx-a100-80gb")).stage_inputs
    assert by_batch["GSB_r"][0, 0] > 2 * (1 / 2) * 2 * by_batch["Psi^e_r"][0, 0]   # all-reduce over t = 2, bf16

def test_the_dense_parameters_per_device_read_without_a_negative_term():
    """A lecturer's walk read Qwen3-30B-A3B's Psi as 2Vh/t - 294912hl/p + h + l(... + 295042h ...)/p: every parameter
    less the expert weights, kept apart by sympy, as if parameters were subtracted. It is now collected by layers
    (explain._readable_params), with the same value."""
    import sympy as sp
    from explorer.cost.explain import _readable_params, explain
    from explorer.cost.explain import symbolic_stages
    from explorer.symbols import Psi_r
    model, cluster = load_model("qwen3-30b-a3b"), load_cluster("dgx-a100-80gb")
    s = Strategy(dp=256, tp=4, ep=8, expert_tp=1, sequence_parallel=True, micro_batch=1, global_batch=1536, zero=1)
    psi = explain(model, s, cluster).definitions_latex()["\\Psi"]
    assert " - " not in psi and "130 h" in psi, psi
    raw = symbolic_stages(model, s, cluster)[Psi_r][0]
    assert sp.simplify(_readable_params(raw) - raw) == 0
    dense = load_model("gpt3-175b")
    plain_psi = symbolic_stages(dense, Strategy(dp=8, tp=8, pp=8, global_batch=64), load_cluster("dgx-a100-80gb"))[Psi_r][0]
    assert _readable_params(plain_psi) is plain_psi          # nothing negative: left as written


def test_experts_split_over_t_keep_the_tokens_their_dispatcher_gathered_and_gather_nothing_again():
    """expert_tp = t under sequence parallelism: Megatron-Core's token dispatcher all-gathers the routed tokens over
    the expert-TP group itself (token_dispatcher.py, gather_from_sequence_parallel_region after the all-to-all), and
    the grouped GEMM, built without tensor parallelism of its own (extensions/transformer_engine.py TEGroupedLinear:
    parallel_mode None, "comms ... explicitly handled by MoE token dispatcher"), keeps those gathered tokens for its
    weight gradient. So no backward re-gather (a dense column-parallel linear's, Korthikanti et al. Sec 4.2.2), and
    the whole gathered input kept: a review against the source found 51.5 GB of such gathers an iteration and
    activations 3 GiB short (Qwen3-30B-A3B, t 2, e 8, 64 H100)."""
    from explorer.cost.evaluate import evaluate
    from explorer.timeline.microstep import microstep_events
    model, cluster = load_model("qwen3-30b-a3b"), load_cluster("dgx-h100")
    by_etp = {etp: Strategy(dp=32, tp=2, ep=8, expert_tp=etp, sequence_parallel=True, micro_batch=1,
                            global_batch=512, zero=1) for etp in (1, 2)}
    ev = microstep_events(model, by_etp[2], cluster, layer=1)
    fc1 = ev[(ev.operator == "expert_fc1") & (ev.bytes > 0)]
    routed = 1 * model.seq_len * model.experts_per_token * model.hidden * 2          # b s k h, bf16
    assert set(zip(fc1.phase, fc1.kind)) == {("bwd", "reduce_scatter"), ("fwd", "all_gather")}   # each device
    assert set(fc1.bytes) == {routed / 2}               # (t - 1) / t of the gathered tokens, t = 2
    act = {etp: evaluate(model, s, cluster).memory_by_stage[0]["activations"] for etp, s in by_etp.items()}
    # etp = 2 keeps fc1's whole gathered input where etp = 1 keeps the device's own routed tokens: half as many
    assert act[2] - act[1] == pytest.approx(model.layers * routed / 2, rel=1e-9)


def test_the_expert_weights_synchronisation_is_shown_on_the_network_it_crosses():
    """With e = 8 filling each DGX B200's NVLink domain, the expert weights' d / e = 8 replicas sit one per node: their
    gradient reduce-scatter and parameter all-gather cross InfiniBand only. The Cost page's communication split had
    put them on the dense data-parallel groups' route (8 per node, 8 nodes): 51 GB of GPT-OSS 120B's 58.5 GB a step on
    NVLink (2026-12-08). Now each part is split over its own group's levels; the rows still add up to the
    synchronisation's bytes, exposed and hidden seconds."""
    from dataclasses import replace
    from explorer import evaluate
    model = load_model("gpt-oss-120b")
    s = Strategy(dp=64, ep=8, expert_tp=1, micro_batch=4, global_batch=1280, zero=1, overlap_dp=True)
    r = evaluate(model, s, load_cluster("dgx-b200"), 64)
    rows = [x for x in r.comm_by_kind if x["category"] == "dp_comm"]
    by_level = {x["level"]: x for x in rows}
    assert sum(x["bytes"] for x in rows) == pytest.approx(r.comm_bytes_per_device["dp_comm"])
    assert sum(x["time_s"] for x in rows) == pytest.approx(r.breakdown_s["dp_comm"])
    assert sum(x["hidden_s"] for x in rows) == pytest.approx(r.hidden_s["dp_comm"])
    psi_e = model.layers * model.experts * 3 * model.hidden * model.moe_ffn_hidden / 8   # GLU fc1 (2 f) + fc2 (f)
    expert_bytes = 2 * (7 / 8) * 2 * psi_e                                              # ZeRO-1 RS + AG, bf16
    assert by_level["cluster"]["bytes"] >= expert_bytes
    assert by_level["cluster"]["bytes"] > 5 * by_level["node"]["bytes"]
    # ZeRO-3's gathers the same way (a review: 256 of their 293 GB had been put on NVLink), and the sync's exposed
    # part no larger than the sync (the dense and expert gathers, each hidden under the whole pass on its own links,
    # had left the gradient sync a negative window: dp_exposed > dp_sync, gradient_sync.sharded_sync_exposed)
    r3 = evaluate(model, replace(s, zero=3), load_cluster("dgx-b200"), 64)
    gathers = {x["level"]: x for x in r3.comm_by_kind if x["category"] == "zero_comm"}
    assert sum(x["bytes"] for x in gathers.values()) == pytest.approx(r3.comm_bytes_per_device["zero_comm"])
    assert sum(x["hidden_s"] for x in gathers.values()) == pytest.approx(r3.hidden_s["zero_comm"])
    assert gathers["cluster"]["bytes"] > 5 * gathers["node"]["bytes"]
    assert 0 <= r3.breakdown_s["dp_comm"] <= r3.stage_times_s[0]["dp_sync_s"] and r3.hidden_s["dp_comm"] >= 0
    assert r3.extra["expert_dp_route"] == (1, 8) and r3.extra["dp_level"] == 1
