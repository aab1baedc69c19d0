"""FlashAttention (Dao et al. NeurIPS 2022; FlashAttention-2, Dao 2023) as an attention implementation.

Korthikanti et al. 2022 (MLSys'23) Table 2 counts sbh(34 + 5as/h) bytes per layer without
parallelism; the 5as^2b are the softmax output (2as^2b), the dropout mask (as^2b) and the dropout
output (2as^2b). FlashAttention keeps none of them -- only Q, K, V, the output and the fp32
logsumexp of each query row (FlashAttention-2 Algorithm 1, output L) -- and recomputes S = QK^T in
its backward: FlashAttention-2 Sec 4.1, backward FLOPs = 2.5 x forward ("because of recomputation").
"""
import pytest
import sympy as sp

from explorer import Strategy, evaluate, load_cluster, load_model
from explorer.cost import layouts as lay
from explorer.cost.block import block_cost
from explorer.errors import ExplorerError
from explorer.io.models import model_from_dict
from explorer.model.graph import build_blocks
from explorer.symbols import W_hbm, a, a_kv, b, beta, f, h, s, t

LSE = 4 * a * s * b          # fp32 logsumexp per query row and head, kept by FlashAttention


def _layer(model, degree_preset="megatron", sp_=False, recompute="none"):
    block = next(x for x in build_blocks(model) if x.kind == "layer")
    return block, block_cost(block, degree_preset, (), sp_, recompute, lay.R)


@pytest.mark.parametrize("preset,divisor", [("replicated", 1), ("megatron", t)])
def test_flash_removes_exactly_korthikantis_5as2b(preset, divisor):
    """GPT layer (with attention dropout): standard minus flash = (5as^2b - the logsumexp) / t."""
    gpt = load_model("gpt3-175b")
    _, std = _layer(gpt, preset)
    _, fl = _layer(gpt.with_attention("flash"), preset)
    diff = sp.simplify((std.act_bytes - fl.act_bytes).subs(beta, 2))
    assert sp.simplify(diff - (5 * a * s ** 2 * b - LSE) / divisor) == 0


def test_flash_layer_is_korthikanti_table2_without_the_s2_term():
    """No parallelism: sbh(34 + 5as/h) becomes 34sbh (+ the 4abs logsumexp)."""
    _, fl = _layer(load_model("gpt3-175b").with_attention("flash"), "replicated")
    gpt = {beta: 2, f: 4 * h, a_kv: a}       # GPT: 16-bit, f = 4h, no grouped-query attention
    assert sp.simplify(fl.act_bytes.subs(gpt) - (34 * s * b * h + LSE)) == 0
    _, std = _layer(load_model("gpt3-175b"), "replicated")
    assert sp.simplify(std.act_bytes.subs(gpt) - s * b * h * (34 + 5 * a * s / h)) == 0


def test_no_s_squared_tensor_is_kept_and_the_kernel_is_compute_bound():
    block, fl = _layer(load_model("llama2-7b"), "megatron", True)
    assert sp.degree(sp.expand(fl.act_bytes), s) == 1                 # no s^2 term left
    step = next(x for x in fl.steps if x.op == "flash_attn")
    assert W_hbm not in step.fwd_s.free_symbols and W_hbm not in step.bwd_s.free_symbols
    assert [op.name for op in block.ops if op.kind == "attention"] == ["flash_attn"]


def test_with_flash_off_the_s2_terms_come_back():
    """llama2-70b at 32k, t=8, p=4, SP: the standard core keeps 2as^2b/t per layer (no dropout, E4) --
    stage 0 (p micro-batches in flight under 1F1B, l/p layers) grows by exactly that, minus the
    logsumexp FlashAttention keeps: over 80 GB (FlashAttention alone does not fit either at 32k:
    context parallelism does, tests/test_context_parallel.py)."""
    model = load_model("llama2-70b").with_seq_len(32768)
    assert model.attention == "flash"
    strategy = Strategy(dp=2, tp=8, pp=4, micro_batch=1, global_batch=64, sequence_parallel=True)
    cluster = load_cluster("dgx-a100-80gb")
    flash = evaluate(model, strategy, cluster)
    std = evaluate(model.with_attention("standard"), strategy, cluster)
    S, A, T, P, L = 32768, 64, 8, 4, 80
    per_layer = (2 * A * S * S * 1 - 4 * A * S * 1) / T
    grown = std.memory_by_stage[0]["activations"] - flash.memory_by_stage[0]["activations"]
    assert grown == pytest.approx(P * (L // P) * per_layer, rel=1e-12)
    assert std.memory_bytes_per_device["total"] > 2 * flash.memory_bytes_per_device["total"]


def test_recomputation_counts_in_hardware_not_model_flops():
    """FlashAttention redoes QK^T in its backward: 2bs^2h per layer per micro-batch, hardware FLOPs only."""
    model, cluster = load_model("llama2-7b"), load_cluster("dgx-a100-80gb")
    strategy = Strategy(dp=4, tp=2, pp=1, micro_batch=1, global_batch=16)
    flash = evaluate(model, strategy, cluster)
    std = evaluate(model.with_attention("standard"), strategy, cluster)
    assert flash.model_flops_per_iteration == pytest.approx(std.model_flops_per_iteration, rel=1e-12)
    S, H, L, B = model.seq_len, model.hidden, model.layers, 16
    extra = flash.hardware_flops_per_iteration - flash.model_flops_per_iteration
    assert extra == pytest.approx(B * L * 2 * S * S * H, rel=1e-12)
    assert std.hardware_flops_per_iteration == std.model_flops_per_iteration
    assert flash.breakdown_s["recompute"] > 0 == std.breakdown_s["recompute"]
    assert sum(flash.breakdown_s.values()) == pytest.approx(flash.iteration_time_s, rel=1e-12)


def test_defaults_flash_for_llama_standard_otherwise():
    assert all(load_model(n).attention == "flash"
               for n in ("llama2-7b", "llama2-70b", "llama3-8b", "llama3-70b", "llama3.1-405b"))
    assert load_model("gpt3-175b").attention == "standard" and load_model("bert-large").attention == "standard"
    hf = model_from_dict({"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 64,
                          "num_attention_heads": 4, "max_position_embeddings": 128, "vocab_size": 100}, "x")
    assert hf.attention == "flash"
    assert model_from_dict({"name": "y", "family": "gpt", "layers": 2, "hidden": 64, "heads": 4, "seq_len": 128, "vocab": 100,
                            "attention": "flash"}).attention == "flash"


def test_unknown_attention_is_refused_in_one_line():
    with pytest.raises(ExplorerError, match="attention.*'paged'.*standard, flash"):
        load_model("gpt3-175b").with_attention("paged")


def test_causal_kernels_run_half_the_blocks():
    """FlashAttention-2 Sec 3.1.1: with the causal mask the kernel skips every 128 x 128 block above the
    diagonal, n(n+1)/2 of n^2 blocks (n = s/128): LLaMA's flash_attn step takes (1/2 + 64/s) of the time
    of the same FLOPs unmasked; BERT (bidirectional) runs them all; model FLOPs keep the full count."""
    from explorer.symbols import ATTENTION_KERNEL, F_a, L_t, eta_a, g_t, phi, t_launch
    block, fl = _layer(load_model("llama2-7b"))
    step = next(x for x in fl.steps if x.op == "flash_attn")
    op = next(o for o in block.ops if o.name == "flash_attn")
    vals = {b: 1, s: 4096, h: 4096, a: 32, a_kv: 32, t: 8, F_a: 312e12, eta_a: 0.75, phi: 0, t_launch: 0,
            g_t: 1e-11, L_t: 1e-6}
    # the kernel's efficiency curve held flat at 0.75 (explorer/hardware/attention.py: flat)
    vals.update(zip(ATTENTION_KERNEL, (0.75, 0.75, 0, 0, 0, 0, 1)))
    full = float((op.flops_fwd / t).subs(vals)) / (312e12 * 0.75)
    assert float(step.fwd_s.subs(vals)) == pytest.approx(full * (0.5 + 64 / 4096), rel=1e-12)
    bert = next(o for o in next(x for x in build_blocks(load_model("bert-large").with_attention("flash"))
                                if x.kind == "layer").ops if o.name == "flash_attn")
    assert bert.executed == 1 and op.executed != 1
    std = load_model("llama2-7b").with_attention("standard")
    strategy = Strategy(dp=4, tp=2, pp=1, micro_batch=1, global_batch=16)
    cluster = load_cluster("dgx-a100-80gb")
    assert evaluate(load_model("llama2-7b"), strategy, cluster).model_flops_per_iteration == \
        pytest.approx(evaluate(std, strategy, cluster).model_flops_per_iteration, rel=1e-12)


def test_fp8_training_runs_the_attention_core_at_the_bf16_peak():
    """Transformer Engine's FP8 recipes cast only the GEMMs' operands (fp8_dot_product_attention off): the
    attention kernel's time is the same under fp8 and bf16; the linear layers' is not."""
    model, cluster = load_model("llama3-8b"), load_cluster("dgx-h100")
    strategy = Strategy(dp=8, tp=1, pp=1, micro_batch=1, global_batch=64)
    from explorer.cost.numbers import hardware_numbers
    hw8, hw16 = hardware_numbers(cluster, "fp8"), hardware_numbers(cluster, "bf16")
    assert (hw8["F_a"], hw8["eta_a"]) == (hw16["F"], hw16["eta"]) and hw8["F"] > hw16["F"]
    r8 = evaluate(model, strategy.with_(dtype="fp8"), cluster)
    r16 = evaluate(model, strategy, cluster)
    assert r8.iteration_time_s < r16.iteration_time_s
