"""Loads exported configs in the frameworks' own code and says what each framework read (issue 29 item 2).

    python tests/data/frameworks/load_exports.py FRAMEWORK CASES.json     # prints one JSON list, a row per case

Run by tests/test_framework_loads.py in a subprocess, with the interpreter that has the framework (the main
environment for deepspeed, megatron-core and mindspore; .venv-torchtitan/bin/python for torchtitan 0.3.0, see
requirements-frameworks.txt and requirements-torchtitan.txt), so that no framework is imported into the test
process. CASES.json is a list of {"text": the exported file, "world_size": devices, "dp": data-parallel degree}.
Each row is {"loaded": true, "read": {...what the framework read...}} or {"loaded": false, "error": one line};
the test compares "read" with what was costed.

* deepspeed (0.19.8): deepspeed.runtime.config.DeepSpeedConfig(config, mpu) -- its batch arithmetic
  (train_batch_size = micro batch x gradient accumulation x data-parallel size), ZeRO, precision and
  communication_data_type checks. The data-parallel size comes from an mpu, as Megatron-DeepSpeed passes one.
* megatron-core (0.16.1): the arguments parsed by Megatron-LM's parser rebuilt from its table (every name and
  choice, megatron_arguments.json), then TransformerConfig (a ModelParallelConfig) built from them as
  Megatron-LM builds it (megatron/training/argument_utils.py core_transformer_config_from_args at NVIDIA/
  Megatron-LM d98e8a64: every dataclass field that is an argument, then the renamed ones below), after the
  two derivations of megatron/training/arguments.py validate_args it needs (params_dtype from --bf16/--fp16;
  virtual_pipeline_model_parallel_size = (num_layers / p) / num_layers_per_virtual_pipeline_stage); its
  __post_init__ runs megatron-core's own checks (heads and groups divisible by t, recomputation, pipeline
  layout, experts, context parallelism, ...).
* torchtitan (0.3.0): torchtitan.config.manager.ConfigManager().parse_args(the command the export states for
  0.3.0) and torchtitan.distributed.ParallelDims.from_config (its degree checks against the world size). Its
  Triton modules are stubbed (no Triton on a CPU machine; the configuration code never uses them).
* mindspore (2.10.0, CPU): the exported script executed (set_auto_parallel_context's checks), then every
  operator's shard() tuple given to that MindSpore primitive (Primitive.shard's checks).
"""
from __future__ import annotations

import argparse
import ast
import dataclasses
import io
import json
import os
import re
import shlex
import sys
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _one_line(err: BaseException) -> str:
    text = " ".join(str(err).split()) or type(err).__name__
    return f"{type(err).__name__}: {text[:300]}"


# ---- DeepSpeed -------------------------------------------------------------------------------------------

def deepspeed(cases: list) -> list:
    os.environ.setdefault("DS_ACCELERATOR", "cpu")
    import torch
    from deepspeed import comm
    from deepspeed.runtime.config import DeepSpeedConfig
    comm.get_rank = lambda *a, **k: 0          # no process group: DeepSpeedConfig only logs with the rank

    class Mpu:
        def __init__(self, d):
            self.d = d

        def get_data_parallel_world_size(self):
            return self.d

    dtype = {torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}
    rows = []
    for case in cases:
        config = DeepSpeedConfig(json.loads(case["text"]), mpu=Mpu(case["dp"]))
        rows.append({"train_batch_size": config.train_batch_size,
                     "micro_batch": config.train_micro_batch_size_per_gpu,
                     "gradient_accumulation_steps": config.gradient_accumulation_steps,
                     "zero_stage": int(config.zero_optimization_stage),
                     "reduce_dtype": dtype[config.communication_data_type] if config.communication_data_type
                     is not None else None,
                     "bf16": bool(config.bfloat16_config.enabled), "fp16": bool(config.float16_config.enabled),
                     "pipeline_stages": config.pipeline["stages"] if isinstance(config.pipeline, dict) else None,
                     "overlap_comm": bool(config.zero_config.overlap_comm)})
    return rows


# ---- Megatron-LM's arguments (its table) and megatron-core ------------------------------------------------

def _enum_choices(choices: list):
    """For choices the table writes as enum members ('<AttnBackend.flash: 1>'): the function from a member's name,
    as typed on the command line, to that choice (ValueError for another name, which argparse reports)."""
    names = {}
    for choice in choices:
        match = re.fullmatch(r"<\w+\.(\w+): [^>]*>", str(choice))
        if not match:
            return None
        names[match.group(1)] = choice

    def member(name: str) -> str:
        if name not in names:
            raise ValueError(name)
        return names[name]
    return member


def megatron_parser(table: dict) -> argparse.ArgumentParser:
    """Megatron-LM's argument parser, rebuilt from its table (megatron_arguments.json, made by make_tables.py from
    add_megatron_arguments at the commit the table records): the same option strings, dests, actions, defaults
    and choices; an unknown flag or a value outside the choices raises ValueError naming it."""
    class Strict(argparse.ArgumentParser):
        def error(self, message):
            raise ValueError(f"Megatron-LM's parser rejects this: {message}")

    parser = Strict(prog="megatron", add_help=False, allow_abbrev=False)
    for option, spec in table["flags"].items():
        if option in ("-h", "--help"):
            continue
        kwargs = {"dest": spec["dest"], "default": spec["default"]}
        if spec["action"] in ("store_true", "store_false"):
            kwargs["action"] = spec["action"]
        elif spec["action"] == "store":
            if spec["type"] in ("int", "float"):
                kwargs["type"] = {"int": int, "float": float}[spec["type"]]
            if spec["choices"]:
                kwargs["choices"] = spec["choices"]
                enum = _enum_choices(spec["choices"])
                if enum:     # Megatron's type=lambda name: AttnBackend[name]: the member's name on the command line
                    kwargs["type"] = enum
            if spec["nargs"] is not None:
                kwargs["nargs"] = spec["nargs"]
        else:
            continue
        parser.add_argument(option, **kwargs)
    return parser


def megatron_argv(text: str) -> list:
    """The arguments of an exported Megatron-LM file: comments and line continuations dropped."""
    body = " ".join(line.split("#", 1)[0].strip().removesuffix("\\") for line in text.splitlines())
    return [tok for tok in shlex.split(body) if tok != "\\"]


NO_KERNELS = {"apply_rope_fusion": False}
"""Fusions whose kernels this CPU machine lacks (Transformer Engine's fused RoPE: TransformerConfig raises
'apply_rope_fusion is not available. Please install TE >= 1.4.'); a kernel choice, not a cost the explorer
models differently, so it is turned off here and nowhere else."""
TE_VERSION = "2.9.0"
"""Transformer Engine is a CUDA library, absent here; Megatron-LM d98e8a64 builds with TE from git
(pyproject.toml [tool.uv.sources] rev 4329ff84). TransformerConfig only compares its version with minimums
(1.7 for MoE FP8, 1.11 for FP8 grouped GEMM, ...), so the check sees this stand-in, newer than each of them."""


def megatron_core(cases: list) -> list:
    import torch
    import torch.nn.functional as F
    from megatron.core import utils
    from megatron.core.transformer.transformer_config import TransformerConfig
    from packaging.version import Version
    utils.get_te_version = lambda: Version(TE_VERSION)
    from megatron.core.model_parallel_config import ModelParallelConfig
    assert issubclass(TransformerConfig, ModelParallelConfig)
    parser = megatron_parser(json.loads((HERE / "megatron_arguments.json").read_text(encoding="utf-8")))
    rows = []
    for case in cases:
        args = parser.parse_args(megatron_argv(case["text"]))
        # validate_args (megatron/training/arguments.py at d98e8a64): the two derivations the config needs
        args.params_dtype = torch.bfloat16 if args.bf16 else (torch.half if args.fp16 else torch.float)
        args.virtual_pipeline_model_parallel_size = None
        if args.num_layers_per_virtual_pipeline_stage:
            per_stage = args.num_layers // args.pipeline_model_parallel_size
            args.virtual_pipeline_model_parallel_size = per_stage // args.num_layers_per_virtual_pipeline_stage
        # core_transformer_config_from_args (megatron/training/argument_utils.py at d98e8a64)
        kw = {f.name: getattr(args, f.name) for f in dataclasses.fields(TransformerConfig) if hasattr(args, f.name)}
        kw.update(persist_layer_norm=not args.no_persist_layer_norm, deallocate_pipeline_outputs=True,
                  pipeline_dtype=args.params_dtype, batch_p2p_comm=not args.overlap_p2p_comm,
                  num_moe_experts=args.num_experts, rotary_interleaved=args.rotary_interleaved,
                  num_layers_in_first_pipeline_stage=args.decoder_first_pipeline_num_layers,
                  num_layers_in_last_pipeline_stage=args.decoder_last_pipeline_num_layers,
                  fp8_param=args.fp8_param_gather)
        if args.swiglu:
            kw.update(activation_func=F.silu, gated_linear_unit=True, bias_activation_fusion=args.bias_swiglu_fusion)
        else:
            kw["bias_activation_fusion"] = args.bias_gelu_fusion
        kw["num_query_groups"] = args.num_query_groups if args.group_query_attention else None
        if len(args.cp_comm_type) == 1:
            kw["cp_comm_type"] = args.cp_comm_type[0]
        kw = {k: v for k, v in kw.items() if k in {f.name for f in dataclasses.fields(TransformerConfig)}}
        kw.update(NO_KERNELS)
        c = TransformerConfig(**kw)
        rows.append({"tp": c.tensor_model_parallel_size, "pp": c.pipeline_model_parallel_size,
                     "vpp": c.virtual_pipeline_model_parallel_size, "cp": c.context_parallel_size,
                     "ep": c.expert_model_parallel_size, "etp": c.expert_tensor_parallel_size,
                     "sequence_parallel": c.sequence_parallel, "recompute_granularity": c.recompute_granularity,
                     "recompute_method": c.recompute_method, "fp8": c.fp8, "bf16": c.bf16, "fp16": c.fp16,
                     "params_dtype": str(c.params_dtype).removeprefix("torch."),
                     "layers": c.num_layers, "hidden": c.hidden_size, "heads": c.num_attention_heads,
                     "kv_heads": c.num_query_groups or c.num_attention_heads, "ffn_hidden": c.ffn_hidden_size,
                     "gated_linear_unit": c.gated_linear_unit, "experts": c.num_moe_experts,
                     "first_stage_layers": c.num_layers_in_first_pipeline_stage,
                     "last_stage_layers": c.num_layers_in_last_pipeline_stage,
                     "overlap_p2p": not c.batch_p2p_comm, "cp_comm_type": c.cp_comm_type})
    return rows


# ---- torchtitan 0.3.0 ------------------------------------------------------------------------------------

TORCHTITAN_TRITON = ("torchtitan.distributed.minimal_async_ep.kernels", "torchtitan.overrides.fused_mla",
                     "torchtitan.overrides.fused_swiglu")
"""The torchtitan 0.3.0 modules that import Triton at import time (grep '^import triton')."""
CURRENT_LINE = "# torchtitan 0.3.0 reads Python configs, not this file: torchrun ... -m torchtitan.train "


def torchtitan(cases: list) -> list:
    if "make_tables" not in sys.modules:
        sys.path.insert(0, str(HERE))
        import make_tables
        make_tables.stub_modules(TORCHTITAN_TRITON)
    from torchtitan.config.manager import ConfigManager
    from torchtitan.distributed import ParallelDims
    rows = []
    for case in cases:
        line = next(x for x in case["text"].splitlines() if x.startswith(CURRENT_LINE))
        c = ConfigManager().parse_args(shlex.split(line[len(CURRENT_LINE):]))
        p, t = c.parallelism, c.training
        dims = ParallelDims.from_config(p, case["world_size"])
        rows.append({"replicate": dims.dp_replicate, "shard": dims.dp_shard, "tp": dims.tp, "pp": dims.pp,
                     "cp": dims.cp, "fsdp_enabled": dims.fsdp_enabled, "world_size": dims.world_size,
                     "schedule": p.pipeline_parallel_schedule, "microbatch": p.pipeline_parallel_microbatch_size,
                     "layers_per_stage": p.pipeline_parallel_layers_per_stage,
                     "first_less": p.pipeline_parallel_first_stage_less_layers,
                     "last_less": p.pipeline_parallel_last_stage_less_layers,
                     "sequence_parallel": p.enable_sequence_parallel,
                     "local_batch_size": t.local_batch_size, "global_batch_size": t.global_batch_size,
                     "seq_len": t.seq_len, "param_dtype": t.mixed_precision_param,
                     "reduce_dtype": t.mixed_precision_reduce,
                     "activation_checkpoint": type(c.activation_checkpoint).__qualname__.split(".")[0],
                     "async_tp": c.compile.enable_async_tensor_parallel, "compile": c.compile.enable})
    return rows


# ---- MindSpore 2.10 --------------------------------------------------------------------------------------

def mindspore(cases: list) -> list:
    import mindspore as ms
    from mindspore import ops
    from mindspore.ops import auto_generate, operations
    from mindspore.parallel._auto_parallel_context import auto_parallel_context
    rows = []
    for case in cases:
        ms.reset_auto_parallel_context()
        scope = {}
        exec(compile(case["text"], "export.py", "exec"), scope)      # an exported script: the test's own output
        shards = 0
        for line in case["text"].splitlines():
            if line.startswith("        ") and "  # " in line:
                body, comment = line.rsplit("  # ", 1)
                prim = comment.split(",")[0]
                cls = getattr(ops, prim, None) or getattr(operations, prim, None) or getattr(auto_generate, prim)
                op = cls(head_num=1, input_layout="BNSD") if prim == "FlashAttentionScore" else cls()
                op.shard(ast.literal_eval(body.split(": ", 1)[1].rstrip(",")))
                shards += 1
        handle = auto_parallel_context()._context_handle     # what optimizer_level level1/2/3 set
        optimizer = ms.get_auto_parallel_context("enable_parallel_optimizer")
        rows.append({"device_num": ms.get_auto_parallel_context("device_num"),
                     "pipeline_stages": ms.get_auto_parallel_context("pipeline_stages"),
                     "parallel_optimizer": optimizer,
                     "zero": 0 if not optimizer else (3 if handle.get_zero3() else
                                                      (2 if handle.get_grad_accumulation_shard() else 1)),
                     "grad_accumulation_shard": handle.get_grad_accumulation_shard(),
                     "gradient_fp32_sync": ms.get_auto_parallel_context("gradient_fp32_sync"),
                     "compute_dtype": str(scope.get("COMPUTE_DTYPE")), "shards": shards})
    return rows


LOADERS = {"deepspeed": deepspeed, "megatron-core": megatron_core, "torchtitan": torchtitan,
           "mindspore": mindspore}


def main() -> None:
    framework, path = sys.argv[1], sys.argv[2]
    cases = json.loads(Path(path).read_text(encoding="utf-8"))
    rows = []
    for case in cases:       # one at a time: a case the framework rejects is one row, the others still load
        said = io.StringIO()
        try:
            with redirect_stdout(said), redirect_stderr(said):
                rows.append({"loaded": True, "read": LOADERS[framework]([case])[0]})
        except (Exception, SystemExit) as err:    # the framework's own rejection (tyro exits), whatever its type
            words = [w for w in said.getvalue().split() if w.strip("-─│╭╮╰╯")][-60:]
            rows.append({"loaded": False, "error": _one_line(err) + (" | " + " ".join(words) if words else "")})
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
