"""Validation group "Megatron-Bridge 2025-26": NVIDIA's published pre-training throughput.

Every row of assets/validation/megatron_bridge.json (the Megatron-Bridge performance summary,
NVIDIA-NeMo/Megatron-Bridge docs/performance-summary*.md, containers 25.09 to 26.08; README in
that folder) on a system we have a preset for becomes a case when the model can express it
today, else a skipped row with the reason. The published metric is model TFLOP/s per GPU in
Megatron-Bridge's own FLOPs convention (README "How Megatron-Bridge counts model FLOPs"), so the
prediction is that count divided by our iteration time: predicted and published differ only by
the time.

How each row becomes a strategy (what the tables leave open, from the recipes' own text, never
to fit the number):
* dp = GPUs / (TP x PP x CP); CP > 1 is Megatron's context parallelism with ring attention (its
  default cp_comm_type p2p), held out even in the fitted container (the fit was made without such
  rows; the bundled ones, Llama 3.1 405B, run 126 layers over uneven chunks: the embedding and the loss counted
  as layers, Megatron-Bridge's account_for_embedding/loss_in_pipeline_split, our default layout);
  VP > 1 is Megatron's interleaved schedule with v = VP chunks; TP > 1 runs with sequence
  parallelism (Megatron-Bridge's Llama 3 recipes set sequence_parallel with TP).
* FSDP > 1 rows (FSDP = dp) are Megatron FSDP "optim_grads_params" (= ZeRO-3, scripts/performance/
  utils/helpers.py, set_megatron_fsdp_overrides) with its parameter all-gathers prefetched under
  compute (our ZeRO-3 prefetch, Strategy.zero_prefetch) and each micro-batch's gradient
  reduce-scatter queued under the compute after its backward (gradient_sync.sharded_sync_exposed);
  held out even in the fitted container (the fit was made without them). FSDP over part of dp
  (hybrid sharding) is skipped. FSDP = 0 or absent is Megatron's distributed
  optimizer = ZeRO-1 over dp (use_distributed_optimizer = True in the recipes), with the gradient
  reduce-scatter overlapped with the backward (overlap_grad_reduce = True) and, with d > 1, the parameter
  all-gather under the next forward (Strategy.overlap_param_gather: Megatron-Bridge turns overlap_param_gather on
  whenever data_parallel_size > 1, src/megatron/bridge/training/comm_overlap.py CommOverlapConfig.
  _get_optimizer_overlap_cfgs at 6725f704, and the Llama recipes set it in their DistributedDataParallelConfig;
  before 2026-12-03's fourth session the cases left it off, so the all-gather that follows the optimizer step was
  priced inside the backward's overlap window).
* TP > 1 runs its TP communication under the GEMMs (our overlap_tp, Megatron --tp-comm-overlap): the
  Llama 3 performance configs pass a Transformer Engine userbuffers overlap config for every system
  (scripts/performance/configs/llama/llama3_llm_pretrain.py COMM_OVERLAP_CONFIG_MAP:
  userbuffers_fp8_h100_h8192_tp4_mbs1_seqlen8192, userbuffers_*_b200_h8192_tp2_mbs1_seqlen8192).
* Gradients are reduced in the model dtype, not fp32: the performance runs set
  `ddp.grad_reduce_in_fp32 = False` (helpers.py set_basic_perf_overrides), so grad_dtype =
  "model" (fidelity issue E7's fp32 option stays off here).
* FP8 rows (per-tensor current scaling, MXFP8 or blockwise) run at dtype "fp8": one FP8
  efficiency per hardware for all recipes; the recipe is in each case's assumptions.
* No activation recomputation (the tables name none for these dense rows).

MoE rows (DeepSeek-V3, Qwen3-30B-A3B, Qwen3-235B-A22B, GPT-OSS-120B) are cases of their own
groups, megatron_bridge_moe_<system>, so that the dense groups' targets stay as they are. They are
predicted with the constants fitted on the dense 25.09 rows and one constant of their own, the host's
issue time per kernel (efficiency.host_launch_s, issue 27), fitted on the NeMo 26.02 DGX-B200 rows
(HOST_FIT, "fitted"); every other MoE row is "held out". Their metric is tokens/s per GPU (published verbatim beside the TFLOP/s),
which does not depend on a FLOPs convention (the README lists two convention changes in these
rows: GPT-OSS's MLP and window counting, DeepSeek-V3's MTP layer). How a MoE row becomes a strategy:
* ep from the row, expert tensor parallelism 1 (expert_tp=1): the performance recipes set
  expert_tensor_parallel_size=1 (scripts/performance/configs/qwen/qwen3_workload_base_configs.py
  BASE_QWEN3_*_CONFIG, deepseek/deepseek_workload_base_configs.py, gpt_oss/
  gpt_oss_workload_base_configs.py; README: expert_tensor_parallel_recipe); TP > 1 runs with
  sequence parallelism (Megatron-Core refuses MoE with TP and without it).
* Keyed by what was run (issue 27 item 5): the CUDA graph scope and the token dispatcher of each
  (container, model, system) come from that container's Megatron-Bridge performance recipes (RUN_KEYS,
  RECIPE_TAGS: tag, commit, file); the 25.09 "(tokendrop)" rows are token-drop with padding at capacity
  factor 1.0 (Megatron-Bridge apply_moe_token_drop: no host synchronisation, whole-layer graphs), every
  other row dropless; routing is force-balanced (README "MoE conditions": the 26.x footnote; recipes
  moe_router_force_load_balancing=True), so every expert gets its fair share and nothing is dropped.
* The recipes' overlap of the EP all-to-all under the other micro-batch's compute (moe_a2a_overlap) is
  Strategy.overlap_ep where the recipe set it (A2A_OVERLAP); elsewhere the all-to-alls are exposed (ep_comm).
  DeepEP/HybridEP move the all-to-all's bytes at the level's achieved bandwidth inside an NVLink domain (their
  published bandwidths on Blackwell, 0.55-0.61 of NVLink's 900 GB/s, are the level's all-to-all efficiency within
  a few per cent: explorer/cost/moe_terms.py) and one copy of a token per remote domain across domains
  (explorer/cost/fused_dispatch.py); their kernels and synchronisations are theirs. DeepSeek-V3's keys (graphs,
  dispatcher, overlap, recomputed modules, the gradient reduce's overlap) are explorer/validation/deepseek_v3_runs.py.
* DeepSeek-V3 runs its multi-token-prediction layer (every row except 25.11 "w/o MTP": README, implied
  FLOPs/token; assets/models/deepseek-v3.json mtp_layers) in the recipe's pipeline layout (DEEPSEEK_V3_LAYOUTS).
* A row its source footnotes as a known regression (explorer/validation/published_regressions.py: GPT-OSS 120B in
  26.06.01, cudnn-frontend issue 256) is skipped with the footnote: it measures the bug, not the recipe.
* Not expressible, skipped with the reason: rows whose layers split over pp x v chunks neither evenly, nor
  with the embedding and loss counted, nor by a published layout; rows without a published tokens/s.
"""
from __future__ import annotations

from dataclasses import replace
from functools import lru_cache

from explorer.cost.megatron_flops import CONVENTION as MEGATRON_CONVENTION
from explorer.cost.megatron_flops import megatron_model_flops, padded_vocab  # noqa: F401 (bf16.py reads it here)
from explorer.errors import ExplorerError
from explorer.io.models import load_model
from explorer.strategy.pipeline_layout import even_layout
from explorer.strategy.strategy import Strategy
from explorer.validation.deepseek_v3_runs import NO_GRAD_OVERLAP, NO_PARAM_GATHER_OVERLAP
from explorer.validation.published_regressions import regression_reason
from explorer.validation.moe_runs import A2A_OVERLAP, MEMORY_KEYS, RECIPE_TAGS, RUN_KEYS, RUN_LAYOUTS  # noqa: F401
from explorer.validation.cases import ROOT, Case
from explorer.validation.spread import MOE, SAME_RUN_FIELDS, container_spread  # noqa: F401 (read here)

PATH = ROOT / "assets" / "validation" / "megatron_bridge.json"
SYSTEMS = {"DGX-H100": "dgx-h100", "DGX-B200": "dgx-b200", "DGX-GB200": "gb200-nvl72"}
"""Published system -> cluster preset (assets/clusters). GB300/B300 rows have no preset yet."""
DENSE = {"llama3-8b", "llama3-70b", "llama3.1-405b"}
GROUP = "megatron_bridge_{}"
MOE_GROUP = "megatron_bridge_moe_{}"
FIT_CONTAINERS = ("NeMo 25.09",)
"""The rows the FP8 efficiencies were fitted on (benchmarks/fit_megatron_bridge.py); every
other container's rows are held out."""
HOST_FIT = ("NeMo 26.02", "DGX-B200")
"""The MoE rows the host's issue time per kernel (efficiency.host_launch_s, explorer/model/kernels.py) was
fitted on (issue 27: one container, one system; every other MoE row is held out)."""

def overlaps_sends(pp: int, vp: int) -> bool:
    """What Megatron-Bridge runs for the pipeline's sends: its CommOverlapConfig turns overlap_p2p_comm on
    (and batch_p2p_comm off) exactly when pp > 1 and vp > 1 (src/megatron/bridge/training/comm_overlap.py,
    CommOverlapConfig.setup, "# PP overlap", NVIDIA-NeMo/Megatron-Bridge at 067f987d): the explorer's
    Strategy.overlap_p2p."""
    return pp > 1 and vp > 1


def group_of(system: str, moe: bool = False) -> str:
    return (MOE_GROUP if moe else GROUP).format(SYSTEMS[system].split("-")[-1] if system != "DGX-GB200"
                                                else "gb200")


def model_flops(model, tp: int, global_batch: int) -> float:
    """Megatron-Bridge's model FLOPs per iteration (README "How Megatron-Bridge counts model FLOPs":
    transformer_flops in src/megatron/bridge/training/utils/flop_utils.py, Megatron-LM's count: causal
    attention at half, padded vocabulary, no recomputation) -- the one spelling of that count,
    explorer.cost.megatron_flops.megatron_model_flops, so that a case's predicted TFLOP/s is the
    evaluation's own megatron_tflops_per_gpu (compare like with like, issue 26 item 4)."""
    return megatron_model_flops(model, global_batch, tp)


def skip_reason(entry: dict) -> str:
    """Why a row is not a case today ('' if it is one)."""
    x = entry["inputs"]
    if x["system"] not in SYSTEMS:
        return f"no preset for {x['system']}"
    if x["model"] not in DENSE | MOE:
        return f"no model preset for {x['model']} (assets/models)"
    if x.get("task") != "pretrain":
        return f"{x.get('task')} row: packed-sequence FLOPs convention, not comparable to pre-training"
    if x["dtype"] not in ("bf16", "fp8"):
        return f"{x['dtype']} training is not modelled"
    regressed = regression_reason(entry)
    if regressed:
        return regressed
    if x["model"] in MOE:
        why = _moe_skip_reason(entry)
        if why:
            return why
    pp = x["pipeline_parallel"]
    fsdp = _fsdp(x)
    if fsdp > 1 and fsdp != x["num_gpus"] // (x["tensor_parallel"] * pp * (x.get("context_parallel") or 1)):
        return f"FSDP over {fsdp} of the data-parallel ranks (hybrid sharding) is not expressible"
    vp = x.get("virtual_pipeline") or 1
    model = _row_model(x)
    if vp > 1 and model.layers % (pp * vp) and not _row_layout(x, model) and \
            even_layout(model.layers, model.mtp_layers, pp * vp) is None:
        return (f"{model.layers} layers over pp x v = {pp * vp} chunks: no published layout for this split, and "
                "the embedding and the loss counted as layers (account_for_embedding/loss_in_pipeline_split) do "
                "not split evenly either")
    return ""


DEEPSEEK_V3_LAYOUTS = {(4, 1): "Et*16|t*16|t*16|t*13", (8, 1): "Et*8|(t*8|)*6t*5", (4, 2): "Et*8|(t*8|)*6t*5",
                       (16, 1): "Et*4|(t*4|)*14t", (8, 2): "Et*4|(t*4|)*14t", (4, 4): "Et*4|(t*4|)*14t",
                       (8, 4): "Et|(tt|)*30"}
"""DeepSeek-V3's pipeline layouts by (p, v), the MTP layers and the loss appended to the last stage: Megatron-Bridge
src/megatron/bridge/recipes/deepseek/deepseek_v3.py set_deepseek_v3_pipeline_model_parallel_layout layout_map (at
v0.3.0, 21b02e0c; last_layer = ["mtp"] * mtp_num_layers + ["loss"]), and for H100's p = 8, v = 4 the performance
configs' pp_layout "Et|(tt|)*30mL" (scripts/performance/configs/deepseek/deepseek_workload_base_configs.py
DEEPSEEK_V3_PRETRAIN_CONFIG_H100_V1 at v0.3.0; deepseek_llm_pretrain.py layout= at v0.2.0, 7af9601c)."""


def _default_layout_note(model, pp: int, vp: int) -> str:
    """The case's words for a split the recipe left to Megatron-Bridge's account_for_embedding/loss_in_pipeline_split
    (the explorer's default layout for layers that do not split into p v chunks: explorer.cost.placement.layout_of)."""
    if vp == 1 or not model.layers % (pp * vp):
        return ""
    layout = even_layout(model.layers, model.mtp_layers, pp * vp)
    return (f"pipeline layout {layout.text()} (the embedding and the loss counted as layers: "
            "account_for_embedding/loss_in_pipeline_split); ")


@lru_cache(maxsize=64)
def _model_at(name: str, seq_len: int):
    """A bundled model preset at a sequence length, read once per process: the tables' rows name a dozen presets,
    read and validated again for each row before (load_all_cases took 0.31 s CPU, now 0.03 s, in every
    `evaluate --json`, whose evidence labels the nearest runs with their models: explorer.validation.run_labels).
    ModelSpec is frozen."""
    return load_model(name).with_seq_len(seq_len)


def _row_model(x: dict):
    """The row's model at its sequence length; DeepSeek-V3 with its MTP module unless the row ran 'w/o MTP'."""
    model = _model_at(x["model"], int(x["seq_len"]))
    if model.mtp_layers and "w/o MTP" in (x.get("label_annotation") or ""):
        model = replace(model, mtp_layers=0)
    return model


def _row_layout(x: dict, model) -> str:
    """The pipeline layout the row's recipe ran ('' where the recipe left the split to Megatron's default)."""
    if x["model"] != "deepseek-v3":
        return ""
    stem = DEEPSEEK_V3_LAYOUTS.get((x["pipeline_parallel"], x.get("virtual_pipeline") or 1))
    return stem + "m" * model.mtp_layers + "L" if stem else ""


def _fsdp(x: dict) -> int:
    """The row's FSDP sharding group (0: none; some tables have no FSDP column, or text in it)."""
    return x["fsdp"] if isinstance(x.get("fsdp"), int) else 0


def _moe_skip_reason(entry: dict) -> str:
    x = entry["inputs"]
    if not entry["expected"].get("tokens_per_sec_per_gpu"):
        return ("no tokens/s published for this run (only model TFLOP/s, whose FLOPs convention changed "
                "across containers: README)")
    if _fsdp(x) > 1:
        return "Megatron FSDP of expert weights is not modelled (the MoE cases run ZeRO-1)"
    ep, stage_ranks = x["expert_parallel"] or 1, x["num_gpus"] // x["pipeline_parallel"]
    if stage_ranks % ep:
        return (f"ep={ep} does not divide the {stage_ranks} ranks of a pipeline stage (Megatron-Core needs "
                "world size % (pp x expert-tp x ep) == 0): the row's parallel sizes do not add up")
    return ""


def as_run(entry: dict) -> dict:
    """The row with the parallel layout its recipe ran (RUN_LAYOUTS) where the table's columns say otherwise, and a
    note saying so; every other row as it is."""
    x = entry.get("inputs") if isinstance(entry, dict) else None
    layout = RUN_LAYOUTS.get((x.get("container"), x.get("model"), x.get("system"))) \
        if isinstance(x, dict) and x.get("task") == "pretrain" else None
    if not layout:
        return entry
    table = ", ".join(f"{k} {x.get(k)}" for k in layout)
    return {**entry, "inputs": {**x, **layout}, "layout_note": (
        f"layout from the recipe, not the table's columns ({table}): RUN_LAYOUTS, Megatron-Bridge f29a269f8 (PR 2477); ")}


def moe_case_of(entry: dict) -> Case:
    """A MoE row as a case: tokens/s per GPU predicted from our iteration time (module docstring)."""
    x = entry["inputs"]
    tp, pp, n, ep = x["tensor_parallel"], x["pipeline_parallel"], x["num_gpus"], x["expert_parallel"] or 1
    dp, vp = n // (tp * pp), x.get("virtual_pipeline") or 1
    drop = x.get("label_annotation") or ""
    model = _row_model(x)
    layout = _row_layout(x, model)
    if "tokendrop" in drop:     # Megatron-Bridge apply_moe_token_drop: capacity factor 1.0, padded (RECIPE_TAGS)
        model = replace(model, moe_capacity_factor=1.0)
    graphs, dispatcher = RUN_KEYS.get((x["container"], x["model"], x["system"]), ("none", "alltoall"))
    strategy = Strategy(dp=dp, tp=tp, pp=pp, micro_batch=x["micro_batch_size"], global_batch=x["global_batch_size"],
                        framework="megatron-bridge",   # Megatron-Core's layers and schedules (frameworks.py)
                        schedule="interleaved" if vp > 1 else "1f1b", chunks=vp, zero=1,
                        sequence_parallel=tp > 1, dtype=x["dtype"], grad_dtype="model",
                        overlap_dp=(x["container"], x["model"], x["system"]) not in NO_GRAD_OVERLAP,
                        overlap_p2p=overlaps_sends(pp, vp),
                        ep=ep, expert_tp=1, cuda_graphs=graphs, moe_dispatcher=dispatcher, fp8_recipe=fp8_recipe_of(x),
                        fp8_param_gather=fp8_params_of(x),
                        overlap_ep=(x["container"], x["model"], x["system"]) in A2A_OVERLAP,
                        overlap_param_gather=param_gather_overlapped(x, dp),
                        pipeline_layout=layout, **MEMORY_KEYS.get((x["container"], x["model"], x["system"]), {}))
    tag = RECIPE_TAGS.get(x["container"], ("?", "?", "?"))
    why = (f"{x['container']}, {x['system']} ({SYSTEMS[x['system']]}), held out (nothing fitted on MoE rows); "
           f"t={tp} p={pp} d={dp} e={ep} expert-t=1 (recipes: expert_tensor_parallel_size=1)"
           f"{' v=' + str(vp) + ' (sends overlapped: overlap_p2p_comm)' if vp > 1 else ''}, b={x['micro_batch_size']} B={x['global_batch_size']}, "
           f"s={x['seq_len']}, ZeRO-1, bf16 gradient reduce, {x['dtype']} "
           f"({x.get('fp8_recipe') or x['precision_verbatim']}{', FP8 parameters' if strategy.fp8_param_gather else ''}); "
           + ("token-drop with padding, capacity factor 1.0 (row says tokendrop; forced balance: nothing dropped), "
              if "tokendrop" in drop else "dropless force-balanced routing, ")
           + f"CUDA graphs {graphs!r}, dispatcher {dispatcher} (Megatron-Bridge {tag[0]} {tag[1][:9]} {tag[2]}); "
           + ("all-to-alls under the partner pass (moe_a2a_overlap: Strategy.overlap_ep); " if strategy.overlap_ep else
              "all-to-alls exposed (no moe_a2a_overlap); ")
           + ("HybridEP/DeepEP: the all-to-all's bytes in an NVLink domain, one copy a remote domain across domains "
              "(explorer/cost/fused_dispatch.py); " if dispatcher in ("deepep", "hybridep") else "")
           + ("DeepSeek-V3 keys: explorer/validation/deepseek_v3_runs.py; " if x["model"] == "deepseek-v3" else "")
           + ("gradient reduce not overlapped (overlap_grad_reduce False); " if not strategy.overlap_dp else "")
           + ("the parameter all-gather under the next forward (overlap_param_gather); "
              if strategy.overlap_param_gather else
              "the parameter all-gather not overlapped (the recipe's overlap_param_gather False); " if dp > 1 else "")
           + ("the 128-token sliding window on every other layer (window_attn_skip_freq 2) and the linear biases, "
              "the experts' second one added per local expert outside the grouped GEMM (gpt-oss preset); "
              if x["model"] == "gpt-oss-120b" else "")
           + (f"{model.mtp_layers} MTP layer (recipes: mtp_num_layers=1); " if model.mtp_layers else "")
           + (f"selective recomputation of {', '.join(strategy.recompute_modules)} (MEMORY_KEYS); "
              if strategy.recompute_modules else "")
           + (f"pipeline layout {layout} (DEEPSEEK_V3_LAYOUTS); " if layout else _default_layout_note(model, pp, vp))
           + entry.get("layout_note", "") + "predicted = GBS x s / (our iteration time x GPUs)")
    # host_launch_s was fitted on the three 26.02 B200 rows expressible then (Qwen3-30B-A3B, Qwen3-235B-A22B, GPT-OSS);
    # DeepSeek-V3 (MTP, uneven layout: issue 26 item 7) came after the fit: held out
    subset = "fitted" if (x["container"], x["system"]) == HOST_FIT and x["model"] != "deepseek-v3" else "held out"
    return Case(entry["id"], group_of(x["system"], moe=True), entry["source"], model, strategy, n,
                "tokens_per_sec_per_gpu", float(entry["expected"]["tokens_per_sec_per_gpu"]),
                why.replace("held out (nothing fitted on MoE rows)", "fitted: host_launch_s (issue 27)"
                            if subset == "fitted" else "held out (host_launch_s fitted on NeMo 26.02 DGX-B200)"),
                cluster=SYSTEMS[x["system"]], subset=subset)


def param_gather_overlapped(x: dict, dp: int) -> bool:
    """Strategy.overlap_param_gather of a MoE row: the distributed optimizer's parameter all-gather under the next
    forward whenever d > 1, as for the dense rows (module docstring: CommOverlapConfig._get_optimizer_overlap_cfgs;
    the MoE pretraining recipes also set it in their DistributedDataParallelConfig: src/megatron/bridge/recipes/
    gpt_oss/gpt_oss.py gpt_oss_120b_pretrain_config and recipes/qwen/qwen3_moe.py at v0.2.0, overlap_param_gather
    True), except where a recipe turned it off (deepseek_v3_runs.NO_PARAM_GATHER_OVERLAP). Until 2026-12-08 the MoE
    rows left it off, so their parameter all-gather was priced inside the backward's overlap window."""
    return dp > 1 and (x["container"], x["model"], fp8_recipe_of(x)) not in NO_PARAM_GATHER_OVERLAP


def fp8_recipe_of(x: dict) -> str:
    """Strategy.fp8_recipe of a row (what Transformer Engine keeps in memory: explorer/hardware/precision.py):
    MXFP8 rows 'mxfp8'; blockwise rows 'blockwise'; every other FP8 row per-tensor current scaling, 'tensorwise'
    (the row's own label FP8-CS, or the performance launcher's non-MX FP8 recipe fp8_cs that the rows without a
    recipe presume); 'delayed' (the default, unused) for BF16 rows."""
    if x["dtype"] != "fp8":
        return "delayed"
    text = str(x.get("fp8_recipe") or x.get("precision_verbatim") or "")
    if text.startswith("MXFP8") or "FP8-MX" in str(x.get("precision_verbatim")):
        return "mxfp8"
    return "blockwise" if text.startswith("blockwise") else "tensorwise"


def fp8_params_of(x: dict) -> bool:
    """Strategy.fp8_param_gather of a row: FP8-CS and MXFP8 rows run bf16_with_fp8_current_scaling_mixed and
    bf16_with_mxfp8_mixed (scripts/performance/utils/helpers.py get_precision_config), fp8_param_gather=True; the
    subchannel recipe's is False (training/mixed_precision.py, NVIDIA-NeMo/Megatron-Bridge at 05097809)."""
    return x["dtype"] == "fp8" and fp8_recipe_of(x) in ("tensorwise", "mxfp8")


def case_of(entry: dict) -> Case:
    x = entry["inputs"]
    if x["model"] in MOE:
        return moe_case_of(entry)
    tp, pp, n, cp = x["tensor_parallel"], x["pipeline_parallel"], x["num_gpus"], x.get("context_parallel") or 1
    dp, vp = n // (tp * pp * cp), x.get("virtual_pipeline") or 1
    fsdp = _fsdp(x) > 1
    zero = 3 if fsdp else 1
    model = _model_at(x["model"], int(x["seq_len"]))
    strategy = Strategy(dp=dp, tp=tp, pp=pp, micro_batch=x["micro_batch_size"], global_batch=x["global_batch_size"],
                        framework="megatron-bridge",   # Megatron-Core's layers and schedules (frameworks.py)
                        schedule="interleaved" if vp > 1 else "1f1b", chunks=vp, zero=zero,
                        sequence_parallel=tp > 1, overlap_dp=True, dtype=x["dtype"], grad_dtype="model",
                        cp=cp, cp_algo="ring", zero_prefetch=fsdp, overlap_tp=tp > 1, fp8_recipe=fp8_recipe_of(x),
                        fp8_param_gather=fp8_params_of(x), overlap_p2p=overlaps_sends(pp, vp),
                        overlap_param_gather=not fsdp and dp > 1)
    container = x["container"]
    subset = "fitted" if container in FIT_CONTAINERS and cp == 1 and not fsdp else "held out"
    why = (f"{container}, {x['system']} ({SYSTEMS[x['system']]}), {subset}; t={tp} p={pp} d={dp}"
           f"{f' cp={cp} (ring: Megatron cp_comm_type p2p, the default)' if cp > 1 else ''}"
           f"{' v=' + str(vp) + ' (sends overlapped: overlap_p2p_comm)' if vp > 1 else ''}, b={x['micro_batch_size']} B={x['global_batch_size']}, "
           + ("ZeRO-3 with prefetch, a reduce-scatter under every backward (Megatron FSDP optim_grads_params)"
              if fsdp else "ZeRO-1 (Megatron's distributed optimizer)"
              + (" with the parameter all-gather under the next forward (overlap_param_gather)" if dp > 1 else ""))
           + ", bf16 gradient "
           f"reduce (grad_reduce_in_fp32=False), {x['dtype']} ({x.get('fp8_recipe') or x['precision_verbatim']}"
           f"{', FP8 parameters' if strategy.fp8_param_gather else ''}); "
           + _default_layout_note(model, pp, vp) + "predicted = Megatron-Bridge FLOPs / (our iteration time x GPUs)")
    return Case(entry["id"], group_of(x["system"]), entry["source"], model, strategy, n, "model_tflops_per_gpu",
                float(entry["expected"]["model_tflops_per_gpu"]), why, cluster=SYSTEMS[x["system"]],
                model_flops=model_flops(model, tp, x["global_batch_size"]), subset=subset,
                convention=MEGATRON_CONVENTION)


def _entries(path=None) -> list:
    from explorer.io.safe_load import parse_text, read_text_capped
    path = path or PATH
    entries = parse_text(read_text_capped(path), ".json", f"cases file {path}")
    if not isinstance(entries, list):
        raise ExplorerError(f"cases file {path} must hold a JSON list of entries")
    return entries


def load_megatron_bridge(path=None) -> tuple:
    """(cases, skipped): the rows that are cases, and (id, system, reason) for every other row
    on a system we have a preset for."""
    cases, skipped = [], []
    entries = [as_run(e) for e in _entries(path)]
    spread = container_spread([e for e in entries if isinstance(e, dict)])
    for entry in entries:
        try:
            reason = skip_reason(entry)
            if reason:
                if not reason.startswith("no preset"):
                    skipped.append((entry["id"], entry["inputs"]["system"], reason))
                continue
            case = case_of(entry)
            if case.id in spread:
                case = replace(case, assumptions=case.assumptions + spread[case.id])
            cases.append(case)
        except ExplorerError as err:
            raise ExplorerError(f"cases file {path or PATH}: entry {entry.get('id')!r}: {err}") from None
        except (KeyError, TypeError, ValueError, AttributeError) as err:
            raise ExplorerError(f"cases file {path or PATH}: entry {entry.get('id')!r} is malformed "
                                f"({type(err).__name__})") from None
    return cases, skipped
