"""Issue 29 item 1: every export is checked against what its framework does, read from the framework's source.

The frameworks are not installed here. What they do is in tests/data/frameworks/:
* megatron_arguments.json, deepspeed_keys.json, torchtitan_config.json, mindspore_api.json: generated from the
  framework's source at a cited commit or release by tests/data/frameworks/make_tables.py (Megatron-LM's own
  argument parser, every option with its dest, action, default and choices; DeepSpeed's config keys;
  torchtitan's JobConfig sections, keys and Literal choices and its llama3 flavors; MindSpore's
  set_auto_parallel_context keys, optimizer levels, primitives and parallel operator implementations);
* rules.json: the validation and runtime rules relied on (validate_args' assertions, the gradient reduction
  dtype each framework picks, ...), each quoted with its repository, path, lines and commit.
Each test parses the export as the framework would (Megatron's parser rebuilt from its table: an unknown flag
or a value outside the choices fails as it does in Megatron), applies those rules, and compares what the
framework would run with what the explorer costed. With MEGATRON_LM_PATH, DEEPSPEED_PATH, TORCHTITAN_PATH or
MINDSPORE_PATH naming the framework's tree (torch and its own dependencies installed), the exports also go
through the framework's own code: Megatron-LM's parser and validate_args, DeepSpeed's DeepSpeedConfig,
torchtitan 0.2.2's ConfigManager and ParallelDims, MindSpore 2.10 executing each script and every shard().
"""
from __future__ import annotations

import argparse
import ast
import importlib.util
import json
import os
import shlex
import tomllib
from pathlib import Path

import pytest

from explorer.codegen import export, parse_megatron_args
from explorer.codegen import torchtitan as tt
from explorer.errors import ExplorerError
from explorer.io.clusters import load_cluster
from explorer.io.models import load_model
from explorer.strategy.strategy import Strategy
from framework_matrix import run_by

DATA = Path(__file__).parent / "data" / "frameworks"
MEGATRON = json.loads((DATA / "megatron_arguments.json").read_text())
DEEPSPEED = json.loads((DATA / "deepspeed_keys.json").read_text())
TORCHTITAN = json.loads((DATA / "torchtitan_config.json").read_text())
MINDSPORE = json.loads((DATA / "mindspore_api.json").read_text())
RULES = json.loads((DATA / "rules.json").read_text())
CLUSTER = load_cluster("dgx-a100-80gb")

LLAMA, GPT, LLAMA3, MOE = "llama2-7b", "gpt-1.7b", "llama3-8b", "qwen3-30b-a3b"


def matrix() -> list:
    """(model, strategy) pairs: every option an exporter writes or refuses, on dense GPT and Llama and MoE."""
    out = []
    for model in (LLAMA, GPT, LLAMA3):
        for dtype in ("bf16", "fp16", "fp32", "fp8"):
            for grad in ("model", "fp32"):
                for zero, overlap in ((0, False), (1, False), (1, True), (2, True), (2, False), (3, True)):
                    out.append((model, Strategy(dp=8, micro_batch=1, global_batch=16, zero=zero, dtype=dtype,
                                                grad_dtype=grad, overlap_dp=overlap)))
                    out.append((model, Strategy(dp=4, tp=2, micro_batch=1, global_batch=16, zero=zero, dtype=dtype,
                                                grad_dtype=grad, overlap_dp=overlap, sequence_parallel=True)))
        for pp, v, p2p in ((2, 2, True), (2, 2, False), (4, 2, True), (4, 2, False), (4, 1, False)):
            schedule = "interleaved" if v > 1 else "1f1b"
            out.append((model, Strategy(dp=2, tp=2, pp=pp, micro_batch=1, global_batch=8 * pp, schedule=schedule,
                                        chunks=v, overlap_p2p=p2p, zero=1, overlap_dp=True, sequence_parallel=True,
                                        grad_dtype="fp32")))
        for gather, overlap in ((True, True), (True, False)):
            for zero in (1, 2):
                out.append((model, Strategy(dp=8, micro_batch=1, global_batch=8, zero=zero, overlap_dp=overlap,
                                            overlap_param_gather=gather)))
        out.append((model, Strategy(dp=8, global_batch=8, zero=3, overlap_dp=True, zero_prefetch=False)))
        for recompute in ("selective", "full"):
            out.append((model, Strategy(dp=8, global_batch=8, zero=3, recompute=recompute, grad_dtype="fp32",
                                        overlap_dp=True)))
    out.append((MOE, Strategy(dp=16, ep=8, global_batch=64)))
    out.append((MOE, Strategy(dp=8, tp=2, ep=8, expert_tp=1, sequence_parallel=True, global_batch=64, zero=1,
                              overlap_dp=True, overlap_param_gather=True)))
    return out


MATRIX = matrix()


def exports(framework: str) -> list:
    """(model, strategy, text) of every matrix strategy `framework` writes, and the count it refuses."""
    out = []
    for name, strategy in MATRIX:
        try:
            out.append((load_model(name), strategy, export(framework, load_model(name), strategy, CLUSTER)))
        except ExplorerError as err:
            assert "\n" not in str(err)
    return out


# ---- Megatron-LM ------------------------------------------------------------------------------------------

def megatron_parser() -> argparse.ArgumentParser:
    """Megatron-LM's argument parser, rebuilt from its table (megatron_arguments.json) by the one builder the
    framework-load checks use (tests/data/frameworks/load_exports.py): an unknown flag or a value outside the
    choices fails the test."""
    spec = importlib.util.spec_from_file_location("load_exports", DATA / "load_exports.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    parser = module.megatron_parser(MEGATRON)

    def error(message):
        raise AssertionError(f"Megatron-LM's parser rejects this: {message}")
    parser.error = error
    return parser


PARSER = megatron_parser()


def megatron_argv(text: str) -> list:
    body = " ".join(line.split("#", 1)[0].strip().removesuffix("\\") for line in text.splitlines())
    return [tok for tok in shlex.split(body) if tok != "\\"]


def megatron_runs(text: str) -> dict:
    """What Megatron-LM runs for these arguments: its parser, then the validate_args and Megatron-FSDP rules of
    rules.json. Raises AssertionError naming the rule an export breaks."""
    r = RULES["megatron"]
    args = PARSER.parse_args(megatron_argv(text))
    pp = args.pipeline_model_parallel_size
    vpp = None
    if args.num_layers_per_virtual_pipeline_stage:
        vpp = (args.num_layers // pp) // args.num_layers_per_virtual_pipeline_stage
        vpp = None if vpp == 1 else vpp
    if vpp is not None and not args.overlap_p2p_comm:
        assert pp > r["overlap_p2p"]["without_overlap_needs_pp_above"], "validate_args: p > 2 without p2p overlap"
    overlap_p2p = args.overlap_p2p_comm if vpp is not None else False
    fsdp = args.use_megatron_fsdp
    zero = r["megatron_fsdp"]["zero_of_sharding"][args.data_parallel_sharding_strategy] if fsdp else \
        (1 if args.use_distributed_optimizer else 0)
    overlap_grad, overlap_gather = args.overlap_grad_reduce, args.overlap_param_gather
    if overlap_gather:
        assert args.overlap_grad_reduce, "validate_args: 'Must use --overlap-param-gather with --overlap-grad-reduce'"
        assert args.use_distributed_optimizer or fsdp, "validate_args: --overlap-param-gather needs the dist. optimizer"
    if fsdp:
        for flag, value in r["megatron_fsdp"]["requires"].items():
            assert getattr(args, MEGATRON["flags"][flag]["dest"]) == value, f"validate_args: Megatron-FSDP needs {flag}"
        forced = r["megatron_fsdp"]["forces"].get(args.data_parallel_sharding_strategy, [])
        overlap_grad = overlap_grad or "overlap_grad_reduce" in forced
        overlap_gather = overlap_gather or "overlap_param_gather" in forced
    params = "fp8" if args.fp8 else ("bf16" if args.bf16 else ("fp16" if args.fp16 else "fp32"))
    if fsdp:      # rules megatron_fsdp_grad_dtype: comm dtype, else main grads dtype, else the parameters'
        comm = args.megatron_fsdp_grad_comm_dtype
        reduced = comm if comm != "auto" else args.megatron_fsdp_main_grads_dtype
        reduced = {"fp8": "bf16"}.get(params, params) if reduced == "auto" else reduced
    elif params in ("bf16", "fp8"):   # rules grad_reduce_dtype: fp32 unless --grad-reduce-in-bf16
        reduced = "bf16" if args.grad_reduce_in_bf16 else "fp32"
    elif params == "fp16":
        reduced = "fp32" if args.accumulate_allreduce_grads_in_fp32 else "fp16"
    else:
        reduced = "fp32"
    return {"args": args, "vpp": vpp, "overlap_p2p": overlap_p2p, "zero": zero, "overlap_grad_reduce": overlap_grad,
            "overlap_param_gather": overlap_gather, "grad_reduce_dtype": reduced, "params": params}


def costed_reduce_dtype(strategy) -> str:
    """The dtype the explorer costs the gradient reduction in (Strategy.grad_dtype: "model" = the parameters')."""
    if strategy.grad_dtype == "fp32" or strategy.dtype == "fp32":
        return "fp32"
    return {"fp8": "bf16"}.get(strategy.dtype, strategy.dtype)


MEGATRON_EXPORTS = exports("megatron")


def test_the_matrix_exercises_every_exporter():
    assert len(MATRIX) >= 200 and len(MEGATRON_EXPORTS) >= 150
    for framework in ("deepspeed", "torchtitan", "mindspore"):
        assert exports(framework), framework


def test_a_megatron_writes_only_flags_megatron_has_and_sends_overlap_as_costed():
    """(a) Megatron has --no-overlap-p2p-communication only (store_false, overlap on by default)."""
    flag = MEGATRON["flags"][RULES["megatron"]["overlap_p2p"]["flag"]]
    assert flag["action"] == "store_false" and flag["default"] is True and flag["dest"] == "overlap_p2p_comm"
    assert "--overlap-p2p-communication" not in MEGATRON["flags"]
    interleaved = 0
    for model, strategy, text in MEGATRON_EXPORTS:
        runs = megatron_runs(text)          # every flag parses with Megatron's own parser
        assert runs["overlap_p2p"] == strategy.overlap_p2p, text
        interleaved += runs["vpp"] is not None
    assert interleaved >= 6


def test_a_megatron_refuses_interleaving_on_two_stages_without_overlap():
    model = load_model(LLAMA)
    s = Strategy(dp=2, tp=2, pp=2, global_batch=16, schedule="interleaved", chunks=2, sequence_parallel=True)
    with pytest.raises(ExplorerError, match="p > 2 only"):
        export("megatron", model, s, CLUSTER)
    runs = megatron_runs(export("megatron", model, s.with_(overlap_p2p=True), CLUSTER))
    assert runs["overlap_p2p"] and runs["vpp"] == 2


def test_b_megatron_overlap_param_gather_passes_validate_args():
    """(b) --overlap-param-gather needs --overlap-grad-reduce (validate_args): written together or refused."""
    seen = 0
    for model, strategy, text in MEGATRON_EXPORTS:
        runs = megatron_runs(text)
        if strategy.overlap_param_gather and strategy.zero in (1, 2):
            assert runs["overlap_param_gather"] and runs["overlap_grad_reduce"]
            seen += 1
    assert seen >= 4
    with pytest.raises(ExplorerError, match="Must use --overlap-param-gather with --overlap-grad-reduce"):
        export("megatron", load_model(LLAMA), Strategy(dp=8, global_batch=8, zero=1, overlap_param_gather=True),
               CLUSTER)


def test_c_megatron_reduces_gradients_in_the_costed_dtype():
    """(c) With --bf16 Megatron reduces in fp32 unless --grad-reduce-in-bf16; Megatron-FSDP in its own dtypes."""
    pairs = set()
    for model, strategy, text in MEGATRON_EXPORTS:
        runs = megatron_runs(text)
        assert runs["grad_reduce_dtype"] == costed_reduce_dtype(strategy), (strategy, text)
        pairs.add((strategy.dtype, strategy.grad_dtype, strategy.zero >= 2))
    assert len(pairs) == 16


def test_d_megatron_builds_the_llama_the_explorer_costs():
    """(d) Llama: rotary positions, untied output, no biases, no dropout; GPT keeps Megatron's defaults."""
    wanted = RULES["megatron"]["llama_model"]["dests"]
    defaults = {spec["dest"]: spec["default"] for spec in MEGATRON["flags"].values()}
    assert all(defaults[dest] != value for dest, value in wanted.items())      # Megatron's default differs
    for model, strategy, text in MEGATRON_EXPORTS:
        args = megatron_runs(text)["args"]
        for dest, value in wanted.items():
            if model.family == "llama":
                assert getattr(args, dest) == value, (model.name, dest)
            else:
                assert getattr(args, dest) == defaults[dest], (model.name, dest)


def test_g_megatron_writes_zero_2_and_3_as_megatron_fsdp():
    """(g) ZeRO-2/3: --use-megatron-fsdp --data-parallel-sharding-strategy optim_grads / optim_grads_params."""
    stages = set()
    for model, strategy, text in MEGATRON_EXPORTS:
        runs = megatron_runs(text)
        assert runs["zero"] == strategy.zero
        if strategy.zero >= 2:
            stages.add(strategy.zero)
            assert runs["overlap_grad_reduce"] == strategy.overlap_dp
            assert "CUDA_DEVICE_MAX_CONNECTIONS unset or > 1" in text
        elif strategy.tp > 1:
            assert "CUDA_DEVICE_MAX_CONNECTIONS=1" in text
    assert stages == {2, 3}
    for s, words in ((Strategy(dp=8, global_batch=8, zero=2), "always overlaps the reduce-scatter"),
                     (Strategy(dp=8, global_batch=8, zero=3, overlap_dp=True, zero_prefetch=False), "prefetching")):
        with pytest.raises(ExplorerError, match=words):
            export("megatron", load_model(LLAMA), s, CLUSTER)


def test_megatron_exports_round_trip():
    for model, strategy, text in MEGATRON_EXPORTS:
        fields, back = parse_megatron_args(text)
        same = strategy.with_(schedule=strategy.schedule if strategy.pp > 1 else "1f1b",
                              overlap_param_gather=strategy.overlap_param_gather and strategy.zero in (1, 2))
        assert back == run_by(same, "megatron-lm"), text
        assert fields["family"] == model.family


def _make_tables():
    import importlib.util
    spec = importlib.util.spec_from_file_location("make_tables", DATA / "make_tables.py")
    make = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(make)
    return make


@pytest.mark.skipif(not os.environ.get("MEGATRON_LM_PATH"), reason="MEGATRON_LM_PATH (a Megatron-LM tree) not set")
def test_megatron_own_validate_args_accepts_every_export(monkeypatch):
    """Megatron-LM's own parser and validate_args on every export (needs torch and a Megatron-LM tree)."""
    import sys
    import torch
    arguments = _make_tables().import_megatron(Path(os.environ["MEGATRON_LM_PATH"]))
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda *a, **k: argparse.Namespace(major=9, minor=0))
    monkeypatch.setattr(sys, "argv", ["megatron"])
    for model, strategy, text in MEGATRON_EXPORTS:
        monkeypatch.setenv("CUDA_DEVICE_MAX_CONNECTIONS", "8" if strategy.zero >= 2 else "1")   # the '# environment:'
        parser = arguments.add_megatron_arguments(argparse.ArgumentParser(allow_abbrev=False))
        args = parser.parse_args(megatron_argv(text) + ["--vocab-size", str(model.vocab),
                                                        "--tokenizer-type", "NullTokenizer"])
        args.world_size, args.rank = strategy.devices, 0
        arguments.validate_args(args, {})
        assert args.overlap_p2p_comm == strategy.overlap_p2p
        if strategy.dtype != "fp32":
            assert args.accumulate_allreduce_grads_in_fp32 == (costed_reduce_dtype(strategy) == "fp32")
        assert args.use_distributed_optimizer == (strategy.zero >= 1)


# ---- DeepSpeed ----------------------------------------------------------------------------------------------

def test_c_deepspeed_reduces_gradients_in_the_costed_dtype():
    """(c) DeepSpeed reduces in communication_data_type (default: the model dtype), accumulates in
    data_types.grad_accum_dtype; both are written, and every key is one DeepSpeed reads."""
    r = RULES["deepspeed"]
    seen = set()
    for model, strategy, text in exports("deepspeed"):
        config = json.loads(text)
        for key, value in config.items():
            assert key in DEEPSPEED["config_keys"], key
            if key == "zero_optimization":
                assert set(value) <= set(DEEPSPEED["zero_optimization"])
            if key == "pipeline":
                assert set(value) <= set(DEEPSPEED["pipeline"])
        assert set(config.get("activation_checkpointing", {})) <= set(DEEPSPEED["activation_checkpointing"])
        comm = config["communication_data_type"]
        assert comm in r["communication_data_type"]["values"] and comm == costed_reduce_dtype(strategy)
        accum = config[r["grad_accum_dtype"]["section"]][r["grad_accum_dtype"]["key"]]
        model_dtype = "fp16" if config["fp16"]["enabled"] else ("bf16" if config["bf16"]["enabled"] else "fp32")
        assert accum in r["grad_accum_dtype"]["values"]
        if accum != model_dtype:                  # DeepSpeed's optimizer check: only ZeRO mixes them
            assert config["zero_optimization"]["stage"] > 0
        seen.add((strategy.dtype, strategy.grad_dtype))
    assert ("bf16", "fp32") in seen and ("bf16", "model") in seen
    with pytest.raises(ExplorerError, match="unsupported mix of model_dtype and grad_accum_dtype"):
        export("deepspeed", load_model(LLAMA), Strategy(dp=8, global_batch=8, grad_dtype="fp32"), CLUSTER)


@pytest.mark.skipif(not os.environ.get("DEEPSPEED_PATH"), reason="DEEPSPEED_PATH (a DeepSpeed tree) not set")
def test_deepspeed_own_config_loads_every_export(monkeypatch):
    """DeepSpeed's own DeepSpeedConfig on every export (needs torch and a DeepSpeed tree or install; the
    data-parallel size comes from an mpu, as Megatron-DeepSpeed passes one)."""
    import sys
    monkeypatch.setenv("DS_ACCELERATOR", "cpu")
    monkeypatch.syspath_prepend(os.environ["DEEPSPEED_PATH"])
    from deepspeed import comm
    from deepspeed.runtime.config import DeepSpeedConfig
    monkeypatch.setattr(comm, "get_rank", lambda *a, **k: 0)

    class Mpu:
        def __init__(self, d):
            self.d = d

        def get_data_parallel_world_size(self):
            return self.d

    import torch
    for model, strategy, text in exports("deepspeed"):
        config = DeepSpeedConfig(json.loads(text), mpu=Mpu(strategy.dp))
        assert config.train_batch_size == strategy.global_batch
        reduce = {torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}[config.communication_data_type]
        assert reduce == costed_reduce_dtype(strategy) and int(config.zero_optimization_stage) == strategy.zero
    assert "deepspeed" in sys.modules


# ---- torchtitan --------------------------------------------------------------------------------------------

def test_e_torchtitan_files_load_and_run_what_was_costed():
    """(e) Every [section] and key exists in torchtitan 0.2.2's JobConfig with an accepted value; replicate-only
    data parallelism never meets TP or PP (DDP is 1-D there); bf16 has FSDP or nothing else (otherwise
    mixed precision is off); gradients are reduced in float32 as costed."""
    r = RULES["torchtitan"]
    files = exports("torchtitan")
    assert len(files) >= 10
    for model, strategy, text in files:
        assert f"torchtitan {r['toml']['version']}" in text.splitlines()[1]
        config = tomllib.loads(text)
        for section, values in config.items():
            assert section in TORCHTITAN["sections"], section
            for key, value in values.items():
                spec = TORCHTITAN["sections"][section].get(key)
                assert spec is not None, f"[{section}] {key}"
                assert spec["choices"] is None or value in spec["choices"], f"[{section}] {key} = {value!r}"
        par, train = config["parallelism"], config["training"]
        assert config["model"]["name"] in TORCHTITAN["models"]
        if par["data_parallel_replicate_degree"] > 1 and par["data_parallel_shard_degree"] <= 1:
            assert par["tensor_parallel_degree"] == par["pipeline_parallel_degree"] == 1   # DDP has no > 1D
        fsdp = par["data_parallel_shard_degree"] > 1 or par["context_parallel_degree"] > 1
        if train["mixed_precision_param"] != "float32":
            assert fsdp or par["tensor_parallel_degree"] == par["pipeline_parallel_degree"] == 1
        assert costed_reduce_dtype(strategy) == "fp32" == {"float32": "fp32"}[r["mixed_precision"]["reduce_dtype"]]
        assert config["activation_checkpoint"]["mode"] != "selective"
    assert TORCHTITAN["sections"]["training"]["mixed_precision_reduce"]["choices"] == ["float32"]


@pytest.mark.parametrize("strategy,words", [
    (Strategy(dp=4, tp=2, global_batch=8, sequence_parallel=True, grad_dtype="fp32"), "DDP has not supported"),
    (Strategy(dp=1, tp=2, global_batch=8, sequence_parallel=True, grad_dtype="fp32"), "trains in fp32"),
    (Strategy(dp=8, global_batch=8, zero=3), "reduces gradients in float32"),
    (Strategy(dp=8, global_batch=8, zero=3, grad_dtype="fp32", recompute="selective"), "not the attention-core"),
])
def test_e_torchtitan_refusals(strategy, words):
    with pytest.raises(ExplorerError, match=words):
        export("torchtitan", load_model(LLAMA), strategy, CLUSTER)


def test_e_torchtitan_model_section_names_a_flavor_of_the_same_shape():
    assert {k: v for k, v in TORCHTITAN["llama3_flavors"].items() if k in tt.LLAMA3_FLAVORS} == \
        {k: {**v, "rope_theta": 500000} for k, v in tt.LLAMA3_FLAVORS.items()}
    assert TORCHTITAN["llama3_model_args_defaults"]["vocab_size"] == tt.LLAMA3_VOCAB
    s = Strategy(dp=8, global_batch=8, zero=3, grad_dtype="fp32", overlap_dp=True)
    assert 'flavor = "8B"' in export("torchtitan", load_model(LLAMA3), s, CLUSTER)
    text = export("torchtitan", load_model(LLAMA), s, CLUSTER)
    assert 'flavor = "h4096-l32-a32-kv32-f11008-v32000"' in text
    registered = next(line for line in text.splitlines() if "TransformerModelArgs(" in line)
    call = ast.parse("TransformerModelArgs(" + registered.split("TransformerModelArgs(", 1)[1], mode="eval").body
    args = {kw.arg: ast.literal_eval(kw.value) for kw in call.keywords}
    model = load_model(LLAMA)
    assert tt.ffn_dim(args["dim"], args["multiple_of"], args["ffn_dim_multiplier"]) == model.ffn_hidden
    assert (args["n_layers"], args["n_heads"], args["n_kv_heads"], args["vocab_size"]) == (32, 32, 32, 32000)
    for name in ("llama2-70b", "llama3-70b", "llama3.1-405b"):
        m = load_model(name)
        a = tt.model_args(m)
        assert tt.ffn_dim(a["dim"], a["multiple_of"], a["ffn_dim_multiplier"]) == m.ffn_hidden


def test_e_torchtitan_refuses_models_it_does_not_have():
    for name in ("gpt-1.7b", "bert-large"):
        with pytest.raises(ExplorerError, match="Llama-style"):
            export("torchtitan", load_model(name), Strategy(dp=8, global_batch=8), CLUSTER)


@pytest.mark.skipif(not os.environ.get("TORCHTITAN_PATH"), reason="TORCHTITAN_PATH (a torchtitan v0.2.2 tree) not set")
def test_torchtitan_own_config_manager_and_parallel_dims_load_every_export(tmp_path, monkeypatch):
    """torchtitan 0.2.2's own ConfigManager (--job.config_file) and ParallelDims on every export (needs torch,
    tyro and tokenizers; its MoE Triton kernels are stubbed)."""
    _make_tables().stub_modules(_make_tables().TORCHTITAN_STUBS)
    monkeypatch.syspath_prepend(os.environ["TORCHTITAN_PATH"])
    from torchtitan.config.manager import ConfigManager
    from torchtitan.distributed import ParallelDims
    for i, (model, strategy, text) in enumerate(exports("torchtitan")):
        path = tmp_path / f"{i}.toml"
        path.write_text(text)
        config = ConfigManager().parse_args(["--job.config_file", str(path)])
        p = config.parallelism
        dims = ParallelDims(dp_shard=p.data_parallel_shard_degree, dp_replicate=p.data_parallel_replicate_degree,
                            cp=p.context_parallel_degree, tp=p.tensor_parallel_degree, pp=p.pipeline_parallel_degree,
                            ep=p.expert_parallel_degree, etp=p.expert_tensor_parallel_degree,
                            world_size=strategy.devices)
        assert dims.fsdp_enabled == (strategy.zero == 3 and strategy.dp > 1)
        assert not (dims.dp_replicate_enabled and not dims.fsdp_enabled and (dims.tp_enabled or dims.pp_enabled))
        assert config.training.mixed_precision_reduce == "float32" and config.model.name == "llama3"


# ---- MindSpore ---------------------------------------------------------------------------------------------

def mindspore_context(text: str) -> dict:
    tree = ast.parse(text)
    call = next(node for node in ast.walk(tree) if isinstance(node, ast.Call)
                and getattr(node.func, "attr", "") == "set_auto_parallel_context")
    return {kw.arg: ast.literal_eval(kw.value) for kw in call.keywords}


def test_f_mindspore_context_says_the_zero_level_the_precision_and_the_gradient_dtype():
    """(f) ZeRO-1/2/3 -> optimizer_level level1/2/3; gradient_fp32_sync as costed (MindSpore's default is
    True); the compute dtype one auto_mixed_precision takes; fp8 refused."""
    r = RULES["mindspore"]
    levels = set()
    for model, strategy, text in exports("mindspore"):
        context = mindspore_context(text)
        assert set(context) <= set(MINDSPORE["set_auto_parallel_context_keys"])
        assert set(context.get("pipeline_config", {})) <= set(MINDSPORE["pipeline_config_keys"])
        if strategy.zero:
            config = context["parallel_optimizer_config"]
            assert context["enable_parallel_optimizer"]
            assert set(config) <= set(MINDSPORE["parallel_optimizer_config_keys"])
            assert config["optimizer_level"] in MINDSPORE["optimizer_levels"]
            assert r["optimizer_level"]["zero_of_level"][config["optimizer_level"]] == strategy.zero
            levels.add(config["optimizer_level"])
        else:
            assert not context.get("enable_parallel_optimizer", False)
        fp32_sync = context.get("gradient_fp32_sync", r["gradient_fp32_sync"]["default"])
        assert ("fp32" if fp32_sync else strategy.dtype) == costed_reduce_dtype(strategy)
        dtype = next(line for line in text.splitlines() if line.startswith("COMPUTE_DTYPE = ")).split()[2]
        assert dtype == {"bf16": "ms.bfloat16", "fp16": "ms.float16", "fp32": "ms.float32"}[strategy.dtype]
        if strategy.dtype != "fp32":
            assert dtype.removeprefix("ms.") in r["mixed_precision"]["dtypes"]
    assert levels == {"level1", "level2", "level3"}
    with pytest.raises(ExplorerError, match="fp8"):
        export("mindspore", load_model(LLAMA), Strategy(dp=8, global_batch=8, dtype="fp8"), CLUSTER)


def test_f_mindspore_shard_tables_name_primitives_with_a_parallel_implementation():
    """(f) Every primitive is one MindSpore has, with a parallel operator implementation; SwiGLU is SiLU then
    Mul (the fused Swiglu's implementation is Softmax's, which cannot cut its axis)."""
    assert MINDSPORE["parallel_operator_info"]["Swiglu"] == "Softmax"
    found = set()
    for model, strategy, text in exports("mindspore"):
        for line in text.splitlines():
            if line.startswith("        ") and "  # " in line:
                prim = line.rsplit("  # ", 1)[1].split(",")[0]
                assert prim in MINDSPORE["primitives"] and prim in MINDSPORE["parallel_operator_info"], prim
                found.add(prim)
    assert {"SiLU", "Mul", "MatMul", "RmsNorm"} <= found


@pytest.mark.skipif(not os.environ.get("MINDSPORE_PATH"), reason="MINDSPORE_PATH (MindSpore 2.10) not set")
def test_mindspore_executes_every_export_and_takes_every_shard(monkeypatch):
    """MindSpore 2.10 runs every script (its set_auto_parallel_context checks) and takes every shard()."""
    monkeypatch.syspath_prepend(os.environ["MINDSPORE_PATH"])
    import mindspore as ms
    from mindspore import ops
    from mindspore.ops import auto_generate, operations
    from mindspore.parallel._auto_parallel_context import auto_parallel_context
    for model, strategy, text in exports("mindspore"):
        ms.reset_auto_parallel_context()
        exec(compile(text, "export.py", "exec"), {})
        assert ms.get_auto_parallel_context("device_num") == strategy.devices
        assert ms.get_auto_parallel_context("enable_parallel_optimizer") == (strategy.zero > 0)
        assert ms.get_auto_parallel_context("gradient_fp32_sync") == (costed_reduce_dtype(strategy) == "fp32")
        assert auto_parallel_context()._context_handle.get_grad_accumulation_shard() == (strategy.zero == 2)
        for line in text.splitlines():
            if line.startswith("        ") and "  # " in line:
                body, comment = line.rsplit("  # ", 1)
                prim = comment.split(",")[0]
                cls = getattr(ops, prim, None) or getattr(operations, prim, None) or getattr(auto_generate, prim)
                op = cls(head_num=1, input_layout="BNSD") if prim == "FlashAttentionScore" else cls()
                op.shard(ast.literal_eval(body.split(": ", 1)[1].rstrip(",")))


# ---- explorer run (h) --------------------------------------------------------------------------------------

def test_h_explorer_run_honours_the_dtype_or_refuses_it_in_one_line(tmp_path):
    """(h) The reference run trains in the strategy's dtype (fp32 or bf16; tests/test_runtime.py measures bf16
    bytes equal to the model's) and refuses fp16 and fp8 in one line; a file without a dtype, or the flags
    alone, train in fp32."""
    from explorer.cli.run_cmd import strategy_of
    from explorer.runtime.measure import check_runnable
    tiny = load_model("tiny-gpt")
    flags = dict(dp=None, tp=None, pp=None, micro_batch=None, global_batch=None, schedule=None, zero=None,
                 sequence_parallel=None, chunks=None, recompute=None, dtype=None)
    for dtype, trained in (("bf16", "bf16"), ("fp8", None), ("fp16", None), ("fp32", "fp32"), (None, "fp32")):
        path = tmp_path / f"{dtype}.json"
        path.write_text(json.dumps({"version": 1, "dp": 2, "global_batch": 2, **({"dtype": dtype} if dtype else {})}))
        strategy = strategy_of(argparse.Namespace(strategy=str(path), **flags))
        assert strategy.dtype == (dtype or "fp32")
        if trained is None:
            with pytest.raises(ExplorerError) as err:
                check_runnable(tiny, strategy, 2, 3)
            assert "\n" not in str(err.value) and f"{dtype} (it needs" in str(err.value)
        else:
            check_runnable(tiny, strategy, 2, 3)
    assert strategy_of(argparse.Namespace(strategy=None, **flags)).dtype == "fp32"
    assert strategy_of(argparse.Namespace(strategy=None, **{**flags, "dtype": "bf16"})).dtype == "bf16"
