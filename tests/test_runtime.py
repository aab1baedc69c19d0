"""The reference run (explorer/runtime): real torch.distributed processes, bytes and losses vs the model.

Skipped without torch (an optional dependency), except the install message. Models are tiny so that
each run takes a few seconds on 2 cores.
"""
import json
import sys

import pytest

from explorer.cli.main import main
from explorer.io.clusters import load_cluster
from explorer.io.models import load_model
from explorer.strategy.strategy import Strategy

TINY = {"name": "micro-gpt", "family": "gpt", "layers": 2, "hidden": 32, "heads": 4, "seq_len": 16, "vocab": 64,
        "source": "test model: tiny so that multi-process runs take seconds"}
LOSS_RTOL = 1e-5
BF16_LOSS_RTOL = 2e-3     # bf16 partial sums rounded per rank vs whole sums in one process (measured <= 4e-5)
CATS = ("op_comm", "redistribution", "pp_comm", "dp_comm", "zero_comm")


@pytest.fixture(scope="module")
def model_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("runtime") / "micro-gpt.json"
    path.write_text(json.dumps(TINY))
    return str(path)


@pytest.fixture(scope="module")
def runs(model_file):
    """One run per strategy, shared by the tests of this module."""
    pytest.importorskip("torch")
    from explorer.runtime.measure import run_strategy
    cache = {}

    def get(**fields):
        fields = {"dtype": "fp32", **fields}          # fp32 unless a test says otherwise (Strategy's default: bf16)
        key = tuple(sorted(fields.items()))
        if key not in cache:
            strategy = Strategy(**fields)
            cache[key] = run_strategy(load_model(model_file), strategy, strategy.devices, load_cluster("classroom"),
                                      iterations=3)
        return cache[key]
    return get


def assert_losses_match(out, rtol=LOSS_RTOL):
    assert len(out["loss_parallel"]) == len(out["loss_single"]) == 3
    for a, b in zip(out["loss_parallel"], out["loss_single"]):
        assert abs(a - b) <= rtol * abs(b), (out["loss_parallel"], out["loss_single"])
    assert out["loss_single"][0] > 0


def assert_bytes_match(out):
    for c in CATS:
        assert out["measured_bytes_per_device"][c] - out["unmodelled_bytes_per_device"][c] == \
            out["model_bytes_per_device"][c], c
    assert out["bytes_match"]


def test_without_torch_run_and_calibrate_say_how_to_install(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "torch", None)       # `import torch` fails, find_spec says None
    for argv in (["run", "--model", "tiny-gpt", "--procs", "2", "--dp", "2", "--json"], ["calibrate"]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "pip install torch==2.13.0" in err and "Traceback" not in err


def test_data_parallel_cli_json_contract_and_exact_bytes(model_file, capsys):
    pytest.importorskip("torch")
    assert main(["run", "--model", model_file, "--procs", "2", "--dp", "2", "--global-batch", "4",
                 "--iterations", "3", "--cluster", "classroom", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    for key in ("measured_bytes_per_device", "model_bytes_per_device", "loss_parallel", "loss_single",
                "iteration_time_s"):
        assert key in out
    assert set(out["measured_bytes_per_device"]) == set(out["model_bytes_per_device"]) == set(CATS)
    assert set(out["iteration_time_s"]) >= {"measured", "predicted"}
    assert out["iteration_time_s"]["measured"] > 0 and out["iteration_time_s"]["predicted"] > 0
    # pure data parallelism: every call is modelled, measured bytes equal the model's exactly
    assert out["measured_bytes_per_device"] == out["model_bytes_per_device"]
    assert out["unmodelled_calls"] == []
    params = 12 * 2 * 32 ** 2 + 13 * 2 * 32 + (64 + 16) * 32 + 2 * 32
    assert out["measured_bytes_per_device"]["dp_comm"] == 4 * params     # fp32, all-reduce over 2: 2(n-1)/n = 1
    assert_losses_match(out)


def test_zero1_reduce_scatter_and_all_gather_carry_what_the_all_reduce_carried(runs):
    out = runs(dp=2, zero=1, global_batch=2)
    assert out["measured_bytes_per_device"] == out["model_bytes_per_device"]
    kinds = {e["kind"] for e in out["events"] if e["category"] == "dp_comm"}
    assert kinds == {"reduce_scatter", "all_gather"}
    assert_losses_match(out)


def test_tensor_parallel_bytes_losses_and_the_loss_collectives(runs):
    out = runs(tp=2, global_batch=2)
    assert_bytes_match(out)
    assert out["unmodelled_calls"] == []
    # Megatron's vocab-parallel cross-entropy: 3 all-reduces of b*s fp32 per micro-batch, in the model's loss
    micro_batches, b, s, t = 2, 1, 16, 2
    assert out["measured_bytes_per_device"]["op_comm"] > micro_batches * 3 * b * s * 4 * 2 * (t - 1) / t
    assert_losses_match(out)


def test_sequence_parallel_bytes_and_losses(runs):
    out = runs(tp=2, sequence_parallel=True, global_batch=2)
    assert_bytes_match(out)
    # Korthikanti et al. 2022: all-gather + reduce-scatter carry what the all-reduces carried, plus the
    # backward re-gather of the QKV and FC1 inputs for their weight gradients (Megatron-LM, fidelity E5):
    # 2 all-gathers of b s h fp32 per layer per micro-batch
    micro_batches, layers, b, s, h, t = 2, 2, 1, 16, 32, 2
    regather = micro_batches * layers * 2 * (t - 1) / t * b * s * h * 4
    assert out["model_bytes_per_device"]["op_comm"] == \
        runs(tp=2, global_batch=2)["model_bytes_per_device"]["op_comm"] + regather
    kinds = {e["kind"] for e in out["events"] if e["category"] == "op_comm"}
    assert {"all_gather", "reduce_scatter"} <= kinds
    # the norms' gradients summed over the group once per iteration (4h per layer + 2h; the model's GS_r,
    # category dp_comm): all in the model now, nothing unmodelled
    assert out["unmodelled_calls"] == []
    assert out["model_bytes_per_device"]["dp_comm"] == (4 * 32 * 2 + 2 * 32) * 4 * 2 * (2 - 1) / 2
    assert_losses_match(out)


def test_per_layer_mixed_tensor_parallel_degrees(runs):
    from explorer.strategy.strategy import LayerSplit
    out = runs(tp=2, global_batch=2, layer_splits=(LayerSplit(2), LayerSplit(1, "replicated")))
    assert_bytes_match(out)
    uniform = runs(tp=2, global_batch=2)
    # the replicated layer drops its 4 all-reduces of b*s*h fp32 per micro-batch (2 micro-batches)
    assert uniform["measured_bytes_per_device"]["op_comm"] - out["measured_bytes_per_device"]["op_comm"] == \
        2 * 4 * 16 * 32 * 4
    assert_losses_match(out)


@pytest.mark.parametrize("schedule", ["1f1b", "gpipe"])
def test_pipeline_bytes_and_losses(runs, schedule):
    out = runs(pp=2, global_batch=4, schedule=schedule)
    assert_bytes_match(out)
    assert out["measured_bytes_per_device"]["pp_comm"] == out["model_bytes_per_device"]["pp_comm"] == 4 * 16 * 32 * 4
    # the tied table's gradient between the first and the last stage (Megatron's embedding group): in the
    # model since fidelity E3, V h fp32 bytes on the synchronising stage (d = 1: nothing else to sync)
    assert out["unmodelled_bytes_per_device"]["dp_comm"] == 0
    assert out["measured_bytes_per_device"]["dp_comm"] == out["model_bytes_per_device"]["dp_comm"] == 64 * 32 * 4
    assert_losses_match(out)


def test_data_and_tensor_parallel_together(runs):
    out = runs(dp=2, tp=2, global_batch=4)
    assert_bytes_match(out)
    assert out["model_bytes_per_device"]["dp_comm"] > 0 and out["model_bytes_per_device"]["op_comm"] > 0
    assert out["unmodelled_bytes_per_device"]["dp_comm"] == 0
    assert_losses_match(out)
    ranks = {r["rank"]: r for r in out["bytes_by_rank"]}
    assert ranks[0]["dp_comm"] == ranks[3]["dp_comm"]          # every device sends the same
    kinds = {e["kind"] for e in out["events"]}
    assert {"forward", "backward", "optimizer", "all_reduce"} <= kinds
    assert all(e["end_s"] >= e["start_s"] >= 0 for e in out["events"])


def test_bf16_halves_what_the_activations_carry_and_keeps_the_loss_in_fp32(runs):
    """bf16 parameters, activations and sends (issue 29 h): every collective of the layers carries half the
    fp32 run's bytes; the vocab-parallel cross-entropy's three all-reduces stay fp32 (Megatron-LM casts the
    logits to fp32: cross_entropy.py calculate_logits_max), as the model prices them."""
    out, fp32 = runs(tp=2, global_batch=2, dtype="bf16"), runs(tp=2, global_batch=2)
    assert out["strategy"]["dtype"] == "bf16"
    assert_bytes_match(out)
    assert out["unmodelled_calls"] == []
    loss = 2 * 3 * 1 * 16 * 4 * (2 * (2 - 1) / 2)         # micro-batches x 3 all-reduces x b s fp32, all-reduce over 2
    layers = fp32["measured_bytes_per_device"]["op_comm"] - loss
    assert out["measured_bytes_per_device"]["op_comm"] == layers / 2 + loss
    assert_losses_match(out, BF16_LOSS_RTOL)
    assert out["loss_parallel"] != fp32["loss_parallel"]               # it did train in bf16


def test_bf16_with_fp32_gradients_reduces_in_fp32_and_gathers_bf16_parameters(runs):
    """ZeRO-1 of a bf16 model reducing in fp32 (Megatron's main_grad): the reduce-scatter carries fp32
    gradients, the all-gather bf16 parameters, 3/4 of the fp32 run's bytes, equal to the model's."""
    out, fp32 = runs(dp=2, zero=1, global_batch=2, dtype="bf16", grad_dtype="fp32"), runs(dp=2, zero=1, global_batch=2)
    assert out["measured_bytes_per_device"] == out["model_bytes_per_device"]
    assert out["measured_bytes_per_device"]["dp_comm"] == 0.75 * fp32["measured_bytes_per_device"]["dp_comm"]
    sizes = {e["kind"]: e["bytes"] for e in out["events"] if e["category"] == "dp_comm" and e["rank"] == 0}
    assert sizes["reduce_scatter"] == 2 * sizes["all_gather"]
    assert_losses_match(out, BF16_LOSS_RTOL)


def test_interleaved_schedule_sends_every_chunk_boundary(runs):
    """Interleaved 1F1B, v = 2 chunks per stage in the schedule object's own order (explorer/schedules/
    interleaved.py): the last stage's chunk 0 feeds the first stage's chunk 1, so each micro-batch crosses
    p v - 1 = 3 boundaries forward and 3 backward; the critical stage sends 3 of the 6 per micro-batch."""
    out = runs(pp=2, global_batch=8, schedule="interleaved", chunks=2)
    assert_bytes_match(out)
    assert out["unmodelled_calls"] == []
    b, s, h, m = 1, 16, 32, 8
    assert out["measured_bytes_per_device"]["pp_comm"] == 3 * m * b * s * h * 4
    assert_losses_match(out)


def test_full_recomputation_runs_each_layers_forward_again_with_its_collectives(runs):
    """Full recomputation (Megatron-LM's CheckpointFunction per layer) re-runs each layer's forward in the
    backward: its two g all-reduces of b s h again, per layer and micro-batch; selective recomputation (the
    attention core) adds none, sequence parallel or not."""
    full, plain = runs(tp=2, global_batch=2, recompute="full"), runs(tp=2, global_batch=2)
    assert_bytes_match(full)
    micro_batches, layers, b, s, h = 2, 2, 1, 16, 32
    assert full["measured_bytes_per_device"]["op_comm"] - plain["measured_bytes_per_device"]["op_comm"] == \
        micro_batches * layers * 2 * b * s * h * 4
    assert_losses_match(full)
    selective = runs(tp=2, sequence_parallel=True, global_batch=2, recompute="selective")
    assert_bytes_match(selective)
    assert selective["measured_bytes_per_device"] == \
        runs(tp=2, sequence_parallel=True, global_batch=2)["measured_bytes_per_device"]
    assert_losses_match(selective)


def test_unsupported_strategies_are_refused_in_one_line(model_file, tmp_path, capsys):
    pytest.importorskip("torch")
    mixed_sp = tmp_path / "mixed.json"
    mixed_sp.write_text(json.dumps({"version": 1, "tp": 2, "sequence_parallel": True, "layer_splits": [
        {"degree": 2, "preset": "megatron"}, {"degree": 1, "preset": "replicated"}]}))
    cases = [["--tp", "2", "--procs", "3"], ["--dp", "2", "--schedule", "gpipe", "--global-batch", "3"],
             ["--tp", "2", "--strategy", str(mixed_sp)]]
    for extra in cases:
        assert main(["run", "--model", model_file, "--json", "--cluster", "classroom"] + extra) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: ") and err.count("\n") == 1
    assert main(["run", "--model", "gpt3-175b", "--dp", "2", "--cluster", "classroom"]) == 2
    assert "parameters" in capsys.readouterr().err


def test_a_strategy_file_with_zero_is_refused(model_file, tmp_path, capsys):
    pytest.importorskip("torch")
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"version": 1, "dp": 2, "global_batch": 2, "zero": 2}))
    assert main(["run", "--model", model_file, "--strategy", str(path), "--cluster", "classroom"]) == 2
    assert "ZeRO stage 2" in capsys.readouterr().err


def test_calibrate_writes_a_cluster_file_the_loader_reads(tmp_path):
    pytest.importorskip("torch")
    out = tmp_path / "here.json"
    assert main(["calibrate", "--out", str(out), "--procs", "2"]) == 0
    cluster = load_cluster(str(out))
    assert cluster.name == "this-machine" and cluster.device.name == "cpu thread, 2 ranks at once"
    assert cluster.device.peak_flops["fp32"] > 1e8                  # any CPU thread does 0.1 GFLOP/s
    assert cluster.levels[0].bandwidth_bytes_per_s > 0 and cluster.levels[0].latency_s > 0


def test_a_rank_that_fails_stops_the_run_with_its_last_line():
    pytest.importorskip("torch")
    from explorer.errors import ExplorerError
    from explorer.runtime.config import Config
    from explorer.runtime.launch import run_ranks
    cfg = Config(hidden=32, heads=3, ffn_hidden=128, seq_len=16, vocab=64, layers=2, dp=2, tp=1, pp=1,
                 micro_batch=1, global_batch=2, schedule="1f1b", scatter_gather=True, sequence_parallel=False,
                 zero=0, stage_blocks=(("embedding", "layer0", "layer1", "head"),), iterations=1, seed=1)
    with pytest.raises(ExplorerError, match="a rank of the run failed: .*RuntimeError"):
        run_ranks(cfg, 2)        # 32 is not divisible by 3 heads: every rank's reshape fails


def test_the_run_flags_name_the_schedule_chunks_recomputation_and_dtype():
    import argparse
    from explorer.cli.run_cmd import strategy_of
    flags = dict(strategy=None, dp=None, tp=None, pp=2, micro_batch=None, global_batch=8, schedule="interleaved",
                 zero=None, sequence_parallel=None, chunks=None, recompute="full", dtype="bf16")
    s = strategy_of(argparse.Namespace(**flags))
    assert (s.schedule, s.chunks, s.recompute, s.dtype) == ("interleaved", 2, "full", "bf16")
    assert strategy_of(argparse.Namespace(**{**flags, "chunks": 4})).chunks == 4
    assert strategy_of(argparse.Namespace(**{**flags, "schedule": None, "recompute": None, "dtype": None})) \
        .dtype == "fp32"
