"""The MoE rows of the Megatron-Bridge validation group keyed by what was run (issue 27 item 5): each container's
Megatron-Bridge release (RECIPE_TAGS) and, read from its performance recipes, each (container, model, system)'s CUDA
graph scope and token dispatcher (RUN_KEYS), expert-parallel overlap (A2A_OVERLAP) and memory options (MEMORY_KEYS).
DeepSeek-V3's keys are explorer/validation/deepseek_v3_runs.py's; explorer/validation/megatron_bridge.py reads these
when it builds a case."""
from __future__ import annotations

from explorer.validation.deepseek_v3_runs import deepseek_v3_a2a_overlap, deepseek_v3_memory_keys, deepseek_v3_run_keys

Q30, Q235, GPT = "qwen3-30b-a3b", "qwen3-235b-a22b", "gpt-oss-120b"
H, B, GB = "DGX-H100", "DGX-B200", "DGX-GB200"
SYSTEM_NAMES = (H, B, GB)
"""The published systems with a cluster preset (megatron_bridge.SYSTEMS' keys)."""

RECIPE_TAGS = {
    "NeMo 25.09": ("v0.1.0rc4", "6725f7049504c3bcf9a65c5aee40aa118bc7a869",
                   "scripts/performance/configs/qwen3/qwen3_*_llm_pretrain.yaml (perf_matrix cuda_graphs), "
                   "scripts/performance/run_script.py (qwen3: apply_moe_token_drop, capacity factor 1.0 with "
                   "padding, src/megatron/bridge/training/utils/moe_token_drop.py)"),
    "NeMo 25.11": ("v0.2.0", "7af9601c9da746d21481194356295bfe23df3737",
                   "scripts/performance/configs/{qwen3,gpt_oss}/workload_base_configs.py"),
    "NeMo 26.02": ("v0.3.0", "21b02e0cfb2f8ff907e0d8baee0c5205876c6812",
                   "scripts/performance/configs/{qwen,gpt_oss}/*_workload_base_configs.py"),
    "NeMo 26.02.01": ("v0.3.1", "9c9dd848966322fc3ed7706747ec13219ef49dda",
                      "scripts/performance/configs/{qwen,gpt_oss}/*_workload_base_configs.py"),
    "NeMo 26.04": ("v0.4.0", "0fbfe7d3e970fbd75c1281d71cee586ce1f3df5e",
                   "scripts/performance/configs/{qwen,gpt_oss}/*_workload_base_configs.py"),
    "NeMo 26.04.01": ("v0.4.1", "f9b6319e58494b9a655b4789724df715aebabaef",
                      "scripts/performance/configs/{qwen,gpt_oss}/*_workload_base_configs.py"),
    "NeMo 26.06": ("v0.5.0", "fcbb6031103d0ca845c1a54d4fee55ecfcca17b6",
                   "scripts/performance/configs/{qwen,gpt_oss}/*_workload_base_configs.py"),
    "NeMo 26.06.01": ("v0.5.1", "5cb3444c43f7499cf3872b2d46870cf8bc2e00ce",
                      "scripts/performance/configs/{qwen,gpt_oss}/*_workload_base_configs.py"),
    "NeMo 26.08": ("v0.6.0", "51885cf132b2814188b6855c25a8588254274c2a",
                   "src/megatron/bridge/perf_recipes/{qwen,gpt_oss}/<system>/*.py"),
}
"""Each container's Megatron-Bridge release (NVIDIA-NeMo/Megatron-Bridge tag, commit, the performance
recipes read): what RUN_KEYS was read from."""


def _keys(graphs: dict, dispatchers: dict, containers) -> dict:
    return {(c, m, sys): (graphs.get((m, sys), "none"), dispatchers.get((m, sys), "alltoall"))
            for c in containers for m in ("qwen3-30b-a3b", "qwen3-235b-a22b", "gpt-oss-120b")
            for sys in SYSTEM_NAMES}


RUN_KEYS = {
    # 25.09 (v0.1.0rc4): perf_matrix cuda_graphs true = Megatron's per-layer graphs (enable_cuda_graph) of whole
    # layers, token-drop with padding on every Qwen3 run: the whole layer is captured
    **_keys({(Q30, B): "layer", (Q30, GB): "layer", (Q235, GB): "layer"}, {}, ("NeMo 25.09",)),
    # 25.11 (v0.2.0) and 26.02 (v0.3.0): QWEN3_30B_A3B_*_FP8_* cuda_graph_scope [moe_router, moe_preprocess];
    # GB200 hybridep (and attn in the 235B's scope); H100 26.02 deepep
    **_keys({(Q30, B): "router", (Q30, GB): "router", (Q235, GB): "layer"},
            {(Q30, GB): "hybridep", (Q235, GB): "hybridep"}, ("NeMo 25.11",)),
    **_keys({(Q30, B): "router", (Q30, GB): "router", (Q235, GB): "layer"},
            {(Q30, GB): "hybridep", (Q235, GB): "hybridep", (Q30, H): "deepep"}, ("NeMo 26.02",)),
    # 26.02.01 (v0.3.1): Qwen3-30B B200 [attn, moe_router, moe_preprocess] with hybridep, H100 hybridep, the
    # 235B on B200/H100 deepep
    **_keys({(Q30, B): "layer", (Q30, GB): "router", (Q235, GB): "layer"},
            {(Q30, B): "hybridep", (Q30, GB): "hybridep", (Q30, H): "hybridep", (Q235, GB): "hybridep",
             (Q235, B): "deepep", (Q235, H): "deepep"}, ("NeMo 26.02.01",)),
    # 26.04, 26.04.01 (v0.4.0, v0.4.1: the same files): the 235B back on the all-to-all off GB200
    **_keys({(Q30, B): "layer", (Q30, GB): "router", (Q235, GB): "layer"},
            {(Q30, B): "hybridep", (Q30, GB): "hybridep", (Q30, H): "hybridep", (Q235, GB): "hybridep"},
            ("NeMo 26.04", "NeMo 26.04.01")),
    # 26.06+ (v0.5.0, v0.5.1, v0.6.0 _enable_hybridep_full_iteration_mxfp8): GB200 MXFP8 full-iteration graphs
    # with hybridep (the 235B's V2 config, vp 3)
    **_keys({(Q30, B): "layer", (Q30, GB): "full", (Q235, GB): "full"},
            {(Q30, B): "hybridep", (Q30, GB): "hybridep", (Q30, H): "hybridep", (Q235, GB): "hybridep"},
            ("NeMo 26.06", "NeMo 26.06.01", "NeMo 26.08")),
    # GPT-OSS 120B, the V2 configs (GBS 1280, the published rows'): v0.4.0/v0.4.1 gpt_oss_workload_base_configs.py
    # GPT_OSS_120B_PRETRAIN_CONFIG_B200_BF16_V2 and _GB200_BF16_V2 moe_flex_dispatcher_backend="hybridep"; v0.5.0/v0.5.1
    # _GB200_FP8_MX_V2 and v0.6.0 perf_recipes/gpt_oss/gb200/gpt_oss.py (_apply_gpt_oss_120b_full_iter_fp8mx_configs,
    # HybridEP's environment): full-iteration graphs with hybridep
    **{(c, GPT, sys): ("none", "hybridep") for c in ("NeMo 26.04", "NeMo 26.04.01") for sys in (B, GB)},
    **{(c, GPT, GB): ("full", "hybridep") for c in ("NeMo 26.06", "NeMo 26.06.01", "NeMo 26.08")},
    # DeepSeek-V3: explorer/validation/deepseek_v3_runs.py (each container's deepseek workload base configs)
    **deepseek_v3_run_keys(),
}
"""(container, model, system) -> (cuda_graphs, moe_dispatcher) of the run, read from that container's
Megatron-Bridge performance recipes (RECIPE_TAGS): Megatron-Bridge's cuda_graph_scope [moe_router,
moe_preprocess] is our "router", [attn, moe_router, moe_preprocess] (or the 25.09 whole-layer graphs of a
token-drop run) "layer", cuda_graph_impl full_iteration "full"; moe_flex_dispatcher_backend hybridep/deepep,
else the all-to-all. GPT-OSS 120B: no CUDA graphs nor flex dispatcher before 26.04 (its V1 configs). The recipes'
EP/all-to-all overlap is A2A_OVERLAP."""
A2A_OVERLAP = {("NeMo 25.11", Q30, H), ("NeMo 26.02", Q30, H)} | {(c, Q30, GB) for c in ("NeMo 26.06", "NeMo 26.06.01", "NeMo 26.08")} | \
    {("NeMo 26.06.01", Q30, B)} | {(c, Q235, GB) for c in ("NeMo 26.06", "NeMo 26.06.01", "NeMo 26.08")} | \
    {(c, GPT, GB) for c in ("NeMo 26.04", "NeMo 26.04.01", "NeMo 26.06", "NeMo 26.06.01", "NeMo 26.08")} | \
    {(c, Q235, H) for c in ("NeMo 25.11", "NeMo 26.02", "NeMo 26.02.01", "NeMo 26.04", "NeMo 26.04.01", "NeMo 26.06",
                            "NeMo 26.06.01", "NeMo 26.08")} | {("NeMo 25.11", Q235, B), ("NeMo 26.06.01", Q235, B)} | \
    deepseek_v3_a2a_overlap()
"""(container, model, system) whose recipe set moe_a2a_overlap=True (Megatron-Bridge scripts/performance/utils/
overrides.py _set_moe_a2a_overlap_overrides: overlap_moe_expert_parallel_comm and delay_wgrad_compute; our
Strategy.overlap_ep), read from RECIPE_TAGS' qwen3 workload base configs (DeepSeek-V3's: deepseek_v3_runs.py): v0.2.0 QWEN3_30B_A3B_H100_FP8_CS_BASE_CONFIG
(scripts/performance/configs/qwen3/workload_base_configs.py), v0.3.0 QWEN3_30B_A3B_PRETRAIN_CONFIG_H100_FP8_CS_V1
(with deepep; v0.3.1 turned it off with hybridep: the H100 rows with it publish 5.1-5.3k tokens/s/GPU, those
without 8.8-10.5k, which the model does not explain: issue 27), v0.5.0/v0.5.1 QWEN3_30B_A3B_..._GB200_FP8_MX_V1,
v0.5.1 ..._B200_FP8_MX_V1, QWEN3_235B_A22B_..._GB200_FP8_MX_V2 (v0.6.0 perf_recipes/qwen/gb200/qwen3_moe.py
overlap_moe_expert_parallel_comm=True); GPT-OSS 120B GB200: v0.4.x-v0.5.x _GB200_BF16_V2 / _FP8_MX_V2 and v0.6.0
perf_recipes/gpt_oss/gb200/gpt_oss.py (comm_overlap.overlap_moe_expert_parallel_comm = True). Qwen3-235B-A22B on H100
in every release from v0.2.0 (QWEN3_235B_A22B_H100_*_BASE_CONFIG, then ..._PRETRAIN_CONFIG_H100_*_V1, kept by _V2:
v0.4.1 qwen3_workload_base_configs.py lines 161-182; v0.6.0 perf_recipes/qwen/h100/qwen3_moe.py) and on B200 in v0.2.0
(..._B200_FP8_CS_BASE_CONFIG, aliased by _FP8_MX_) and v0.5.1 (..._B200_FP8_MX_V2): missed until 2026-12-07. The GPT-OSS configs' recompute_modules ["layernorm", "moe_act"] (V1 and
V2 on every system; [] in the GB200 full-iteration MXFP8 ones) are MEMORY_KEYS."""


RUN_LAYOUTS = {
    ("NeMo 26.02.01", Q30, H): {"pipeline_parallel": 1, "virtual_pipeline": None, "expert_parallel": 16},
}
"""(container, model, system) -> the parallel layout the row's recipe ran where the table's columns say otherwise.
Qwen3-30B-A3B on 16 H100 in 26.02.01: Megatron-Bridge commit f29a269f8 (PR 2477, "Update Qwen3 30B H100 Base Configs
with HybridEP", 2026-02-23; in v0.3.1, not in v0.3.0) changed QWEN3_30B_A3B_PRETRAIN_CONFIG_H100_FP8_CS_V1 in one
edit from pipeline_model_parallel_size 2, virtual 12, expert_model_parallel_size 8, moe_a2a_overlap and DeepEP to
expert_model_parallel_size 16 (pipeline 1: WorkloadBaseConfig's default), no overlap and HybridEP. RUN_KEYS already
took the dispatcher and the overlap from that edit, so the table's layout with them priced a run nobody made; the
layout comes with them (megatron_bridge.as_run). The 26.02.01 table row (docs/performance-summary-archive.md) repeats
26.02's PP 2 / VP 12 / EP 8 columns; its 9,058 tokens/s/GPU is consistent with the p 1 e 16 HybridEP rows (26.04
8,901, 26.04.01 8,960, 26.06 8,826) but does not by itself decide the layout (25.09's token-drop run at p 2, v 24,
e 8 without the overlap published 10,494). Pre-training rows only (as_run)."""


MEMORY_KEYS = {
    # DeepSeek-V3 from 25.11 on: explorer/validation/deepseek_v3_runs.py (e.g. NeMo 26.08, Megatron-Bridge v0.6.0,
    # 51885cf1: perf_recipes/deepseek/gb200/deepseek_v3.py deepseek_v3_pretrain_256gpu_gb200_fp8mx_config
    # recompute_modules ["mla_up_proj"], common.py _deepseek_v3_common recompute_granularity "selective"; fp32 Adam
    # moments: the precision-aware optimizer only in the partial_cg_dev variant)
    **deepseek_v3_memory_keys(),
    # GPT-OSS 120B: every read config of 25.11-26.04.01 recomputes the layer norms and the experts' activation
    # (v0.2.0 scripts/performance/configs/gpt_oss/workload_base_configs.py GPT_OSS_120B_{GB200,B200,H100}_BF16_BASE_
    # CONFIG; v0.3.0-v0.4.1 gpt_oss_workload_base_configs.py ..._V1 and, inheriting them, ..._V2: recompute_modules
    # ["layernorm", "moe_act"]); the 26.06+ GB200 MXFP8 full-iteration configs recompute nothing (v0.5.0
    # GPT_OSS_120B_PRETRAIN_CONFIG_GB200_FP8_MX_V2 recompute_modules [])
    **{(c, GPT, sys): {"recompute": "selective", "recompute_modules": ("layernorm", "moe_act")}
       for c in ("NeMo 25.11", "NeMo 26.02", "NeMo 26.02.01", "NeMo 26.04", "NeMo 26.04.01") for sys in (H, B, GB)},
}
"""What a row's recipe keeps in memory beyond the FP8 recipe (Strategy.recompute_modules, adam_moments), read from
that container's Megatron-Bridge performance recipe, for the rows whose recipe was read; every other row runs
without recomputation and with fp32 moments; every FP8-CS and MXFP8 row keeps FP8 parameters (fp8_params_of).
Not modelled, so not keyed: CPU activation offloading (cpu_offloading_num_layers: the Llama 3 70B GB200 and GPT-OSS
recipes)."""
