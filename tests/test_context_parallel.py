"""Context parallelism: the sequence split over cp devices; ring attention and DeepSpeed-Ulysses.

Sources: Megatron-LM docs `context_parallel.rst` (CP splits every module's sequence; K/V passed
around the cp ring by point-to-point, overlapped with attention; 2cp chunks for causal load
balancing; gradients reduced over the data-parallel group with CP), Transformer Engine
`AttnFuncWithCPAndKVP2P` (backward passes K/V and their gradients), Liu et al. 2023 (Ring
Attention, Sec 3), Jacobs et al. 2023 (DeepSpeed-Ulysses, Sec 3.1: all-to-all of Q, K, V before
attention and of the output after it).
"""
import json

import pytest

from explorer import Strategy, evaluate, load_cluster, load_model
from explorer.cli.main import main
from explorer.errors import ExplorerError
from explorer.cost.superstep import CATEGORIES, COMM_CATEGORIES
from explorer.timeline.microstep import microstep_events
from framework_matrix import run_by

A100 = load_cluster("dgx-a100-80gb")
LLAMA_32K = load_model("llama2-70b").with_seq_len(32768)


def kv_local(model, t, cp, b=1, beta=2):
    """K + V bytes of one device's s/cp tokens (its KV heads under tensor parallelism)."""
    return beta * b * (model.seq_len // cp) * 2 * model.kv_heads * (model.hidden // model.heads) // t


def long_context(**over):
    """llama2-70b at 32k on 512 A100s: t=8, p=4, cp=4, d=4, b=1, B=512, sequence parallel,
    FlashAttention (the LLaMA default), no activation recomputation, distributed optimizer (ZeRO-1 over
    dp x cp). This is Megatron-Bridge's long-context recipe llama3_70b_16k (TP 8, PP 2, CP 2, SP,
    micro-batch 1, GBS 512, bf16; NVIDIA-NeMo/Megatron-Bridge recipes/llama/llama3_70b_16k.py) with the
    sequence doubled and pp and cp doubled with it."""
    fields = dict(dp=4, tp=8, pp=4, cp=4, micro_batch=1, global_batch=512, sequence_parallel=True, zero=1)
    fields.update(over)
    return Strategy(**fields)


def test_llama2_70b_at_32k_with_cp4_fits_80gb_and_ring_traffic_is_2cp_minus_1_kv():
    r = evaluate(LLAMA_32K, long_context(), A100)
    assert r.gpus == 512
    assert r.memory_bytes_per_device["total"] < A100.device.memory_bytes          # fits (about 31 GiB)
    kv = kv_local(LLAMA_32K, t=8, cp=4)
    assert kv == 4 * 2 ** 20                                                       # 4 MiB per layer
    chunk_kv = kv / 2                                                              # one of the 2cp chunks
    fwd = 2 * (4 - 1) * chunk_kv           # issue 10: 2(cp-1) x (K+V bytes) per layer per micro-batch
    assert fwd == (4 - 1) * kv             # = cp-1 sends of the device's K/V (its 2 chunks)
    bwd = 2 * (4 - 1) * kv                 # backward: K/V again and their gradients (TE)
    layers_stage, m = 80 // 4, 512 // 4
    assert r.comm_bytes_per_device["cp_comm"] == pytest.approx(m * layers_stage * (fwd + bwd), rel=1e-12)
    row = next(x for x in r.comm_by_kind if x["category"] == "cp_comm")
    assert row["kind"] == "p2p" and row["bytes"] == pytest.approx(r.comm_bytes_per_device["cp_comm"])
    assert row["level"] == A100.levels[-1].name        # cp stride t = 8: the ring crosses nodes
    # overlapped with the attention of each step: mostly hidden at 32k
    assert r.hidden_s["cp_comm"] > 10 * r.breakdown_s["cp_comm"]
    assert sum(r.breakdown_s.values()) == pytest.approx(r.iteration_time_s, rel=1e-12)


def test_the_ring_backward_runs_transformer_engines_schedule():
    """TE AttnFuncWithCPAndKVP2P.backward (transformer_engine/pytorch/attention/dot_product_attention/
    context_parallel.py): cp transfers, K,V at the first step, K,V with the partial dK,dV at the cp-2 middle ones,
    dK,dV at the last, each one message under one step's kernel -- 2(cp-1) x (K+V) bytes and cp latencies (the
    lumped form before, cp-1 steps of 2(K+V) and two messages each, paid 2(cp-1)); a step is exposed only by what
    outlasts its kernel, so with a long kernel nothing is, with none all of it is."""
    import sympy as sp
    from explorer.cost import context_parallel as cpx
    from explorer.symbols import L_c, g_c
    for cp in (2, 4, 8):
        kv = cpx.kv_bytes(False, cp)
        bare, hidden = (cpx.ring(False, cp, sp.Integer(0), sp.Integer(0)),
                        cpx.ring(False, cp, sp.Integer(10), sp.Integer(10)))
        values = {x: 1e-6 if x in (g_c, L_c) else 2.0 for x in (bare.bwd_total_s + kv).free_symbols}
        assert float((bare.bwd_bytes - 2 * (cp - 1) * kv).subs(values)) == 0
        assert float(bare.bwd_total_s.subs(values)) == pytest.approx(float((2 * (cp - 1) * kv * g_c + cp * L_c)
                                                                          .subs(values)), rel=1e-12)
        assert float(bare.bwd_s.subs(values)) == pytest.approx(float(bare.bwd_total_s.subs(values)), rel=1e-12)
        assert float(hidden.bwd_s.subs(values)) == 0 and float(hidden.fwd_s.subs(values)) == 0
        assert float(bare.fwd_total_s.subs(values)) == pytest.approx(float(((cp - 1) * (kv * g_c + L_c)).subs(values)))


def test_sequence_split_divides_activations_and_compute_by_cp():
    """Same t, p, micro-batches in flight: every kept activation is that of s/cp tokens."""
    one = evaluate(LLAMA_32K, long_context(cp=1, dp=16, zero=0), A100)
    four = evaluate(LLAMA_32K, long_context(zero=0), A100)
    assert four.memory_by_stage[0]["activations"] == pytest.approx(one.memory_by_stage[0]["activations"] / 4,
                                                                   rel=1e-12)
    assert four.model_flops_per_iteration == pytest.approx(one.model_flops_per_iteration, rel=1e-12)
    ratio = four.stage_times_s[0]["fwd_compute_s"] / one.stage_times_s[0]["fwd_compute_s"]
    assert 0.25 <= ratio < 0.26          # 1/cp, plus the fixed launch and GEMM-efficiency terms
    # gradients reduced over dp x cp = 16 in both: the same bytes per device
    assert four.comm_bytes_per_device["dp_comm"] == pytest.approx(one.comm_bytes_per_device["dp_comm"], rel=1e-12)


def test_gradients_are_reduced_over_dp_times_cp():
    """cp=4, dp=1: the weights are replicated over the 4 cp ranks; ring all-reduce over 4 (nccl_busbw)."""
    s = long_context(dp=1, global_batch=32, zero=0)
    r = evaluate(LLAMA_32K, s, A100)
    j = r.extra["sync_stage"]
    params_dev = r.memory_by_stage[j]["params"] / 2           # bf16 parameters
    # plus the sequence-parallel LayerNorm gradients, all-reduced over t = 8 once (two RMSNorms of h per
    # layer, the final norm on the last stage; Megatron-LM _allreduce_layernorm_grads)
    h, layers_here = LLAMA_32K.hidden, LLAMA_32K.layers // 4
    norms = (2 * layers_here + (1 if j == 3 else 0)) * h
    assert r.comm_bytes_per_device["dp_comm"] == pytest.approx(2 * 3 / 4 * 2 * params_dev + 2 * 7 / 8 * 2 * norms,
                                                               rel=1e-9)


def test_ulysses_moves_four_all_to_alls_forward_and_backward():
    """Q, K, V before attention, the output after it; each device sends (cp-1)/cp of its local tensor."""
    model = load_model("llama2-7b").with_seq_len(16384)            # 32 heads, no GQA
    s = Strategy(dp=1, tp=2, pp=1, cp=4, cp_algo="ulysses", micro_batch=1, global_batch=4, sequence_parallel=True)
    r = evaluate(model, s, A100)
    local = 2 * 1 * (16384 // 4) * 4096 // 2      # Q (= K = V = O here) of one device, bytes
    per_layer = 2 * 4 * (4 - 1) / 4 * local        # 4 all-to-alls forward, 4 backward
    assert r.comm_bytes_per_device["cp_comm"] == pytest.approx(4 * 32 * per_layer, rel=1e-12)
    assert next(x for x in r.comm_by_kind if x["category"] == "cp_comm")["kind"] == "all_to_all"
    assert r.hidden_s["cp_comm"] == pytest.approx(0.0, abs=1e-12) and r.breakdown_s["cp_comm"] > 0
    assert sum(r.breakdown_s.values()) == pytest.approx(r.iteration_time_s, rel=1e-12)


@pytest.mark.parametrize("change,message", [
    (dict(cp=3), "sequence length 32768 to split into 2 x cp = 6 equal chunks"),
    (dict(cp_algo="ulysses"), "Ulysses .* 8 key/value heads over tp x cp = 32"),
])
def test_rules_name_the_offending_values(change, message):
    with pytest.raises(ExplorerError, match=message):
        evaluate(LLAMA_32K, long_context(**change), A100)


def test_ring_needs_flash_attention_and_devices_count_cp():
    with pytest.raises(ExplorerError, match="needs FlashAttention"):
        evaluate(LLAMA_32K.with_attention("standard"), long_context(), A100)
    with pytest.raises(ExplorerError, match="dp x tp x cp x pp = 4 x 8 x 4 x 4 = 512 does not equal the 256"):
        evaluate(LLAMA_32K, long_context(), A100, gpus=256)
    with pytest.raises(ExplorerError, match="cp_algo 'tree' is unknown"):
        long_context(cp_algo="tree")


def test_cp_comm_is_a_communication_category():
    assert "cp_comm" in CATEGORIES and "cp_comm" in COMM_CATEGORIES


def test_microsteps_show_the_exchange_at_the_attention_operator():
    """The ring's K/V transfer is drawn under the FlashAttention kernel (hidden, its own row), with the
    bytes of the cost model: (cp-1) KV forward, 2 (cp-1) KV backward; FlashAttention's QK^T
    recomputation opens its backward."""
    s = long_context(dp=1, global_batch=32)
    ev = microstep_events(LLAMA_32K, s, A100, layer=0)
    mine = ev[ev["device"] == ev["device"].iloc[0]]
    cp = mine[mine["category"] == "cp_comm"]
    assert set(cp["operator"]) == {"flash_attn"} and set(cp["kind"]) == {"p2p"}
    kv = kv_local(LLAMA_32K, t=8, cp=4)
    assert cp[cp["phase"] == "fwd"]["bytes"].sum() == pytest.approx(3 * kv)
    assert cp[cp["phase"] == "bwd"]["bytes"].sum() == pytest.approx(6 * kv)
    hidden = cp[cp["hidden"]]
    assert len(hidden) == 2 and all(row.endswith(" · cp") for row in hidden["row"])
    attn = mine[(mine["operator"] == "flash_attn") & (mine["phase"] == "fwd") & (mine["category"] == "compute")]
    assert hidden[hidden["phase"] == "fwd"]["start_s"].iloc[0] == attn["start_s"].iloc[0]
    assert (mine[(mine["operator"] == "flash_attn") & (mine["category"] == "recompute")]["duration_s"] > 0).any()


def test_cli_cp_flags(capsys):
    code = main(["evaluate", "--model", "llama2-70b", "--cluster", "dgx-a100-80gb", "--seq-len", "32768",
                 "--cp", "4", "--tp", "8", "--pp", "4", "--gpus", "512", "--micro-batch", "1",
                 "--global-batch", "512", "--sequence-parallel", "--zero", "1", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["comm_bytes_per_device"]["cp_comm"] > 0
    assert main(["evaluate", "--model", "llama2-70b", "--cluster", "dgx-a100-80gb", "--cp", "4", "--tp", "8",
                 "--pp", "4", "--gpus", "100", "--cp-algo", "ring"]) == 2
    assert "not divisible by tp x cp x pp = 128" in capsys.readouterr().err


def test_superstep_timeline_draws_the_exposed_exchange_and_agrees_with_the_model():
    from explorer.timeline import superstep_events
    model = load_model("llama2-7b").with_seq_len(16384)
    s = Strategy(dp=1, tp=2, pp=2, cp=4, cp_algo="ulysses", micro_batch=1, global_batch=8, sequence_parallel=True)
    r = evaluate(model, s, A100)
    ev = superstep_events(model, s, A100, result=r)
    assert float(ev["end_s"].max()) == pytest.approx(r.iteration_time_s, rel=1e-9)
    drawn = ev[(ev["category"] == "cp_comm") & (ev["stage"] == r.critical_stage)]["duration_s"].sum()
    assert drawn == pytest.approx(r.breakdown_s["cp_comm"], rel=1e-9)


def test_the_search_space_has_cp_only_for_long_sequences():
    """cp is searched from 8k tokens on (Megatron-Core parallelism guide: CP for 8K+ sequences),
    over divisors with seq_len % 2cp == 0; shorter sequences keep the space they had: gpt3-175b on
    1024 GPUs at B = 1536 counts 6,209,280 raw points, as before context parallelism."""
    from explorer.search.space import enumerate_space
    long = enumerate_space(load_model("llama2-7b").with_seq_len(16384), 16, 16)
    assert sorted({f.cp for f in long.families}) == [1, 2, 4, 8, 16]
    assert all(f.dp * f.tp * f.cp * f.pp == 16 for f in long.families)
    assert long.kept + sum(long.pruned.values()) == long.total
    assert {f.cp for f in enumerate_space(load_model("llama2-7b"), 16, 16).families} == {1}
    # 6,209,280 before DualPipeV joined the registry (63,360 of its points: issue 25); 6,272,640 before Megatron's
    # first/last-stage layouts (27,840 points of the two interleaved shapes whose layers do not split evenly:
    # explorer/search/space.py layouts)
    assert enumerate_space(load_model("gpt3-175b"), 1024, 1536).total == 6_300_480


def test_the_search_prices_a_cp_strategy_as_evaluate_does():
    """The search's chain and objective (explorer.search.tables / objective) against evaluate()."""
    from explorer.hardware.cluster import BYTES_PER_ELEMENT
    from explorer.search.objective import Objective
    from explorer.search.tables import A, B, F, GS, PSI, W, Chain, node_stages, stage_sums
    model = LLAMA_32K
    for s in (long_context(), long_context(dp=2, cp=8, zero=0, recompute="full")):
        chain = Chain(model, A100, s, [s.micro_batch])
        stages = node_stages(model, s)
        sums = stage_sums(chain, chain.chain(tuple(s.split_of(i) for i in range(model.layers)), stages), stages,
                          s.pp)[:, :, 0]
        obj = Objective(A100, BYTES_PER_ELEMENT[s.dtype], chain.hw, s.dp, s.tp, s.pp, s.cp)
        time = float(obj.time(sums[F], sums[B], sums[PSI], sums[GS], s.micro_batches, s.chunks, s.zero,
                              s.overlap_dp, s.schedule, sums[W]))
        memory = float(obj.peak_memory(sums[PSI], sums[A], s.micro_batches, s.chunks, s.zero, s.schedule))
        r = evaluate(model, s, A100)
        assert time == pytest.approx(r.iteration_time_s, rel=1e-9)
        assert memory == pytest.approx(r.memory_bytes_per_device["total"], rel=1e-9)


def test_search_cli_fixes_cp_and_its_algorithm(capsys):
    code = main(["search", "--model", "llama2-7b", "--cluster", "dgx-a100-80gb", "--gpus", "8", "--global-batch",
                 "8", "--seq-len", "16384", "--cp", "2", "--cp-algo", "ulysses", "--top", "3", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["top"]
    assert all(c["strategy"]["cp"] == 2 and c["strategy"]["cp_algo"] == "ulysses" for c in out["top"])


def test_megatron_export_writes_cp_and_reads_it_back():
    from explorer.codegen import megatron_args, parse_megatron_args
    for algo, comm in (("ring", "p2p"), ("ulysses", "a2a")):
        model = LLAMA_32K if algo == "ring" else load_model("llama2-7b").with_seq_len(16384)
        s = long_context(cp_algo=algo) if algo == "ring" else \
            Strategy(dp=2, tp=2, pp=1, cp=4, cp_algo="ulysses", micro_batch=1, global_batch=8, sequence_parallel=True)
        text = megatron_args(model, s)
        assert f"--context-parallel-size {s.cp} " in text and f"--cp-comm-type {comm} " in text
        assert "--attention-backend flash" in text     # the kernel that was costed, pinned (issue 30)
        fields, back = parse_megatron_args(text)
        assert back == run_by(s, "megatron-lm") and fields["attention"] == "flash"


def test_megatron_bridge_llama3_70b_16k_recipe_fits_an_h100():
    """NVIDIA-NeMo/Megatron-Bridge recipes/llama/llama3_70b_16k.py: TP 8, PP 2, CP 2, sequence parallel,
    micro-batch 1, global batch 512, bf16, distributed optimizer (ZeRO-1 over dp x cp); 256 H100s.
    It fits 80 GB (about 40 GiB); the standard attention without CP would need several times the device."""
    model = load_model("llama3-70b").with_seq_len(16384)
    h100 = load_cluster("dgx-h100")
    s = Strategy(dp=8, tp=8, pp=2, cp=2, micro_batch=1, global_batch=512, sequence_parallel=True, zero=1)
    r = evaluate(model, s, h100)
    assert r.gpus == 256 and r.memory_bytes_per_device["total"] < h100.device.memory_bytes
    plain = evaluate(model.with_attention("standard"), s.with_(cp=1, dp=16), h100)
    assert plain.memory_bytes_per_device["total"] > 4 * h100.device.memory_bytes


def test_share_links_carry_cp_only_when_used():
    from explorer.io.share import decode, encode
    s = long_context(cp_algo="ring")
    params = encode(LLAMA_32K, A100, s)
    assert params["cp"] == "4" and params["cpa"] == "ring"
    back = decode(params)
    assert back.strategy == s and not back.messages
    assert "cp" not in encode(LLAMA_32K, A100, long_context(cp=1, dp=16))
    bad = decode({**params, "cpa": "tree"})
    assert any("link parameter 'cpa' must be one of ring, ulysses" in m for m in bad.messages)
