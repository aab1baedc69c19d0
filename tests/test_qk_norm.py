"""Qwen3's query and key RMSNorms (ModelSpec.qk_layernorm; Megatron-Core SelfAttention q_layernorm / k_layernorm,
Megatron-Bridge qwen3_moe_bridge.py qk_layernorm=True): an operator of the attention, its kernels and bytes, read
from HuggingFace and framework configs and written back by the exporters."""
from dataclasses import replace

import pytest
import sympy as sp

from explorer.codegen import export
from explorer.codegen.imports import import_config
from explorer.errors import ExplorerError
from explorer.io.clusters import load_cluster
from explorer.io.models import load_model, model_from_dict
from explorer.model import kernels as kn
from explorer.model.graph.build import build_blocks
from explorer.strategy.strategy import Strategy
from explorer.symbols import a, a_kv, b, beta, s

QWEN = load_model("qwen3-30b-a3b")


def _layer(model):
    return next(blk for blk in build_blocks(model) if blk.kind == "layer")


def test_the_qwen3_presets_normalise_queries_and_keys_after_the_qkv_split():
    assert QWEN.qk_layernorm and load_model("qwen3-235b-a22b").qk_layernorm
    names = [op.name for op in _layer(QWEN).ops]
    assert names[names.index("qkv") + 1] == "qk_norm" and names[names.index("qkv") + 2] == "flash_attn"
    plain = replace(QWEN, qk_layernorm=False)
    assert "qk_norm" not in [op.name for op in _layer(plain).ops] and _layer(plain).key != _layer(QWEN).key
    assert not any(op.name == "qk_norm" for m in ("llama3-8b", "gpt-oss-120b", "deepseek-v3")
                   for op in _layer(load_model(m)).ops)


def test_its_bytes_kernels_activations_and_parameters():
    """A copy and a norm of the queries and of the keys (TE's RMSNorm makes a strided view contiguous): 4 beta bytes
    per normalised element forward, 4 kernels forward and 6 backward (each norm's input gradient and gamma reduction,
    the gradient's copy into the QKV gradient); it keeps its input; two weights of the head size."""
    op = next(o for o in _layer(QWEN).ops if o.name == "qk_norm")
    d = QWEN.head_dim
    assert sp.expand(op.mem_bytes_fwd - 4 * beta * b * s * (a + a_kv) * d) == 0
    assert kn.launches(op, kn.Recipe()) == (4, 6) and op.params == 2 * d and op.role == "heads"
    rms = next(o for o in _layer(QWEN).ops if o.name == "rms1")
    assert kn.launches(op, kn.Recipe())[1] == 2 * kn.launches(rms, kn.Recipe())[1] + 2   # two norms + two copies
    assert sp.expand(op.act_bytes - beta * b * s * (a + a_kv) * d) == 0
    assert op.flops_fwd == 0                              # model FLOPs unchanged


def test_the_norms_are_read_from_huggingface_and_framework_configs():
    cfg = {"model_type": "qwen3_moe", "num_hidden_layers": 4, "hidden_size": 2048, "num_attention_heads": 32,
           "num_key_value_heads": 4, "head_dim": 128, "intermediate_size": 6144, "num_experts": 128,
           "num_experts_per_tok": 8, "moe_intermediate_size": 768, "vocab_size": 151936,
           "max_position_embeddings": 40960}
    assert model_from_dict(cfg, "q", 4096).qk_layernorm
    assert not model_from_dict({**cfg, "model_type": "mixtral"}, "m", 4096).qk_layernorm
    strategy = Strategy(dp=16, micro_batch=1, global_batch=256, ep=16, expert_tp=1)
    cluster = load_cluster("dgx-h100")
    for framework, needle in (("megatron", "--qk-layernorm"), ("megatron-bridge", "qk_layernorm = True")):
        text = export(framework, QWEN, strategy.with_(framework="megatron-lm" if framework == "megatron"
                                                       else "megatron-bridge"), cluster)
        assert needle in text, framework
        assert import_config(text, framework).model["qk_layernorm"] is True
        plain = export(framework, replace(QWEN, qk_layernorm=False), strategy, cluster)
        assert needle not in plain and "qk_layernorm" not in import_config(plain, framework).model


@pytest.mark.parametrize("change,message", [
    ({"qk_layernorm": 1}, "must be true or false"),
    ({"family": "gpt"}, "for the llama family"),
])
def test_bad_qk_norm_fields_say_one_line(change, message):
    with pytest.raises(ExplorerError, match=message):
        replace(QWEN, **change)


def test_latent_attention_refuses_it():
    with pytest.raises(ExplorerError, match="latent attention"):
        replace(load_model("deepseek-v3"), qk_layernorm=True)


def test_their_weight_gradients_are_all_reduced_over_the_tensor_parallel_group():
    """Megatron-Core finalize_model_grads.py _allreduce_non_tensor_model_parallel_grads reduces the q_layernorm /
    k_layernorm gradients over the TP group with qk_layernorm, sequence parallelism or not: the block's replicated-
    gradient all-reduce carries their 2 d weights."""
    from explorer.cost.block import block_cost
    layer = _layer(QWEN)
    plain = _layer(replace(QWEN, qk_layernorm=False))
    with_norm, without = (block_cost(blk, "megatron", (), False, "none", "replicated") for blk in (layer, plain))
    extra = with_norm.grad_sync_bytes - without.grad_sync_bytes
    from explorer.symbols import t
    assert sp.simplify(extra - 2 * (t - 1) / t * beta * 2 * QWEN.head_dim) == 0      # a ring all-reduce's bytes
