"""Calibrate "this machine": CPU GEMM FLOP/s, memory bandwidth and gloo alpha/beta, as a cluster file.

Short benchmarks, one thread per process (as the reference run's ranks):

* GEMM: the median time of square-ish fp32 matmuls of several sizes, fitted by
  least squares to time = FLOPs / F + c (the model's (x + phi)/(F eta) + tau with
  eta = 1, explorer/cost/block.py compute_time): peak F = 1/slope; tau (the
  per-kernel overhead) = the median time of a one-element add; phi = (c - tau) F.
* Memory bandwidth: copying a 64 MiB tensor reads and writes it (2 x 64 MiB).
* gloo alpha/beta: two processes all-reduce 4 B and 4 MiB; with the model's ring
  cost for n = 2 (explorer/cost/collectives.py: bytes S, 2(n-1) = 2 latency
  steps), L = t(4 B)/2 and g = (t(4 MiB) - 2L)/S.

With procs > 1 the GEMM and memory benchmarks run in `procs` processes at once
(the median of their results): what each of a run's ranks gets when they all
compute together on the cores there are (and under whatever else runs then).

The result is a dict in the cluster file schema (explorer/io/clusters.py), one
level ("machine") for the processes of this computer.
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from explorer.errors import ExplorerError

GEMM_SIZES = ((64, 64, 64), (128, 256, 256), (128, 768, 256), (256, 1024, 256), (512, 512, 512))
COPY_BYTES = 64 * 2 ** 20
SMALL_BYTES, LARGE_BYTES = 4, 4 * 2 ** 20
MACHINE_FANOUT = 64        # processes one machine holds in the cluster file (loopback TCP between them)
REPEATS = 7
CPU_DEVICE = "cpu thread"   # the device name of a calibrated cluster: one CPU thread per process
MAX_BENCH_PROCS = 64


def _median_time(fn, repeats: int = REPEATS) -> float:
    fn()                                  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def gemm_fit(repeats: int = REPEATS) -> dict:
    """{'flops_per_s', 'intercept_s', 'launch_s', 'samples'} of one thread's fp32 matmuls."""
    import torch
    points = []
    for m, n, k in GEMM_SIZES:
        a, b = torch.randn(m, k), torch.randn(k, n)
        points.append((2.0 * m * n * k, _median_time(lambda: a @ b, repeats)))
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    slope = sum((x - mx) * (y - my) for x, y in points) / sum((x - mx) ** 2 for x in xs)
    if slope <= 0:
        raise ExplorerError("the GEMM benchmark gave no usable FLOP/s (timings too noisy); run it again")
    one = torch.ones(1)
    launch = _median_time(lambda: one + one, repeats * 5)
    return {"flops_per_s": 1.0 / slope, "intercept_s": max(0.0, my - mx * slope), "launch_s": launch,
            "samples": [{"flops": x, "seconds": y} for x, y in points]}


def memory_bandwidth(repeats: int = REPEATS) -> float:
    """Bytes per second of a large copy (read + write)."""
    import torch
    src = torch.empty(COPY_BYTES // 4)
    dst = torch.empty_like(src)
    return 2 * COPY_BYTES / _median_time(lambda: dst.copy_(src), repeats)


def _gloo_rank(rank: int, port: str, out: str) -> None:
    import torch
    import torch.distributed as dist
    torch.set_num_threads(1)
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", port
    dist.init_process_group("gloo", rank=rank, world_size=2)
    result = {}
    for size in (SMALL_BYTES, LARGE_BYTES):
        x = torch.ones(size // 4)
        dist.barrier()
        result[str(size)] = _median_time(lambda: dist.all_reduce(x), REPEATS * (3 if size == SMALL_BYTES else 1))
    if rank == 0:
        Path(out).write_text(json.dumps(result))
    dist.destroy_process_group()


def gloo_alpha_beta(timeout_s: float = 120) -> dict:
    """{'latency_s', 'bytes_per_s'} of a two-process gloo all-reduce on this machine."""
    from explorer.runtime.launch import free_port
    with tempfile.TemporaryDirectory(prefix="explorer-calibrate-") as tmp:
        out, port = str(Path(tmp, "gloo.json")), str(free_port())
        _spawn([["gloo", str(r), port, out] for r in range(2)], timeout_s, "gloo")
        times = json.loads(Path(out).read_text())
    latency = times[str(SMALL_BYTES)] / 2
    per_byte = (times[str(LARGE_BYTES)] - 2 * latency) / LARGE_BYTES
    if per_byte <= 0:
        raise ExplorerError("the gloo benchmark gave no usable bandwidth (timings too noisy); run it again")
    return {"latency_s": latency, "bytes_per_s": 1.0 / per_byte}


def _bench_rank(out: str) -> None:
    """One process of a concurrent compute benchmark: its GEMM fit and memory bandwidth to `out`."""
    import torch
    torch.set_num_threads(1)
    fit = gemm_fit()
    Path(out).write_text(json.dumps({"flops_per_s": fit["flops_per_s"], "intercept_s": fit["intercept_s"],
                                     "launch_s": fit["launch_s"], "bytes_per_s": memory_bandwidth()}))


def _spawn(args_per_child: list, timeout_s: float, what: str) -> None:
    """Run `python -m explorer.runtime.calibrate ARGS...` children at once; ExplorerError if one fails."""
    root = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([root] + [p for p in [os.environ.get("PYTHONPATH")] if p]))
    children = [subprocess.Popen([sys.executable, "-m", "explorer.runtime.calibrate", *args], env=env,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                for args in args_per_child]
    try:
        errors = [err for child in children for _, err in [child.communicate(timeout=timeout_s)] if child.returncode]
    except subprocess.TimeoutExpired:
        errors = [f"took more than {timeout_s:.0f} s"]
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
                child.wait()
    if errors:
        raise ExplorerError(f"the {what} benchmark failed: {(errors[0].strip().splitlines() or ['?'])[-1]}")


def compute_benchmark(procs: int, timeout_s: float = 300) -> dict:
    """Median GEMM fit and memory bandwidth of `procs` processes benchmarking at once."""
    if procs == 1:
        import torch
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            fit = gemm_fit()
            return {**fit, "bytes_per_s": memory_bandwidth()}
        finally:
            torch.set_num_threads(threads)
    with tempfile.TemporaryDirectory(prefix="explorer-calibrate-") as tmp:
        outs = [str(Path(tmp, f"bench{i}.json")) for i in range(procs)]
        _spawn([["bench", out] for out in outs], timeout_s, "compute")
        results = [json.loads(Path(out).read_text()) for out in outs]
    return {key: statistics.median(r[key] for r in results)
            for key in ("flops_per_s", "intercept_s", "launch_s", "bytes_per_s")}


def _memory_gib() -> float:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2 ** 30
    except (ValueError, OSError, AttributeError):
        return 1.0


def device_name(procs: int) -> str:
    return CPU_DEVICE if procs == 1 else f"{CPU_DEVICE}, {procs} ranks at once"


def calibrate(name: str = "this-machine", procs: int = 1) -> dict:
    """Benchmark this machine (compute with `procs` processes at once); a cluster file dict."""
    import torch
    if not 1 <= procs <= MAX_BENCH_PROCS:
        raise ExplorerError(f"--procs must be between 1 and {MAX_BENCH_PROCS}, got {procs}")
    gemm = compute_benchmark(procs)
    bandwidth = gemm["bytes_per_s"]
    net = gloo_alpha_beta()
    peak = gemm["flops_per_s"] / 1e12
    phi = max(0.0, (gemm["intercept_s"] - gemm["launch_s"]) * gemm["flops_per_s"])
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    return {
        "name": name,
        "source": f"measured by python -m explorer calibrate on {when}: one CPU thread per process, "
                  f"{procs} computing at once, torch {torch.__version__}, {os.cpu_count()} cores",
        "device": {"name": device_name(procs), "peak_tflops": {"fp32": peak, "bf16": peak, "fp16": peak},
                   "memory_gib": round(_memory_gib(), 3), "hbm_bandwidth_gbps": bandwidth / 1e9,
                   "source": "fp32 GEMM fit over sizes " + ", ".join("x".join(map(str, s)) for s in GEMM_SIZES)
                             + "; memory: 64 MiB copy; bf16/fp16 set to the fp32 value (the run is fp32)"},
        "levels": [{"name": "machine", "fanout": MACHINE_FANOUT, "bandwidth_gbps": net["bytes_per_s"] / 1e9,
                    "latency_us": net["latency_s"] * 1e6, "bandwidth_efficiency": 1.0,
                    "source": "gloo all-reduce of 4 B and 4 MiB between two processes (loopback TCP)"}],
        "efficiency": {"gemm_max": 1.0, "gemm_half_flops": phi, "hbm": 1.0, "kernel_launch_s": gemm["launch_s"],
                       "source": "GEMM intercept and a one-element add's time (per-operator overhead)"},
    }


if __name__ == "__main__":   # python -m explorer.runtime.calibrate gloo RANK PORT OUT | bench OUT
    if sys.argv[1] == "gloo":
        _gloo_rank(int(sys.argv[2]), sys.argv[3], sys.argv[4])
    else:
        _bench_rank(sys.argv[2])
