"""What FP8 recipes, bf16 Adam moments and per-module recomputation keep in memory (issue 26 item 3, issue 27
item 4): the numbers derived by hand from the cited sources (explorer/hardware/precision.py,
explorer/model/recompute.py), against evaluate()."""
from fractions import Fraction

import pytest

from explorer.cost.block import block_cost
from explorer.cost.evaluate import evaluate
from explorer.cost.numbers import hardware_numbers
from explorer.errors import ExplorerError
from explorer.hardware.precision import SAVED_INPUT_BYTES, WEIGHT_COPY_BYTES
from explorer.io.clusters import load_cluster
from explorer.io.models import load_model
from explorer.io.share import decode, encode
from explorer.io.strategies import strategy_from_dict, strategy_to_dict
from explorer.model import kernels as kn
from explorer.model.graph import build_blocks
from explorer.strategy import rules
from explorer.strategy.strategy import Strategy
from explorer.symbols import F, F_a
from framework_matrix import run_by

GiB = 2 ** 30
LLAMA70 = load_model("llama3-70b")          # h 8192, f 28672, s 8192, 80 layers, untied output layer
H100 = load_cluster("dgx-h100")
h, f, s, layers = 8192, 28672, 8192, 80
# one pipeline stage (1F1B keeps p - r = 1 micro-batch in flight), t = 8 with sequence parallelism, b = 1
ONE_STAGE = Strategy(dp=8, tp=8, pp=1, micro_batch=1, global_batch=64, sequence_parallel=True, zero=1)


B200 = load_cluster("dgx-b200")       # MXFP8 runs on Blackwell only (explorer.hardware.precision.RECIPE_HARDWARE)


def _memory(**changes) -> dict:
    """Bytes per device on 64 H100; an MXFP8 strategy on 64 B200 (the bytes kept do not depend on the device)."""
    cluster = B200 if changes.get("fp8_recipe") == "mxfp8" else H100
    return evaluate(LLAMA70, ONE_STAGE.with_(**changes), cluster, 64).memory_bytes_per_device


@pytest.mark.parametrize("recipe", ["delayed", "tensorwise", "blockwise", "mxfp8"])
def test_fp8_memory_is_below_bf16_by_what_the_recipe_keeps(recipe):
    """Llama 3 70B, t = 8 with SP, one stage, b = 1, ZeRO-1 over d = 8.

    Activations: Transformer Engine saves each linear's input for its weight gradient in FP8 (linear.py
    _linear_forward: columnwise FP8 data only), at SAVED_INPUT_BYTES q per element instead of 2: per layer the
    inputs of QKV (h), the output projection (h), FC1 (h) and FC2 (f), each s b / t elements on a device (SP
    shards the norm outputs, TP the attention output and the SwiGLU output), so
        delta A = layers x s b / t x (3h + f) x (2 - q)
                = 80 x 1024 x 53,248 x (2 - q) B = 4.0625 GiB x (2 - q):
    4.0625 GiB per-tensor (q = 1), 3.935 GiB MXFP8 and blockwise (q = 33/32). The embedding keeps nothing and
    the output layer (Megatron's ColumnParallelLinear, not TE) keeps its input in bf16: no other change.
    Weights: TE caches an FP8 copy of each weight, row- and column-wise (WEIGHT_COPY_BYTES w: 2 B per-tensor,
    2 x 33/32 MXFP8, 2 (1 + 4/128^2) blockwise) beside the 2 B bf16 weight, so params grow by (2 + w) / 2
    (counted over every weight of the stage: an upper bound by the embedding's, output layer's and norms'
    copies, which stay bf16). Gradients and the optimizer's fp32 states do not change."""
    bf16, fp8 = _memory(dtype="bf16"), _memory(dtype="fp8", fp8_recipe=recipe)
    q, w = SAVED_INPUT_BYTES[recipe], WEIGHT_COPY_BYTES[recipe]
    saved = layers * s * 1 // 8 * (3 * h + f) * (2 - q)
    assert layers * s // 8 * (3 * h + f) == 4.0625 * GiB
    assert bf16["activations"] - fp8["activations"] == pytest.approx(float(saved), rel=1e-12)
    assert fp8["params"] / bf16["params"] == pytest.approx(float((2 + w) / 2), rel=1e-12)
    assert (fp8["grads"], fp8["optimizer"]) == (bf16["grads"], bf16["optimizer"])
    copies = bf16["params"] * float(w) / 2
    assert fp8["total"] == pytest.approx(bf16["total"] - float(saved) + copies, rel=1e-12)


def test_the_issue_example_saves_about_a_fifth_of_the_activations():
    """Issue 26: Llama 3 70B t4 p8 v5 SP on 64 H100 keeps about 49 GiB of activations in bf16, about 9.6 GiB
    fewer in FP8. Stage 0 of the interleaved schedule holds 10 layers and p (1 + (p - 1)/(p v)) = 9.4
    micro-batches' worth of them (Narayanan et al. SC'21 Sec 2.2.2): 9.4 x 10 x s b / 4 x (3h + f) B =
    9.547 GiB."""
    base = Strategy(dp=2, tp=4, pp=8, micro_batch=1, global_batch=128, schedule="interleaved", chunks=5,
                    sequence_parallel=True, overlap_tp=True, overlap_dp=True, zero=1)
    bf16 = evaluate(LLAMA70, base, H100, 64).memory_bytes_per_device["activations"]
    fp8 = evaluate(LLAMA70, base.with_(dtype="fp8"), H100, 64).memory_bytes_per_device["activations"]
    assert bf16 / GiB == pytest.approx(49.25, abs=0.01)
    assert (bf16 - fp8) == pytest.approx(9.4 * 10 * s // 4 * (3 * h + f), rel=1e-12)


def test_output_layer_and_router_stay_bf16_under_fp8():
    """Megatron runs the output layer and the MoE router outside Transformer Engine: their GEMMs at the 16-bit
    rate F_a eta_a, no FP8 quantisation kernels; the layers' linears at the FP8 peak F with their casts."""
    blocks = build_blocks(LLAMA70)
    head = block_cost(blocks[-1], "megatron", (), True, "none", "seq", host=("none", "mxfp8"))
    layer = block_cost(blocks[1], "megatron", (), True, "none", "seq", host=("none", "mxfp8"))
    logits = next(st for st in head.steps if st.op == "logits")
    qkv = next(st for st in layer.steps if st.op == "qkv")
    assert F_a in logits.fwd_s.free_symbols and F not in logits.fwd_s.free_symbols
    assert F in qkv.fwd_s.free_symbols and F_a not in qkv.fwd_s.free_symbols
    recipe = kn.Recipe(fp8="mxfp8")
    logits_op = next(op for op in blocks[-1].ops if op.name == "logits")
    qkv_op = next(op for op in blocks[1].ops if op.name == "qkv")
    assert kn.launches(logits_op, recipe) == (1, 2) and kn.launches(qkv_op, recipe) == (2, 4)
    router = next(op for b in build_blocks(load_model("qwen3-30b-a3b")) for op in b.ops if op.name == "router")
    assert kn.launches(router, recipe) == kn.launches(router, kn.Recipe())


@pytest.mark.parametrize("dtype, recipe, states, update", [
    ("bf16", "delayed", 6, 18),       # TE keeps the fp32 master weights' 16-bit remainders: 2 + 2 + 2
    ("fp8", "delayed", 6, 18),        # delayed scaling: TE still manages the master weights
    ("fp8", "mxfp8", 8, 22),          # Megatron keeps the fp32 master copy: 4 + 2 + 2
])
def test_bf16_adam_moments(dtype, recipe, states, update):
    """Megatron's precision-aware optimizer with --exp-avg-dtype/--exp-avg-sq-dtype bf16 (precision.py): the
    optimizer keeps `states` of ZeRO's K = 12 B per parameter, and its step moves `update` of K_opt = 30 B (the
    moments 4 x 2 B fewer, the master weight's remainder 2 x 2 B fewer)."""
    base = ONE_STAGE.with_(dtype=dtype, fp8_recipe=recipe)
    cluster = B200 if recipe == "mxfp8" else H100          # MXFP8 runs on Blackwell only
    fp32 = evaluate(LLAMA70, base, cluster, 64)
    bf16 = evaluate(LLAMA70, base.with_(adam_moments="bf16"), cluster, 64)
    got = bf16.memory_bytes_per_device["optimizer"] / fp32.memory_bytes_per_device["optimizer"]
    assert got == pytest.approx(states / 12, rel=1e-12)
    # the step: (K_opt - saved) Psi / (d W_hbm) (+ the gradient-norm all-reduce, alike in both); Psi / d = the
    # fp32 run's optimizer bytes / 12
    per_device = fp32.memory_bytes_per_device["optimizer"] / 12
    faster = fp32.breakdown_s["optimizer"] - bf16.breakdown_s["optimizer"]
    assert faster == pytest.approx((30 - update) * per_device / hardware_numbers(cluster, dtype)["W"], rel=1e-9)


def test_recompute_modules_drop_what_megatron_recomputes():
    """--recompute-modules (explorer/model/recompute.py), one stage of Llama 3 70B, t = 8 with SP, bf16:
    layernorm discards the two norms' outputs -- the saved inputs of QKV and FC1, s b h / t each at 2 B:
        80 x 2 x 2 x 1024 x 8192 B = 2.5 GiB;
    mlp drops the dense MLP's saved tensors -- FC1's input (h), the SwiGLU input (2f) and FC2's input (f):
        80 x 2 x 1024 x (h + 3f) B = 15.94 GiB;
    each recomputes its forward (more recompute seconds), the default (core_attn) changes nothing under
    FlashAttention."""
    none = evaluate(LLAMA70, ONE_STAGE, H100, 64)
    for modules, saved in ((("layernorm",), 80 * 2 * 2 * 1024 * h), (("mlp",), 80 * 2 * 1024 * (h + 3 * f))):
        r = evaluate(LLAMA70, ONE_STAGE.with_(recompute="selective", recompute_modules=modules), H100, 64)
        drop = none.memory_bytes_per_device["activations"] - r.memory_bytes_per_device["activations"]
        assert drop == pytest.approx(saved, rel=1e-12), modules
        assert r.breakdown_s["recompute"] > none.breakdown_s["recompute"]
    default = evaluate(LLAMA70, ONE_STAGE.with_(recompute="selective"), H100, 64)
    assert default.memory_bytes_per_device == none.memory_bytes_per_device


def test_bad_options_are_one_line_refusals():
    for bad, needle in (({"fp8_recipe": "mxfp4"}, "fp8_recipe 'mxfp4' is unknown"),
                        ({"fp8_recipe": "mxfp8"}, "needs dtype fp8"),
                        ({"adam_moments": "bf16"}, "ZeRO >= 1"),
                        ({"adam_moments": "fp8"}, "adam_moments 'fp8' is unknown"),
                        ({"recompute_modules": ("moe",)}, "does not model")):
        with pytest.raises(ExplorerError, match=needle) as err:
            Strategy(**bad)
        assert "\n" not in str(err.value)
    selective = Strategy(recompute="selective")
    for model, changes, needle in (
            (LLAMA70, {"recompute_modules": ("mla_up_proj",)}, "multi-latent attention"),
            (LLAMA70, {"recompute_modules": ("moe_act",)}, "need a model with experts"),
            (load_model("mixtral-8x7b"), {"recompute_modules": ("mla_up_proj",)}, "multi-latent attention"),
            (load_model("mixtral-8x7b"), {"recompute_modules": ("mlp",)}, "every layer of mixtral-8x7b has experts"),
            (load_model("deepseek-v3"), {"recompute_modules": ("moe_act",), "dtype": "fp8"}, "Delayed scaling")):
        with pytest.raises(ExplorerError, match=needle):
            rules.check(model, selective.with_(**changes))


def test_options_travel_in_links_files_and_megatron_flags():
    from explorer.codegen import export
    from explorer.codegen.imports import import_config
    strategy = Strategy(dp=2, tp=4, pp=8, micro_batch=1, global_batch=128, schedule="interleaved", chunks=5,
                        sequence_parallel=True, overlap_tp=True, overlap_dp=True,
                        dtype="fp8", fp8_recipe="tensorwise", zero=1, adam_moments="bf16", recompute="selective",
                        recompute_modules=("mlp", "layernorm"))
    assert strategy.recompute_modules == ("layernorm", "mlp")          # one spelling per set
    assert strategy_from_dict(strategy_to_dict(strategy)) == strategy
    shared = decode(encode(LLAMA70, H100, strategy))
    assert (shared.strategy, shared.messages) == (strategy, [])
    assert "rcm" in decode({**encode(LLAMA70, H100, strategy), "rcm": "mlp,eval"}).messages[0]
    text = export("megatron", LLAMA70, strategy, H100)
    assert "--fp8-recipe tensorwise" in text and "--exp-avg-sq-dtype bf16" in text
    assert "--recompute-modules layernorm mlp" in text
    assert import_config(text, "megatron", world_size=64).strategy == run_by(strategy, "megatron-lm")
    recipe = export("megatron-bridge", LLAMA70, strategy, H100)
    assert "bf16_with_fp8_current_scaling_mixed" in recipe and "exp_avg_dtype = torch.bfloat16" in recipe
    assert import_config(recipe, "megatron-bridge").strategy == run_by(strategy, "megatron-bridge")
    for framework in ("deepspeed", "mindspore"):
        with pytest.raises(ExplorerError, match="Adam moments|fp8"):
            export(framework, LLAMA70, strategy.with_(dtype="bf16", fp8_recipe="delayed", tp=1, pp=1, dp=64,
                                                      chunks=1, schedule="1f1b", sequence_parallel=False,
                                                      overlap_tp=False, recompute="none"), H100)


def test_the_search_keeps_the_options_and_prunes_what_they_forbid():
    """bf16 moments need the distributed optimizer: the search drops its ZeRO-0 points and prices the rest's
    memory as evaluate() does."""
    from explorer.search import search
    model = load_model("llama2-7b")
    cluster = load_cluster("dgx-a100-80gb")
    result = search(model, cluster, 8, 64, top=3, refine_top=1, dtype="bf16", adam_moments="bf16",
                    recompute_modules=("mlp",))
    assert result.pruned.get("bf16 Adam moments without the distributed optimizer", 0) > 0
    for cand in result.top:
        assert cand.strategy.adam_moments == "bf16" and cand.strategy.zero >= 1
        assert cand.strategy.recompute_modules == (("mlp",) if cand.strategy.recompute == "selective" else ())
        again = evaluate(model, cand.strategy, cluster, 8).memory_bytes_per_device["total"]
        assert cand.peak_memory_bytes == pytest.approx(again, rel=1e-9)
    assert Fraction(1) == SAVED_INPUT_BYTES["delayed"]
