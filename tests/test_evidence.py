"""Every number carries its evidence (issue 28 item 1): the regime, its validated error, the nearest
validated runs, and whether a prediction extrapolates (explorer/validation/evidence.py)."""
import dataclasses
import json
import subprocess
import sys

import pytest

from explorer.io.clusters import load_cluster
from explorer.io.models import load_model
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


def test_the_cli_prints_the_evidence():
    args = [sys.executable, "-m", "explorer", "evaluate", "--model", "mixtral-8x7b", "--cluster", "mi300x",
            "--dp", "8", "--ep", "8", "--global-batch", "64"]
    out = json.loads(subprocess.run(args + ["--json"], capture_output=True, text=True, check=True, cwd=ROOT).stdout)
    assert out["evidence"]["extrapolating"] and "MI300X" in out["evidence"]["reason"]
    text = subprocess.run(args, capture_output=True, text=True, check=True, cwd=ROOT).stdout
    assert "evidence: extrapolating: no validated run on MI300X" in text
