"""Calculon (Isaev et al., SC'23; github.com/calculon-ai/calculon) as a paired peer for the benchmarks.

Calculon is not on PyPI: clone its repository outside this one and install it into its own environment,
    git clone https://github.com/calculon-ai/calculon /tmp/calculon
    python -m venv /tmp/calc-venv && /tmp/calc-venv/bin/pip install -e /tmp/calculon numpy psutil pandas
then point the benchmarks at it with CALCULON=/tmp/calc-venv/bin/calculon (or put `calculon` on PATH);
CALCULON_REPO names its checkout (models/, systems/), else it is found from the installed package.
Nothing here imports Calculon: it runs as a separate process, as a person would run it.

The execution-file fields and their meanings are Calculon's (calculon/llm/llm.py, Llm.Execution:
activation_recompute in full | attn_only | none; tensor_par_comm_type rs_ag = Megatron sequence
parallelism, ar = plain all-reduce; optimizer_sharding = ZeRO-1 / distributed optimizer;
pipeline_interleaving = model chunks per stage; tensor_par_net / pipeline_par_net / data_par_net index
the system file's networks, 0 = NVLink inside an 8-GPU node in systems/a100_80g.json).
"""
from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

RECOMPUTE_TO_CALCULON = {"none": "none", "selective": "attn_only", "full": "full"}
RECOMPUTE_FROM_CALCULON = {v: k for k, v in RECOMPUTE_TO_CALCULON.items()}
NODE_GPUS = 8  # systems/a100_80g.json: network 0 ("size": 8) is the NVLink domain of one DGX A100


@dataclass(frozen=True)
class Peer:
    command: str          # the `calculon` executable
    repo_dir: Path        # its checkout: models/, systems/

    def model_file(self, name: str) -> Path:
        return self.repo_dir / "models" / f"{name}.json"

    def system_file(self, name: str = "a100_80g") -> Path:
        return self.repo_dir / "systems" / f"{name}.json"

    def commit(self) -> str:
        out = subprocess.run(["git", "-C", str(self.repo_dir), "rev-parse", "HEAD"], capture_output=True, text=True)
        return out.stdout.strip() or "unknown"


def find(environ=os.environ) -> Peer | None:
    """Calculon from $CALCULON or PATH, its checkout from $CALCULON_REPO or its installed package; else None."""
    command = environ.get("CALCULON") or shutil.which("calculon")
    if not command or not Path(command).exists():
        return None
    repo = environ.get("CALCULON_REPO")
    if not repo:
        python = _shebang_python(Path(command))
        if python is None:
            return None
        out = subprocess.run([python, "-c", "import calculon, os; print(os.path.dirname(os.path.dirname("
                              "os.path.abspath(calculon.__file__))))"], capture_output=True, text=True)
        repo = out.stdout.strip()
    repo_dir = Path(repo)
    if not (repo_dir / "models").is_dir() or not (repo_dir / "systems").is_dir():
        return None
    return Peer(command=str(command), repo_dir=repo_dir)


def _shebang_python(command: Path) -> str | None:
    try:
        first = command.read_text(errors="replace").splitlines()[0]
    except (OSError, IndexError):
        return None
    return first[2:].strip().split()[0] if first.startswith("#!") else None


def execution(*, gpus: int, tp: int, pp: int, micro_batch: int, global_batch: int, recompute: str = "none",
              sequence_parallel: bool = False, zero: int = 0, chunks: int = 1, overlap_tp: bool = False,
              overlap_dp: bool = False, datatype: str = "float16") -> dict:
    """Calculon's execution file for the explorer's strategy fields (the same names as `explorer evaluate`)."""
    if gpus % (tp * pp):
        raise ValueError(f"tp*pp = {tp * pp} does not divide {gpus} GPUs")
    if zero > 1:
        raise ValueError("Calculon shards only the optimizer states (ZeRO-1)")
    return {
        "num_procs": gpus, "tensor_par": tp, "pipeline_par": pp, "data_par": gpus // (tp * pp),
        "tensor_par_net": 0 if tp <= NODE_GPUS else 1, "pipeline_par_net": 1, "data_par_net": 1,
        "batch_size": global_batch, "microbatch_size": micro_batch, "datatype": datatype,
        "fused_activation": True, "attention_type": "multihead",
        "activation_recompute": RECOMPUTE_TO_CALCULON[recompute], "pipeline_interleaving": chunks,
        "optimizer_sharding": zero == 1, "tensor_par_comm_type": "rs_ag" if sequence_parallel else "ar",
        "tensor_par_overlap": "ring" if overlap_tp else "none", "seq_par_ag_redo": False,
        "data_par_overlap": overlap_dp, "weight_offload": False, "activations_offload": False,
        "optimizer_offload": False, "training": True,
    }


def explorer_flags(exe: dict) -> tuple[list[str], list[str]]:
    """`explorer evaluate` flags for one of Calculon's executions, and what of it the explorer cannot express."""
    flags = ["--gpus", str(exe["num_procs"]), "--tp", str(exe["tensor_par"]), "--pp", str(exe["pipeline_par"]),
             "--micro-batch", str(exe["microbatch_size"]), "--global-batch", str(exe["batch_size"]),
             "--recompute", RECOMPUTE_FROM_CALCULON[exe["activation_recompute"]]]
    chunks = int(exe.get("pipeline_interleaving", 1))
    flags += ["--schedule", "interleaved", "--chunks", str(chunks)] if chunks > 1 else ["--schedule", "1f1b"]
    sp = exe["tensor_par_comm_type"] in ("rs_ag", "p2p_rs_ag") and exe["tensor_par"] > 1
    if sp:
        flags.append("--sequence-parallel")
    if exe.get("optimizer_sharding"):
        flags += ["--zero", "1"]
    if exe.get("data_par_overlap"):
        flags.append("--overlap-dp")
    if sp and exe.get("tensor_par_overlap", "none") != "none":
        flags.append("--overlap-tp")
    lost = []
    if exe["tensor_par_comm_type"] == "p2p_rs_ag":
        lost.append("p2p_rs_ag (point-to-point RS/AG) read as sequence parallelism")
    if exe.get("seq_par_ag_redo"):
        lost.append("seq_par_ag_redo (all-gather redone in the backward)")
    if not sp and exe.get("tensor_par_overlap", "none") != "none":
        lost.append(f"tensor_par_overlap={exe['tensor_par_overlap']} without sequence parallelism")
    for key in ("weight_offload", "activations_offload", "optimizer_offload"):
        if exe.get(key):
            lost.append(key)
    return flags, lost
