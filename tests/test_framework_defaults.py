"""A strategy names the framework it targets; that framework's default gradient dtype is what is costed, searched
and exported (issue 26 item 5; explorer/strategy/frameworks.py cites each default)."""
import json

import pytest

from explorer.codegen import export
from explorer.codegen.imports import import_config
from explorer.cost.evaluate import evaluate
from explorer.errors import ExplorerError
from explorer.io.clusters import load_cluster
from explorer.io.models import load_model
from explorer.io.share import decode, encode
from explorer.io.strategies import strategy_from_dict, strategy_to_dict
from explorer.search import search
from explorer.strategy.frameworks import EXPORTER, FRAMEWORKS, default_grad_dtype
from explorer.strategy.strategy import Strategy

H100 = load_cluster("dgx-h100")
LLAMA = load_model("llama2-7b")
BF16_DEFAULT = {"generic": "model", "megatron-lm": "fp32", "megatron-bridge": "fp32", "deepspeed": "model",
                "torchtitan": "fp32", "mindspore": "fp32"}
"""Each framework's gradient reduction dtype for bf16 training (frameworks.py: Megatron-LM arguments.py, Megatron-
Bridge bf16_mixed, DeepSpeed engine.communication_data_type, torchtitan mixed_precision_reduce, MindSpore
gradient_fp32_sync)."""
STRATEGY = {"megatron-lm": dict(dp=4, tp=2, zero=1), "megatron-bridge": dict(dp=4, tp=2, zero=1),
            "deepspeed": dict(dp=8, zero=1), "torchtitan": dict(dp=4, tp=2, zero=3, overlap_dp=True),
            "mindspore": dict(dp=4, tp=2)}
"""A strategy each exporter writes (DeepSpeed: no tensor parallelism; torchtitan: FSDP for bf16)."""


def _exported_grad_dtype(framework: str, strategy: Strategy) -> str:
    """The gradient reduction dtype the exported config makes the framework use ("model" or "fp32")."""
    text = export(EXPORTER[framework], LLAMA, strategy, H100)
    if framework == "mindspore":         # no importer: read the written context key
        assert text.count("gradient_fp32_sync=") == 1
        return "fp32" if "gradient_fp32_sync=True" in text else "model"
    return import_config(text, EXPORTER[framework], world_size=strategy.devices).strategy.grad_dtype


@pytest.mark.parametrize("framework", [f for f in FRAMEWORKS if f != "generic"])
def test_export_of_a_strategy_costed_under_a_framework_reduces_in_the_costed_dtype(framework):
    strategy = Strategy(micro_batch=1, global_batch=32, sequence_parallel=STRATEGY[framework].get("tp", 1) > 1,
                        framework=framework, **STRATEGY[framework])
    assert strategy.grad_dtype == BF16_DEFAULT[framework] == default_grad_dtype(framework, "bf16", strategy.zero)
    assert _exported_grad_dtype(framework, strategy) == strategy.grad_dtype
    override = strategy.with_(grad_dtype="model" if strategy.grad_dtype == "fp32" else "fp32")
    if framework not in ("torchtitan", "deepspeed"):      # torchtitan: fp32 only; DeepSpeed fp32 needs ZeRO>=1: ok
        assert _exported_grad_dtype(framework, override) == override.grad_dtype


def test_the_costed_gradient_bytes_follow_the_framework():
    """gpt-7.5b on 32 A100s (issue 26: 28.9 GB of DP traffic costed with bf16 gradients, 43.4 GB run): under
    Megatron-LM the gradients are reduced in fp32, twice the bytes of the ring all-reduce."""
    model, a100 = load_model("gpt-7.5b"), load_cluster("dgx-a100-80gb")
    generic = Strategy(dp=32, micro_batch=1, global_batch=128)
    megatron = generic.with_(framework="megatron-lm")
    assert (generic.grad_dtype, megatron.grad_dtype) == ("model", "fp32")
    g, m = (evaluate(model, s, a100).comm_bytes_per_device["dp_comm"] for s in (generic, megatron))
    assert m == pytest.approx(2 * g, rel=1e-12)
    assert evaluate(model, megatron.with_(grad_dtype="model"), a100).comm_bytes_per_device["dp_comm"] == g


def test_defaults_follow_framework_dtype_and_zero_unless_chosen():
    s = Strategy(framework="megatron-lm", dp=8, global_batch=8)
    assert s.grad_dtype == "fp32"
    assert s.with_(zero=3).grad_dtype == "model"          # Megatron-FSDP: 'auto', the parameters' dtype
    assert s.with_(dtype="fp16").grad_dtype == "model"    # --fp16: fp16 unless --accumulate-allreduce-grads-in-fp32
    assert s.with_(framework="deepspeed").grad_dtype == "model"
    chosen = Strategy(framework="megatron-lm", grad_dtype="model", dp=8, global_batch=8)
    assert chosen.grad_dtype == "model" and chosen.with_(framework="torchtitan").grad_dtype == "model"
    assert Strategy(framework="megatron").framework == "megatron-lm"     # the exporter's name is taken too
    assert Strategy().framework == "generic" and Strategy().grad_dtype == "model"


@pytest.mark.parametrize("bad", ["pytorch", "", 3, None])
def test_an_unknown_framework_is_one_line(bad):
    with pytest.raises(ExplorerError, match="framework .* is unknown; use one of generic") as err:
        Strategy(framework=bad)
    assert "\n" not in str(err.value)


def test_strategy_files_and_share_links_keep_the_framework():
    s = Strategy(dp=4, tp=2, global_batch=8, framework="torchtitan")
    assert strategy_from_dict(strategy_to_dict(s)) == s
    d = strategy_to_dict(s)
    del d["grad_dtype"]                                   # a file that says nothing takes the framework's default
    assert strategy_from_dict(d).grad_dtype == "fp32"
    model, cluster = load_model("llama2-7b"), load_cluster("dgx-a100-80gb")
    params = encode(model, cluster, s)
    assert params["fw"] == "torchtitan" and "gd" not in params     # the default is not written
    assert decode(params).strategy == s and not decode(params).messages
    chosen = s.with_(grad_dtype="model")
    params = encode(model, cluster, chosen)
    assert params["gd"] == "model" and decode(params).strategy == chosen
    assert "fw" not in encode(model, cluster, Strategy(dp=4, tp=2, global_batch=8))   # older links unchanged
    bad = decode({**params, "fw": "caffe"})
    assert any("link parameter 'fw'" in m for m in bad.messages)


@pytest.mark.parametrize("exporter", ["megatron", "mindspore"])
def test_search_costs_and_exports_under_the_framework(exporter):
    """search --framework: every candidate is a strategy of that framework with its default gradient dtype, the
    search's own price equals evaluate()'s, and its export reduces in that dtype (MindSpore: fp32 for bf16, always;
    Megatron-LM: fp32 with the distributed optimizer, the parameters' dtype under Megatron-FSDP)."""
    model, cluster = load_model("tiny-gpt"), load_cluster("classroom")
    found = search(model, cluster, 8, 16, top=4, refine_top=2, framework=exporter)
    framework = {"megatron": "megatron-lm"}.get(exporter, exporter)
    assert found.top
    for c in found.top + found.pareto:
        s = c.strategy
        assert s.framework == framework and s.grad_dtype == default_grad_dtype(framework, "bf16", s.zero)
        assert c.searched_s == pytest.approx(c.iteration_time_s, rel=1e-9)
        assert _exported_grad_dtype_of(exporter, model, s, cluster) == s.grad_dtype
    if exporter == "mindspore":
        assert all(c.strategy.grad_dtype == "fp32" for c in found.top)


def _exported_grad_dtype_of(exporter, model, strategy, cluster) -> str:
    text = export(exporter, model, strategy, cluster)
    if exporter == "mindspore":
        return "fp32" if "gradient_fp32_sync=True" in text else "model"
    return import_config(text, exporter, world_size=strategy.devices).strategy.grad_dtype


def test_cli_framework_flag(capsys):
    from explorer.cli.main import main
    base = ["evaluate", "--model", "gpt-1.7b", "--cluster", "dgx-a100-80gb", "--gpus", "8", "--global-batch", "8",
            "--json"]
    assert main(base + ["--framework", "megatron-lm"]) == 0
    assert json.loads(capsys.readouterr().out)["strategy"]["grad_dtype"] == "fp32"
    assert main(base + ["--framework", "megatron-lm", "--grad-dtype", "model"]) == 0
    out = json.loads(capsys.readouterr().out)["strategy"]
    assert (out["framework"], out["grad_dtype"]) == ("megatron-lm", "model")


@pytest.mark.parametrize("framework, sp_, per_rank", [("generic", False, "1/t"), ("deepspeed", False, "1/t"),
                                                      ("megatron-lm", False, "whole"),
                                                      ("megatron-bridge", False, "whole"),
                                                      ("megatron-lm", True, "1/t")])
def test_megatron_core_sends_the_whole_boundary_tensor_without_sequence_parallelism(framework, sp_, per_rank):
    """Megatron-Core's schedules send [s/cp, b, h] from every tensor-parallel rank, divided by t only under sequence
    parallelism (schedules.py get_tensor_shapes): no SC'21 scatter/gather, whatever the strategy asked; DeepSpeed
    partitions the sends by default (pipe_partitioned) as the generic default does (frameworks.SENDS_WHOLE)."""
    t_, b_, m_ = 4, 1, 4
    strategy = Strategy(dp=1, tp=t_, pp=2, micro_batch=b_, global_batch=b_ * m_, framework=framework,
                        sequence_parallel=sp_, scatter_gather=True)
    assert strategy.scatters_sends == (framework not in ("megatron-lm", "megatron-bridge"))
    assert strategy.scatter_gather and strategy.with_(framework="generic").scatters_sends   # the field keeps the ask
    result = evaluate(LLAMA, strategy, H100, 8)
    sends = sum(row["bytes"] for row in result.comm_by_kind if row["kind"] == "p2p")
    whole = m_ * b_ * LLAMA.seq_len * LLAMA.hidden * 2          # bf16, one send a micro-batch from stage 0
    assert sends == pytest.approx(whole if per_rank == "whole" else whole / t_, rel=1e-12)
    gathers = [row for row in result.comm_by_kind if row["kind"] == "all_gather" and row["category"] == "pp_comm"]
    assert bool(gathers) == (per_rank == "1/t" and not sp_)


@pytest.mark.parametrize("sp_", [False, True])
def test_megatron_reduces_a_column_parallel_input_gradient_under_its_weight_gradient(sp_):
    """Megatron-LM's column-parallel linears (its own and Transformer Engine's) launch the input gradient's all-reduce
    (reduce-scatter under SP) before the weight-gradient GEMM and wait after it (layers.py
    LinearWithGradAccumulationAndAsyncCommunication.backward: "scheduled before the weight gradient computation";
    frameworks.ASYNC_DGRAD). gpt3-175b t 8 on A100: the same collectives, of which megatron-lm hides the QKV's and
    fc1's backward ones (half of the layer's four without SP) under their weight gradients; generic keeps SC'21's."""
    gpt3, a100 = load_model("gpt3-175b"), load_cluster("dgx-a100-80gb")
    runs = {fw: evaluate(gpt3, Strategy(dp=16, tp=8, pp=8, micro_batch=1, global_batch=1536, sequence_parallel=sp_,
                                        scatter_gather=False, grad_dtype="model", framework=fw), a100)
            for fw in ("generic", "megatron-lm")}
    total = {fw: r.breakdown_s["op_comm"] + r.hidden_s["op_comm"] for fw, r in runs.items()}
    assert total["megatron-lm"] == pytest.approx(total["generic"], rel=1e-9)            # the same collectives
    hidden = runs["megatron-lm"].hidden_s["op_comm"] - runs["generic"].hidden_s["op_comm"]
    assert hidden > 0.15 * total["generic"]
    if not sp_:     # four equal all-reduces of b s h a layer, two of them (the backward ones) now hidden
        assert hidden == pytest.approx(total["generic"] / 2, rel=0.05)    # beside the loss and embedding ones
    assert runs["megatron-lm"].iteration_time_s < runs["generic"].iteration_time_s - 0.9 * hidden
