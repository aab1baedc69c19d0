"""Start the ranks (one `python -m explorer.runtime.launch` process per rank) and collect their records.

Backend: nccl when CUDA is present (one GPU per rank), gloo otherwise. Each rank
uses one CPU thread, so N ranks on N cores do not fight over threads. The
single-process reference runs the same code in this process with every degree 1.
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, replace
from pathlib import Path

from explorer.errors import ExplorerError
from explorer.runtime.comm import Comm
from explorer.runtime.config import Config, coords, rank_of
from explorer.runtime.train import train
from explorer.runtime.record import Recorder

THREADS_PER_RANK = 1
POLL_S = 0.05          # how often the launcher looks at its children
RUN_TIMEOUT_S = 600     # a stuck run (a rank that died mid-collective) is stopped after this


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _config_from(data: dict) -> Config:
    data = dict(data)
    data["stage_blocks"] = tuple(tuple(blocks) for blocks in data["stage_blocks"])
    data["layer_degrees"] = tuple(data.get("layer_degrees", ()))
    data["chunk_blocks"] = tuple(tuple(tuple(c) for c in stage) for stage in data.get("chunk_blocks", ()))
    return Config(**data)


def worker(rank: int, world: int, port: int, outdir: str) -> None:
    """One rank: join the process group, build the groups, train, write rank<r>.json."""
    import torch
    import torch.distributed as dist
    torch.set_num_threads(THREADS_PER_RANK)
    cfg = _config_from(json.loads(Path(outdir, "config.json").read_text()))
    cuda = torch.cuda.is_available() and torch.cuda.device_count() >= world
    if cuda:
        torch.cuda.set_device(rank)
        torch.set_default_device(f"cuda:{rank}")
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    dist.init_process_group("nccl" if cuda else "gloo", rank=rank, world_size=world)
    tp_i, dp_i, pp_i = coords(cfg, rank)
    comm = Comm(Recorder(), rank=rank, tp_rank=tp_i, tp_size=cfg.tp, dp_size=cfg.dp)
    if cuda:                            # kernels are asynchronous: a span's end waits for them
        comm.rec.sync = torch.cuda.synchronize
    for pp in range(cfg.pp):            # every rank creates every group, in the same order
        for dp in range(cfg.dp):
            group = dist.new_group([rank_of(cfg, x, dp, pp) for x in range(cfg.tp)])
            if (dp, pp) == (dp_i, pp_i):
                comm.tp_group = group
        for tp in range(cfg.tp):
            group = dist.new_group([rank_of(cfg, tp, x, pp) for x in range(cfg.dp)])
            if (tp, pp) == (tp_i, pp_i):
                comm.dp_group = group
    if cfg.pp > 1:
        for dp in range(cfg.dp):
            for tp in range(cfg.tp):
                group = dist.new_group([rank_of(cfg, tp, dp, 0), rank_of(cfg, tp, dp, cfg.pp - 1)])
                if (tp, dp) == (tp_i, dp_i):
                    comm.emb_group = group
    losses = train(cfg, comm, pp_i, dp_i)
    dist.barrier()
    out = {"rank": rank, "tp": tp_i, "dp": dp_i, "pp": pp_i, "losses": losses,
           "backend": "nccl" if cuda else "gloo", **comm.rec.to_dict()}
    Path(outdir, f"rank{rank}.json").write_text(json.dumps(out))
    dist.destroy_process_group()


def run_ranks(cfg: Config, procs: int, timeout_s: float = RUN_TIMEOUT_S) -> list:
    """Run `procs` ranks as `python -m explorer.runtime.launch` processes; their records, by rank."""
    if procs != cfg.dp * cfg.tp * cfg.pp:
        raise ExplorerError(f"--procs {procs} must equal dp x tp x pp = {cfg.dp * cfg.tp * cfg.pp}")
    root = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([root] + [p for p in [os.environ.get("PYTHONPATH")] if p]))
    with tempfile.TemporaryDirectory(prefix="explorer-run-") as outdir:
        Path(outdir, "config.json").write_text(json.dumps(asdict(cfg)))
        port = str(free_port())
        logs = [open(Path(outdir, f"rank{r}.err"), "w") for r in range(procs)]
        children = [subprocess.Popen([sys.executable, "-m", "explorer.runtime.launch", str(r), str(procs), port,
                                      outdir], env=env, stdout=subprocess.DEVNULL, stderr=logs[r])
                    for r in range(procs)]
        error = _wait(children, timeout_s)
        for log in logs:
            log.close()
        if error is not None:
            rank, text = error
            if rank is not None:
                lines = [line for line in Path(outdir, f"rank{rank}.err").read_text(errors="replace").splitlines()
                         if line.strip()]
                text = lines[-1] if lines else f"exit code {children[rank].returncode}"
            raise ExplorerError(f"a rank of the run failed: {text}")
        return [json.loads(Path(outdir, f"rank{r}.json").read_text()) for r in range(procs)]


def _wait(children: list, timeout_s: float):
    """Wait for every child; on the first failure or the timeout, stop the others at once.
    Returns None, or (rank that failed | None, message)."""
    deadline = time.monotonic() + timeout_s
    try:
        while True:
            codes = [child.poll() for child in children]
            failed = [r for r, code in enumerate(codes) if code not in (None, 0)]
            if failed:
                return failed[0], ""
            if all(code == 0 for code in codes):
                return None
            if time.monotonic() > deadline:
                return None, f"the run took more than {timeout_s:.0f} s"
            time.sleep(POLL_S)
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
                child.wait()


def run_single(cfg: Config) -> list:
    """Loss per iteration of the same model, seed and batch in one process (every degree 1)."""
    import torch
    threads = torch.get_num_threads()
    torch.set_num_threads(THREADS_PER_RANK)
    try:
        blocks = tuple(b for c in range(cfg.chunks) for s in range(cfg.pp) for b in cfg.blocks_of(s, c))  # model order
        single = replace(cfg, dp=1, tp=1, pp=1, stage_blocks=(blocks,), layer_degrees=(), chunks=1, chunk_blocks=(),
                         schedule="1f1b")
        return train(single, Comm(Recorder()), 0, 0)
    finally:
        torch.set_num_threads(threads)


if __name__ == "__main__":          # one rank: python -m explorer.runtime.launch RANK WORLD PORT OUTDIR
    worker(int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
