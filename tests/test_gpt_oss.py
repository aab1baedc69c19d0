"""gpt-oss' own attention and biases (issue 27, GPT-OSS 120B predicted too fast): the sliding window of every
other layer, the learnable attention sinks (which select the kernel), and the linear biases -- above all the
experts' second bias, which Megatron-Core adds outside the grouped GEMM one local expert at a time."""
from __future__ import annotations

from dataclasses import replace

import pytest

from explorer.cost.evaluate import evaluate
from explorer.cost.numbers import hardware_numbers
from explorer.errors import ExplorerError
from explorer.hardware.attention import kernel_for
from explorer.io.clusters import load_cluster
from explorer.io.models import load_model, model_from_dict
from explorer.model import kernels as kn
from explorer.model.graph.moe import moe_blocks, window_keys
from explorer.strategy.strategy import Strategy
from explorer.symbols import b, beta, h, s


@pytest.fixture(scope="module")
def oss():
    return load_model("gpt-oss-120b")


def test_the_preset_carries_the_window_the_sinks_and_the_biases(oss):
    assert (oss.sliding_window_tokens, oss.window_attn_skip_freq, oss.linear_bias, oss.attention_sinks) == \
        (128, 2, True, True)
    # Megatron-Core is_layer_window_attention: layer_number % 2 != 0, 1-based: the first layer is windowed
    assert [oss.is_window_layer(i) for i in range(4)] == [True, False, True, False]
    assert sum(oss.is_window_layer(i) for i in range(oss.layers)) == 18


def test_a_window_layer_is_its_own_block_running_the_band_of_key_blocks(oss):
    blocks = moe_blocks(oss)
    windowed, full = blocks[1], blocks[2]
    assert windowed.key != full.key and blocks[3].key == windowed.key
    attn = {blk.key: next(op for op in blk.ops if op.name == "flash_attn") for blk in (windowed, full)}
    w, f = attn[windowed.key], attn[full.key]
    # 128 keys each query attends (window_size (127, 0)) span two 128-wide key blocks per query block
    assert window_keys(128) == 256 and window_keys(129) == 256 and window_keys(130) == 384 and window_keys(1) == 128
    assert float(w.executed.subs(s, 4096)) == pytest.approx(256 / 4096)
    assert float(f.executed.subs(s, 4096)) == pytest.approx((4096 + 128) / (2 * 4096))
    assert w.window == 256 and f.window == 0


def test_the_window_makes_a_layer_cheaper_but_not_free_on_the_published_cudnn_curve(oss):
    """On H100 the kernel's curve (cuDNN, FlashAttention-3 paper's points) prices the band as a call of 256 keys:
    less efficient than a long causal call, so the windowed layer's attention costs more than 256/2112 of it."""
    from explorer.timeline.microstep import microstep_events
    strategy = Strategy(dp=8, micro_batch=1, global_batch=8, ep=8, expert_tp=1)
    cluster = load_cluster("dgx-h100")

    def attention_s(layer):
        df = microstep_events(oss, strategy, cluster, 8, layer=layer)
        return float(df[df.operator == "flash_attn"].duration_s.sum())
    windowed, full = attention_s(0), attention_s(1)
    assert 256 / 2112 * full < windowed < 0.5 * full


def test_sinks_rule_out_flashattention_and_keep_cudnn():
    """Transformer Engine's get_attention_backend: softmax_type != vanilla disables FlashAttention; cuDNN's
    fused attention (9.13.1+) runs the learnable softmax. A100's published kernel is FlashAttention-2's, so a
    sink model there falls back to the flat curve; H100's is cuDNN's and stays."""
    assert kernel_for("A100-SXM4-80GB", "bf16")[0] == "fa2-a100"
    assert kernel_for("A100-SXM4-80GB", "bf16", "learnable") is None
    assert kernel_for("H100-SXM", "bf16", "learnable")[0] == "cudnn-h100-bf16"
    a100 = load_cluster("dgx-a100-80gb")
    sinks = hardware_numbers(a100, "bf16", "learnable")["attention"]
    assert sinks["n_f"] == 0 and sinks["eta_f"] == pytest.approx(a100.efficiency.gemm_max_for("bf16"))
    assert hardware_numbers(a100, "bf16")["attention"]["n_f"] > 0


def test_the_experts_second_bias_is_sized_and_launched_per_local_expert(oss):
    layer = moe_blocks(oss)[1]
    names = [op.name for op in layer.ops]
    assert names.index("expert_fc2") + 1 == names.index("expert_bias") and "proj_bias" in names
    bias = layer.ops[names.index("expert_bias")]
    k = oss.experts_per_token
    assert sp_equal(bias.mem_bytes_fwd, 6 * beta * b * s * k * h) and bias.expert
    recipe = kn.Recipe(local_experts=16)
    assert kn.launches(bias, recipe) == (33, 82)
    assert kn.launches(bias, kn.Recipe(local_experts=2)) == (5, 12)
    assert kn.eager(bias, "layer", kn.Recipe(graphs="full", local_experts=16)) == (0, 0)


def sp_equal(x, y) -> bool:
    return bool((x - y).expand() == 0)


def test_the_biases_bind_the_host_of_the_h100_rows(oss):
    """64 H100s, p 4, e 8 (16 local experts), b = 1: the host issues the 16 experts' bias kernels one by one;
    without the biases the same run is more than 10 % faster."""
    strategy = Strategy(dp=16, pp=4, micro_batch=1, global_batch=1280, zero=1, ep=8, expert_tp=1,
                        grad_dtype="model", overlap_dp=True)
    cluster = load_cluster("dgx-h100")
    with_bias = evaluate(oss, strategy, cluster, 64)
    without = evaluate(replace(oss, linear_bias=False), strategy, cluster, 64)
    assert with_bias.iteration_time_s > 1.10 * without.iteration_time_s
    assert with_bias.extra["host_exposed_s"] > without.extra["host_exposed_s"]


def test_huggingface_gpt_oss_config_reads_window_sinks_and_biases():
    cfg = {"model_type": "gpt_oss", "num_hidden_layers": 4, "hidden_size": 2880, "num_attention_heads": 64,
           "num_key_value_heads": 8, "head_dim": 64, "intermediate_size": 2880, "num_local_experts": 128,
           "num_experts_per_tok": 4, "vocab_size": 201088, "max_position_embeddings": 131072, "sliding_window": 128,
           "layer_types": ["sliding_attention", "full_attention"] * 2}
    m = model_from_dict(cfg, "oss", 4096)
    assert (m.sliding_window_tokens, m.window_attn_skip_freq, m.linear_bias, m.attention_sinks) == (128, 2, True, True)
    cfg["layer_types"] = ["sliding_attention", "full_attention", "full_attention", "sliding_attention"]
    with pytest.raises(ExplorerError, match="every k-th layer"):
        model_from_dict(cfg, "oss", 4096)


@pytest.mark.parametrize("change,message", [
    ({"sliding_window_tokens": 8192}, "longer than the sequence"),
    ({"sliding_window_tokens": 0}, "needs 'sliding_window_tokens'"),
    ({"linear_bias": 1}, "must be true or false"),
    ({"attention_sinks": "yes"}, "must be true or false"),
    ({"family": "gpt"}, "llama family"),
])
def test_bad_window_and_bias_fields_say_one_line(oss, change, message):
    with pytest.raises(ExplorerError, match=message):
        replace(oss, **change)


def test_export_writes_the_window_the_sinks_and_the_biases(oss):
    from explorer.codegen.megatron import megatron_args
    strategy = Strategy(dp=16, pp=4, micro_batch=1, global_batch=1280, zero=1, ep=8, expert_tp=1)
    text = megatron_args(oss, strategy)
    assert "--window-size 127,0" in text and "--window-attn-skip-freq 2" in text
    assert "--softmax-type learnable" in text and "--attention-backend fused" in text
    assert "--disable-bias-linear" not in text


@pytest.mark.parametrize("change, what", [({}, "sliding-window attention"),
                                           ({"sliding_window_tokens": 0, "window_attn_skip_freq": 0},
                                            "learnable attention sinks")])
def test_ring_context_parallelism_is_refused_for_a_window_or_sinks(oss, change, what):
    """Transformer Engine's context-parallel attention asserts a sliding window only with cp_comm_type a2a or
    all_gather and a sink softmax only with a2a (attn_forward_func_with_cp): the ring (p2p) is refused in one line
    naming what the model has; Ulysses (a2a) still evaluates."""
    model = replace(oss, layers=2, **change)
    ring = Strategy(dp=4, cp=2, cp_algo="ring", ep=4, global_batch=8, micro_batch=1)
    with pytest.raises(ExplorerError, match=what):
        evaluate(model, ring, load_cluster("dgx-h100"))
    assert evaluate(model, ring.with_(cp_algo="ulysses"), load_cluster("dgx-h100")).iteration_time_s > 0


def test_the_experts_clamp_is_its_own_eager_pass_inside_the_moe_act_checkpoint(oss):
    """gpt-oss' clamp of the GLU halves (Megatron-Core fused_bias_geglu.py weighted_bias_quick_geglu_impl: two
    clamps and torch.cat outside the compiled activation): 4 beta bytes per element of the b s k x 2 f_e GEMM
    output forward, three kernels forward and nine backward; under moe_act recomputation the clamp and the
    activation run again in the backward, the experts' second bias (added after fc2, outside the checkpoint) not."""
    from explorer.model import recompute as rc
    layer = moe_blocks(oss)[1]
    names = [op.name for op in layer.ops]
    assert names[names.index("expert_fc1"):names.index("expert_fc2") + 1] == \
        ["expert_fc1", "expert_clamp", "expert_act", "expert_fc2"]
    clamp = layer.ops[names.index("expert_clamp")]
    assert sp_equal(clamp.mem_bytes_fwd, 4 * beta * b * s * oss.experts_per_token * 2 * oss.moe_ffn_hidden)
    assert kn.launches(clamp, kn.Recipe(local_experts=16)) == (3, 9)
    modules = ("layernorm", "moe_act")
    redone = {op.name for op in layer.ops if op.expert and rc.recomputed(op, modules)}
    assert redone == {"expert_clamp", "expert_act"}
    # the activation's saved input (the clamped copy) and fc2's (the activation's output) are not kept; the
    # clamp keeps the GEMM's output, the checkpoint's input
    ops = dict(zip(names, layer.ops))
    prev = dict(zip(names[1:], layer.ops))
    assert not rc.kept(ops["expert_act"], prev["expert_act"], ops["expert_act"].act[0], modules)
    assert not rc.kept(ops["expert_fc2"], prev["expert_fc2"], ops["expert_fc2"].act[0], modules)
    assert rc.kept(clamp, prev["expert_clamp"], clamp.act[0], modules)
    plain = moe_blocks(replace(oss, glu_clamp=0.0))[1]
    assert "expert_clamp" not in [op.name for op in plain.ops] and plain.key != layer.key


def test_a_fused_dispatchers_fp32_weights_make_the_second_bias_fp32(oss):
    """HybridEP and DeepEP hand the experts fp32 routing weights (Megatron-Core token_dispatcher.py: 'HybridEP only
    supports float32 probs'): the bias add t + b p and its concatenation run in fp32, 24 + 2 beta = 28 bytes per
    element forward against 6 beta = 12 with the all-to-all dispatcher's 16-bit weights."""
    from explorer.cost import moe_terms as moe
    from explorer.symbols import W_hbm
    bias = next(op for op in moe_blocks(oss)[1].ops if op.name == "expert_bias")
    fwd, bwd = moe.fp32_bias_time(bias, 1)
    at = {b: 1, s: 4096, h: 2880, beta: 2}
    elements = 4096 * oss.experts_per_token * 2880
    assert float((fwd * W_hbm).subs(at)) == pytest.approx(16 * elements)
    assert float((bwd / fwd).subs(at)) == pytest.approx(1.5)
    assert float((fwd * W_hbm).subs({**at, beta: 4})) == 0          # fp32 training: no cast back, nothing more
    assert moe.fp32_bias_time(next(op for op in moe_blocks(oss)[1].ops if op.name == "expert_fc2"), 1) == (0, 0)
    from explorer.cost.block import block_cost
    layer = moe_blocks(oss)[1]
    step = {flex: next(x for x in block_cost(layer, "megatron", (), False, "none", "replicated",
                                             host=tuple(kn.Recipe(local_experts=16, flex=flex))).steps
                       if x.op == "expert_bias") for flex in (False, True)}
    assert sp_equal(step[True].fwd_s - step[False].fwd_s, fwd) and sp_equal(step[True].bwd_s - step[False].bwd_s, bwd)


def test_the_clamp_is_read_from_huggingface_and_megatron_bridge_configs(oss):
    from explorer.codegen import export
    from explorer.codegen.imports import import_config
    cfg = {"model_type": "gpt_oss", "num_hidden_layers": 4, "hidden_size": 2880, "num_attention_heads": 64,
           "num_key_value_heads": 8, "head_dim": 64, "intermediate_size": 2880, "num_local_experts": 128,
           "num_experts_per_tok": 4, "vocab_size": 201088, "max_position_embeddings": 131072, "swiglu_limit": 7.0}
    assert model_from_dict(cfg, "oss", 4096).glu_clamp == 7.0
    strategy = Strategy(dp=64, micro_batch=4, global_batch=1280, ep=8, expert_tp=1, framework="megatron-bridge")
    text = export("megatron-bridge", oss, strategy, load_cluster("dgx-b200"))
    assert "activation_func_clamp_value = 7.0" in text
    assert import_config(text, "megatron-bridge").model["glu_clamp"] == 7.0
    lm = export("megatron", oss, strategy.with_(framework="megatron-lm"), load_cluster("dgx-b200"))
    assert "--activation-func-clamp-value 7.0" in lm and import_config(lm, "megatron").model["glu_clamp"] == 7.0
    with pytest.raises(ExplorerError, match="--activation-func-clamp-value"):
        import_config(lm.replace("--activation-func-clamp-value 7.0", "--activation-func-clamp-value nan"), "megatron")
    with pytest.raises(ExplorerError, match="activation_func_clamp_value must be a number > 0"):
        import_config(text.replace("activation_func_clamp_value = 7.0", "activation_func_clamp_value = True"),
                      "megatron-bridge")
    with pytest.raises(ExplorerError, match="needs 'experts'"):
        replace(oss, experts=0, experts_per_token=0, moe_ffn_hidden=0, glu_clamp=7.0)


def test_yarn_rope_runs_unfused_with_its_counted_kernels_and_bytes(oss):
    """YaRN's concentration factor (0.1 ln 32 + 1 = 1.347 at gpt-oss' 32) sends Megatron-Core's RoPE down the
    unfused _apply_rotary_pos_emb_bshd (rope_utils.py: 'mscale ... is not supported by TE's fused RoPE'): on Q and K,
    12 kernels each forward and 7 backward, 12 beta and 14 beta bytes per rotated element (torch's dispatcher on
    CPU over that function); the fused pair flash_attn's count holds does not run."""
    assert oss.yarn_scaling_factor == 32.0
    layer = moe_blocks(oss)[1]
    names = [op.name for op in layer.ops]
    assert names[names.index("qkv"):names.index("flash_attn") + 1] == ["qkv", "yarn_rope", "flash_attn"]
    rope = layer.ops[names.index("yarn_rope")]
    from explorer.symbols import a, a_kv
    q, kv = a * oss.head_dim, a_kv * oss.head_dim
    assert sp_equal(rope.mem_bytes_fwd, 12 * beta * b * s * (q + kv))
    assert sp_equal(rope.mem_bytes_bwd, 14 * beta * b * s * (q + kv))
    assert rope.act_bytes == 0 and rope.role == "heads"
    flash = layer.ops[names.index("flash_attn")]
    total = [x + y for x, y in zip(kn.launches(rope), kn.launches(flash))]
    assert total == [24 + 1, 14 + 1]          # the unfused RoPE's kernels and the attention kernel, each way
    plain = replace(oss, yarn_scaling_factor=0.0)
    assert "yarn_rope" not in [op.name for op in moe_blocks(plain)[1].ops]
    assert moe_blocks(plain)[1].key != layer.key


def test_yarn_rope_costs_its_bytes_on_the_gpu_and_its_launches_on_the_host(oss):
    """The backward reads its own counted bytes (Operator.mem_bytes_bwd), not the 3/2 rule; every kernel pays tau_k
    on the GPU and tau_h on the host."""
    from explorer.cost.block import block_cost
    from explorer.symbols import W_hbm, t_launch
    layer = moe_blocks(oss)[1]
    step = next(x for x in block_cost(layer, "megatron", (), False, "none", "replicated",
                                      host=tuple(kn.Recipe(local_experts=16))).steps if x.op == "yarn_rope")
    from explorer.symbols import a, a_kv, t
    at = {b: 4, s: 4096, beta: 2, W_hbm: 1e12, t_launch: 0, a: oss.heads, a_kv: oss.kv_heads, t: 1}
    rotated = 4 * 4096 * (oss.heads + oss.kv_heads) * oss.head_dim
    assert float(step.fwd_s.subs(at)) == pytest.approx(24 * rotated / 1e12)
    assert float(step.bwd_s.subs(at)) == pytest.approx(28 * rotated / 1e12)
    launches_only = {b: 1, s: 1, beta: 0, W_hbm: 1, t_launch: 1, a: 1, a_kv: 1, t: 1}
    assert float(step.fwd_s.subs(launches_only)) == 22 and float(step.bwd_s.subs(launches_only)) == 12
    assert step.launches == (22, 12)
    strategy = Strategy(dp=64, micro_batch=4, global_batch=1280, ep=8, expert_tp=1, grad_dtype="model")
    cluster = load_cluster("dgx-b200")
    with_yarn = evaluate(oss, strategy, cluster, 64).iteration_time_s
    plain = evaluate(replace(oss, yarn_scaling_factor=0.0), strategy, cluster, 64).iteration_time_s
    assert with_yarn > 1.015 * plain


def test_the_clamp_syncs_the_host_once_per_call_and_again_where_moe_act_replays_it(oss):
    """weighted_bias_quick_geglu_impl makes its offset with torch.tensor(..., device=...): a blocking copy, one
    device-to-host synchronisation per forward, and one more in the backward under moe_act's recomputation, which
    also replays the recomputed modules' launches on the host; none under full-iteration CUDA graphs."""
    from explorer.cost.block import block_cost
    from explorer.symbols import t_launch, tau_h, tau_s
    layer = moe_blocks(oss)[1]
    clamp = next(op for op in layer.ops if op.name == "expert_clamp")
    assert kn.syncs(clamp, kn.Recipe(local_experts=16)) == 1
    assert kn.syncs(clamp, kn.Recipe(graphs="full", local_experts=16)) == 0
    assert kn.syncs(clamp, kn.Recipe(local_experts=16, dropless=False, syncs=False)) == 1
    # per-layer graphs capture a token-drop layer's experts whole: no copy issued, no synchronisation
    assert kn.syncs(clamp, kn.Recipe(graphs="layer", local_experts=16, dropless=False, syncs=False)) == 0
    assert kn.syncs(clamp, kn.Recipe(graphs="layer", local_experts=16)) == 1     # dropless: the experts stay eager
    at = {tau_s: 1, tau_h: 1000, t_launch: 0}

    def cost(recompute, modules):
        return block_cost(layer, "megatron", (), False, recompute, "replicated",
                          host=tuple(kn.Recipe(local_experts=16, recompute_modules=modules)))
    plain, moe_act = cost("none", ()), cost("selective", ("layernorm", "moe_act"))
    # forward: the dispatcher's synchronisation and the clamp's
    assert float(plain.sync_fwd_s.subs(at)) == 2 * 1001 and float(plain.sync_bwd_s.subs(at)) == 0
    assert float(moe_act.sync_bwd_s.subs(at)) == 1001
    # the backward's host replays the two norms (1 kernel each), the clamp (3) and the activation (1)
    extra = moe_act.host_bwd_s - plain.host_bwd_s
    assert float(extra.subs(at)) == 1000 * (1 + 1 + 3 + 1)


def test_yarn_is_read_written_and_read_back_by_every_config_format(oss):
    from explorer.codegen import export
    from explorer.codegen.imports import import_config
    cfg = {"model_type": "gpt_oss", "num_hidden_layers": 4, "hidden_size": 2880, "num_attention_heads": 64,
           "num_key_value_heads": 8, "head_dim": 64, "intermediate_size": 2880, "num_local_experts": 128,
           "num_experts_per_tok": 4, "vocab_size": 201088, "max_position_embeddings": 131072,
           "rope_scaling": {"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0,
                            "original_max_position_embeddings": 4096}}
    assert model_from_dict(cfg, "oss", 4096).yarn_scaling_factor == 32.0
    for scaling in ({"rope_type": "llama3", "factor": 8.0}, None):
        assert model_from_dict({**cfg, "rope_scaling": scaling}, "oss", 4096).yarn_scaling_factor == 0
    # YaRN runs unfused at any factor (both frameworks turn the fusion off for a position embedding but rope)
    assert model_from_dict({**cfg, "rope_scaling": {"rope_type": "yarn", "factor": 1.0}}, "oss",
                           4096).yarn_scaling_factor == 1.0
    assert model_from_dict({**cfg, "rope_scaling": {"type": "yarn", "factor": 4}}, "oss", 4096).yarn_scaling_factor == 4
    v5 = {k: v for k, v in cfg.items() if k != "rope_scaling"}      # transformers v5 configs: rope_parameters
    v5["rope_parameters"] = {"rope_type": "yarn", "factor": 32.0, "rope_theta": 150000.0}
    assert model_from_dict(v5, "oss", 4096).yarn_scaling_factor == 32.0
    with pytest.raises(ExplorerError, match="rope_scaling: field 'factor' must be a positive number"):
        model_from_dict({**cfg, "rope_scaling": {"rope_type": "yarn", "factor": "x"}}, "oss", 4096)
    with pytest.raises(ExplorerError, match="must be 0 \\(plain RoPE\\) or a number from 1 to 1e\\+06"):
        model_from_dict({**cfg, "rope_scaling": {"rope_type": "yarn", "factor": 0.5}}, "oss", 4096)
    strategy = Strategy(dp=64, micro_batch=4, global_batch=1280, ep=8, expert_tp=1, framework="megatron-bridge")
    text = export("megatron-bridge", oss, strategy, load_cluster("dgx-b200"))
    assert 'position_embedding_type = "yarn"' in text and "yarn_rotary_scaling_factor = 32.0" in text
    # the provider leaves YaRN's other settings None, which YarnRotaryEmbedding cannot take: written as gpt-oss' bridge
    for line in ("yarn_original_max_position_embeddings = 4096", "yarn_beta_fast = 32.0", "yarn_beta_slow = 1.0",
                 "yarn_correction_range_round_to_int = False"):
        assert line in text
    assert import_config(text, "megatron-bridge").model["yarn_scaling_factor"] == 32.0
    lm = export("megatron", oss, strategy.with_(framework="megatron-lm"), load_cluster("dgx-b200"))
    assert "--position-embedding-type yarn" in lm and "--rotary-scaling-factor 32.0" in lm
    assert "--yarn-original-max-position-embeddings 4096" in lm and "--no-yarn-correction-range-round-to-int" in lm
    assert import_config(lm, "megatron").model["yarn_scaling_factor"] == 32.0
    # a yarn script without the factor: Megatron-LM's default 1.0, still the unfused path
    assert import_config(lm.replace("--rotary-scaling-factor 32.0", ""), "megatron").model["yarn_scaling_factor"] == 1
    assert "yarn_scaling_factor" not in import_config(lm.replace("--position-embedding-type yarn",
                                                                 "--position-embedding-type rope"), "megatron").model
    with pytest.raises(ExplorerError, match="--rotary-scaling-factor"):
        import_config(lm.replace("--rotary-scaling-factor 32.0", "--rotary-scaling-factor -3"), "megatron")
    for bad in ("1e7", "0.5"):
        with pytest.raises(ExplorerError, match="--rotary-scaling-factor must be YaRN's factor, a number from 1 to 1e"):
            import_config(lm.replace("--rotary-scaling-factor 32.0", f"--rotary-scaling-factor {bad}"), "megatron")
    with pytest.raises(ExplorerError, match="yarn_rotary_scaling_factor must be YaRN's factor"):
        import_config(text.replace("yarn_rotary_scaling_factor = 32.0", "yarn_rotary_scaling_factor = 1e9"),
                      "megatron-bridge")


@pytest.mark.parametrize("change", [{"yarn_scaling_factor": v} for v in (0.5, -1, float("nan"), True, float("inf"),
                                                                         1e6 + 1)])
def test_bad_yarn_factors_say_one_line(oss, change):
    message = "'yarn_scaling_factor' must be 0 \\(plain RoPE\\) or a number from 1 to 1e"
    with pytest.raises(ExplorerError, match=message):
        replace(oss, **change)


def test_yarn_is_refused_off_the_llama_family_and_with_latent_attention():
    with pytest.raises(ExplorerError, match="for the llama family"):
        model_from_dict({"name": "g", "family": "gpt", "layers": 2, "hidden": 64, "heads": 4, "seq_len": 32,
                         "vocab": 100, "yarn_scaling_factor": 4.0})
    dsv3 = load_model("deepseek-v3")
    with pytest.raises(ExplorerError, match="latent attention"):
        replace(dsv3, yarn_scaling_factor=40.0)


def test_a_latent_attention_script_with_yarn_imports_without_the_field():
    """DeepSeek-V3's YaRN is latent attention's own (its rotary part runs in MLA's path): a Megatron-LM script with
    --multi-latent-attention and --position-embedding-type yarn reads back without yarn_scaling_factor."""
    from explorer.codegen import export
    from explorer.codegen.imports import import_config
    strategy = Strategy(dp=128, micro_batch=1, global_batch=1024, ep=64, expert_tp=1, framework="megatron-lm")
    lm = export("megatron", load_model("deepseek-v3"), strategy, load_cluster("dgx-h100"))
    assert "--multi-latent-attention" in lm
    model = import_config(lm.replace("--position-embedding-type rope",
                                     "--position-embedding-type yarn --rotary-scaling-factor 40"), "megatron").model
    assert model["kv_lora_rank"] == 512 and "yarn_scaling_factor" not in model


def test_the_quick_geglu_activation_is_read_written_and_read_back(oss):
    """gpt-oss' activation is quick-GELU on the gate times (linear + 1) (openai/gpt-oss model.py swiglu; Megatron-Bridge
    gpt_oss_bridge.py: activation_func quick_gelu, glu_linear_offset 1.0): the exports write it (they wrote SwiGLU
    until 2026-12-07, so an exported run neither had that activation nor clamped where Megatron-Core clamps), the
    imports read it back; its fused kernel moves what SwiGLU's does, so the cost does not change."""
    from explorer.codegen import export
    from explorer.codegen.imports import import_config
    assert oss.quick_geglu and oss.glu_linear_offset == 1.0
    cfg = {"model_type": "gpt_oss", "num_hidden_layers": 4, "hidden_size": 2880, "num_attention_heads": 64,
           "num_key_value_heads": 8, "head_dim": 64, "intermediate_size": 2880, "num_local_experts": 128,
           "num_experts_per_tok": 4, "vocab_size": 201088, "max_position_embeddings": 131072}
    hf = model_from_dict(cfg, "oss", 4096)
    assert hf.quick_geglu and hf.glu_linear_offset == 1.0
    strategy = Strategy(dp=64, micro_batch=4, global_batch=1280, ep=8, expert_tp=1, framework="megatron-bridge")
    cluster = load_cluster("dgx-b200")
    text = export("megatron-bridge", oss, strategy, cluster)
    assert "cfg.model.activation_func = quick_gelu" in text and "cfg.model.glu_linear_offset = 1.0" in text
    assert "from megatron.core.fusions.fused_bias_geglu import quick_gelu" in text
    back = import_config(text, "megatron-bridge").model
    assert back["quick_geglu"] is True and back["glu_linear_offset"] == 1.0
    lm = export("megatron", oss, strategy.with_(framework="megatron-lm"), cluster)
    assert "--quick-geglu" in lm and "--swiglu" not in lm and "--glu-linear-offset 1.0" in lm
    back = import_config(lm, "megatron").model
    assert back["family"] == "llama" and back["quick_geglu"] and back["glu_linear_offset"] == 1.0
    assert back["linear_bias"]
    with pytest.raises(ExplorerError, match="activation_func"):
        import_config(text.replace("activation_func = quick_gelu", "activation_func = F.gelu"), "megatron-bridge")
    with pytest.raises(ExplorerError, match="--glu-linear-offset"):
        import_config(lm.replace("--glu-linear-offset 1.0", "--glu-linear-offset nan"), "megatron")
    plain = replace(oss, quick_geglu=False, glu_linear_offset=0.0)
    same = evaluate(plain, strategy, cluster, 64).iteration_time_s
    assert evaluate(oss, strategy, cluster, 64).iteration_time_s == same
    assert "--swiglu" in export("megatron", plain, strategy.with_(framework="megatron-lm"), cluster)


@pytest.mark.parametrize("change, message", [
    ({"glu_linear_offset": -1.0}, "'glu_linear_offset' must be a non-negative number"),
    ({"glu_linear_offset": float("nan")}, "'glu_linear_offset' must be a non-negative number"),
    ({"glu_linear_offset": True}, "'glu_linear_offset' must be a non-negative number"),
    ({"quick_geglu": False}, "'glu_linear_offset' needs 'quick_geglu'"),
    ({"quick_geglu": "yes"}, "'quick_geglu' must be true or false"),
])
def test_bad_glu_fields_say_one_line(oss, change, message):
    with pytest.raises(ExplorerError, match=message):
        replace(oss, **change)


def test_quick_geglu_is_refused_off_the_llama_family():
    with pytest.raises(ExplorerError, match="'quick_geglu' is for the llama family"):
        model_from_dict({"name": "g", "family": "gpt", "layers": 2, "hidden": 64, "heads": 4, "seq_len": 32,
                         "vocab": 100, "quick_geglu": True})
