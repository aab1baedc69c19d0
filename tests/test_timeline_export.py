"""Exports (CSV, JSON, Chrome trace-event JSON) and the `timeline` command."""
import io
import json

import pandas as pd
import pytest

from explorer import Strategy, load_cluster, load_model
from explorer.cli.main import main
from explorer.timeline import COLUMNS, export, microstep_events, superstep_events, trace_events

GPT3, A100 = load_model("gpt3-175b"), load_cluster("dgx-a100-80gb")
FLAGS = ["--model", "gpt3-175b", "--cluster", "dgx-a100-80gb", "--gpus", "64", "--tp", "8", "--pp", "8",
         "--micro-batch", "1", "--global-batch", "64"]


@pytest.fixture(scope="module")
def events():
    s = Strategy(dp=1, tp=8, pp=8, micro_batch=1, global_batch=16, schedule="interleaved", chunks=2)
    return superstep_events(GPT3, s, A100)


def test_columns_are_documented_and_in_order(events):
    assert list(events.columns) == list(COLUMNS)
    required = {"row", "stage", "device", "start_s", "end_s", "kind", "category", "micro_batch", "chunk",
                "operator", "level", "bytes"}
    assert required <= set(COLUMNS) and all(COLUMNS[c] for c in COLUMNS)
    assert (events.end_s >= events.start_s).all()
    assert set(events.chunk) == {-1, 0, 1}          # -1: idle and the steps after the pipeline


def test_csv_and_json_round_trip(events):
    back = pd.read_csv(io.StringIO(export(events, "csv")), keep_default_na=False)
    assert list(back.columns) == list(COLUMNS) and len(back) == len(events)
    assert back.end_s.max() == pytest.approx(events.end_s.max(), rel=1e-15)
    records = json.loads(export(events, "json"))
    assert len(records) == len(events) and set(records[0]) == set(COLUMNS)
    assert max(r["end_s"] for r in records) == pytest.approx(events.end_s.max(), rel=1e-14)


def check_trace(trace, n_events):
    complete = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert len(complete) == n_events
    for e in complete:
        assert {"name", "ph", "ts", "dur", "pid", "tid", "args"} <= set(e)
        assert isinstance(e["ts"], float) and e["dur"] >= 0 and isinstance(e["tid"], int)
    names = {e["tid"]: e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "thread_name"}
    assert {e["tid"] for e in complete} <= set(names)
    return complete


def test_chrome_trace_of_super_and_micro_steps(events):
    complete = check_trace(json.loads(export(events, "chrome-trace")), len(events))
    assert max(e["ts"] + e["dur"] for e in complete) == pytest.approx(events.end_s.max() * 1e6)
    assert {"forward 0", "backward 3 c1", "idle"} <= {e["name"] for e in complete}
    micro = microstep_events(GPT3, Strategy(dp=1, tp=8, pp=8, micro_batch=1, global_batch=8), A100, op="qkv")
    names = {e["name"] for e in check_trace(trace_events(micro), len(micro))}
    assert "qkv all_reduce" in names and "qkv compute" in names


def test_cli_prints_the_events_of_the_issue_example(capsys):
    assert main(["timeline"] + FLAGS + ["--schedule", "1f1b", "--format", "csv"]) == 0
    out, err = capsys.readouterr()
    df = pd.read_csv(io.StringIO(out), keep_default_na=False)
    assert list(df.columns) == list(COLUMNS) and set(df.stage) == set(range(8))
    assert "timeline makespan (1f1b)" in err and "cost model iteration time" in err


def test_cli_chrome_trace_file_loads(tmp_path, capsys):
    out = tmp_path / "trace.json"
    assert main(["timeline"] + FLAGS + ["--draw", "zb-h1", "--format", "chrome-trace", "--out", str(out)]) == 0
    trace = json.loads(out.read_text())
    complete = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert complete and any(e["name"].startswith("weight") for e in complete)
    printed = capsys.readouterr().out
    assert "zb-h1" in printed and "the 1f1b iteration's" in printed and "difference" in printed


def test_cli_micro_level_json(capsys):
    assert main(["timeline"] + FLAGS + ["--level", "micro", "--layer", "3", "--format", "json"]) == 0
    records = json.loads(capsys.readouterr().out)
    assert {r["row"] for r in records} == {f"gpu {k}" for k in range(8)}


@pytest.mark.parametrize("extra,message", [
    (["--schedule", "zz"], "invalid choice: 'zz'"),
    (["--level", "micro", "--op", "nope"], "operator 'nope' not found"),
    (["--level", "micro", "--layer", "500"], "outside the model's layers"),
    (["--op", "qkv"], "add --level micro"),
    (["--schedule", "interleaved", "--global-batch", "12"], "multiple of pp=8"),
    (["--format", "xml"], "invalid choice: 'xml'"),
])
def test_cli_bad_input_exits_2_with_one_line(extra, message, capsys):
    assert main(["timeline"] + FLAGS + extra) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and err.count("\n") == 1


def test_cli_format_choices_match_the_library():
    """The timeline command lists its formats without importing pandas; they must stay equal."""
    from explorer.cli.timeline_cmd import FORMATS as CLI_FORMATS
    from explorer.timeline import FORMATS as LIBRARY_FORMATS
    assert tuple(CLI_FORMATS) == tuple(LIBRARY_FORMATS)
