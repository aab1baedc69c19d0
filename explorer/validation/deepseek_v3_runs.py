"""What each published DeepSeek-V3 Megatron-Bridge row ran (issue 27 item 5), read from that container's
performance recipes: CUDA graph scope, token dispatcher, EP/all-to-all overlap and the recompute modules.

Before this table every DeepSeek-V3 row was priced eager, with the all-to-all dispatcher, exposed all-to-alls and
no selective recomputation -- none of which the recipes ran from 25.11 on. Read from NVIDIA-NeMo/Megatron-Bridge
(tags and commits as explorer.validation.moe_runs.RECIPE_TAGS):

* 25.09, v0.1.0rc4 (6725f704) scripts/performance/configs/deepseek/deepseek_v3_llm_pretrain.yaml perf_matrix
  (cuda_graphs false on every system) and scripts/performance/run_script.py (the deepseek branch): H100 enable_deepep
  with A2A_1F1B (overlap_moe_expert_parallel_comm, delay_wgrad_compute), recompute_modules ["mla_up_proj", "mlp"] and
  overlap_grad_reduce False (NO_GRAD_OVERLAP); B200 and GB200 token-drop (apply_moe_token_drop, DeepEP off), the
  all-to-all, ["mla_up_proj"], overlap_grad_reduce True.
* 25.11, v0.2.0 (7af9601c) scripts/performance/configs/deepseek/workload_base_configs.py
  DEEPSEEK_V3_GB200_BASE_CONFIG: moe_flex_dispatcher_backend "hybridep", cuda_graph_scope ["moe_router",
  "moe_preprocess"] (our "router"), recompute_modules ["mla_up_proj"], moe_a2a_overlap False;
  DEEPSEEK_V3_B200_BASE_CONFIG: no flex dispatcher (the all-to-all), no graphs, ["mla_up_proj"].
* 26.02 / 26.02.01, v0.3.0 (21b02e0c) / v0.3.1 (9c9dd848) scripts/performance/configs/deepseek/
  deepseek_workload_base_configs.py DEEPSEEK_V3_PRETRAIN_CONFIG_GB200_FP8_MX_V2: hybridep, cuda_graph_scope
  ["attn", "moe_router", "moe_preprocess"] (our "layer"), ["mla_up_proj"]; ..._B200_FP8_MX_V2: hybridep, no graphs,
  ["mla_up_proj"].
* 26.04 / 26.04.01, v0.4.0 (0fbfe7d3) / v0.4.1 (f9b6319e) the same file: GB200_FP8_MX_V2 = GB200_V2, hybridep,
  "layer" graphs, recompute_modules ["mlp"] (the three dense layers' MLPs); B200 26.04: as 26.02. The 26.04.01 B200
  row ran p = 8, v = 2, e = 32, which is not v0.4.1's B200 config (p = 16, e = 8) but that of Megatron-Bridge commit
  5acef9309caa26d4be918e50f9597e4b83f3efdd ("b200 DSv3 better cfg (#3368)", 2026-04-18, before the 26.04.01
  publication; the same config ships in v0.5.0): DEEPSEEK_V3_PRETRAIN_CONFIG_B200_FP8_MX_V2 with
  moe_flex_dispatcher_backend "deepep", moe_a2a_overlap True, cuda_graph_scope ["attn", "moe_router",
  "moe_preprocess"], recompute_modules ["mla_up_proj", "mlp"], pp_layout "Et*4|(t*4|)*14tmL" (the layout
  DEEPSEEK_V3_LAYOUTS already gives p = 8, v = 2).
* 26.06 / 26.06.01, v0.5.0 (fcbb6031) / v0.5.1 (5cb3444c) GB200_FP8_MX_V2 (cherry-pick 7a8bd64b "GB300/GB200 MXFP8
  full-iter CG recipes"): cuda_graph_impl "full_iteration", moe_a2a_overlap True, hybridep, ["mla_up_proj"].
* 26.08, v0.6.0 (51885cf1) src/megatron/bridge/perf_recipes/deepseek/gb200/deepseek_v3.py
  deepseek_v3_pretrain_256gpu_gb200_fp8mx_config: ["mla_up_proj"], and perf_recipes/deepseek/common.py
  _enable_deepseek_full_iteration_mxfp8: hybridep, cuda_graph_impl "full_iteration",
  overlap_moe_expert_parallel_comm True (with delay_wgrad_compute).

The 25.11 GB200 MXFP8 row ran p = 8, v = 4, e = 32, not the recipe's p = 4, v = 4, e = 64; it keeps the system's keys
(dispatcher, graphs, recomputation), the one reading there is.
"""
from __future__ import annotations

DEEPSEEK_V3 = "deepseek-v3"
_UP = ("mla_up_proj",)
_GB200, _B200 = "DGX-GB200", "DGX-B200"

DEEPSEEK_V3_RUNS = {
    ("NeMo 25.09", "DGX-H100"): ("none", "deepep", True, ("mla_up_proj", "mlp")),
    **{("NeMo 25.09", sys): ("none", "alltoall", False, _UP) for sys in (_GB200, _B200)},
    ("NeMo 25.11", _GB200): ("router", "hybridep", False, _UP),
    ("NeMo 25.11", _B200): ("none", "alltoall", False, _UP),
    **{(c, _GB200): ("layer", "hybridep", False, _UP) for c in ("NeMo 26.02", "NeMo 26.02.01")},
    **{(c, _B200): ("none", "hybridep", False, _UP) for c in ("NeMo 26.02", "NeMo 26.02.01", "NeMo 26.04")},
    **{(c, _GB200): ("layer", "hybridep", False, ("mlp",)) for c in ("NeMo 26.04", "NeMo 26.04.01")},
    ("NeMo 26.04.01", _B200): ("layer", "deepep", True, ("mla_up_proj", "mlp")),
    **{(c, _GB200): ("full", "hybridep", True, _UP) for c in ("NeMo 26.06", "NeMo 26.06.01", "NeMo 26.08")},
}
"""(container, system) -> (cuda_graphs, moe_dispatcher, overlap_ep, recompute_modules) of the DeepSeek-V3 row
(module docstring); a row not listed runs eager, with the all-to-all, exposed, without selective recomputation."""
NO_GRAD_OVERLAP = {("NeMo 25.09", DEEPSEEK_V3, "DGX-H100")}
"""(container, model, system) whose recipe turned the gradient reduce's overlap off (25.09 run_script.py: H100
overlap_grad_reduce False): Strategy.overlap_dp False."""
NO_PARAM_GATHER_OVERLAP = {("NeMo 25.11", DEEPSEEK_V3, "mxfp8")}
"""(container, model, FP8 recipe) whose recipe turned the parameter all-gather's overlap off: 25.11, v0.2.0
scripts/performance/configs/deepseek/deepseek_llm_pretrain.py, the GB200 and B200 configs with precision fp8_mx
("keeping this eanbled causes NaN grad norm": comm_overlap, ddp and optimizer overlap_param_gather False).
Every other MoE pretraining row ran it (megatron_bridge.py param_gather_overlapped)."""


def deepseek_v3_run_keys() -> dict:
    """(container, model, system) -> (cuda_graphs, moe_dispatcher), as moe_runs.RUN_KEYS."""
    return {(c, DEEPSEEK_V3, sys): (graphs, dispatcher) for (c, sys), (graphs, dispatcher, _, _) in
            DEEPSEEK_V3_RUNS.items()}


def deepseek_v3_a2a_overlap() -> set:
    """The (container, model, system) whose recipe set moe_a2a_overlap, as moe_runs.A2A_OVERLAP."""
    return {(c, DEEPSEEK_V3, sys) for (c, sys), (_, _, overlap, _) in DEEPSEEK_V3_RUNS.items() if overlap}


def deepseek_v3_memory_keys() -> dict:
    """(container, model, system) -> Strategy fields of the recipe's selective recomputation, as
    megatron_bridge.MEMORY_KEYS."""
    return {(c, DEEPSEEK_V3, sys): {"recompute": "selective", "recompute_modules": modules}
            for (c, sys), (_, _, _, modules) in DEEPSEEK_V3_RUNS.items() if modules}
