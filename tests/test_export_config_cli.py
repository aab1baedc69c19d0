"""python -m explorer export-config: the exporters from the command line (subprocesses, as a user runs it)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from explorer.codegen import parse_megatron_args
from explorer.io.strategies import save_strategy
from explorer.strategy.strategy import LayerSplit, Strategy
from framework_matrix import run_by

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "tests" / "golden" / "codegen"
GPT3 = Strategy(dp=8, tp=8, pp=16, micro_batch=1, global_batch=1536, schedule="interleaved", chunks=2, zero=1,
                recompute="selective", sequence_parallel=True, overlap_dp=True, dtype="bf16")   # = the golden's


def cli(*args):
    return subprocess.run([sys.executable, "-m", "explorer", "export-config", *map(str, args)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("export")
    save_strategy(GPT3, tmp / "gpt3.json")
    save_strategy(Strategy(dp=2, tp=2, pp=1, micro_batch=1, global_batch=4,
                           layer_splits=(LayerSplit(2, "megatron"), LayerSplit(1, "replicated")) * 2),
                  tmp / "mixed.json")
    (tmp / "bad.json").write_text('{"version": 1, "tp": "eight"}')
    return tmp


def test_megatron_to_stdout_matches_the_golden_and_round_trips(files):
    run = cli("--model", "gpt3-175b", "--strategy", files / "gpt3.json", "--framework", "megatron")
    assert run.returncode == 0, run.stderr
    assert run.stdout == (GOLDEN / "gpt3-175b_interleaved_sp.megatron.sh").read_text()
    assert parse_megatron_args(run.stdout)[1] == run_by(GPT3, "megatron-lm")


def test_out_file_and_cluster_flag(files):
    out = files / "ms.py"
    run = cli("--model", "gpt3-175b", "--strategy", files / "gpt3.json", "--framework", "mindspore",
              "--cluster", "dgx-h100", "--out", out)
    assert run.returncode == 0 and run.stdout == "", run.stderr
    assert out.read_text() == (GOLDEN / "gpt3-175b_interleaved_sp.mindspore.py").read_text()


def test_deepspeed_refuses_tensor_parallelism(files):
    run = cli("--model", "tiny-gpt", "--strategy", files / "mixed.json", "--framework", "deepspeed")
    assert run.returncode == 2 and run.stdout == ""
    assert run.stderr.count("\n") == 1 and "tensor parallelism t=2" in run.stderr


@pytest.mark.parametrize("args,words", [
    (("--model", "tiny-gpt", "--strategy", "{mixed}", "--framework", "megatron"), "layer 1 is split replicated"),
    (("--model", "tiny-gpt", "--strategy", "{bad}", "--framework", "megatron"), "tp"),
    (("--model", "tiny-gpt", "--strategy", "{gpt3}", "--framework", "torchtitan"),
     "does not divide the 4 attention heads"),
    (("--model", "tiny-gpt", "--strategy", "{mixed}", "--framework", "caffe"), "caffe"),
    (("--model", "no-such-model", "--strategy", "{mixed}", "--framework", "megatron"), "no-such-model"),
    (("--model", "tiny-gpt", "--strategy", "{missing}", "--framework", "megatron"), "missing.json"),
])
def test_bad_input_and_refusals_are_one_line_exit_2(files, args, words):
    names = {"mixed": files / "mixed.json", "bad": files / "bad.json", "gpt3": files / "gpt3.json",
             "missing": files / "missing.json"}
    run = cli(*[a.format(**names) if a.startswith("{") else a for a in args])
    assert run.returncode == 2 and run.stdout == ""
    assert run.stderr.startswith("error: ") and run.stderr.count("\n") == 1 and words in run.stderr


def test_torchtitan_golden_from_the_command_line(files):
    strategy = Strategy(dp=8, tp=2, micro_batch=1, global_batch=64, zero=3, recompute="full",
                        sequence_parallel=True, dtype="bf16", grad_dtype="fp32", overlap_dp=True)   # = the golden's
    save_strategy(strategy, files / "llama.json")
    run = cli("--model", "llama2-7b", "--strategy", files / "llama.json", "--framework", "torchtitan")
    assert run.returncode == 0, run.stderr
    assert run.stdout == (GOLDEN / "llama2-7b_fsdp_tp_sp.torchtitan.toml").read_text()
