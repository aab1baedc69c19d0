"""python -m explorer search: JSON contract, strategies loadable by `evaluate --strategy`, errors, progress."""
import json

import pytest

from explorer import evaluate, load_cluster, load_model
from explorer.cli.main import main
from explorer.io.strategies import strategy_from_dict

ARGS = ["search", "--model", "tiny-gpt", "--cluster", "classroom", "--gpus", "8", "--global-batch", "16"]


@pytest.fixture(scope="module")
def output():
    import io
    from contextlib import redirect_stderr, redirect_stdout
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(ARGS + ["--top", "3", "--max-memory-gib", "0.04", "--json"])
    return code, json.loads(out.getvalue()), err.getvalue()


def test_json_contract(output):
    code, data, _ = output
    assert code == 0
    assert {"model", "cluster", "gpus", "global_batch", "memory_cap_bytes", "elapsed_s", "total", "kept",
            "evaluated", "refined", "pruned", "top", "pareto"} <= set(data)
    assert data["kept"] + sum(data["pruned"].values()) == data["total"]
    assert [row["rank"] for row in data["top"]] == [1, 2, 3]
    assert data["memory_cap_bytes"] == 0.04 * 2 ** 30
    for row in data["top"] + data["pareto"]:
        assert {"strategy", "iteration_time_s", "peak_memory_bytes", "mfu", "breakdown_s"} <= set(row)
        assert row["peak_memory_bytes"] <= data["memory_cap_bytes"]


def test_strategies_reevaluate_to_the_reported_numbers(output):
    _, data, _ = output
    model, cluster = load_model("tiny-gpt"), load_cluster("classroom")
    for row in data["top"] + data["pareto"]:
        r = evaluate(model, strategy_from_dict(row["strategy"]), cluster, 8)
        assert r.iteration_time_s == row["iteration_time_s"]
        assert r.memory_bytes_per_device["total"] == row["peak_memory_bytes"]


def test_evaluate_loads_a_searched_strategy(output, tmp_path, capsys):
    _, data, _ = output
    path = tmp_path / "best.json"
    path.write_text(json.dumps(data["top"][0]["strategy"]))
    code = main(["evaluate", "--model", "tiny-gpt", "--cluster", "classroom", "--gpus", "8",
                 "--strategy", str(path), "--json"])
    assert code == 0
    assert json.loads(capsys.readouterr().out)["iteration_time_s"] == data["top"][0]["iteration_time_s"]


def test_progress_goes_to_stderr(output):
    _, _, err = output
    assert "search: 100%" in err


def test_text_output(capsys):
    assert main(ARGS + ["--top", "2"]) == 0
    out = capsys.readouterr().out
    assert "Pareto front" in out and "pruned" in out and " 1 " in out


@pytest.mark.parametrize("extra", [["--gpus", "0"], ["--max-memory-gib", "-1"], ["--top", "0"],
                                   ["--model", "no-such-model"], ["--global-batch", "x"], ["--seq-len", "0"],
                                   ["--gpus", str(2 ** 21)],    # beyond explorer.limits.MAX_DEVICES
                                   ["--memory-headroom", "1"], ["--memory-headroom", "-0.1"],
                                   ["--memory-headroom", "nan"]])
def test_bad_input_is_one_line_and_exit_2(extra, capsys):
    assert main(ARGS + extra) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ")


def test_the_memory_headroom_leaves_part_of_the_device_free(capsys):
    """Issue 30 item 5: without a cap the search plans on the device's memory less a headroom (5 % by default,
    --memory-headroom sets it); a cap given is taken as it is."""
    from explorer.cli.search_cmd import HEADROOM_DEFAULT
    from explorer.search.search import MEMORY_HEADROOM
    assert float(HEADROOM_DEFAULT) == MEMORY_HEADROOM
    device = load_cluster("classroom").device.memory_bytes
    for extra, cap in (([], device * (1 - MEMORY_HEADROOM)), (["--memory-headroom", "0.2"], device * 0.8),
                       (["--memory-headroom", "0.2", "--max-memory-gib", "1"], 2 ** 30)):
        assert main(ARGS + ["--top", "1", "--json"] + extra) == 0
        data = json.loads(capsys.readouterr().out)
        assert data["memory_cap_bytes"] == pytest.approx(cap)
        assert all(row["peak_memory_bytes"] <= cap for row in data["top"] + data["pareto"])
