"""Megatron-LM command-line arguments for a (model, strategy), and the parser back.

Every flag is one of Megatron-LM's own (NVIDIA/Megatron-LM, megatron/training/arguments.py at commit
d98e8a64, 2026-08; tests/data/frameworks/megatron_arguments.json is its parser's table, and
tests/data/frameworks/rules.json the validate_args rules relied on): --tensor/--pipeline/--context/
--expert-model-parallel-size, --sequence-parallel, --num-layers-per-virtual-pipeline-stage (the
interleaved schedule: Megatron asserts layers % p == 0 and (l/p) % that == 0), --decoder-first/
--decoder-last-pipeline-num-layers ("Default None is even split of transformer layers across all
pipeline stages"; the layers left over are split evenly over the middle stages),
--recompute-granularity/--recompute-method/--recompute-num-layers, --micro-batch-size,
--global-batch-size, --bf16/--fp16/--fp8-format and the model shape (--num-layers --hidden-size
--num-attention-heads --ffn-hidden-size --seq-length --max-position-embeddings, --group-query-attention
--num-query-groups, --attention-backend flash or unfused: the attention kernel that was costed; for Llama-style models --swiglu --normalization RMSNorm --position-embedding-type rope
--untie-embeddings-and-output-weights --disable-bias-linear and no dropout, as the explorer builds them:
Megatron's defaults are learned absolute positions, tied embeddings, biases and dropout 0.1).

What validate_args and Megatron-Core do with them, and so what is written:
* Overlapped pipeline sends are on by default with a virtual pipeline; the only flag is
  --no-overlap-p2p-communication, which validate_args allows with p > 2 only (a virtual pipeline on two
  stages without overlap is refused here).
* --overlap-param-gather needs --overlap-grad-reduce and the distributed optimizer or Megatron-FSDP.
* ZeRO-1 is --use-distributed-optimizer; ZeRO-2/3 are Megatron-FSDP (--use-megatron-fsdp
  --data-parallel-sharding-strategy optim_grads / optim_grads_params, --ckpt-format fsdp_dtensor, which
  validate_args requires). Megatron-FSDP always overlaps the gradient reduce-scatter of sharded gradients
  and, fully sharded, the parameter all-gather (megatron_fsdp.py), so a strategy without them is refused.
* Gradients: with --bf16 Megatron accumulates and reduces them in fp32 unless --grad-reduce-in-bf16; with
  --fp16 in fp16 unless --accumulate-allreduce-grads-in-fp32; Megatron-FSDP in
  --megatron-fsdp-main-grads-dtype / --megatron-fsdp-grad-comm-dtype ('auto': the parameters' dtype).
  Each is written so that Megatron reduces in strategy.grad_dtype.
* Precision (explorer/hardware/precision.py): --fp8-recipe when not Megatron's default (delayed); bf16 Adam
  moments as --use-precision-aware-optimizer --exp-avg-dtype bf16 --exp-avg-sq-dtype bf16 (TE's FusedAdam;
  only with the distributed optimizer, as the rules require).

Megatron-LM has no data-parallel flag: d = world size / (t p), the world size coming from the launcher
(torchrun --nnodes x --nproc-per-node). The text states it in a '# world size: N' line that the parser reads,
and the CUDA_DEVICE_MAX_CONNECTIONS setting validate_args asserts in an '# environment:' line.
Nor is the explorer's `scatter_gather` (SC'21 Sec 4.1's scatter/gather of pipeline sends) a flag any more
(Megatron-LM commit 10e7b745 removed the unused --no-scatter-gather-tensors-in-pipeline): it is not written, and a
megatron-lm strategy costs the whole tensor its schedules send (explorer/strategy/frameworks.py SENDS_WHOLE). An
imported script is a megatron-lm strategy: Megatron-Core runs it (its sends, its asynchronous input gradients).
"""
from __future__ import annotations

import argparse
import shlex

from explorer.codegen.common import (check_host_options, check_rank_order, check_uniform_split, layers_per_model_chunk, refuse,
                                     stage_counts, title)
from explorer.codegen.common import megatron_layout_text
from explorer.strategy.pipeline_layout import first_last_counts, parse as parse_layout, stage_map_of
from explorer.errors import ExplorerError
from explorer.codegen.import_fields import whole
from explorer.codegen.megatron_moe import add_arguments as add_moe_arguments, moe_flags
from explorer.codegen.megatron_moe import graph_flags, host_fields
from explorer.codegen.megatron_moe import model_fields as moe_model_fields
from explorer.schedules import chunked
from explorer.strategy.strategy import RECOMPUTE_MODULES, Strategy
from explorer.strategy.options import OPTIONS
from explorer.hardware.precision import FP8_RECIPES, MOMENT_DTYPES

NAME = "Megatron-LM"
WORLD = "# world size:"


def _check(model, strategy, name: str = NAME) -> None:
    """The refusals of Megatron-Core (shared with Megatron-Bridge, which trains with it): `name` says whose."""
    s = strategy
    if not model.is_transformer:
        raise refuse(name, f"it trains transformers (GPT, BERT, Llama); {model.name} is a {model.family} model")
    check_uniform_split(name, model, s)
    if s.zero >= 2 and not s.overlap_dp:
        raise refuse(name, f"ZeRO-{s.zero} without overlapped gradient reduction: Megatron-FSDP "
                           f"(--data-parallel-sharding-strategy {FSDP_SHARDING[s.zero]}) always overlaps the "
                           "reduce-scatter of sharded gradients with the backward (megatron_fsdp.py)")
    if s.zero == 3 and not s.zero_prefetch:
        raise refuse(name, "ZeRO-3 without prefetching: Megatron-FSDP fully sharded always gathers the next "
                           "parameters under the current compute (optim_grads_params sets overlap_param_gather)")
    if s.overlap_param_gather and s.zero in (1, 2) and not s.overlap_dp:
        raise refuse(name, "overlapped parameter gather without overlapped gradient reduction: validate_args "
                           "asserts 'Must use --overlap-param-gather with --overlap-grad-reduce'")
    if s.pp > 1 and s.schedule not in ("1f1b", "interleaved"):
        raise refuse(name, f"the {s.schedule} schedule: its pipeline schedules are 1F1B and interleaved 1F1B "
                           "(megatron/core/pipeline_parallel/schedules.py has no GPipe or zero-bubble flag)")
    check_rank_order(name, s)
    check_host_options(name, s, writes_moments=True, writes_host=True)   # --use-precision-aware-optimizer; graphs
    layout = megatron_layout_text(model, s)
    if chunked(s.schedule) and layers_per_model_chunk(model, s) is None and not layout:
        raise refuse(name, f"interleaving needs the {model.layers} layers to split into p x v = "
                           f"{s.pp * s.chunks} equal model chunks")
    if _virtual(s) and not s.overlap_p2p and s.pp <= 2:
        raise refuse(name, f"the interleaved schedule on p={s.pp} stages without overlapped sends: Megatron "
                           "overlaps them by default, and validate_args allows --no-overlap-p2p-communication "
                           "with p > 2 only (batched sends would pair the same 2 ranks twice)")
    if s.overlap_p2p and not _virtual(s):
        raise refuse(name, "overlapped pipeline sends with one model chunk per stage: validate_args turns "
                           "them off without a virtual pipeline")


FSDP_SHARDING = {2: "optim_grads", 3: "optim_grads_params"}
"""ZeRO stage -> Megatron-FSDP's --data-parallel-sharding-strategy."""
FSDP_DTYPE = {"bf16": "bf16", "fp8": "bf16", "fp16": "fp16", "fp32": "fp32"}
"""Training dtype -> the parameters' (and so 'auto' gradients') dtype; FP8 trains on bf16 parameters."""


def _virtual(s) -> bool:
    """A virtual pipeline (v > 1 model chunks per stage): the only case Megatron overlaps sends."""
    return chunked(s.schedule) and s.chunks > 1 and s.pp > 1


def llama_style(model) -> bool:
    """Built LLaMA-style by the explorer (explorer/model/graph: the llama family, and every model with
    experts, a head size of its own or latent attention): RMSNorm, SwiGLU, rotary positions, no biases,
    no dropout, an untied output layer."""
    return model.family == "llama" or getattr(model, "uses_moe_graph", False)


def grad_flags(s) -> list:
    """The flags that make Megatron reduce gradients in strategy.grad_dtype (rules.json megatron.grad_reduce_dtype
    and megatron_fsdp_grad_dtype): Megatron-FSDP has dtypes of its own ('auto' = the parameters'), and the
    DDP flags are written with them too, so that validate_args' accumulate_allreduce_grads_in_fp32 agrees."""
    out = []
    if s.zero >= 2 and not (s.grad_dtype == "model" and s.dtype == "fp32"):
        dtype = "fp32" if s.grad_dtype == "fp32" else FSDP_DTYPE[s.dtype]
        out += [("--megatron-fsdp-main-grads-dtype", dtype), ("--megatron-fsdp-grad-comm-dtype", dtype)]
    if s.grad_dtype == "fp32":
        out.append(("--accumulate-allreduce-grads-in-fp32",))
    elif s.dtype in ("bf16", "fp8"):    # otherwise validate_args turns fp32 accumulation on for --bf16
        out.append(("--grad-reduce-in-bf16",))
    return out


def megatron_args(model, strategy) -> str:
    """The arguments, one flag per line (a shell continuation after each but the last)."""
    _check(model, strategy)
    s = strategy
    out = [("--tensor-model-parallel-size", s.tp), ("--pipeline-model-parallel-size", s.pp),
           ("--context-parallel-size", s.cp), ("--expert-model-parallel-size", s.ep)]
    if s.cp > 1:   # Transformer Engine's CP communication: p2p (ring) or a2a (Ulysses-style)
        out.append(("--cp-comm-type", "p2p" if s.cp_algo == "ring" else "a2a"))
    if s.sequence_parallel:
        out.append(("--sequence-parallel",))
    layout = megatron_layout_text(model, s)
    if layout:     # Megatron reads v from it (transformer_config.py: detected_vpp_size)
        out.append(("--pipeline-model-parallel-layout", layout))
    elif chunked(s.schedule):
        out.append(("--num-layers-per-virtual-pipeline-stage", layers_per_model_chunk(model, s)))
    counts = stage_counts(model, s)
    if s.pp > 1 and len(set(counts)) > 1 and not layout:
        out += [("--decoder-first-pipeline-num-layers", counts[0]),
                ("--decoder-last-pipeline-num-layers", counts[-1])]
    if s.recompute == "selective":
        out.append(("--recompute-granularity", "selective"))
        if s.recompute_modules:      # Megatron-Core's default is core_attn alone
            out.append(("--recompute-modules",) + s.recompute_modules)
    elif s.recompute == "full":
        out += [("--recompute-granularity", "full"), ("--recompute-method", "uniform"),
                ("--recompute-num-layers", 1)]
    if s.zero >= 1:          # Megatron-FSDP (v1) runs on the distributed optimizer too
        out.append(("--use-distributed-optimizer",))
    if s.zero >= 2:
        out += [("--use-megatron-fsdp",), ("--data-parallel-sharding-strategy", FSDP_SHARDING[s.zero]),
                ("--ckpt-format", "fsdp_dtensor")]
    if s.overlap_dp:
        out.append(("--overlap-grad-reduce",))
    if s.overlap_param_gather and s.zero in (1, 2):   # needs --overlap-grad-reduce (checked above)
        out.append(("--overlap-param-gather",))
    if s.overlap_tp:
        out.append(("--tp-comm-overlap",))
    if _virtual(s) and not s.overlap_p2p:   # overlap is Megatron's default with a virtual pipeline
        out.append(("--no-overlap-p2p-communication",))
    out += [("--micro-batch-size", s.micro_batch), ("--global-batch-size", s.global_batch)]
    if s.dtype == "fp8":              # Transformer Engine FP8 on top of bf16 (Megatron-LM --fp8-format)
        out += [("--bf16",), ("--fp8-format", "hybrid")]
        if s.fp8_recipe != "delayed":   # Megatron-LM's default --fp8-recipe is delayed
            out.append(("--fp8-recipe", s.fp8_recipe))
    elif s.dtype != "fp32":
        out.append((f"--{s.dtype}",))
    out += grad_flags(s)
    for option in OPTIONS:           # the option table's Megatron-LM switches (explorer/strategy/options.py)
        if option.megatron and getattr(s, option.name) is True:
            out += [(option.megatron,)] + list(option.megatron_with(s) if option.megatron_with else ())
    if s.adam_moments != "fp32":      # TE's FusedAdam keeps the moments in bf16 (explorer/hardware/precision.py)
        out += [("--use-precision-aware-optimizer",), ("--exp-avg-dtype", s.adam_moments),
                ("--exp-avg-sq-dtype", s.adam_moments)]
    out += [("--num-layers", model.layers), ("--hidden-size", model.hidden),
            ("--num-attention-heads", model.heads), ("--ffn-hidden-size", model.ffn_hidden),
            ("--seq-length", model.seq_len), ("--max-position-embeddings", model.seq_len)]
    if model.kv_heads != model.heads:
        out += [("--group-query-attention",), ("--num-query-groups", model.kv_heads)]
    if llama_style(model):
        rope = "yarn" if getattr(model, "yarn_scaling_factor", 0) else "rope"     # gpt-oss: YaRN (megatron_moe.py)
        glu = "--quick-geglu" if getattr(model, "quick_geglu", False) else "--swiglu"    # gpt-oss: quick-GEGLU
        out += [(glu,), ("--normalization", "RMSNorm"), ("--position-embedding-type", rope),
                ("--untie-embeddings-and-output-weights",),
                *(() if getattr(model, "linear_bias", False) else (("--disable-bias-linear",),)),
                ("--attention-dropout", 0.0), ("--hidden-dropout", 0.0)]
    out.append(("--attention-backend", attention_backend_of(model)))    # the kernel that was costed
    out += moe_flags(model, s)                       # experts, head size, latent attention (issue 11)
    out += graph_flags(model, s)                     # CUDA graphs (issue 27; megatron_moe.py)
    if model.mtp_layers:                             # DeepSeek-V3's MTP modules (explorer/model/graph/mtp.py)
        out.append(("--mtp-num-layers", model.mtp_layers))
    lines = [" ".join(shlex.quote(str(x)) for x in item) for item in out]   # every word quoted for the shell
    head = [f"# Megatron-LM arguments for {title(model, s)}",
            f"{WORLD} {s.devices} (= d {s.dp} x t {s.tp}{f' x cp {s.cp}' if s.cp > 1 else ''} x p {s.pp}; "
            "torchrun --nnodes x --nproc-per-node)"]
    if s.zero >= 2:
        head.append("# environment: CUDA_DEVICE_MAX_CONNECTIONS unset or > 1 (validate_args asserts it for "
                    "Megatron-FSDP)")
    elif s.tp > 1 or s.cp > 1:
        head.append("# environment: CUDA_DEVICE_MAX_CONNECTIONS=1 (validate_args asserts it with t > 1 or "
                    "cp > 1 before Blackwell)")
    return "\n".join(head + [line + " \\" for line in lines[:-1]] + lines[-1:]) + "\n"


def _precision_fields(args, dtype: str) -> dict:
    """fp8_recipe and adam_moments from --fp8-recipe and the precision-aware optimizer's moment dtypes
    (explorer/hardware/precision.py); a dtype pair it does not model is refused in one line."""
    out = {}
    if args.recompute_granularity == "selective" and args.recompute_modules is not None:
        bad = [m for m in args.recompute_modules if m not in RECOMPUTE_MODULES]
        if bad or not args.recompute_modules:
            raise ExplorerError(f"--recompute-modules {' '.join(args.recompute_modules)[:60]}: the explorer models "
                                f"{', '.join(RECOMPUTE_MODULES)}")
        out["recompute_modules"] = tuple(args.recompute_modules)
    if dtype == "fp8" and args.fp8_recipe not in (None, "delayed"):
        if args.fp8_recipe not in FP8_RECIPES:
            raise ExplorerError(f"--fp8-recipe {args.fp8_recipe[:40]!r}: the explorer models "
                                f"{', '.join(FP8_RECIPES)}")
        out["fp8_recipe"] = args.fp8_recipe
    moments = {args.exp_avg_dtype, args.exp_avg_sq_dtype} if args.use_precision_aware_optimizer else {"fp32"}
    if len(moments) > 1 or not moments <= set(MOMENT_DTYPES):
        raise ExplorerError(f"--exp-avg-dtype {args.exp_avg_dtype[:20]} --exp-avg-sq-dtype {args.exp_avg_sq_dtype[:20]}: "
                            "the explorer models both Adam moments in fp32 or both in bf16")
    if moments != {"fp32"}:
        out["adam_moments"] = moments.pop()
    return out


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise ExplorerError(f"cannot read the Megatron-LM arguments: {message}")


ATTENTION_BACKEND = {"flash": "flash", "standard": "unfused"}
"""Megatron-Core's AttnBackend (megatron/core/transformer/enums.py: flash, fused, unfused, local, auto; Megatron-LM
--attention-backend, default auto, megatron/training/arguments.py _add_network_size_args at d98e8a64) for each
attention the explorer prices (explorer/model/spec.py ATTENTION): FlashAttention keeps no s x s scores, the
unfused core materialises them (Korthikanti et al. 2022 Sec 4.1). Always written: with auto Transformer Engine
picks a kernel by GPU and shape (cuDNN's fused attention on Hopper), which is not what a 'standard' model costs.
The Megatron-Bridge recipe writes the same (model.attention_backend = AttnBackend.flash / .unfused)."""
BACKEND_ATTENTION = {backend: attention for attention, backend in ATTENTION_BACKEND.items()} | {"fused": "flash"}
"""Read back: 'fused' (cuDNN's fused attention, what a model with attention sinks pins: attention_backend_of) is
the explorer's fused kernel too."""


def attention_backend_of(model) -> str:
    """--attention-backend for `model`: ATTENTION_BACKEND, but 'fused' (cuDNN) for a fused kernel with attention
    sinks, which Transformer Engine never runs on FlashAttention (explorer/hardware/attention.py kernel_for)."""
    if model.attention == "flash" and getattr(model, "attention_sinks", False):
        return "fused"
    return ATTENTION_BACKEND[model.attention]


def _parser() -> _Parser:
    p = _Parser(prog="megatron", add_help=False, allow_abbrev=False)
    for flag in ("--tensor-model-parallel-size", "--pipeline-model-parallel-size", "--context-parallel-size",
                 "--expert-model-parallel-size", "--num-layers-per-virtual-pipeline-stage",
                 "--decoder-first-pipeline-num-layers", "--decoder-last-pipeline-num-layers",
                 "--recompute-num-layers", "--micro-batch-size", "--global-batch-size", "--num-layers",
                 "--hidden-size", "--num-attention-heads", "--ffn-hidden-size", "--seq-length",
                 "--max-position-embeddings", "--num-query-groups", "--mtp-num-layers"):
        p.add_argument(flag, type=int)
    p.add_argument("--pipeline-model-parallel-layout")
    p.add_argument("--attention-backend", default="auto")
    for flag in ("--recompute-granularity", "--recompute-method", "--normalization", "--fp8-format",
                 "--cp-comm-type", "--data-parallel-sharding-strategy", "--position-embedding-type",
                 "--fp8-recipe"):
        p.add_argument(flag)
    for flag in ("--exp-avg-dtype", "--exp-avg-sq-dtype"):
        p.add_argument(flag, default="fp32")
    p.add_argument("--recompute-modules", nargs="*")
    for flag in ("--megatron-fsdp-main-grads-dtype", "--megatron-fsdp-grad-comm-dtype"):
        p.add_argument(flag, default="auto")
    for flag in ("--sequence-parallel", "--use-distributed-optimizer", "--overlap-grad-reduce", "--bf16",
                 "--fp16", "--group-query-attention", "--swiglu", "--quick-geglu",
                 "--accumulate-allreduce-grads-in-fp32",
                 "--use-flash-attn", "--tp-comm-overlap", "--overlap-param-gather", "--grad-reduce-in-bf16",
                 "--use-megatron-fsdp", "--use-precision-aware-optimizer"):
        p.add_argument(flag, action="store_true")
    p.add_argument("--no-overlap-p2p-communication", action="store_false", dest="overlap_p2p_comm")
    for option in OPTIONS:           # the option table's switches, read back (their first flag)
        if option.megatron:
            p.add_argument(option.megatron, action="store_true", dest=f"option_{option.name}")
    add_moe_arguments(p)
    return p


def parse_megatron_args(text: str, world_size: int | None = None) -> tuple:
    """(model fields, Strategy) from Megatron-LM arguments; flags it does not model are ignored.

    The world size is `world_size`, or the text's '# world size: N' line."""
    if world_size is None:
        for line in text.splitlines():
            if line.strip().startswith(WORLD):
                words = line.strip()[len(WORLD):].split()
                world_size = int(words[0]) if words and words[0].isdigit() else None
    if not isinstance(world_size, int) or world_size < 1:
        raise ExplorerError("the Megatron-LM arguments do not say the world size (give it, or a "
                            "'# world size: N' line)")
    body = " ".join(line.split("#", 1)[0].strip().removesuffix("\\") for line in text.splitlines())
    try:
        tokens = [tok for tok in shlex.split(body) if tok != "\\"]
    except ValueError as err:
        raise ExplorerError(f"cannot split the Megatron-LM arguments: {err}") from None
    args, _ = _parser().parse_known_args(tokens)
    for flag in ("num_layers", "hidden_size", "num_attention_heads", "seq_length", "micro_batch_size",
                 "global_batch_size"):
        if getattr(args, flag) is None:
            raise ExplorerError(f"the Megatron-LM arguments lack --{flag.replace('_', '-')}")
    # a size given is a whole number >= 1, named by its flag ('--pipeline-model-parallel-size 0' read as 1, -2 as a
    # negative dp: a hostile review)
    tp, pp, cp = (1 if value is None else whole(value, flag) for value, flag in (
        (args.tensor_model_parallel_size, "--tensor-model-parallel-size"),
        (args.pipeline_model_parallel_size, "--pipeline-model-parallel-size"),
        (args.context_parallel_size, "--context-parallel-size")))
    algo = {None: "ring", "p2p": "ring", "a2a": "ulysses"}.get(args.cp_comm_type)
    if algo is None:
        raise ExplorerError(f"--cp-comm-type {args.cp_comm_type[:40]!r}: the explorer models p2p (ring) and a2a "
                            "(Ulysses) only")
    if world_size % (tp * cp * pp):
        raise ExplorerError(f"world size {world_size} is not divisible by t x cp x p = {tp * cp * pp}")
    model = {"layers": args.num_layers, "hidden": args.hidden_size, "heads": args.num_attention_heads,
             "seq_len": args.seq_length, "ffn_hidden": args.ffn_hidden_size or 4 * args.hidden_size,
             "kv_heads": args.num_query_groups if args.group_query_attention else args.num_attention_heads,
             "family": "llama" if args.swiglu or args.quick_geglu else "gpt", **moe_model_fields(args)}
    if args.attention_backend != "auto":     # the kernel named, as the export writes it (ATTENTION_BACKEND)
        if args.attention_backend not in BACKEND_ATTENTION:
            raise ExplorerError(f"--attention-backend {args.attention_backend[:40]!r}: the explorer prices "
                                "flash, fused and unfused (FlashAttention or cuDNN's fused kernel, the unfused core) only")
        model["attention"] = BACKEND_ATTENTION[args.attention_backend]
    elif args.use_flash_attn:    # older arguments; else the family's default attention (ModelSpec.DEFAULT_ATTENTION)
        model["attention"] = "flash"
    zero = _zero(args)
    dtype = "fp8" if args.fp8_format else ("bf16" if args.bf16 else ("fp16" if args.fp16 else "fp32"))
    fields = {"framework": "megatron-lm",      # priced as Megatron-Core runs it (explorer/strategy/frameworks.py)
              "dp": world_size // (tp * cp * pp), "tp": tp, "pp": pp, "cp": cp, "cp_algo": algo,
              "micro_batch": args.micro_batch_size,
              "global_batch": args.global_batch_size, "sequence_parallel": args.sequence_parallel,
              "zero": zero, "overlap_dp": args.overlap_grad_reduce or zero >= 2,
              "overlap_tp": args.tp_comm_overlap,
              "overlap_param_gather": args.overlap_param_gather and zero in (1, 2),
              "dtype": dtype, "grad_dtype": _grad_dtype(args, dtype, zero),
              "recompute": args.recompute_granularity or "none", "ep": args.expert_model_parallel_size or 1,
              **_precision_fields(args, dtype), **host_fields(args),
              **{o.name: True for o in OPTIONS if o.megatron and getattr(args, f"option_{o.name}")}}
    if args.expert_tensor_parallel_size not in (None, tp):
        fields["expert_tp"] = args.expert_tensor_parallel_size
    if args.num_layers_per_virtual_pipeline_stage:
        per_stage, rest = divmod(args.num_layers, pp)
        chunks, left = divmod(per_stage, args.num_layers_per_virtual_pipeline_stage)
        if rest or left:
            raise ExplorerError("--num-layers-per-virtual-pipeline-stage does not divide the layers of a stage")
        if chunks > 1 and pp > 1:
            # a virtual pipeline overlaps its sends unless --no-overlap-p2p-communication (validate_args)
            fields.update(schedule="interleaved", chunks=chunks, overlap_p2p=args.overlap_p2p_comm)
    if args.mtp_num_layers:
        model["mtp_layers"] = args.mtp_num_layers
    first, last = args.decoder_first_pipeline_num_layers, args.decoder_last_pipeline_num_layers
    if args.pipeline_model_parallel_layout:      # v from the layout (transformer_config.py: detected_vpp_size)
        virtual = len(parse_layout(args.pipeline_model_parallel_layout).stages)
        if virtual % pp:
            raise ExplorerError(f"--pipeline-model-parallel-layout has {virtual} virtual stages, not a multiple "
                                f"of the {pp} pipeline stages")
        fields.update(layout_fields(args.pipeline_model_parallel_layout, pp, args.mtp_num_layers or 0, args.num_layers,
                                    first, last))
        if virtual > pp:
            fields.update(schedule="interleaved", chunks=virtual // pp, overlap_p2p=args.overlap_p2p_comm)
    elif pp > 1 and (first is not None or last is not None):
        fields["stage_map"] = _stage_map(args.num_layers, pp, first, last)
    strategy = Strategy(**fields)
    if strategy.stage_map and strategy.stage_map == strategy.with_(stage_map=()).stages(args.num_layers):
        strategy = strategy.with_(stage_map=())      # the even split, written out: keep the default
    return model, strategy


def _zero(args) -> int:
    """ZeRO stage: Megatron-FSDP's sharding strategy, else 1 with the distributed optimizer."""
    if args.use_megatron_fsdp:
        stage = {"optim_grads": 2, "optim_grads_params": 3, None: 3}.get(args.data_parallel_sharding_strategy)
        if stage is None:
            raise ExplorerError(f"--data-parallel-sharding-strategy {str(args.data_parallel_sharding_strategy)[:40]!r}:"
                                " the explorer reads optim_grads (ZeRO-2) and optim_grads_params (ZeRO-3)")
        return stage
    return 1 if args.use_distributed_optimizer else 0


def _grad_dtype(args, dtype: str, zero: int) -> str:
    """The dtype Megatron reduces gradients in, as a Strategy.grad_dtype ("model" or "fp32")."""
    if zero >= 2:            # Megatron-FSDP: grad comm dtype, else main grads dtype, else the parameters'
        comm = args.megatron_fsdp_grad_comm_dtype
        reduced = comm if comm != "auto" else args.megatron_fsdp_main_grads_dtype
        return "fp32" if reduced == "fp32" else "model"
    if dtype in ("bf16", "fp8"):  # validate_args: fp32 unless --grad-reduce-in-bf16
        return "model" if args.grad_reduce_in_bf16 else "fp32"
    return "fp32" if args.accumulate_allreduce_grads_in_fp32 else "model"


def layout_fields(text: str, pp: int, mtp_layers: int, layers: int, first=None, last=None) -> dict:
    """The strategy fields of an imported layout: a layout that says no more than a stage map (stage_map_of: what
    megatron_layout_text writes for a dragged split) of the model's `layers` comes back as that stage map, so the
    split stays draggable on the Strategy page, or as nothing when it is the even split; any other layout -- one
    whose MTP layers are not the model's, or whose layer count is not (the rules name either) -- as the layout.
    With --decoder-first/last-pipeline-num-layers (`first`, `last`) too: refused, as Megatron-LM refuses them."""
    if first is not None or last is not None:
        raise ExplorerError("a pipeline layout and the first/last stage's layer counts are given together: Megatron-LM "
                            "refuses them together (give one of them)")
    stage_map = stage_map_of(text, pp, mtp_layers)
    if stage_map is None or len(stage_map) != layers:
        return {"pipeline_layout": text}
    return {} if stage_map == Strategy(pp=pp).stages(layers) else {"stage_map": stage_map}


def _stage_map(layers: int, pp: int, first, last) -> tuple:
    """The stage map of --decoder-first/last-pipeline-num-layers (pipeline_layout.first_last_counts)."""
    counts = first_last_counts(layers, pp, first, last)
    return tuple(stage for stage, count in enumerate(counts) for _ in range(count))


def notes(model, strategy) -> list:
    """What Megatron-LM would do differently from what was costed, and how the arguments pin it."""
    s = strategy
    out = [f"Megatron-LM has no data-parallel flag: d = world size / (t cp p); launch on {s.devices} GPUs."]
    if s.dtype in ("bf16", "fp8") and s.zero < 2:
        out.append("Megatron reduces gradients in fp32 with --bf16 unless --grad-reduce-in-bf16: written "
                   + ("--accumulate-allreduce-grads-in-fp32" if s.grad_dtype == "fp32" else "--grad-reduce-in-bf16")
                   + f", costed in {'fp32' if s.grad_dtype == 'fp32' else 'bf16'}.")
    if s.zero >= 2:
        out.append("Megatron-FSDP always overlaps the gradient reduce-scatter (and, fully sharded, the parameter "
                   "gathers); its gradient dtypes are written as costed.")
    if _virtual(s):
        out.append("A virtual pipeline overlaps its sends by default"
                   + ("." if s.overlap_p2p else ": written --no-overlap-p2p-communication, as costed."))
    if llama_style(model):
        out.append("Megatron's defaults are learned positions, tied embeddings, biases and dropout 0.1: the "
                   "Llama-style flags are written so that it builds the model that was costed.")
    out.append(f"The attention kernel is pinned (--attention-backend {attention_backend_of(model)}): with "
               "Megatron's default, auto, Transformer Engine picks one by GPU and shape.")
    out.append(f"Megatron pads the vocabulary to a multiple of 128 x t; the explorer costs V = {model.vocab}.")
    return out
