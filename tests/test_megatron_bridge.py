"""The Megatron-Bridge 2025-26 validation group (issue 11): rows -> cases, FLOPs convention, fit.

Source: NVIDIA-NeMo/Megatron-Bridge docs/performance-summary*.md as bundled in
assets/validation/megatron_bridge.json (README in that folder: fields, FLOPs convention).
"""
import json
from pathlib import Path

import pytest

from explorer.io.clusters import load_cluster
from explorer.io.models import load_model
from explorer.validation import load_all_cases, load_megatron_bridge, summarize, validate
from explorer.validation.fit import fit_system
from explorer.validation.megatron_bridge import FIT_CONTAINERS, MOE, model_flops, padded_vocab

ROOT = Path(__file__).resolve().parents[1]
ENTRIES = json.loads((ROOT / "assets" / "validation" / "megatron_bridge.json").read_text())
DENSE_GROUPS = ("megatron_bridge_h100", "megatron_bridge_b200", "megatron_bridge_gb200")
MOE_GROUPS = ("megatron_bridge_moe_h100", "megatron_bridge_moe_b200", "megatron_bridge_moe_gb200")


@pytest.fixture(scope="module")
def bridge():
    return load_megatron_bridge()


def test_flops_convention_matches_the_tables_implied_flops_per_token():
    """README: Llama 3 8B at s=8192 is 51.470 GFLOP/token by the formula, 51.472 implied by 25.09 GB200;
    Llama 3 70B 449.2 vs 449.0 (25.09 H100)."""
    assert model_flops(load_model("llama3-8b"), 1, 1) / 8192 == pytest.approx(51.470e9, rel=1e-4)
    assert model_flops(load_model("llama3-70b"), 4, 1) / 8192 == pytest.approx(449.2e9, rel=1e-3)
    implied = {e["id"]: e["derived"].get("model_flops_per_token_implied") for e in ENTRIES}
    assert model_flops(load_model("llama3-8b"), 1, 1) / 8192 == \
        pytest.approx(implied["mb_2509_pretrain_llama3-8b_gb200_fp8"], rel=1e-3)


def test_padded_vocab():
    """README: 128256 stays at TP=1, 128512 at TP=4, 129024 at TP=8."""
    assert [padded_vocab(128256, t) for t in (1, 4, 8)] == [128256, 128512, 129024]


def test_every_dense_row_is_a_case_or_skipped_with_a_reason(bridge):
    cases, skipped = bridge
    on_presets = [e for e in ENTRIES if e["inputs"]["system"] in ("DGX-H100", "DGX-B200", "DGX-GB200")]
    assert len(cases) + len(skipped) == len(on_presets)
    assert all(reason for _, _, reason in skipped)
    assert {c.group for c in cases} == set(DENSE_GROUPS) | set(MOE_GROUPS)
    dense = [c for c in cases if c.group in DENSE_GROUPS]
    assert all(c.model.family == "llama" and not c.model.is_moe and c.strategy.dtype == "fp8" for c in dense)
    reasons = " ".join(r for _, _, r in skipped)
    for why in ("nvfp4", "no model preset"):
        assert why in reasons
    # issue 26 item 7: rows over uneven chunks and DeepSeek-V3's MTP rows are cases, not skipped
    assert "uneven interleaved" not in reasons and "multi-token-prediction" not in reasons
    assert {"llama3.1-405b"} <= {c.model.name for c in dense}


def test_cases_follow_the_rows(bridge):
    """70B on H100, 25.09: 64 GPUs, TP 4, PP 8, VP 5, GBS 128, MBS 1 -> d=2 interleaved v=5, SP on,
    distributed optimizer (ZeRO-1), bf16 gradient reduce (grad_reduce_in_fp32=False)."""
    case = {c.id: c for c in bridge[0]}["mb_2509_pretrain_llama3-70b_h100_fp8"]
    s = case.strategy
    assert (s.tp, s.pp, s.dp, s.chunks, s.schedule, s.micro_batch, s.global_batch) == (4, 8, 2, 5, "interleaved", 1, 128)
    assert s.sequence_parallel and s.zero == 1 and s.grad_dtype == "model" and s.overlap_dp
    assert case.cluster == "dgx-h100" and case.subset == "fitted" and case.expected == 727


def test_fitted_and_held_out_rows_are_disjoint_by_container(bridge):
    cases = [c for c in bridge[0] if c.group in DENSE_GROUPS]
    for c in cases:      # the fit's rows: its containers' rows without FSDP or CP (added after the fit)
        plain = c.strategy.zero == 1 and c.strategy.cp == 1
        assert (c.subset == "fitted") == (plain and any(f"{k}," in c.assumptions for k in FIT_CONTAINERS))
    for group in DENSE_GROUPS:
        subsets = {c.subset for c in cases if c.group == group}
        assert subsets == {"fitted", "held out"}, group


def test_predicted_tflops_are_the_sources_flops_over_our_time(bridge):
    from explorer.cost.evaluate import evaluate
    case = next(c for c in bridge[0] if c.group in DENSE_GROUPS)
    row = validate([case], None)[0]
    t = evaluate(case.model, case.strategy, load_cluster(case.cluster), case.gpus).iteration_time_s
    assert row.predicted == pytest.approx(case.model_flops / (t * case.gpus) / 1e12, rel=1e-12)


def test_fit_moves_only_the_fp8_constant_and_reports_both_subsets(bridge):
    fit = fit_system("dgx-b200", bridge[0])
    assert 0.2 <= fit.gemm_max_fp8 <= 1.0
    assert len(fit.fitted) == 2 and len(fit.held_out) == 6     # + the four Llama 3.1 405B rows (issue 26 item 7)
    stats = fit.stats()
    assert set(stats) == {"fitted", "held out"}
    # the fitted value does at least as well on the fitted rows as the preset's value and its neighbours
    from explorer.validation.fit import _mean_error
    fitted_rows = [c for c in bridge[0] if c.cluster == "dgx-b200" and c.subset == "fitted"]
    cluster = load_cluster("dgx-b200")
    best = _mean_error(fitted_rows, cluster, fit.gemm_max_fp8)
    for other in (cluster.efficiency.gemm_max_fp8, fit.gemm_max_fp8 - 0.05):
        assert best <= _mean_error(fitted_rows, cluster, other) + 1e-9


HAS_FLASH_ATTENTION = "attention" in __import__("explorer.model.spec", fromlist=["ModelSpec"]).ModelSpec.__dataclass_fields__


@pytest.mark.skipif(not HAS_FLASH_ATTENTION,
                    reason="needs FlashAttention (issue 10, branch cpfa): the presets' gemm_max_fp8 were fitted with "
                           "it; without it the s^2 softmax of s=8192 is charged as memory-bound kernels")
def test_megatron_bridge_targets_per_system(bridge):
    """Issue 11: mean |error| <= 10 %, max <= 20 % per system, with the constants fitted on the 25.09 rows
    (benchmarks/fit_megatron_bridge.py) -- fitted and held-out rows both."""
    rows = validate(bridge[0], None)
    summary = summarize(rows)
    for group in DENSE_GROUPS:
        assert summary[group]["mean_abs_error"] <= 0.10, (group, summary[group])
        worst = max(abs(r.relative_error) for r in rows if r.group == group and r.id not in KNOWN_MISSES)
        assert worst <= 0.20, (group, summary[group])
    errors = {r.id: r.relative_error for r in rows}
    for case_id in KNOWN_MISSES:          # still missed (else the entry goes): the list cannot go stale
        assert abs(errors[case_id]) > 0.20, (case_id, errors[case_id])


KNOWN_MISSES = {
    "mb_2509_pretrain_llama3p1-405b_gb200_fp8_alt":
        "Llama 3.1 405B t4 p8 cp2 v8 MXFP8 on 128 GB200, published 1,458 TFLOP/s/GPU, +27 %. Its twin on 128 DGX "
        "B200, the same recipe (Megatron-Bridge 6725f704 scripts/performance/configs/llama31/llama31_405b_llm_pretrain."
        "yaml perf_matrix gb200/b200 fp8_mx: tp 4, pp 8, cp 2, vp 8, GBS 64; helpers.py COMM_OVERLAP_CONFIG_MAP gives "
        "GB200 the B200 userbuffers config), published 1,569: GB200 7 % slower than B200, where every other twin is "
        "faster (Llama 3 8B: +1 to +5 %) and the model, which prices GB200 above B200 for any one strategy (higher FP8 "
        "peak, an NVLink domain), puts it 11 % faster (tests/test_validation_misses.py test_the_405b_misses_are_in_what_was_run). What differs in what "
        "was run is not in the strategy: 4 GPUs per node (num_gpus_per_node: 4), NCCL_NET_GDR_LEVEL=PHB and "
        "NCCL_NET_GDR_C2C=1 (utils/executors.py, GB200 only), PYTORCH_CUDA_ALLOC_CONF=expandable_segments for this "
        "recipe (setup_experiment.py); no cost term of the model reads them. Issue 26, fourth session.",
}
"""Rows outside issue 11's per-row bound, each with what differs in what was run."""


def test_group_selection():
    assert {c.group for c in load_all_cases(["megatron_table1"])} == {"megatron_table1"}
    assert all(c.id.startswith("mb_") for c in load_all_cases(["megatron_bridge"]))
    from explorer import ExplorerError
    with pytest.raises(ExplorerError, match="unknown"):
        load_all_cases(["nope"])


# ---- the MoE rows (issue 11: DeepSeek-V3, Qwen3-30B-A3B, Qwen3-235B-A22B, GPT-OSS-120B) ----

def _moe_entries():
    return [e for e in ENTRIES if e["inputs"]["model"] in MOE
            and e["inputs"]["system"] in ("DGX-H100", "DGX-B200", "DGX-GB200")]


def test_every_moe_row_is_a_case_of_its_own_group_or_skipped_with_a_reason(bridge):
    cases, skipped = bridge
    ids = {e["id"] for e in _moe_entries()}
    moe_cases = [c for c in cases if c.id in ids]
    assert {c.group for c in moe_cases} == set(MOE_GROUPS)
    assert all(c.model.is_moe for c in cases if c.group in MOE_GROUPS)
    assert len(moe_cases) + len([s for s in skipped if s[0] in ids]) == len(ids)
    assert len(moe_cases) >= 40
    reasons = {r for i, _, r in skipped if i in ids}
    assert all(reasons)
    assert any("tokens/s" in r for r in reasons)                   # the 25.09 H100 DeepSeek-V3 alternative
    assert any("do not add up" in r for r in reasons)              # 25.09 GB200 DeepSeek-V3 alt: ep 64 > 32 ranks
    assert {c.model.name for c in moe_cases} >= {"qwen3-30b-a3b", "qwen3-235b-a22b", "gpt-oss-120b", "deepseek-v3"}
    # DeepSeek-V3 on H100 (t2 p8 v4 e64) runs its MTP layer in the published layout (issue 26 item 7)
    ds = next(c for c in moe_cases if c.id == "mb_2509_pretrain_deepseek-v3_h100_fp8")
    assert ds.model.mtp_layers == 1 and ds.strategy.pipeline_layout == "Et|(tt|)*30mL"
    without = [c for c in moe_cases if c.id in ("mb_2511_pretrain_deepseek-v3_gb200_bf16",
                                                 "mb_2511_pretrain_deepseek-v3_gb200_fp8mx")]   # 'w/o MTP' rows
    assert len(without) == 2 and all(c.model.mtp_layers == 0 for c in without)
    # 94 layers over 8 x 4 chunks: the embedding and loss as members (96 slots), the default layout
    assert any(c.model.name == "qwen3-235b-a22b" and c.strategy.pp * c.strategy.chunks == 32 for c in moe_cases)


def test_moe_cases_follow_the_rows_and_the_recipes(bridge):
    """Qwen3-235B-A22B on GB200, 25.09: 64 GPUs, TP 2, PP 1, EP 64, GBS 1024, MBS 1 -> d=32, ep=64 over
    tp x dp, expert tensor parallelism 1 (recipes: expert_tensor_parallel_size=1), SP on; compared on the
    published tokens/s per GPU, held out (nothing fitted on MoE rows)."""
    case = {c.id: c for c in bridge[0]}["mb_2509_pretrain_qwen3-235b-a22b_gb200_fp8"]
    s = case.strategy
    assert (s.tp, s.pp, s.dp, s.ep, s.etp, s.micro_batch, s.global_batch) == (2, 1, 32, 64, 1, 1, 1024)
    assert s.sequence_parallel and s.zero == 1 and s.dtype == "fp8" and s.grad_dtype == "model"
    assert case.metric == "tokens_per_sec_per_gpu" and case.expected == 4452 and case.subset == "held out"
    assert case.group == "megatron_bridge_moe_gb200" and "tokendrop" in case.assumptions
    bf16 = {c.id: c for c in bridge[0]}["mb_2604_pretrain_gpt-oss-120b_h100_bf16"]
    assert (bf16.strategy.pp, bf16.strategy.ep, bf16.strategy.dtype) == (4, 8, "bf16")
    assert "sliding window" in bf16.assumptions


def test_moe_prediction_is_tokens_over_our_iteration_time(bridge):
    from explorer.cost.evaluate import evaluate
    case = {c.id: c for c in bridge[0]}["mb_2604_pretrain_qwen3-30b-a3b_h100_fp8"]
    t = evaluate(case.model, case.strategy, load_cluster(case.cluster), case.gpus).iteration_time_s
    row = validate([case], None)[0]
    assert row.predicted == pytest.approx(1024 * 4096 / (t * 16), rel=1e-12)


def test_the_fit_never_sees_the_moe_rows(bridge):
    """The FP8 GEMM fit never sees an MoE row; the host's issue time per kernel (issue 27) is fitted on one
    container's rows of one system (NeMo 26.02, DGX-B200) and every other MoE row is held out."""
    from explorer.validation.megatron_bridge import HOST_FIT
    fit = fit_system("dgx-h100", bridge[0])
    moe_ids = {c.id for c in bridge[0] if c.group in MOE_GROUPS}
    assert not moe_ids & {i for i, _, _ in fit.fitted + fit.held_out}
    fitted = [c for c in bridge[0] if c.group in MOE_GROUPS and c.subset == "fitted"]
    assert len(fitted) == 3 and all(c.assumptions.startswith("NeMo 26.02, DGX-B200") for c in fitted)
    assert HOST_FIT == ("NeMo 26.02", "DGX-B200")
    assert "NeMo 26.02 DGX-B200" in load_cluster("dgx-b200").efficiency.source


@pytest.fixture(scope="module")
def moe_summary(bridge):
    return summarize(validate([c for c in bridge[0] if c.group in MOE_GROUPS], None))


def test_moe_rows_evaluate_and_their_errors_are_reported(moe_summary):
    for group in MOE_GROUPS:
        st = moe_summary[group]
        assert st["cases"] >= 10 and st["held out"]["cases"] >= st["cases"] - 3
        assert 0 < st["mean_abs_error"] <= st["max_abs_error"] < 10


@pytest.mark.xfail(strict=False, reason=(
    "Expected miss (issue 27 targets: held-out mean <= 15 %, max <= 30 % per system). 2026-12-06: H100 mean 26 % "
    "(max 194 %: 25.11 Qwen3-30B-A3B 5275 tokens/s with moe_a2a_overlap, half of 25.09's 10494 on the same "
    "layout), B200 19 % (max 85 %: GPT-OSS 120B BF16, predicted too fast on Blackwell), GB200 13.6 % (max 58 %: "
    "GPT-OSS BF16 26.04 with moe_a2a_overlap; the 26.06.01 MXFP8 row is skipped, its source footnotes it as a "
    "known regression): docs/validation.md"))
def test_megatron_bridge_moe_targets_per_system(moe_summary):
    for group in MOE_GROUPS:
        held = moe_summary[group]["held out"]
        assert held["mean_abs_error"] <= 0.15, (group, held)
        assert held["max_abs_error"] <= 0.30, (group, held)


def test_identical_moe_runs_keyed_by_what_was_run_agree(bridge):
    """Keyed by what was run -- drop policy, FP8 recipe, CUDA graph scope and dispatcher from each
    container's Megatron-Bridge recipes (RUN_KEYS), as well as system, model, layout and batch -- the runs
    published in several containers agree within 6 % on H100 and B200 and 11 % on GB200 (Qwen3-30B-A3B, 25.11 23766
    against 26.02.01 26373 tokens/s; the 1.99x and 1.94x pairs of issue 11
    compared token-drop with dropless runs; the 1.77x H100 pair was p 2 v 12 e 8 with DeepEP and the
    overlap against 26.02.01's p 1 e 16 with HybridEP, the layout its recipe ran: RUN_LAYOUTS). The one configuration
    that stood 1.58x apart (GPT-OSS 120B MXFP8 on GB200: 26.06 28947, 26.06.01 18304, 26.08 28672 tokens/s with
    the same recipe) is the row its source footnotes as a known regression, skipped with that footnote
    (tests/test_validation_misses.py)."""
    from collections import defaultdict
    runs = defaultdict(list)
    for c in bridge[0]:
        if c.group in MOE_GROUPS:
            s = c.strategy
            recipe = c.assumptions.split(f"{s.dtype} (")[1].split(")")[0]
            runs[(c.group, c.model.name, c.model.seq_len, c.model.moe_capacity_factor, s.dtype, recipe, s.tp,
                  s.pp, s.chunks, s.ep, s.micro_batch, s.global_batch, c.gpus, s.cuda_graphs,
                  s.moe_dispatcher)].append((c.expected, c.id))
    worst = {g: max((max(v)[0] / min(v)[0], sorted(i for _, i in v)) for k, v in runs.items() if k[0] == g)
             for g in MOE_GROUPS}
    assert worst["megatron_bridge_moe_h100"][0] < 1.06 and worst["megatron_bridge_moe_b200"][0] < 1.06, worst
    spread, ids = worst["megatron_bridge_moe_gb200"]
    assert spread == pytest.approx(26373 / 23766) and all("qwen3-30b-a3b_gb200" in i for i in ids)
    gpt_oss = [v for k, v in runs.items() if k[0] == "megatron_bridge_moe_gb200" and k[1] == "gpt-oss-120b"
               and k[4] == "fp8"]
    assert sorted(e for v in gpt_oss for e, _ in v) == [28672, 28947]       # 26.08 and 26.06; 26.06.01 skipped


def test_run_keys_come_from_the_recipes(bridge):
    """The keys of a few rows, from Megatron-Bridge's performance recipes (RECIPE_TAGS: tag and commit): 25.09
    Qwen3 rows token-drop with whole-layer graphs off H100; 26.02 Qwen3-30B-A3B on B200 router graphs with the
    all-to-all; 26.06 on GB200 full-iteration graphs with HybridEP; GPT-OSS eager with the all-to-all before 26.04,
    HybridEP from its V2 configs (26.04 on B200), full graphs and EP overlap on GB200 from 26.06; the Qwen3-30B-A3B
    H100 runs of 25.11 and 26.02 overlap the all-to-alls (moe_a2a_overlap), 26.02.01's do not."""
    from explorer.validation.megatron_bridge import RECIPE_TAGS
    by_id = {c.id: c for c in bridge[0]}
    key = lambda rid: (by_id[rid].strategy.cuda_graphs, by_id[rid].strategy.moe_dispatcher,
                       by_id[rid].model.moe_capacity_factor)
    assert key("mb_2509_pretrain_qwen3-30b-a3b_b200_fp8") == ("layer", "alltoall", 1.0)
    assert key("mb_2509_pretrain_qwen3-30b-a3b_h100_fp8") == ("none", "alltoall", 1.0)
    assert key("mb_2602_pretrain_qwen3-30b-a3b_b200_mxfp8") == ("router", "alltoall", 0.0)
    assert key("mb_2606_pretrain_qwen3-30b-a3b_gb200_mxfp8") == ("full", "hybridep", 0.0)
    assert key("mb_2602_pretrain_gpt-oss-120b_b200_bf16") == ("none", "alltoall", 0.0)
    assert key("mb_2604_pretrain_gpt-oss-120b_b200_bf16") == ("none", "hybridep", 0.0)
    assert key("mb_2606_pretrain_gpt-oss-120b_gb200_mxfp8") == ("full", "hybridep", 0.0)
    overlap = {rid: by_id[rid].strategy.overlap_ep for rid in (
        "mb_2511_pretrain_qwen3-30b-a3b_h100_fp8cs", "mb_2602_pretrain_qwen3-30b-a3b_h100_fp8",
        "mb_260201_pretrain_qwen3-30b-a3b_h100_fp8", "mb_2606_pretrain_qwen3-30b-a3b_gb200_mxfp8",
        "mb_2606_pretrain_gpt-oss-120b_gb200_mxfp8", "mb_2604_pretrain_gpt-oss-120b_b200_bf16")}
    assert overlap == {"mb_2511_pretrain_qwen3-30b-a3b_h100_fp8cs": True, "mb_2602_pretrain_qwen3-30b-a3b_h100_fp8": True,
                       "mb_260201_pretrain_qwen3-30b-a3b_h100_fp8": False, "mb_2606_pretrain_qwen3-30b-a3b_gb200_mxfp8": True,
                       "mb_2606_pretrain_gpt-oss-120b_gb200_mxfp8": True, "mb_2604_pretrain_gpt-oss-120b_b200_bf16": False}
    assert all(len(commit) == 40 for _, commit, _ in RECIPE_TAGS.values())
    assert "21b02e0cf" in by_id["mb_2602_pretrain_qwen3-30b-a3b_b200_mxfp8"].assumptions


def test_qwen3_235b_on_h100_overlaps_its_all_to_alls_in_every_container(bridge):
    """Every Megatron-Bridge release from v0.2.0 (NeMo 25.11) on sets moe_a2a_overlap=True for Qwen3-235B-A22B on H100
    (v0.2.0 scripts/performance/configs/qwen3/workload_base_configs.py QWEN3_235B_A22B_H100_FP8_CS_BASE_CONFIG;
    v0.3.0-v0.5.1 qwen/qwen3_workload_base_configs.py QWEN3_235B_A22B_PRETRAIN_CONFIG_H100_FP8_CS_V1, which _V2 keeps;
    v0.4.1 lines 173-182), and v0.2.0 for B200 (QWEN3_235B_A22B_B200_FP8_CS_BASE_CONFIG, which _FP8_MX_ aliases);
    26.02's B200 V1/V2 do not. Until 2026-12-07 these rows ran without the overlap here (-16..-22 % then)."""
    by_id = {c.id: c for c in bridge[0]}
    rows = [c for c in bridge[0] if c.model.name == "qwen3-235b-a22b" and c.cluster == "dgx-h100"
            and not c.id.startswith("mb_2509")]
    assert len(rows) >= 5 and all(c.strategy.overlap_ep for c in rows)
    assert by_id["mb_2511_pretrain_qwen3-235b-a22b_b200_fp8mx"].strategy.overlap_ep
    assert not by_id["mb_2602_pretrain_qwen3-235b-a22b_b200_mxfp8"].strategy.overlap_ep


def test_deepseek_v3_rows_are_keyed_by_their_recipes(bridge):
    """DeepSeek-V3 rows run what their container's recipe ran (explorer/validation/deepseek_v3_runs.py): 25.09
    eager (perf_matrix cuda_graphs false), GB200 token-drop with the all-to-all and mla_up_proj, H100 DeepEP with the
    all-to-alls overlapped, mla_up_proj and mlp recomputed, the gradient reduce not overlapped; GB200 26.02 HybridEP with [attn, moe_router,
    moe_preprocess] graphs and mla_up_proj recomputed; GB200 26.06+ full-iteration graphs with HybridEP and the
    all-to-alls overlapped (v0.5.0 DEEPSEEK_V3_PRETRAIN_CONFIG_GB200_FP8_MX_V2); B200 26.04.01 (p 8, v 2, e 32) the
    #3368 config: DeepEP, overlap, mla_up_proj and mlp recomputed; GB200 26.04 mlp only."""
    by_id = {c.id: c for c in bridge[0]}
    key = lambda rid: (lambda s: (s.cuda_graphs, s.moe_dispatcher, s.overlap_ep, s.recompute,
                                  tuple(sorted(s.recompute_modules))))(by_id[rid].strategy)
    assert key("mb_2509_pretrain_deepseek-v3_gb200_fp8") == ("none", "alltoall", False, "selective",
                                                             ("mla_up_proj",))
    assert key("mb_2509_pretrain_deepseek-v3_h100_fp8") == ("none", "deepep", True, "selective",
                                                            ("mla_up_proj", "mlp"))
    assert not by_id["mb_2509_pretrain_deepseek-v3_h100_fp8"].strategy.overlap_dp
    assert by_id["mb_2509_pretrain_deepseek-v3_gb200_fp8"].strategy.overlap_dp
    assert key("mb_2511_pretrain_deepseek-v3_gb200_bf16") == ("router", "hybridep", False, "selective",
                                                              ("mla_up_proj",))
    assert key("mb_2602_pretrain_deepseek-v3_gb200_mxfp8") == ("layer", "hybridep", False, "selective",
                                                               ("mla_up_proj",))
    assert key("mb_2604_pretrain_deepseek-v3_gb200_mxfp8") == ("layer", "hybridep", False, "selective", ("mlp",))
    for c in ("2606", "260601", "2608"):
        assert key(f"mb_{c}_pretrain_deepseek-v3_gb200_mxfp8") == ("full", "hybridep", True, "selective",
                                                                   ("mla_up_proj",))
    assert key("mb_2604_pretrain_deepseek-v3_b200_mxfp8") == ("none", "hybridep", False, "selective",
                                                              ("mla_up_proj",))
    assert key("mb_260401_pretrain_deepseek-v3_b200_mxfp8") == ("layer", "deepep", True, "selective",
                                                                ("mla_up_proj", "mlp"))
    assert by_id["mb_260401_pretrain_deepseek-v3_b200_mxfp8"].strategy.pipeline_layout == "Et*4|(t*4|)*14tmL"


def test_the_issue_27_rows(moe_summary, bridge):
    """Issue 27's three rows (model was 32,545 / 6,069 / 24,098 tokens/s/GPU against 9,691 / 3,776 / 13,568):
    the two Qwen3 rows now within 20 % (the first is a fitted row of host_launch_s, the second held out)."""
    rows = {r.id: r for r in validate([c for c in bridge[0] if c.id in THREE], None)}
    for rid in THREE[:2]:
        assert abs(rows[rid].relative_error) <= 0.20, (rid, rows[rid].predicted)


@pytest.mark.xfail(strict=True, reason="issue 27: GPT-OSS 120B on B200 +26.8 % with the recipe's overlap_param_gather")
def test_the_issue_27_gpt_oss_row(bridge):
    """GPT-OSS 120B on 64 B200 (26.04.01, BF16, e8, b=4, GPU-bound). +36 % when this was first an expected failure,
    +22.8 % with gpt-oss' own terms, +19.7 % (passing) once YaRN's unfused rotary embedding and the clamp's per-call
    synchronisation were priced (2026-12-07). 2026-12-08: the case now runs the parameter all-gather under the next
    forward as the recipe does (gpt_oss_120b_pretrain_config: overlap_param_gather True; megatron_bridge.py
    param_gather_overlapped): 0.48 -> 0.20 s of exposed DP synchronisation a step, +26.8 % -- the 19.7 % had leaned on
    an all-gather the run hides. What the row still lacks is on the GPU (docs/validation.md, 2026-12-08). Held out."""
    row = validate([c for c in bridge[0] if c.id == THREE[2]], None)[0]
    assert abs(row.relative_error) <= 0.20


THREE = ("mb_2602_pretrain_qwen3-30b-a3b_b200_mxfp8", "mb_260401_pretrain_qwen3-235b-a22b_b200_mxfp8",
         "mb_260401_pretrain_gpt-oss-120b_b200_bf16")


def test_moe_rows_of_one_configuration_in_several_containers_are_kept_and_say_their_spread(bridge):
    """Issue 11: identical configurations published in several containers (GPT-OSS 120B on 64 GB200s,
    MXFP8, e=64 b=4 B=1280: 26.06 28947, 26.06.01 18304, 26.08 28672 tokens/s/GPU) are each a case (but a
    row its source footnotes as a regression), and each case's note names the others and the max/min ratio. Rows are
    grouped by the layout their recipe ran (megatron_bridge.as_run: RUN_LAYOUTS)."""
    from explorer.validation.megatron_bridge import as_run, container_spread
    notes = container_spread([as_run(e) for e in ENTRIES])
    ids = {c.id for c in bridge[0]}
    trio = ("mb_2606_pretrain_gpt-oss-120b_gb200_mxfp8", "mb_260601_pretrain_gpt-oss-120b_gb200_mxfp8",
            "mb_2608_pretrain_gpt-oss-120b_gb200_mxfp8")
    for rid in trio:
        assert rid in notes
        assert "3 containers" in notes[rid] and "18304" in notes[rid] and "max/min 1.58" in notes[rid]
    # 26.06.01's is the row its source footnotes as a known regression: skipped with that footnote, the others cases
    assert [rid in ids for rid in trio] == [True, False, True]
    by_id = {c.id: c for c in bridge[0]}
    assert all(by_id[rid].assumptions.endswith(notes[rid]) for rid in notes if rid in by_id)
    assert not any(rid.startswith("mb_") and "llama3" in rid for rid in notes)    # MoE rows only


def test_context_parallel_rows_map_to_cp():
    """A CP = 2 row (Llama 3.1 405B, H100, t=8 p=8 cp=2 on 1024 GPUs) becomes a strategy with cp=2 and
    dp = GPUs / (t p cp) = 8, ring attention (Megatron cp_comm_type p2p, the default), held out even
    in the fitted container (the fit was made without it). Every bundled CP row is a case since issue 26
    item 7: its 126 layers over p x v = 64 chunks run with the embedding and the loss as chunk members."""
    from copy import deepcopy

    from explorer.validation.megatron_bridge import case_of, skip_reason
    rows = [e for e in ENTRIES if (e["inputs"].get("context_parallel") or 1) > 1]
    on_presets = [e for e in rows if e["inputs"]["system"] in ("DGX-H100", "DGX-B200", "DGX-GB200")
                  and e["inputs"]["dtype"] in ("bf16", "fp8")]
    assert on_presets and all(skip_reason(e) == "" for e in on_presets)
    first = case_of(on_presets[0])
    assert first.strategy.cp == 2 and "Et|(tt|)*62tL" in first.assumptions
    entry = deepcopy(next(e for e in rows if e["id"] == "mb_2509_pretrain_llama3p1-405b_h100_fp8"))
    entry["inputs"]["virtual_pipeline"] = None          # 126 layers over p = 8 stages: still uneven
    entry["inputs"]["pipeline_parallel"] = 2             # 63 layers a stage: expressible
    assert skip_reason(entry) == ""
    case = case_of(entry)
    s = case.strategy
    assert (s.cp, s.cp_algo, s.dp, s.tp, s.pp) == (2, "ring", 1024 // (8 * 2 * 2), 8, 2)
    assert case.subset == "held out" and entry["inputs"]["container"] in FIT_CONTAINERS


def test_fsdp_rows_are_zero3_with_a_reduce_scatter_under_every_backward(bridge):
    """Megatron FSDP rows (optim_grads_params, FSDP = dp) are ZeRO-3 with prefetched gathers and the
    overlapped sync: Llama 3 70B on 64 GB200s (FSDP 64, b=2, B=256) and Llama 3 8B on 8 H100s (FSDP 8),
    every one held out; each reduce-scatter hides under the compute after its own backward, so almost
    none of the m = 2 or 16 reduce-scatters is exposed."""
    fsdp = [c for c in bridge[0] if c.group in DENSE_GROUPS and c.strategy.zero == 3]
    assert {c.model.name for c in fsdp} >= {"llama3-70b", "llama3-8b"} and len(fsdp) >= 8
    assert all(c.subset == "held out" and c.strategy.zero_prefetch and c.strategy.overlap_dp for c in fsdp)
    from explorer.cost.evaluate import evaluate
    case = next(c for c in fsdp if c.id == "mb_2509_pretrain_llama3-8b_h100_fp8")
    res = evaluate(case.model, case.strategy, load_cluster(case.cluster), case.gpus)
    row = res.stage_times_s[0]
    assert res.micro_batches == 16 and row["dp_sync_s"] > row["bwd_s"]      # one window could not hide it
    assert row["dp_exposed_s"] < 0.01 * row["dp_sync_s"]


def test_the_moe_run_keys_name_the_systems_the_group_has():
    """explorer/validation/moe_runs.py keys rows by the published system names megatron_bridge.SYSTEMS maps to
    presets: a system added to one and not the other would leave its rows unkeyed (priced eager, all-to-all)."""
    from explorer.validation.megatron_bridge import SYSTEMS
    from explorer.validation.moe_runs import RUN_KEYS, SYSTEM_NAMES
    assert SYSTEM_NAMES == tuple(SYSTEMS)
    assert {system for _, _, system in RUN_KEYS} <= set(SYSTEMS)


def test_moe_rows_gather_their_parameters_under_the_next_forward_as_the_recipes_do(bridge):
    """Megatron-Bridge turns overlap_param_gather on whenever d > 1 (CommOverlapConfig._get_optimizer_overlap_cfgs) and
    the MoE pretraining recipes set it in their DDP config too; only 25.11's DeepSeek-V3 MXFP8 configs turned it off
    ("keeping this eanbled causes NaN grad norm"). Until 2026-12-08 every MoE case left it off."""
    moe = [c for c in bridge[0] if c.group in MOE_GROUPS]
    off = {c.id for c in moe if c.strategy.dp > 1 and not c.strategy.overlap_param_gather}
    assert off == {c.id for c in moe if c.id.startswith("mb_2511_pretrain_deepseek-v3") and c.id.endswith("fp8mx")}
    assert len(off) == 2 and all("overlap_param_gather" in c.assumptions for c in moe if c.strategy.dp > 1)
