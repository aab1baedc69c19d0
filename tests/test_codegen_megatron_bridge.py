"""The Megatron-Bridge exporter (explorer/codegen/megatron_bridge.py): valid Python, every cost-changing field
written as costed, Megatron-Core's refusals, the notes the Export page shows."""
import ast

import pytest

from explorer.codegen import FRAMEWORKS, export, framework_notes
from explorer.codegen.megatron_bridge import COMMIT, read_recipe
from explorer.errors import ExplorerError
from explorer.io.clusters import load_cluster
from explorer.io.models import load_model
from explorer.strategy.strategy import Strategy

CLUSTER = load_cluster("dgx-a100-80gb")
LLAMA = load_model("llama3-8b")
INTERLEAVED_FP8 = Strategy(dp=4, tp=2, pp=4, micro_batch=1, global_batch=64, schedule="interleaved", chunks=2,
                           zero=1, sequence_parallel=True, overlap_dp=True, overlap_param_gather=True,
                           overlap_p2p=True, dtype="fp8")


def _fields(text: str) -> dict:
    return read_recipe(ast.parse(text))


def test_it_is_a_fifth_framework_citing_its_source():
    assert "megatron-bridge" in FRAMEWORKS
    text = export("megatron-bridge", LLAMA, INTERLEAVED_FP8, CLUSTER)
    compile(text, "recipe.py", "exec")            # valid Python (compiled, never run)
    assert COMMIT[:8] in text and "perf_recipes" in text
    assert "def explorer_pretrain_config() -> ConfigContainer:" in text


def test_every_costed_choice_is_written():
    r = _fields(export("megatron-bridge", LLAMA, INTERLEAVED_FP8, CLUSTER))
    f = r["fields"]
    assert r["world_size"] == 32 and r["model_name"] == "llama3-8b"
    assert (f["model", "tensor_model_parallel_size"], f["model", "pipeline_model_parallel_size"],
            f["model", "virtual_pipeline_model_parallel_size"], f["model", "context_parallel_size"]) == (2, 4, 2, 1)
    assert f["model", "sequence_parallel"] is True and f["model", "seq_length"] == f["dataset", "seq_length"]
    assert (f["train", "micro_batch_size"], f["train", "global_batch_size"]) == (1, 64)
    assert r["precision"] == "bf16_with_fp8_delayed_scaling_mixed"     # Strategy.fp8_recipe's default, Megatron's
    assert f["mixed_precision", "first_last_layers_bf16"] is False and f["mixed_precision", "fp8_param_gather"] is False
    assert f["mixed_precision", "grad_reduce_in_fp32"] is False      # bf16_mixed's default True would be fp32
    assert f["ddp", "use_distributed_optimizer"] is True and f["optimizer", "use_distributed_optimizer"] is True
    assert r["comm_overlap"] == {"tp_comm_overlap": False, "overlap_p2p_comm": True, "batch_p2p_comm": False,
                                 "overlap_grad_reduce": True, "overlap_param_gather": True}
    assert f["model", "activation_func"] == "F.silu" and f["model", "normalization"] == "RMSNorm"


def test_commoverlapconfig_defaults_are_overridden_when_not_costed():
    """CommOverlapConfig turns both data-parallel overlaps on with d > 1: a strategy without them says False."""
    s = Strategy(dp=8, pp=2, micro_batch=1, global_batch=64, zero=1, dtype="bf16", grad_dtype="fp32")
    r = _fields(export("megatron-bridge", LLAMA, s, CLUSTER))
    assert r["comm_overlap"]["overlap_grad_reduce"] is False and r["comm_overlap"]["overlap_param_gather"] is False
    assert r["comm_overlap"]["batch_p2p_comm"] is True and r["comm_overlap"]["overlap_p2p_comm"] is False
    assert r["fields"]["mixed_precision", "grad_reduce_in_fp32"] is True


def test_fsdp_context_parallel_and_experts():
    fsdp = Strategy(dp=8, tp=2, micro_batch=1, global_batch=64, zero=3, sequence_parallel=True, overlap_dp=True,
                    dtype="bf16", grad_dtype="fp32")
    text = export("megatron-bridge", LLAMA, fsdp, CLUSTER)
    f = _fields(text)["fields"]
    assert f["ddp", "use_megatron_fsdp"] is True and f["ddp", "data_parallel_sharding_strategy"] == "optim_grads_params"
    assert f["ddp", "megatron_fsdp_grad_comm_dtype"] == "torch.float32" and f["checkpoint", "ckpt_format"] == "fsdp_dtensor"
    assert 'CUDA_DEVICE_MAX_CONNECTIONS"] = 8' in text
    cp = Strategy(dp=2, tp=2, cp=4, cp_algo="ulysses", micro_batch=1, global_batch=16, sequence_parallel=True)
    assert _fields(export("megatron-bridge", LLAMA, cp, CLUSTER))["fields"]["model", "cp_comm_type"] == "a2a"
    moe = Strategy(dp=8, tp=2, ep=8, expert_tp=1, micro_batch=1, global_batch=64, zero=1, sequence_parallel=True)
    f = _fields(export("megatron-bridge", load_model("mixtral-8x7b"), moe, CLUSTER))["fields"]
    assert (f["model", "num_moe_experts"], f["model", "expert_model_parallel_size"],
            f["model", "expert_tensor_parallel_size"]) == (8, 8, 1)
    deepseek = load_model("deepseek-v3")
    assert deepseek.kv_lora_rank
    with pytest.raises(ExplorerError, match="Megatron-Bridge cannot express this strategy: multi-latent attention"):
        export("megatron-bridge", deepseek, Strategy(dp=8, ep=8, global_batch=8), CLUSTER)


@pytest.mark.parametrize("model,strategy,reason", [
    ("resnet-50", Strategy(dp=8, global_batch=64), "a cnn model"),
    ("bert-large", Strategy(dp=8, global_batch=64), "decoder-only"),
    ("llama3-8b", Strategy(dp=4, pp=2, global_batch=64, schedule="gpipe"), "the gpipe schedule"),
    ("llama3-8b", Strategy(dp=8, global_batch=64, zero=3, overlap_dp=True, zero_prefetch=False), "prefetching"),
    ("llama3-8b", Strategy(dp=4, pp=2, global_batch=64, schedule="interleaved", chunks=2), "p > 2 only"),
])
def test_refusals_are_one_line(model, strategy, reason):
    with pytest.raises(ExplorerError) as err:
        export("megatron-bridge", load_model(model), strategy, CLUSTER)
    assert str(err.value).startswith("Megatron-Bridge cannot express this strategy") and reason in str(err.value)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_every_framework_has_notes(framework):
    model = LLAMA if framework != "mindspore" else load_model("llama2-7b")
    notes = framework_notes(framework, model, INTERLEAVED_FP8)
    assert notes["expresses"] and notes["differences"] and all(isinstance(n, str) for n in notes["differences"])


def test_notes_say_what_megatron_would_do_with_gradients():
    notes = " ".join(framework_notes("megatron", LLAMA, INTERLEAVED_FP8)["differences"])
    assert "reduces gradients in fp32" in notes and "--grad-reduce-in-bf16" in notes
    bridge = " ".join(framework_notes("megatron-bridge", LLAMA, INTERLEAVED_FP8)["differences"])
    assert "grad_reduce_in_fp32" in bridge and "CommOverlapConfig" in bridge
    with pytest.raises(ExplorerError, match="unknown"):
        framework_notes("jax", LLAMA, INTERLEAVED_FP8)
