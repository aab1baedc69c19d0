"""The command line, run as a user runs it: `python -m explorer ...` in a subprocess."""
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from explorer import LayerSplit, Strategy, evaluate, list_clusters, list_models, load_cluster, load_model
from explorer.cost.superstep import CATEGORIES, COMM_CATEGORIES
from explorer.io.strategies import save_strategy

ROOT = Path(__file__).resolve().parents[1]
MEMORY_KEYS = ("params", "grads", "optimizer", "activations", "total")
ISSUE_COMMAND = ("evaluate --model gpt3-175b --cluster dgx-a100-80gb --gpus 1024 --tp 8 --pp 8 "
                 "--micro-batch 1 --global-batch 1536 --schedule 1f1b --json").split()


def cli(*args, timeout=120):
    return subprocess.run([sys.executable, "-m", "explorer", *map(str, args)], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout)


_POOL = ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2))


def start(*args):
    """Start `python -m explorer args` now (the runs overlap; each pays ~1 s of imports)."""
    return _POOL.submit(cli, *args)


# ---- every command of this file starts at once (module fixture); tests wait for their run ----

def bad_model_file(tmp):
    path = tmp / "bad.json"
    path.write_text('{"name": "x", "family": "gpt", "layers": 2,,}')
    return path


def wrong_type_model_file(tmp):
    path = tmp / "wrong.json"
    path.write_text(json.dumps({"name": "x", "family": "gpt", "layers": "two", "hidden": 64, "heads": 4,
                                "seq_len": 16, "vocab": 10}))
    return path


def bad_strategy_file(tmp):
    path = tmp / "bad-strategy.json"
    path.write_text(json.dumps({"version": 1, "tp": "eight"}))
    return path


TINY = ["--model", "tiny-gpt", "--cluster", "classroom"]
BAD = {  # name -> (arguments after `evaluate` given a temporary directory, text the error must name)
    "unknown preset": (lambda tmp: ["--model", "no-such-model", "--cluster", "classroom", "--gpus", "4"],
                       "no-such-model"),
    "unknown cluster": (lambda tmp: ["--model", "tiny-gpt", "--cluster", "no-such-cluster", "--gpus", "4"],
                        "no-such-cluster"),
    "malformed model file": (lambda tmp: ["--model", bad_model_file(tmp), "--cluster", "classroom", "--gpus", "4"],
                             "bad.json"),
    "wrong type in model file": (lambda tmp: ["--model", wrong_type_model_file(tmp), "--cluster", "classroom",
                                              "--gpus", "4"], "layers"),
    "missing file": (lambda tmp: ["--model", tmp / "missing.json", "--cluster", "classroom", "--gpus", "4"],
                     "missing.json"),
    "tp does not divide heads": (lambda tmp: TINY + ["--gpus", "3", "--tp", "3"], "3"),
    "gpus mismatch": (lambda tmp: TINY + ["--gpus", "5", "--tp", "2", "--dp", "2"], "5"),
    "unknown flag": (lambda tmp: TINY + ["--gpus", "4", "--frobnicate"], "--frobnicate"),
    "bad flag value": (lambda tmp: TINY + ["--gpus", "four"], "four"),
    "malformed strategy file": (lambda tmp: TINY + ["--strategy", bad_strategy_file(tmp)], "tp"),
}

ROUND_TRIP = Strategy(dp=2, tp=2, pp=2, micro_batch=2, global_batch=16, schedule="gpipe", zero=1,
                      recompute="selective", sequence_parallel=True, overlap_dp=True, scatter_gather=False,
                      layer_splits=(LayerSplit(2, "megatron"), LayerSplit(1, "replicated"),
                                    LayerSplit(2, "column", (("fc2", "row"),)), LayerSplit(2, "batch")),
                      stage_map=(0, 0, 0, 1))
OVERRIDDEN = Strategy(dp=2, tp=2, pp=1, micro_batch=1, global_batch=8)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("cli")
    save_strategy(ROUND_TRIP, tmp / "round-trip.json")
    save_strategy(OVERRIDDEN, tmp / "override.json")
    jobs = {
        "models": start("models"),
        "clusters": start("clusters"),
        "issue json": start(*ISSUE_COMMAND),
        "issue text": start(*[a for a in ISSUE_COMMAND if a != "--json"]),
        "interleaved": start("evaluate", *TINY, "--gpus", "4", "--pp", "2", "--global-batch", "8",
                             "--schedule", "interleaved", "--json"),
        "round trip": start("evaluate", *TINY, "--strategy", tmp / "round-trip.json", "--json"),
        "override": start("evaluate", *TINY, "--strategy", tmp / "override.json", "--global-batch", "16",
                          "--json"),
        "unknown command": start("frobnicate"),
    }
    for name, (make, _) in BAD.items():
        jobs[name] = start("evaluate", *make(tmp))
    return jobs


def ok(runs, name):
    run = runs[name].result()
    assert run.returncode == 0, run.stderr
    assert run.stderr == ""
    return run.stdout


def test_models_lists_every_preset(runs):
    names = {line.split()[0] for line in ok(runs, "models").splitlines()[1:] if line.strip()}
    assert names == {spec.name for spec in list_models()}
    assert {"gpt3-175b", "tiny-gpt", "resnet-50", "llama2-7b"} <= names


def test_clusters_lists_every_preset(runs):
    names = {line.split()[0] for line in ok(runs, "clusters").splitlines()[1:] if line.strip()}
    assert names == {c.name for c in list_clusters()}
    assert {"dgx-a100-80gb", "dgx-h100", "h200", "classroom"} <= names


def test_issue_command_prints_the_json_contract(runs):
    """The issue's command: GPT-3 175B on 1024 A100s, t = 8, p = 8, b = 1, B = 1536, 1F1B:
    one JSON object with the documented keys."""
    out = json.loads(ok(runs, "issue json"))   # one JSON object and nothing else
    assert isinstance(out, dict)
    total = out["iteration_time_s"]
    assert isinstance(total, float) and total > 0
    assert set(out["breakdown_s"]) == set(CATEGORIES)
    assert sum(out["breakdown_s"].values()) == pytest.approx(total, rel=1e-12)
    assert all(x >= 0 for x in out["breakdown_s"].values())
    assert set(out["comm_bytes_per_device"]) == set(COMM_CATEGORIES)
    assert set(out["memory_bytes_per_device"]) >= set(MEMORY_KEYS)
    mem = out["memory_bytes_per_device"]
    assert mem["total"] == pytest.approx(sum(mem[k] for k in MEMORY_KEYS[:-1]), rel=1e-12)
    for key in ("params", "model_flops_per_iteration", "hardware_flops_per_iteration", "tflops_per_gpu", "mfu"):
        assert isinstance(out[key], (int, float)) and out[key] > 0, key
    assert out["tflops_per_gpu"] == pytest.approx(
        out["model_flops_per_iteration"] / (total * 1024) / 1e12, rel=1e-12)
    # the strategy it assumed, and whether it fits (issue "Speed where a person waits"): 93.7 GiB > 80
    assert out["strategy"]["recompute"] == "none" and out["strategy"]["sequence_parallel"] is False
    assert out["strategy"]["dp"] == 16 and out["strategy"]["tp"] == 8 and out["strategy"]["pp"] == 8
    assert out["fits_memory"] is False and out["memory_capacity_bytes"] == 80 * 2 ** 30
    assert mem["total"] > out["memory_capacity_bytes"]
    assert 0 < out["mfu"] < 1
    assert isinstance(out["formula_latex"], str) and out["formula_latex"].strip()


def test_issue_command_matches_the_library(runs):
    out = json.loads(ok(runs, "issue json"))
    model, cluster = load_model("gpt3-175b"), load_cluster("dgx-a100-80gb")
    strategy = Strategy(dp=16, tp=8, pp=8, micro_batch=1, global_batch=1536, schedule="1f1b")
    result = evaluate(model, strategy, cluster, 1024)
    assert out["iteration_time_s"] == pytest.approx(result.iteration_time_s, rel=1e-12)
    assert out["breakdown_s"] == pytest.approx(result.breakdown_s, rel=1e-12)
    assert out["params"] == result.params


def test_text_output(runs):
    text = ok(runs, "issue text")
    assert "iteration time" in text and "bubble" in text


def test_interleaved_from_the_command_line(runs):
    """The interleaved schedule (chunks default 2) evaluates from the CLI."""
    assert json.loads(ok(runs, "interleaved"))["iteration_time_s"] > 0


# ---- bad input: exit 2, one line "error: ...", no traceback -------------------------------------

@pytest.mark.parametrize("name", list(BAD))
def test_bad_input_is_one_error_line_exit_2(runs, name):
    run = runs[name].result()
    assert run.returncode == 2, (run.stdout, run.stderr)
    lines = run.stderr.splitlines()
    assert len(lines) == 1 and lines[0].strip(), run.stderr
    assert lines[0].startswith("error:")
    assert "Traceback" not in run.stderr + run.stdout
    assert BAD[name][1] in lines[0]


def test_unknown_command_is_one_error_line_exit_2(runs):
    run = runs["unknown command"].result()
    assert run.returncode == 2
    assert len(run.stderr.splitlines()) == 1 and run.stderr.startswith("error:")
    assert "Traceback" not in run.stderr


# ---- --strategy FILE round trip -----------------------------------------------------------------

def test_strategy_file_round_trip(runs):
    """save_strategy -> `evaluate --strategy FILE --json` -> the same numbers as evaluate()."""
    out = json.loads(ok(runs, "round trip"))
    result = evaluate(load_model("tiny-gpt"), ROUND_TRIP, load_cluster("classroom"), 8)
    assert out["gpus"] == 8 and out["micro_batches"] == result.micro_batches
    assert out["iteration_time_s"] == pytest.approx(result.iteration_time_s, rel=1e-12)
    assert out["breakdown_s"] == pytest.approx(result.breakdown_s, rel=1e-12, abs=1e-18)
    assert out["comm_bytes_per_device"] == pytest.approx(result.comm_bytes_per_device, rel=1e-12)
    assert out["memory_bytes_per_device"] == pytest.approx(
        {k: result.memory_bytes_per_device[k] for k in MEMORY_KEYS}, rel=1e-12)
    assert out["params"] == result.params


def test_flags_override_the_strategy_file(runs):
    out = json.loads(ok(runs, "override"))
    result = evaluate(load_model("tiny-gpt"), OVERRIDDEN.with_(global_batch=16), load_cluster("classroom"), 4)
    assert out["iteration_time_s"] == pytest.approx(result.iteration_time_s, rel=1e-12)
    assert out["micro_batches"] == 8


def test_evaluate_names_a_fitting_strategy_when_the_given_one_does_not_fit():
    """Issue 11: DeepSeek-V3 on 1024 H100s with no strategy flags (pure DP, ~10 TiB per device) gets
    the flags of the app's default, which fits; running those flags prints no such hint."""
    out = cli("evaluate", "--model", "deepseek-v3", "--cluster", "dgx-h100", "--gpus", "1024", timeout=300)
    assert out.returncode == 0, out.stderr
    hint = [ln for ln in out.stdout.splitlines() if ln.startswith("Does not fit")]
    assert len(hint) == 1 and "--ep " in hint[0]
    flags = hint[0].split(": ", 1)[1].split()
    again = cli("evaluate", "--model", "deepseek-v3", "--cluster", "dgx-h100", "--gpus", "1024", *flags, "--json",
                timeout=300)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["fits_memory"] is True


def test_every_command_module_is_named_and_registers_its_commands():
    """The CLI imports only the named command's module (explorer/cli/main.py COMMAND_MODULES): a module left out
    of the table would vanish from the CLI, --help included. Each module registers exactly the commands the
    table gives it, and the explorer/cli/*_cmd.py files are all in it."""
    import importlib
    from pathlib import Path
    from explorer.cli.args import Parser
    from explorer.cli.main import COMMAND_MODULES
    package = Path(importlib.import_module("explorer.cli").__file__).parent
    assert {p.stem for p in package.glob("*_cmd.py")} == set(COMMAND_MODULES.values())
    for module_name in set(COMMAND_MODULES.values()):
        sub = Parser(prog="x").add_subparsers(dest="command", parser_class=Parser)
        importlib.import_module(f"explorer.cli.{module_name}").register(sub)
        assert set(sub.choices) == {c for c, m in COMMAND_MODULES.items() if m == module_name}, module_name
