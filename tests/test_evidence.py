"""Every number carries its evidence (issue 28 item 1): the regime, its validated error, the nearest
validated runs, and whether a prediction extrapolates (explorer/validation/evidence.py)."""
import dataclasses
import json
import subprocess
import sys

import pytest

from explorer.io.clusters import load_cluster
from explorer.io.models import load_model
from explorer.io.presets import fallback_strategy
from explorer.strategy.strategy import Strategy
from explorer.validation import evidence as E

ROOT = E.RESIDUALS.parents[2]

GPT3 = Strategy(dp=16, tp=8, pp=8, micro_batch=1, global_batch=1536, sequence_parallel=True, recompute="selective")


def test_the_bundled_residuals_are_todays_validation():
    """assets/validation/residuals.json holds what validate() predicts now: regenerate it with
    `python -m explorer.validation.evidence` after a deliberate change of the model or its constants."""
    bundled = {r["id"]: r for r in json.loads(E.RESIDUALS.read_text())["rows"]}
    fresh = {r["id"]: r for r in E.fresh_rows()}
    assert bundled.keys() == fresh.keys()
    for ident, row in fresh.items():
        assert bundled[ident]["features"] == row["features"], ident
        assert bundled[ident]["relative_error"] == pytest.approx(row["relative_error"], rel=1e-9, abs=1e-12), ident
        assert bundled[ident]["speed_error"] == pytest.approx(row["speed_error"], rel=1e-9, abs=1e-12), ident


def test_errors_are_signed_as_speeds_whatever_the_row_measured():
    """A time 20 % short is a speed 25 % high; a throughput's relative error is its speed error already."""
    assert E.speed_error("iteration_time_s", -0.2) == pytest.approx(0.25)
    assert E.speed_error("layer_bwd_s", 0.25) == pytest.approx(-0.2)
    assert E.speed_error("tokens_per_sec_per_gpu", 0.3) == 0.3
    with pytest.raises(ValueError, match="neither a time nor a throughput"):
        E.speed_error("memory_gib", 0.1)


def test_gpt3_on_a100_is_validated():
    ev = E.evidence(load_model("gpt3-175b"), GPT3, load_cluster("dgx-a100-80gb"))
    assert not ev["extrapolating"] and ev["reason"] == ""
    assert ev["regime"].startswith("A100") and "dense" in ev["regime"] and ev["validated_rows"] >= 10
    assert 0 < ev["mean_abs_error"] <= ev["max_abs_error"] < 0.2
    assert len(ev["nearest_rows"]) == 3 and ev["nearest_rows"][0]["id"].startswith("ptdp_table1")
    assert [r["distance"] for r in ev["nearest_rows"]] == sorted(r["distance"] for r in ev["nearest_rows"])


def test_moe_on_mi300x_extrapolates_and_says_why():
    ev = E.evidence(load_model("mixtral-8x7b"), Strategy(dp=8, ep=8, global_batch=64), load_cluster("mi300x"))
    assert ev["extrapolating"] and "MI300X" in ev["reason"] and ev["validated_rows"] == 0
    assert ev["mean_abs_error"] is None and E.band_text(ev).startswith("extrapolating")


def test_an_uploaded_model_names_its_nearest_validated_rows():
    upload = dataclasses.replace(load_model("llama3-8b"), name="my-upload", layers=20)
    ev = E.evidence(upload, Strategy(dp=8, tp=2, global_batch=64), load_cluster("dgx-h100"))
    assert ev["nearest_rows"] and all(r["id"] and r["distance"] >= 0 for r in ev["nearest_rows"])
    assert "H100" in ev["regime"]


def test_the_distance_weighs_what_the_docstring_says():
    a = E.Features("H100-SXM", "bf16", False, 64, 4096, False, False)
    assert E.distance(a, a) == 0
    assert E.distance(a, dataclasses.replace(a, accelerator="B200")) == 2
    assert E.distance(a, dataclasses.replace(a, precision="fp16")) == 1
    assert E.distance(a, dataclasses.replace(a, precision="fp8")) == 2
    assert E.distance(a, dataclasses.replace(a, moe=True)) == 3
    assert E.distance(a, dataclasses.replace(a, gpus=512)) == pytest.approx(0.75)
    assert E.distance(a, dataclasses.replace(a, seq_len=16384)) == pytest.approx(1.0)
    assert E.distance(a, dataclasses.replace(a, ep_overlap_eager=True)) == 1
    # a prediction (first) with more local experts or narrower GEMMs than a row, beyond a factor 2: 0.5 a doubling
    moe = dataclasses.replace(a, moe=True, ep=True, local_experts=128, width=2048)
    assert E.distance(moe, dataclasses.replace(moe, local_experts=16)) == pytest.approx(1.0)    # 8x: 2 past 2x
    assert E.distance(moe, dataclasses.replace(moe, local_experts=64)) == 0                     # within 2x
    assert E.distance(dataclasses.replace(moe, local_experts=16), moe) == 0     # fewer: towards large GEMMs
    assert E.distance(dataclasses.replace(a, width=128), dataclasses.replace(a, width=1024)) == pytest.approx(1.0)
    assert E.distance(dataclasses.replace(a, width=8192), dataclasses.replace(a, width=1024)) == 0
    assert E.distance(a, dataclasses.replace(moe, moe=True)) == pytest.approx(3 + 1)   # a dense prediction: MoE, e
    assert E._experts_distance(a, moe) == 0 == E._experts_distance(moe, a)      # dense: no experts to compare


def _rows(*features) -> list:
    """Residual rows (id, group, source, Features, error, subset) of these features, for _differs."""
    return [(f"row{i}", "", "", f, 0.0, "") for i, f in enumerate(features)]


def test_the_reason_names_what_adds_most_to_the_distance():
    row = E.Features("A100-SXM4-80GB", "fp16", False, 64, 2048, False, False, width=1536)
    wide = dataclasses.replace(row, width=8192)
    narrow = dataclasses.replace(row, width=96, precision="bf16")                  # width 1.5 > precision 1
    said = E._differs(narrow, row, _rows(row, wide))
    assert "GEMMs this narrow" in said and "hidden / t = 96" in said and "down to 1,536" in said
    assert "bf16" in E._differs(dataclasses.replace(row, width=1024, precision="bf16"), row, _rows(row))
    # no validated run in its regime: the accelerator is named first, whatever adds most
    elsewhere = dataclasses.replace(narrow, accelerator="MI300X", moe=True, seq_len=128)
    assert E._differs(elsewhere, row, ()) == "no validated run on MI300X"
    assert E._differs(dataclasses.replace(row, moe=True), row, ()) == "no validated MoE run on A100-SXM4-80GB"


def test_a_moe_prediction_is_shown_moe_rows_first():
    """Qwen3-30B-A3B at e 1 is farther from every MoE row (expert parallelism, 128 local experts) than from some
    dense ones; its nearest rows are its regime's, whose band it is shown."""
    ev = E.evidence(load_model("qwen3-30b-a3b"), Strategy(dp=8, tp=4, ep=1, sequence_parallel=True,
                                                          global_batch=256), load_cluster("dgx-h100"))
    ids = {r[0]: r[3] for r in E.residuals()}
    assert all(ids[r["id"]].moe and ids[r["id"]].regime == "H100-SXM · 16-bit · MoE" for r in ev["nearest_rows"])
    assert "at most 16" in ev["reason"]


def test_a_model_with_narrow_gemms_extrapolates_and_a_short_sequence_is_named():
    """BERT-large (1,024 wide) at t 8 (its default strategy) runs 128-wide GEMMs where every validated run's are
    768-8,192 wide: its A100 prediction is not shown the band of GPT-3-sized runs, and the reason names the width. tiny-gpt (128-token
    sequences, 256 wide) at t 2 is named for the larger of its differences, the sequence 16x shorter."""
    a100 = load_cluster("dgx-a100-80gb")
    bert = load_model("bert-large")
    strategy = fallback_strategy(bert, a100)            # what the app opens with: 1,024 GPUs, t 8
    assert strategy.tp == 8
    ev = E.evidence(bert, strategy, a100)
    assert ev["extrapolating"] and "GEMMs this narrow" in ev["reason"] and "hidden / t = 128" in ev["reason"]
    assert all(r[3].width >= 768 for r in E.residuals()) and E.features_of(bert, strategy, a100).width == 128
    whole = Strategy(dp=8, tp=1, global_batch=64)                                          # 1,024 wide
    ev_whole = E.evidence(bert, whole, a100)
    rows = {r[0]: r[3] for r in E.residuals()}
    assert E._width_distance(E.features_of(bert, whole, a100), rows[ev_whole["nearest_rows"][0]["id"]]) == 0
    assert "GEMMs this narrow" not in ev_whole["reason"]
    tiny = E.evidence(load_model("tiny-gpt"), Strategy(dp=4, tp=2, global_batch=64), a100)
    assert tiny["extrapolating"] and "128-token sequences" in tiny["reason"]


def test_the_cli_prints_the_evidence():
    args = [sys.executable, "-m", "explorer", "evaluate", "--model", "mixtral-8x7b", "--cluster", "mi300x",
            "--dp", "8", "--ep", "8", "--global-batch", "64"]
    out = json.loads(subprocess.run(args + ["--json"], capture_output=True, text=True, check=True, cwd=ROOT).stdout)
    assert out["evidence"]["extrapolating"] and "MI300X" in out["evidence"]["reason"]
    text = subprocess.run(args, capture_output=True, text=True, check=True, cwd=ROOT).stdout
    assert "evidence: extrapolating: no validated run on MI300X" in text


QWEN30 = Strategy(dp=16, micro_batch=1, global_batch=256, ep=16, expert_tp=1, dtype="fp8")   # as the H100 rows ran


def test_expert_parallel_overlap_without_full_graphs_is_a_known_gap_with_its_runs():
    """A strategy with the MoE all-to-alls under the partner pass and no full-iteration graph is shown the gap
    the validation found (tests/test_validation_misses.py: the misses over 30 %), filled with the validated runs
    that have it: most slower than predicted, the slowest more than twice (since the measured hidden share,
    fused_dispatch.EAGER_HIDDEN, some a few percent faster). Its nearest rows are such runs. Without the overlap, or
    with full-iteration graphs, no gap."""
    qwen, h100 = load_model("qwen3-30b-a3b").with_seq_len(4096), load_cluster("dgx-h100")
    over = QWEN30.with_(overlap_ep=True)
    ev = E.evidence(qwen, over, h100)
    same = [r for r in E.residuals() if r[3].ep_overlap_eager and r[5] != "fitted"]
    assert len(same) >= 4 and max(r[4] for r in same) > 1 and sum(r[4] > 0 for r in same) > len(same) / 2
    took = sorted(1 + r[4] for r in same)                # published time over predicted time
    assert len(ev["known_gaps"]) == 1
    assert f"The {len(same)} validated runs with this feature took {took[0]:.2f}-{took[-1]:.2f}x the predicted" in \
        ev["known_gaps"][0]
    assert "PR 2184" in ev["known_gaps"][0] and took[-1] > 2 and "Qwen3" not in ev["known_gaps"][0]
    ids = {r[0] for r in same}
    assert ev["nearest_rows"][0]["id"] in ids
    assert E.evidence(qwen, QWEN30, h100)["known_gaps"] == []
    graphed = QWEN30.with_(overlap_ep=True, cuda_graphs="full", moe_dispatcher="hybridep")
    assert E.evidence(qwen, graphed, load_cluster("gb200-nvl72"))["known_gaps"] == []
    assert not E.overlap_eager(load_model("llama3-8b"), Strategy(dp=8, global_batch=64))


def test_the_known_gap_reaches_the_cli_and_the_cost_page():
    args = [sys.executable, "-m", "explorer", "evaluate", "--model", "qwen3-30b-a3b", "--cluster", "dgx-h100",
            "--gpus", "16", "--ep", "16", "--global-batch", "256", "--seq-len", "4096", "--overlap-ep"]
    text = subprocess.run(args, capture_output=True, text=True, check=True, cwd=ROOT).stdout
    assert "Known gap: expert-parallel overlap without full-iteration CUDA graphs" in text
    out = json.loads(subprocess.run(args + ["--json"], capture_output=True, text=True, check=True, cwd=ROOT).stdout)
    assert len(out["evidence"]["known_gaps"]) == 1


def test_the_overlap_is_named_when_it_is_what_sets_a_prediction_apart():
    a = E.Features("H100-SXM", "fp8", True, 16, 4096, False, True, True)
    b = dataclasses.replace(a, ep_overlap_eager=False)
    assert "expert-parallel overlap" in E._differs(a, b, _rows(b))
    assert "without expert-parallel overlap" in E._differs(b, a, _rows(a))


def test_an_mlp_or_a_cnn_is_told_that_every_validated_run_is_a_transformer():
    """resnet-50's 'sequence' is one image: its distance from the transformer rows is the sequence's, but what sets
    it apart is that no validated run is of its kind."""
    a100 = load_cluster("dgx-a100-80gb")
    for name in ("resnet-50", "tiny-mlp"):
        model = load_model(name)
        ev = E.evidence(model, fallback_strategy(model, a100), a100)
        assert ev["extrapolating"] and ev["reason"] == "no validated run of a model other than a transformer on " \
                                                      "A100-SXM4-80GB"


def test_a_wide_band_is_shown_as_a_warning_like_an_extrapolation():
    """'±47 % typical' was drawn in the same grey caption as A100's '±4 %' (a lecturer's walk, 2026-12-07): a regime
    whose validated runs the model misses by more than WIDE_BAND on average is shown as a warning (weak)."""
    a100 = E.evidence(load_model("gpt3-175b"), Strategy(dp=16, tp=8, pp=8, global_batch=1536),
                      load_cluster("dgx-a100-80gb"))
    assert not a100["extrapolating"] and a100["mean_abs_error"] < E.WIDE_BAND and not E.weak(a100)
    moe_b200 = E.evidence(load_model("qwen3-30b-a3b").with_seq_len(4096), Strategy(dp=8, ep=8, expert_tp=1,
                          global_batch=512), load_cluster("dgx-b200"))
    assert moe_b200["mean_abs_error"] > E.WIDE_BAND and E.weak(moe_b200)
    assert E.weak({**a100, "extrapolating": True})


def test_a_weak_band_names_the_direction_its_rows_all_missed():
    """GPT-OSS in BF16 on B200: every validated run of its regime ran slower than predicted (the family
    tests/test_validation_misses.py names), so the band says which way to correct, not only '±47 %'."""
    model, cluster = load_model("gpt-oss-120b"), load_cluster("dgx-b200")
    ev = E.evidence(model, Strategy(dp=64, ep=8, expert_tp=1, global_batch=1280, recompute="selective"), cluster)
    low, high = ev["signed_range"]
    assert ev["one_way"] == "fast" and 0 < low <= high and E.weak(ev)
    assert f"too fast on every one of them, by {100 * low:.0f}-{100 * high:.0f} % in speed" in E.band_text(ev)
    gpt3 = E.evidence(load_model("gpt3-175b"), GPT3, load_cluster("dgx-a100-80gb"))    # mixed signs, narrow band
    assert gpt3["one_way"] == "" and "every one" not in E.band_text(gpt3)


@pytest.mark.parametrize("signed, way", [((0.1, 0.2, 0.3), "fast"), ((-0.3, -0.2, -0.1), "slow"),
                                         ((-0.1, 0.2, 0.3), ""), ((0.2, 0.3), ""), ((), "")])
def test_one_way_needs_three_rows_of_one_sign(signed, way):
    assert E.one_way(list(signed)) == way
