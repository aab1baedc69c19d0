"""Every failure clean: extreme numbers, arithmetic errors and non-finite results become ExplorerError;
the CLI never prints a traceback and --json is always valid JSON."""
import base64
import dataclasses
import json

import pytest

from explorer import limits
from explorer.cli import evaluate_cmd, main as cli_main   # the CLI imports the named command's module (COMMAND_MODULES)
from explorer.io.clusters import cluster_from_dict, cluster_to_dict, load_cluster
from explorer.errors import ExplorerError
from explorer.cost.checked import evaluate_checked
from explorer.cost.evaluate import evaluate
from explorer.io.models import load_model
from explorer.io.share import decode
from explorer.strategy import Strategy
from explorer.io.uploads import cluster_from_upload

CLASSROOM = cluster_to_dict(load_cluster("classroom"))


def extreme_cluster(path: tuple, value) -> dict:
    d = json.loads(json.dumps(CLASSROOM))
    target = d
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return d


@pytest.mark.parametrize("path,value,named", [
    (("device", "peak_tflops", "bf16"), 1e-300, "peak_tflops"),
    (("device", "peak_tflops", "bf16"), 1e300, "peak_tflops"),
    (("device", "hbm_bandwidth_gbps"), 1e-300, "hbm_bandwidth_gbps"),
    (("device", "memory_gib"), 1e308, "memory_gib"),
    (("levels", 0, "bandwidth_gbps"), 5e-324, "bandwidth_gbps"),
    (("levels", 0, "latency_us"), 1e308, "latency_us"),
    (("levels", 0, "fanout"), 10 ** 400, "MAX_DEVICES"),
    (("efficiency", "kernel_launch_s"), 1e308, "kernel_launch_s"),
    (("efficiency", "gemm_max"), 1e-300, "gemm_max"),
    (("efficiency", "gemm_half_flops"), 1e300, "gemm_half_flops")])
def test_absurd_cluster_magnitudes_are_refused_with_the_field_named(path, value, named):
    with pytest.raises(ExplorerError, match=named):
        cluster_from_dict(extreme_cluster(path, value), "x")


def test_upload_and_link_with_tiny_peak_are_clean():
    bad = extreme_cluster(("device", "peak_tflops", "bf16"), 1e-300)
    with pytest.raises(ExplorerError, match="peak_tflops"):
        cluster_from_upload("c.json", json.dumps(bad).encode())
    spec = base64.urlsafe_b64encode(json.dumps(bad).encode()).decode().rstrip("=")
    shared = decode({"model": "tiny-gpt", "cluster_spec": spec})
    assert any("peak_tflops" in m for m in shared.messages)


@pytest.mark.parametrize("peak", [1e-288, 5e-324])
def test_a_cluster_built_in_code_gives_a_finite_result_or_a_clean_error(peak):
    cluster = load_cluster("classroom")
    device = dataclasses.replace(cluster.device, peak_flops={"bf16": peak})
    try:                       # finite (if absurd) numbers, or a clean refusal; never NaN, inf or a crash
        result = evaluate_checked(load_model("tiny-gpt"), Strategy(), dataclasses.replace(cluster, device=device))
    except ExplorerError as err:
        assert "not a finite" in str(err) or "too extreme" in str(err)
    else:
        assert limits.check_result(result) is result and result.iteration_time_s > 1e200


def test_non_finite_results_are_refused_naming_the_field():
    result = evaluate(load_model("tiny-gpt"), Strategy(), load_cluster("classroom"))
    assert limits.check_result(result) is result
    bad = dataclasses.replace(result, breakdown_s={**result.breakdown_s, "compute": float("inf")})
    with pytest.raises(ExplorerError, match=r"breakdown_s\.compute.*not a finite|not a finite.*breakdown_s\.compute"):
        limits.check_result(bad)
    with pytest.raises(ExplorerError, match="not a finite"):
        limits.check_result(dataclasses.replace(result, iteration_time_s=float("nan")))


def test_arithmetic_errors_become_explorer_errors():
    with pytest.raises(ExplorerError, match="ZeroDivisionError"):
        limits.guarded(lambda: 1 / 0)
    with pytest.raises(ExplorerError, match="OverflowError"):
        limits.guarded(lambda: 10.0 ** 400)


def run_cli(argv, capsys):
    code = cli_main.main(argv)
    out, err = capsys.readouterr()
    assert code in (0, 2), code
    assert "Traceback" not in err and "Traceback" not in out
    if code == 2:
        assert err.startswith("error: ") and err.count("\n") == 1
    return code, out, err


def test_cli_catches_anything_with_one_line(monkeypatch, capsys):
    def boom(args):
        raise RuntimeError("unexpected\nsecond line")
    monkeypatch.setattr(evaluate_cmd, "run", boom)
    code, _, err = run_cli(["evaluate", "--model", "tiny-gpt", "--cluster", "classroom", "--gpus", "1"], capsys)
    assert code == 2 and "RuntimeError: unexpected second line" in err


def test_cli_keeps_keyboard_interrupt(monkeypatch):
    def stop(args):
        raise KeyboardInterrupt
    monkeypatch.setattr(evaluate_cmd, "run", stop)
    with pytest.raises(KeyboardInterrupt):
        cli_main.main(["evaluate", "--model", "tiny-gpt", "--cluster", "classroom", "--gpus", "1"])


def test_cli_json_is_strict_json(capsys):
    code, out, _ = run_cli(["evaluate", "--model", "tiny-gpt", "--cluster", "classroom", "--gpus", "4", "--tp", "2",
                            "--pp", "2", "--global-batch", "8", "--json"], capsys)
    assert code == 0
    json.loads(out, parse_constant=lambda name: pytest.fail(f"{name} in --json output"))


def test_cli_extreme_cluster_file_exits_2(tmp_path, capsys):
    path = tmp_path / "c.json"
    path.write_text(json.dumps(extreme_cluster(("efficiency", "kernel_launch_s"), 1e308)))
    code, out, err = run_cli(["evaluate", "--model", "tiny-gpt", "--cluster", str(path), "--gpus", "1", "--json"],
                             capsys)
    assert code == 2 and "kernel_launch_s" in err and out == ""


def test_cli_huge_model_dimension_exits_2(tmp_path, capsys):
    path = tmp_path / "m.yaml"
    path.write_text("family: gpt\nlayers: 2\nhidden: " + "9" * 4000 + "\nheads: 4\nseq_len: 32\nvocab: 100\n")
    code, _, err = run_cli(["evaluate", "--model", str(path), "--cluster", "classroom", "--gpus", "1"], capsys)
    assert code == 2 and "MAX_HIDDEN" in err


@pytest.mark.parametrize("content,named", [
    ("[" * 100_000, "nested"),
    (json.dumps([{"id": "ptdp_table1_x", "source": "s", "inputs": {
        "params_billion": 1.7, "layers": 24, "hidden_size": 2304, "attention_heads": 24, "seq_len": 2048,
        "vocab": 51200, "global_batch_size": 512, "tensor_parallel": 1, "pipeline_parallel": 1, "num_gpus": 32},
        "expected": {"teraflops_per_gpu": 0}}]), "ptdp_table1_x"),
    (json.dumps([{"id": "ptdp_table1_y", "inputs": {}}]), "ptdp_table1_y"),
    ("{}", "list")])
def test_validate_bad_cases_files_exit_2(tmp_path, capsys, content, named):
    path = tmp_path / "cases.json"
    path.write_text(content)
    code, _, err = run_cli(["validate", "--cases", str(path)], capsys)
    assert code == 2 and named in err


def test_validate_dev_zero_is_refused_unread(capsys):
    code, _, err = run_cli(["validate", "--cases", "/dev/zero"], capsys)
    assert code == 2 and "not a regular file" in err
