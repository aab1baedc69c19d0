"""Argument parsing shared by the commands; errors are one line on stderr, exit 2."""
from __future__ import annotations

import argparse
from dataclasses import replace

from explorer.io.clusters import load_cluster
from explorer.errors import ExplorerError
from explorer.io.models import load_model
from explorer.model.spec import ATTENTION
from explorer.strategy.strategy import CP_ALGOS, DTYPES, GRAD_DTYPES, RECOMPUTE, SCHEDULES, Strategy
from explorer.strategy.options import OPTIONS
from explorer.strategy.pipeline_layout import COUNTS_CHARS, first_last_layout, layout_from_text
from explorer.strategy.frameworks import FRAMEWORKS, GRAD_FROM_FRAMEWORK, default_grad_dtype
from explorer.io.strategies import load_strategy
from explorer.schedules import chunked


class Parser(argparse.ArgumentParser):
    """argparse that reports a bad flag as ExplorerError (one line, exit 2) instead of usage text."""

    def error(self, message):
        raise ExplorerError(message)


def add_strategy_flags(cmd: argparse.ArgumentParser, extra_schedules: tuple = ()) -> None:
    cmd.add_argument("--model", required=True, help="preset name or model file (JSON/YAML/config.json)")
    cmd.add_argument("--cluster", required=True, help="preset name or cluster file")
    cmd.add_argument("--gpus", type=int, help="number of devices (default: dp*tp*cp*pp)")
    cmd.add_argument("--tp", type=int, help="operator (tensor) parallel degree t")
    cmd.add_argument("--pp", type=int, help="pipeline stages p")
    cmd.add_argument("--dp", type=int, help="data-parallel degree d (default gpus/(tp*cp*pp))")
    cmd.add_argument("--ep", type=int, help="expert-parallel degree e, carved out of dp (MoE models)")
    cmd.add_argument("--expert-tp", type=int, help="expert tensor-parallel degree: tp (default) or 1")
    cmd.add_argument("--micro-batch", type=int, help="micro-batch size b (sequences)")
    cmd.add_argument("--global-batch", type=int, help="global batch size B (sequences)")
    cmd.add_argument("--schedule", choices=tuple(SCHEDULES) + tuple(extra_schedules))
    cmd.add_argument("--chunks", type=int, help="interleaved model chunks per stage v")
    cmd.add_argument("--zero", type=int, choices=(0, 1, 2, 3),
                     help="ZeRO stage; --zero 1 --grad-dtype fp32 is Megatron's distributed optimizer "
                          "(optimizer states sharded over dp, fp32 main grads reduce-scattered)")
    cmd.add_argument("--recompute", choices=RECOMPUTE)
    cmd.add_argument("--sequence-parallel", action="store_true", default=None)
    cmd.add_argument("--overlap-dp", action="store_true", default=None,
                     help="overlap gradient synchronisation with the last backward (interleaved: each "
                          "chunk's; Megatron-LM --overlap-grad-reduce)")
    cmd.add_argument("--overlap-tp", action="store_true", default=None,
                     help="run the sequence-parallel all-gathers and reduce-scatters under the GEMMs next to them "
                          "(Megatron-LM --tp-comm-overlap; needs --sequence-parallel)")
    cmd.add_argument("--overlap-param-gather", action="store_true", default=None,
                     help="ZeRO-1/2: run the parameter all-gather after the step under the next forward "
                          "(Megatron-LM --overlap-param-gather with the distributed optimizer; off by default)")
    cmd.add_argument("--overlap-p2p", action="store_true", default=None,
                     help="interleaved schedule: run the pipeline's point-to-point sends under computation; a "
                          "receiving pass waits for its input's send (Megatron-LM's overlap_p2p_comm)")
    cmd.add_argument("--zero-prefetch", action=argparse.BooleanOptionalAction, default=None,
                     help="ZeRO-3: gather the next layer's parameters under the current layer's compute "
                          "(DeepSpeed stage3_prefetch_bucket_size, FSDP forward/backward_prefetch; on by default, "
                          "as in DeepSpeed)")
    cmd.add_argument("--seq-len", type=int, help="override the model's sequence length")
    add_pipeline_layout_flags(cmd)
    add_long_context_flags(cmd)
    cmd.add_argument("--expert-load-share", type=float,
                     help="MoE what-if: the most-loaded expert's share of the routed tokens (default balanced)")
    cmd.add_argument("--dtype", choices=DTYPES,
                     help="training dtype; fp8 = Transformer Engine FP8 GEMMs with bf16 weights, "
                          "gradients and activations, fp32 master weights and Adam states")
    cmd.add_argument("--grad-dtype", choices=GRAD_DTYPES,
                     help="gradient accumulation/all-reduce dtype: model or fp32 (Megatron-LM "
                          "--accumulate-allreduce-grads-in-fp32: 4 B gradients, twice the dp bytes); default: the "
                          "--framework's own (generic: model)")
    cmd.add_argument("--framework", choices=FRAMEWORKS,
                     help="the framework the strategy targets; its defaults apply unless overridden (gradients "
                          "reduced in fp32 by Megatron-LM with bf16, Megatron-Bridge's bf16 recipes, torchtitan and "
                          "MindSpore; in the model dtype by DeepSpeed and generic, the default: "
                          "explorer/strategy/frameworks.py)")
    add_option_flags(cmd)
    cmd.add_argument("--strategy", help="strategy JSON file; flags given on the line override it")
    cmd.add_argument("--json", action="store_true", help="print one JSON object")


def add_option_flags(cmd: argparse.ArgumentParser, searched: bool = False) -> None:
    """A flag per strategy option (explorer/strategy/options.py), as its record says; `searched`: the search
    command's, for the options the search carries (with their defaults and the search's help)."""
    for o in OPTIONS:
        if searched and not o.search:
            continue
        extra = {"default": o.default} if searched else {}
        text = o.search_help if searched and o.search_help else o.help
        if o.kind == "bool":
            cmd.add_argument(o.flag, action="store_true", help=text, **({"default": None} if not searched else extra))
        elif o.kind == "choice":
            cmd.add_argument(o.flag, choices=o.choices, help=text, **extra)
        else:
            cmd.add_argument(o.flag, nargs="+", choices=o.choices, metavar="MODULE", help=text, **extra)


def option_flags(args) -> dict:
    """The option values given on the line (those whose flag was not given are left out)."""
    return {o.name: getattr(args, o.name) for o in OPTIONS if getattr(args, o.name, None) is not None}


def add_pipeline_layout_flags(cmd: argparse.ArgumentParser) -> None:
    """--pipeline-layout and Megatron-LM's first/last-stage layer counts (explorer/strategy/pipeline_layout.py)."""
    cmd.add_argument("--pipeline-layout", help="uneven pipeline stages as Megatron-LM's "
                     "--pipeline-model-parallel-layout writes them: E embedding, t layer, m MTP layer, L loss, '|' "
                     "between the p x v virtual stages, (X)*n and c*n repeats; e.g. 'Et|(tt|)*30mL'")
    cmd.add_argument("--decoder-first-pipeline-num-layers", type=int, metavar="N",
                     help="layers on the first pipeline stage, the rest split evenly (Megatron-LM's flag)")
    cmd.add_argument("--decoder-last-pipeline-num-layers", type=int, metavar="N",
                     help="layers on the last pipeline stage, the rest split evenly (Megatron-LM's flag)")


def _first_last_layout(args, model, fields: dict) -> None:
    """fields['pipeline_layout'] from --decoder-first/last-pipeline-num-layers (Megatron's rule)."""
    first = getattr(args, "decoder_first_pipeline_num_layers", None)
    last = getattr(args, "decoder_last_pipeline_num_layers", None)
    if first is None and last is None:
        return
    if getattr(args, "pipeline_layout", None):
        raise ExplorerError("give --pipeline-layout or --decoder-first/last-pipeline-num-layers, not both "
                            "(Megatron-LM refuses them together)")
    chunks = fields.get("chunks", 1)
    fields["pipeline_layout"] = first_last_layout(model.layers, model.mtp_layers, fields["pp"], chunks,
                                                  first, last).text()
    fields["stage_map"] = ()


def add_long_context_flags(cmd: argparse.ArgumentParser) -> None:
    """--cp, --cp-algo (context parallelism) and --attention (FlashAttention or the standard core)."""
    cmd.add_argument("--cp", type=int, help="context-parallel degree: the sequence split over cp devices")
    cmd.add_argument("--cp-algo", choices=CP_ALGOS, help="ring (Megatron-LM CP, K/V passed around a ring, "
                     "overlapped) or ulysses (DeepSpeed-Ulysses all-to-all on heads); default ring")
    cmd.add_argument("--attention", choices=ATTENTION,
                     help="attention implementation (default: flash for LLaMA models, standard otherwise)")


FLAG_FIELDS = {"tp": "tp", "pp": "pp", "dp": "dp", "micro_batch": "micro_batch",
               "global_batch": "global_batch", "schedule": "schedule", "chunks": "chunks",
               "zero": "zero", "recompute": "recompute", "sequence_parallel": "sequence_parallel",
               "overlap_dp": "overlap_dp", "overlap_tp": "overlap_tp",
               "overlap_param_gather": "overlap_param_gather", "zero_prefetch": "zero_prefetch",
               "overlap_p2p": "overlap_p2p", "dtype": "dtype", "grad_dtype": "grad_dtype",
               "cp": "cp", "cp_algo": "cp_algo", "ep": "ep", "expert_tp": "expert_tp",
               "framework": "framework", "pipeline_layout": "pipeline_layout"}
"""Flags (argparse dests) -> Strategy fields, beside the option table's (option_flags)."""


def model_and_cluster(args) -> tuple:
    """The --model (with --seq-len applied) and --cluster of a command."""
    model = load_model(args.model)
    if args.seq_len is not None:
        if args.seq_len <= 0:
            raise ExplorerError(f"--seq-len must be positive, got {args.seq_len}")
        model = model.with_seq_len(args.seq_len)
    if getattr(args, "attention", None) is not None:
        model = model.with_attention(args.attention)
    share = getattr(args, "expert_load_share", None)
    if share is not None:              # ModelSpec checks it (an MoE model, 1/experts <= share <= 1)
        model = replace(model, expert_load_share=share)
    return model, load_cluster(args.cluster)


def resolve(args) -> tuple:
    """(model, cluster, strategy, gpus) from parsed flags; ExplorerError on anything wrong."""
    model, cluster = model_and_cluster(args)
    fields = {}
    if args.strategy:
        loaded = load_strategy(args.strategy)
        fields = {name: getattr(loaded, name)
                  for name in Strategy.__dataclass_fields__}
        if loaded.grad_dtype == default_grad_dtype(loaded.framework, loaded.dtype, loaded.zero):
            fields["grad_dtype"] = GRAD_FROM_FRAMEWORK    # its framework's default: follows --framework/--dtype/--zero
    for flag, name in FLAG_FIELDS.items():
        value = getattr(args, flag)
        if value is not None:
            fields[name] = value
    fields.update(option_flags(args))
    for name in ("tp", "pp", "dp", "micro_batch", "chunks", "cp", "ep"):
        if name in fields and (not isinstance(fields[name], int) or fields[name] < 1):
            raise ExplorerError(f"--{name.replace('_', '-')} must be a positive integer, got {fields[name]}")
    fields.setdefault("tp", 1)
    fields.setdefault("pp", 1)
    cp = fields.get("cp", 1)
    gpus = args.gpus
    if gpus is not None and gpus < 1:
        raise ExplorerError(f"--gpus must be a positive integer, got {gpus}")
    if "dp" not in fields:
        if gpus is None:
            raise ExplorerError("give --gpus (or --dp) so the data-parallel degree is known")
        if gpus % (fields["tp"] * fields["pp"] * cp):
            what = "tp x cp x pp" if cp > 1 else "tp x pp"
            raise ExplorerError(f"--gpus {gpus} is not divisible by {what} = {fields['tp'] * fields['pp'] * cp}")
        fields["dp"] = gpus // (fields["tp"] * fields["pp"] * cp)
    fields.setdefault("micro_batch", 1)
    fields.setdefault("global_batch", fields["micro_batch"] * fields["dp"])
    if chunked(fields.get("schedule", "1f1b")) and "chunks" not in fields:
        fields["chunks"] = 2
    if not chunked(fields.get("schedule", "1f1b")) and args.chunks is None:
        fields["chunks"] = 1
    if getattr(args, "pipeline_layout", None) is not None:    # given, even as '' (named empty below)
        fields["stage_map"] = ()              # the layout given on the line replaces a file's stage map
        text = args.pipeline_layout.strip()
        if not text or set(text) <= COUNTS_CHARS:     # layer counts per stage, as the Strategy page takes them
            fields["pipeline_layout"] = layout_from_text(text, model.layers, model.mtp_layers, fields["pp"],
                                                         fields["pp"] * fields.get("chunks", 1))
    _first_last_layout(args, model, fields)
    strategy = Strategy(**fields)
    return model, cluster, strategy, gpus if gpus is not None else strategy.devices
