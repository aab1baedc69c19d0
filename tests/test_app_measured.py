"""AppTest of the Measured page: install hint without torch, a saved run, a run from the page."""
import sys
from pathlib import Path

import pytest

from tests.app_util import chart_specs, errors, metric, open_page

SAVED = Path(__file__).parent / "data" / "run_micro_gpt_tp2_pp2.json"
# made by: python -m explorer run --model M --procs 4 --tp 2 --pp 2 --global-batch 4 --iterations 2
#   --cluster classroom --out tests/data/run_micro_gpt_tp2_pp2.json, M = tests/test_runtime.py TINY as a file


def test_without_torch_the_page_says_how_to_install_and_still_opens_a_saved_run(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)
    at = open_page("measured")
    assert any("pip install torch==2.13.0" in i.value for i in at.info)
    assert not any(b.label == "Run" for b in at.button)
    at.file_uploader(key="w_run_file").upload(SAVED.name, SAVED.read_bytes(), "application/json").run()
    assert not at.exception and not errors(at)
    assert metric(at, "Iteration, measured").endswith("ms")
    table = at.dataframe[0].value
    assert list(table["measured - not modelled = model"]) == [True] * 5
    times = at.dataframe[2].value
    assert "compute" in list(times["category"]) and (times["model (ms)"] >= 0).all()
    spec = chart_specs(at)[0]
    bars = [t for t in spec["data"] if t["type"] == "bar"]
    rows = {y for t in bars for y in t["y"]}
    assert {"model · stage 0", "model · stage 1"} <= rows
    assert {f"rank {r} (stage {r // 2})" for r in range(4)} <= rows
    assert all("base" in t for t in bars)
    micro = chart_specs(at)[1]          # layer 0's forward: model rows of its group over the measured ranks
    rows = {y for t in micro["data"] for y in t["y"]}
    assert {"model · gpu 0", "model · gpu 1", "rank 0 (stage 0)", "rank 1 (stage 0)"} <= rows
    assert "qkv" in {c[2] for t in micro["data"] for c in t["customdata"]}


def test_a_bad_file_is_refused_in_one_line():
    at = open_page("measured")
    at.file_uploader(key="w_run_file").upload("x.json", b'{"model": 1}', "application/json").run()
    assert not at.exception
    assert any("lacks" in e for e in errors(at))


def test_running_from_the_page_shows_bytes_losses_and_the_gantt():
    pytest.importorskip("torch")
    at = open_page("measured")
    at.selectbox(key="w_run_cluster").set_value("classroom")
    at.number_input(key="w_run_iterations").set_value(2)
    next(b for b in at.button if b.label == "Run").click().run(timeout=240)
    assert not at.exception and not errors(at)
    job = at.session_state["worker_jobs"].get("reference_run")   # the run goes to a worker (app_pages/jobs.py)
    if job is not None:
        assert job.wait(240), job
        at.run()                   # what the page's progress fragment does once the job has finished
    assert not at.exception and not errors(at)
    table = at.dataframe[0].value
    assert list(table["measured - not modelled = model"]) == [True] * 5
    losses = at.dataframe[1].value
    assert len(losses) == 2
    assert max(abs(losses["loss, parallel run"] - losses["loss, one process"]) / losses["loss, one process"]) < 1e-5
    assert chart_specs(at)


def test_bad_saved_runs_show_one_error_and_no_exception():
    """The issue's four files (issue 31): each is refused with a message, never an exception box."""
    from app_pages.text import plain
    from tests.test_saved_run import ISSUE
    at = open_page("measured")
    for name in ("deep nesting", "strategy 5", "measured time 'x'", "NaN loss", "markup drawn in a chart"):
        data, named = ISSUE[name]
        at.file_uploader(key="w_run_file").upload("run.json", data, "application/json").run()
        assert not at.exception, (name, at.exception)
        shown = errors(at)
        assert len(shown) == 1 and plain(named) in shown[0], (name, shown)      # shown as literal text
