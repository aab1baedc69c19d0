"""What the model misses in the Megatron-Bridge validation group, and why: the rows a publisher marks as regressions
(skipped with the footnote: explorer/validation/published_regressions.py), the Llama 3.1 405B context-parallel rows
(issue 26) and the MoE rows missed by more than 30 % (issue 27), each tied to what was run or to a cost the model does
not price (docs/validation.md). Moved out of tests/test_megatron_bridge.py."""
import json
from pathlib import Path

import pytest

from explorer.io.clusters import load_cluster
from explorer.validation import load_megatron_bridge, validate

ROOT = Path(__file__).resolve().parents[1]
ENTRIES = json.loads((ROOT / "assets" / "validation" / "megatron_bridge.json").read_text())
MOE_GROUPS = ("megatron_bridge_moe_h100", "megatron_bridge_moe_b200", "megatron_bridge_moe_gb200")


@pytest.fixture(scope="module")
def bridge():
    return load_megatron_bridge()


def test_rows_their_source_marks_as_regressions_are_skipped_with_the_footnote(bridge):
    """A row its publisher footnotes as a known regression measures the regressed kernel, not the recipe
    (explorer/validation/published_regressions.py): skipped, with the footnote and the issue it links; every
    other row with a tokens/s on a preset system stays a case (a missed row is not a regression)."""
    from explorer.validation.published_regressions import REGRESSIONS, regression_reason
    cases, skipped = bridge
    reasons = {i: r for i, _, r in skipped}
    why = reasons["mb_260601_pretrain_gpt-oss-120b_gb200_mxfp8"]
    assert "known regression" in why and "cudnn-frontend/issues/256" in why and "10x slower" in why
    assert "mb_260601_pretrain_gpt-oss-120b_gb200_mxfp8" not in {c.id for c in cases}
    marked = {e["id"] for e in ENTRIES if any(m in e["provenance"]["row_verbatim"] for m in REGRESSIONS)}
    assert marked == {"mb_260601_pretrain_gpt-oss-120b_gb300_mxfp8", "mb_260601_pretrain_gpt-oss-120b_gb200_mxfp8"}
    assert [i for i, r in reasons.items() if "known regression" in r] == ["mb_260601_pretrain_gpt-oss-120b_gb200_mxfp8"]
    assert regression_reason({"provenance": {"row_verbatim": "| DGX-GB200 | 64 | MXFP8 | 1280 | 4 | 28947 | 943 |"}}) == ""
    assert regression_reason({}) == ""

def test_the_405b_misses_are_in_what_was_run(bridge):
    """Issue 26 (dense targets): why the Llama 3.1 405B context-parallel rows stay outside max 15 %. (a) GB200's
    alt row and its DGX-B200 twin ran the same recipe (every SAME_RUN_FIELDS but the system): published, GB200 is
    slower; the model, for the one strategy, makes GB200 faster -- no constant fitted per system can give both
    (KNOWN_MISSES). (b) The H100 405B rows (t8 p8 cp2 v8, the same recipe in every container) span 12 % across
    containers (737 to 827) while the H100 70B rows (t4 p8 v5) span under 3 %: the 405B's software path got faster
    and the model, which has no container, predicts one number (870 at GBS 512, 885 at 1,536) for them all.
    (c) The cost the model could lack on exactly these rows (the largest model's CP rows) is not there: Transformer
    Engine's ring
    (AttnFuncWithCPAndKVP2P) sends each step's K,V (backward K,V and dK,dV) under one step's attention kernel,
    as the model prices it, and every transfer is shorter than the kernel it runs under, so nothing is exposed;
    even all of it exposed is under 1.5 % of the iteration. (d) Undoing every overlap the cases assume (the CP ring,
    the pipeline's sends, the DP reduce-scatter and parameter all-gather) leaves the H100 25.11 row above +8 % and
    the GB200/B200 twins more than 18 points apart: no overlap assumption closes either. (e) The model's own
    global-batch effect (GBS 512 -> 1536: more micro-batches, a smaller bubble) is under 4 %, the published rise
    of the same recipe from 25.11 to 26.04.01 over 10 %."""
    from dataclasses import replace
    from explorer.cost.evaluate import evaluate
    from explorer.validation.megatron_bridge import SAME_RUN_FIELDS
    entries = {e["id"]: e for e in ENTRIES}
    gb, b = (entries[f"mb_2509_pretrain_llama3p1-405b_{k}_fp8_alt"] for k in ("gb200", "b200"))
    same = [f for f in SAME_RUN_FIELDS if f not in ("system", "fp8_recipe")]
    assert all(gb["inputs"].get(f) == b["inputs"].get(f) for f in same)
    assert gb["inputs"]["fp8_recipe"] == b["inputs"]["fp8_recipe"]
    assert gb["expected"]["model_tflops_per_gpu"] < 0.95 * b["expected"]["model_tflops_per_gpu"]
    cases = {c.id: c for c in bridge[0]}
    gb_case, b_case = cases[gb["id"]], cases[b["id"]]
    assert gb_case.strategy == b_case.strategy
    t = {c.cluster: evaluate(c.model, c.strategy, load_cluster(c.cluster), c.gpus).iteration_time_s
         for c in (gb_case, b_case)}
    assert t["gb200-nvl72"] < t["dgx-b200"] / 1.05              # the model: GB200 faster for the same strategy
    for size, layout, spread in (("llama3p1-405b", (8, 8, 2, 8), (0.10, 1.0)), ("llama3-70b", (4, 8, 1, 5), (0, 0.03))):
        rows = [e for e in ENTRIES if e["id"].startswith("mb_") and f"_{size}_h100_" in e["id"] and
                (e["inputs"]["tensor_parallel"], e["inputs"]["pipeline_parallel"], e["inputs"]["context_parallel"],
                 e["inputs"]["virtual_pipeline"]) == layout and e["inputs"]["dtype"] == "fp8"]
        values = [e["expected"]["model_tflops_per_gpu"] for e in rows]
        assert len(rows) >= 5 and spread[0] < max(values) / min(values) - 1 < spread[1], (size, values)

    def error(case, undo: bool = False) -> float:
        """Relative error of `case`; with `undo`, every overlap the case assumes is taken away."""
        cluster = load_cluster(case.cluster)
        s = replace(case.strategy, overlap_p2p=False, overlap_dp=False, overlap_param_gather=False) \
            if undo else case.strategy
        r = evaluate(case.model, s, cluster, case.gpus)
        if not undo:        # (c) the ring is hidden, and small beside the iteration
            assert r.breakdown_s["cp_comm"] == 0 and 0 < r.hidden_s["cp_comm"] < 0.015 * r.iteration_time_s
        time = r.iteration_time_s + (r.hidden_s["cp_comm"] if undo else 0.0)
        return case.model_flops / (time * case.gpus) / 1e12 / case.expected - 1
    h100 = cases["mb_2511_pretrain_llama3p1-405b_h100_fp8cs"]
    assert error(h100) > 0.15 and error(h100, undo=True) > 0.08                                    # (d)
    assert min(error(gb_case, u) - error(b_case, u) for u in (False, True)) > 0.18
    later = cases["mb_260401_pretrain_llama3p1-405b_h100_fp8"]                                      # (e)
    assert h100.strategy.global_batch == 512 and later.strategy.global_batch == 1536
    predicted = [c.model_flops / (evaluate(c.model, c.strategy, load_cluster(c.cluster), c.gpus).iteration_time_s
                                  * c.gpus) for c in (h100, later)]
    assert predicted[1] / predicted[0] - 1 < 0.04 and later.expected / h100.expected - 1 > 0.10

def test_the_moe_misses_over_30_percent_are_two_families_the_model_names(bridge):
    """What is left of issue 27's max target (<= 30 % held out), 2026-12-06: every held-out MoE row missed by more
    than 30 % is (a) GPT-OSS 120B in BF16 on Blackwell -- GPU-bound in the model, on the BF16 GEMM efficiency derived
    from H100's (docs/validation.md) -- or (b) a run with the all-to-all under the partner micro-batch
    (moe_a2a_overlap: Strategy.overlap_ep) without a full-iteration CUDA graph. Of (b)
    Megatron-LM says "EP Overlap brings extra cpu overhead and may cause GPU bubble during execution" (NVIDIA/
    Megatron-LM PR 2184), and Megatron-Bridge turned the overlap off where it cost time (PR 1760: Qwen3-235B-A22B on
    B200, "Disable moe_a2a_overlap due to CPU overhead", step 20.1 -> 16.9 s with VP off too; issue 1705): the model
    prices the overlap's hidden all-to-alls but has no term for the merged schedule's own host work (no published
    measurement of it per layer). Either family's rows all miss in the same direction (the model too fast), and one
    25.09 row (Qwen3-30B-A3B on B200, token-drop, whole-layer graphs) sits at the threshold. A new kind of miss fails
    this test. 2026-12-07: with gpt-oss' eager clamp, its fp32 expert bias behind HybridEP and the bias no longer
    recomputed under moe_act (explorer/model/graph/moe.py expert_clamp, explorer/cost/moe_terms.py fp32_bias_time),
    family (a) went from 8 rows over 30 % (+31 to +85 %) to 3 (+33 to +80 %). The same day Qwen3-235B-A22B's H100
    rows (and B200 25.11) were found to run with moe_a2a_overlap (explorer/validation/moe_runs.py A2A_OVERLAP), and
    an overlapped all-to-all of a step that is not one CUDA graph was given NVIDIA's measured hidden share, 36.55 %
    (explorer/cost/fused_dispatch.py EAGER_HIDDEN): left over 30 % are GPT-OSS B200 25.11 (GBS 512) of family (a) and
    three of family (b) -- Qwen3-30B-A3B H100 25.11 and 26.02 (the overlap inside the interleaved schedule with
    delayed weight gradients) and Qwen3-235B-A22B H100 26.02.01 (DeepEP); the threshold row is at +26 %.
    2026-12-08: with the recipes' overlap_param_gather on the MoE rows, GPT-OSS B200 26.04 and 26.02.01 join family (a)
    at +31.8 and +30.2 % (25.11: +102.8 %): their exposed expert-data-parallel synchronisation fell 0.48 -> 0.20 s."""
    cases = [c for c in bridge[0] if c.group in MOE_GROUPS and c.subset == "held out"]
    rows = {r.id: r for r in validate(cases, None)}
    by_id = {c.id: c for c in cases}
    misses = {i: r.relative_error for i, r in rows.items() if abs(r.relative_error) > 0.30}
    gpt_oss_blackwell = {i for i in misses if by_id[i].model.name == "gpt-oss-120b" and by_id[i].strategy.dtype == "bf16"
                         and by_id[i].cluster in ("dgx-b200", "gb200-nvl72")}
    overlap_eager = {i for i in misses if by_id[i].strategy.overlap_ep and by_id[i].strategy.cuda_graphs != "full"}
    threshold = {i for i in misses if i == "mb_2509_pretrain_qwen3-30b-a3b_b200_fp8" and misses[i] < 0.32}
    assert set(misses) == gpt_oss_blackwell | overlap_eager | threshold, sorted(misses)
    assert all(e > 0 for e in misses.values())                              # too fast, every one
    assert len(gpt_oss_blackwell) >= 1 and len(overlap_eager) >= 3
    # the two H100 overlapped rows (p 2, v 12 or 24, e 8, with delayed weight gradients: the perf launcher's
    # moe_a2a_overlap) have no twin without the overlap in the tables: 26.02.01 ran p 1 e 16 (RUN_LAYOUTS). Plain EP
    # overlap alone, at p 1 without delayed weight gradients, is priced within 10 % on 16 H100 (moe_ab_h100: HybridEP
    # p 1 e 16, 24.71 -> 20.99 s measured, tests/test_moe_ab.py); what those rows lack is in the overlap run inside the
    # interleaved schedule with delay_wgrad_compute, which no A/B isolates (25.09: p 2 v 24 e 8 without it, 10,494)
    assert by_id["mb_260201_pretrain_qwen3-30b-a3b_h100_fp8"].strategy.pp == 1
    assert {"mb_2602_pretrain_qwen3-30b-a3b_h100_fp8", "mb_2511_pretrain_qwen3-30b-a3b_h100_fp8cs"} <= overlap_eager
