"""NVIDIA's matched MoE A/B runs on 16 H100 (explorer/validation/moe_ab.py, assets/validation/moe_ab_h100.json):
Qwen3-30B-A3B, BF16, t 1 p 1 e 16, b 1, B 1,024, s 4,096, one option changed at a time. Every row is held out but
the HybridEP overlap-on run, whose Nsight profile measured the eager hidden share (fused_dispatch.EAGER_HIDDEN).
Sources: NVIDIA-NeMo/Megatron-Bridge skills/nemo-mbridge-perf-moe-comm-overlap/SKILL.md and
-expert-parallel-overlap/SKILL.md (415e90afd, 2026-08-10), -cuda-graphs/SKILL.md (302976773, 2026-08-01)."""
import json

import pytest

from explorer.errors import ExplorerError
from explorer.validation import load_all_cases, validate
from explorer.validation.moe_ab import PATH, load_moe_ab_cases

MEASURED_S = {   # step time, seconds, as published
    "mb_ab_h100_qwen3-30b_hybridep_overlap_off": 24.7138, "mb_ab_h100_qwen3-30b_hybridep_overlap_on": 20.9920,
    "mb_ab_h100_qwen3-30b_alltoall_overlap_off": 41.25, "mb_ab_h100_qwen3-30b_alltoall_overlap_on": 31.31,
    "mb_ab_h100_qwen3-30b_alltoall_eager": 41.36, "mb_ab_h100_qwen3-30b_alltoall_graphs": 42.00}


@pytest.fixture(scope="module")
def rows():
    cases = load_moe_ab_cases()
    return {c.id: c for c in cases}, {r.id: r for r in validate(cases, None)}


def test_the_rows_are_the_published_step_times_each_with_its_line(rows):
    cases, _ = rows
    assert {i: c.expected for i, c in cases.items()} == MEASURED_S
    for entry in json.loads(PATH.read_text()):
        assert str(entry["expected"]["step_time_s"]).rstrip("0") in entry["provenance"]["line_verbatim"].replace(
            "`", "")
        assert entry["provenance"]["repo"] == "NVIDIA-NeMo/Megatron-Bridge"
        assert len(entry["provenance"]["file_last_changed_commit"]) == 40
    assert all(c.cluster == "dgx-h100" and c.gpus == 16 for c in cases.values())
    assert {i for i, c in cases.items() if c.subset != "held out"} == {"mb_ab_h100_qwen3-30b_hybridep_overlap_on"}
    assert "measured EAGER_HIDDEN" in cases["mb_ab_h100_qwen3-30b_hybridep_overlap_on"].assumptions


def test_each_row_runs_what_it_changed(rows):
    cases, _ = rows
    key = {i: (c.strategy.moe_dispatcher, c.strategy.cuda_graphs, c.strategy.overlap_ep) for i, c in cases.items()}
    assert key["mb_ab_h100_qwen3-30b_hybridep_overlap_off"] == ("hybridep", "router", False)
    assert key["mb_ab_h100_qwen3-30b_hybridep_overlap_on"] == ("hybridep", "router", True)
    assert key["mb_ab_h100_qwen3-30b_alltoall_overlap_on"] == ("alltoall", "none", True)
    assert key["mb_ab_h100_qwen3-30b_alltoall_graphs"] == ("alltoall", "layer", False)
    s = cases["mb_ab_h100_qwen3-30b_hybridep_overlap_off"].strategy
    assert (s.dp, s.tp, s.pp, s.ep, s.expert_tp, s.micro_batch, s.global_batch, s.dtype) == \
        (16, 1, 1, 16, 1, 1, 1024, "bf16")
    assert "moe_permute_fusion false (not modelled)" in cases["mb_ab_h100_qwen3-30b_alltoall_overlap_off"].assumptions
    assert "layout inferred" in cases["mb_ab_h100_qwen3-30b_alltoall_graphs"].assumptions


def test_within_issue_27s_moe_targets(rows):
    """Held out: mean <= 15 %, max <= 30 % (issue 27's targets for the MoE groups)."""
    _, r = rows
    errors = [abs(x.relative_error) for x in r.values()]
    assert sum(errors) / len(errors) <= 0.15 and max(errors) <= 0.30, errors


def test_the_dispatcher_difference_is_priced(rows):
    """A component, not a total: the all-to-all across the two nodes against HybridEP. Measured 41.25 / 24.71 =
    1.67x slower (different days and graph scopes: router graphs on the HybridEP rows); the model's ratio within
    10 % of it."""
    _, r = rows
    measured = MEASURED_S["mb_ab_h100_qwen3-30b_alltoall_overlap_off"] / MEASURED_S["mb_ab_h100_qwen3-30b_hybridep_overlap_off"]
    model = r["mb_ab_h100_qwen3-30b_alltoall_overlap_off"].predicted / r["mb_ab_h100_qwen3-30b_hybridep_overlap_off"].predicted
    assert model == pytest.approx(measured, rel=0.10)


def test_plain_ep_overlap_saves_time_and_the_model_hides_more_than_the_runs(rows):
    """The overlap A/Bs (only overlap_moe_expert_parallel_comm changed): HybridEP 24.71 -> 20.99 s (-15.1 %),
    the all-to-all 41.25 -> 31.31 s (-24.1 %). The model saves in both and more with the all-to-all, as measured.
    Until 2026-12-07 it hid all of an all-to-all under a long enough partner pass and saved more than the runs
    (19.4 % and 38.1 %); the profile of the HybridEP pair shows 36.55 % of its communication under compute, and that
    measured share is now what a step that is not one CUDA graph hides (explorer/cost/fused_dispatch.py EAGER_HIDDEN):
    the model saves about half of what the runs save (7.9 % and 16.4 %) -- the runs also spent less time in the
    dispatcher's own code with the overlap on (HybridEP metadata preprocess 3.1 -> 0.7 s in the same profile), which
    the model does not price. Both overlap rows within 8 % of their times. Pinned so that a change is seen."""
    _, r = rows
    saved = {}
    for d in ("hybridep", "alltoall"):
        off, on = (r[f"mb_ab_h100_qwen3-30b_{d}_overlap_{x}"].predicted for x in ("off", "on"))
        measured = 1 - MEASURED_S[f"mb_ab_h100_qwen3-30b_{d}_overlap_on"] / MEASURED_S[f"mb_ab_h100_qwen3-30b_{d}_overlap_off"]
        saved[d] = (1 - on / off, measured)
    assert saved["hybridep"][1] == pytest.approx(0.151, abs=0.001) and saved["alltoall"][1] == pytest.approx(0.241, abs=0.001)
    assert all(0.4 * measured < model < measured for model, measured in saved.values()), saved
    assert saved["alltoall"][0] > saved["hybridep"][0]
    for d in ("hybridep", "alltoall"):
        assert abs(r[f"mb_ab_h100_qwen3-30b_{d}_overlap_on"].relative_error) < 0.08


def test_the_graph_ab_the_model_does_not_reproduce(rows):
    """Transformer Engine graphs of [attn, moe_router, moe_preprocess] with the all-to-all: the run got 1.5 % slower
    (41.36 -> 42.00 s, "A successful capture is not a speedup guarantee"); the model removes the graphed parts' host
    issue time and comes out ~8 % faster. The row stays within the targets (-12.5 %); pinned as a known miss."""
    _, r = rows
    eager, graphs = r["mb_ab_h100_qwen3-30b_alltoall_eager"], r["mb_ab_h100_qwen3-30b_alltoall_graphs"]
    assert MEASURED_S["mb_ab_h100_qwen3-30b_alltoall_graphs"] > MEASURED_S["mb_ab_h100_qwen3-30b_alltoall_eager"]
    assert graphs.predicted < eager.predicted
    assert abs(graphs.relative_error) <= 0.30


def test_the_group_is_selectable_and_bad_files_are_refused(tmp_path):
    assert {c.group for c in load_all_cases(["moe_ab_h100"])} == {"moe_ab_h100"}
    bad = tmp_path / "ab.json"
    entry = json.loads(PATH.read_text())[0]
    for broken, words in (({**entry, "inputs": {**entry["inputs"], "dispatcher": "carrier-pigeon"}}, "dispatcher"),
                          ({**entry, "inputs": {**entry["inputs"], "tensor_parallel": 3}}, "does not divide the row's 16 GPUs"),
                          ({**entry, "inputs": {**entry["inputs"], "num_gpus": 15}}, "not divisible"),
                          ({"id": "x"}, "malformed")):
        bad.write_text(json.dumps([broken]))
        with pytest.raises(ExplorerError, match=words):
            load_moe_ab_cases(bad)
