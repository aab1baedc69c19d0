"""benchmarks/calculon_peer.py: Calculon's execution files from the explorer's strategy fields and back,
and finding Calculon (without Calculon installed: a fake checkout and command)."""
from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("calculon_peer", ROOT / "benchmarks" / "calculon_peer.py")
peer_mod = importlib.util.module_from_spec(_spec)
sys.modules.setdefault("calculon_peer", peer_mod)   # dataclasses look their module up there
_spec.loader.exec_module(peer_mod)

# Calculon's own example (examples/3072_t4_p64_d12_mbs4_full.json in github.com/calculon-ai/calculon)
CALCULON_EXAMPLE = {
    "num_procs": 3072, "tensor_par": 4, "pipeline_par": 64, "data_par": 12, "tensor_par_net": 0,
    "pipeline_par_net": 1, "data_par_net": 1, "batch_size": 3072, "microbatch_size": 4, "datatype": "float16",
    "fused_activation": True, "attention_type": "multihead", "activation_recompute": "full",
    "pipeline_interleaving": 1, "optimizer_sharding": True, "tensor_par_comm_type": "rs_ag",
    "tensor_par_overlap": "none", "seq_par_ag_redo": False, "data_par_overlap": False, "weight_offload": False,
    "activations_offload": False, "optimizer_offload": False, "training": True}


def test_execution_matches_calculons_example_file():
    exe = peer_mod.execution(gpus=3072, tp=4, pp=64, micro_batch=4, global_batch=3072, recompute="full",
                             sequence_parallel=True, zero=1)
    assert exe == CALCULON_EXAMPLE


def test_bench_cold_configuration():
    exe = peer_mod.execution(gpus=1024, tp=8, pp=8, micro_batch=1, global_batch=1536, recompute="selective",
                             sequence_parallel=True)
    assert (exe["data_par"], exe["activation_recompute"], exe["tensor_par_comm_type"]) == (16, "attn_only", "rs_ag")
    assert exe["optimizer_sharding"] is False and exe["pipeline_interleaving"] == 1
    with pytest.raises(ValueError):
        peer_mod.execution(gpus=1000, tp=8, pp=8, micro_batch=1, global_batch=1536)
    with pytest.raises(ValueError):
        peer_mod.execution(gpus=64, tp=8, pp=8, micro_batch=1, global_batch=64, zero=2)


def test_explorer_flags_round_trip_and_what_is_lost():
    flags, lost = peer_mod.explorer_flags(CALCULON_EXAMPLE)
    assert flags == ["--gpus", "3072", "--tp", "4", "--pp", "64", "--micro-batch", "4", "--global-batch", "3072",
                     "--recompute", "full", "--schedule", "1f1b", "--sequence-parallel", "--zero", "1"]
    assert lost == []
    exe = dict(CALCULON_EXAMPLE, pipeline_interleaving=2, tensor_par_overlap="pipe", data_par_overlap=True,
               seq_par_ag_redo=True, weight_offload=True, tensor_par_comm_type="p2p_rs_ag",
               activation_recompute="attn_only")
    flags, lost = peer_mod.explorer_flags(exe)
    assert flags[flags.index("--schedule"):flags.index("--schedule") + 4] == ["--schedule", "interleaved",
                                                                               "--chunks", "2"]
    assert "--overlap-tp" in flags and "--overlap-dp" in flags and "selective" in flags
    assert len(lost) == 3 and any("weight_offload" in x for x in lost)


def test_explorer_accepts_the_flags(tmp_path):
    """The flags are ones `python -m explorer evaluate` parses (a small model, so it is quick)."""
    flags, _ = peer_mod.explorer_flags(dict(CALCULON_EXAMPLE, num_procs=8, tensor_par=2, pipeline_par=2,
                                            data_par=2, batch_size=16, microbatch_size=1))
    out = subprocess.run([sys.executable, "-m", "explorer", "evaluate", "--model", "tiny-gpt", "--cluster",
                          "dgx-a100-80gb", *flags, "--json"], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert '"iteration_time_s"' in out.stdout


def test_find(tmp_path):
    assert peer_mod.find({"PATH": str(tmp_path)}) is None                 # not installed
    repo = tmp_path / "calculon"
    (repo / "models").mkdir(parents=True)
    (repo / "systems").mkdir()
    command = tmp_path / "calculon-bin"
    command.write_text("#!/bin/sh\n")
    found = peer_mod.find({"CALCULON": str(command), "CALCULON_REPO": str(repo)})
    assert found is not None and found.model_file("megatron-22B") == repo / "models" / "megatron-22B.json"
    assert peer_mod.find({"CALCULON": str(command), "CALCULON_REPO": str(tmp_path)}) is None   # no models/
