"""Fidelity fixes (issue "Fidelity: ... ten measured errors"), each with the issue's number and its source.

Done here: E2 (ZeRO-2/3 gradient reduce-scatter per micro-batch), E4 (softmax output kept once
without dropout), E6 (full recomputation keeps the sequence-parallel layer input). The others
(E1 hierarchical collectives, E3, E5, E7-E10, FlashAttention, context parallelism, overlaps) are
open.
"""
import pytest

from explorer import Strategy, evaluate, load_cluster, load_model

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
