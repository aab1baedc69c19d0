"""A Result as the CLI's JSON object and as a readable table."""
from __future__ import annotations

from explorer.cost.evaluate import Result
from explorer.cost.megatron_flops import CONVENTION as MEGATRON_CONVENTION
from explorer.cost.megatron_flops import EQ3_CONVENTION
from explorer.cost.numeric import CATEGORIES
from explorer.io.strategies import strategy_to_dict

MEMORY_KEYS = ("params", "grads", "optimizer", "activations", "total")
_HARDWARE = EQ3_CONVENTION + ", plus the recomputed FLOPs"
_MEGATRON = MEGATRON_CONVENTION + " (null for a model that is not a causal decoder)"
FLOPS_CONVENTIONS = {"model_flops_per_iteration": EQ3_CONVENTION, "tflops_per_gpu": EQ3_CONVENTION,
                     "mfu": EQ3_CONVENTION, "hardware_flops_per_iteration": _HARDWARE,
                     "hardware_tflops_per_gpu": _HARDWARE,
                     "megatron_model_flops_per_iteration": _MEGATRON, "megatron_tflops_per_gpu": _MEGATRON,
                     "megatron_mfu": _MEGATRON}
"""Which FLOPs count each throughput number of result_dict uses (issue 26, item 4)."""


def result_dict(result: Result, formula_latex: str = "", terms_latex: dict | None = None,
                definitions_latex: dict | None = None, strategy=None) -> dict:
    """The stable JSON contract of `python -m explorer evaluate --json`: with `strategy`, the full
    strategy evaluated (every field, the defaults it assumed included, as strategy files hold it)."""
    capacity = result.extra["device_memory_bytes"]
    return {
        **({"strategy": strategy_to_dict(strategy)} if strategy is not None else {}),
        "fits_memory": result.memory_bytes_per_device["total"] <= capacity,
        "memory_capacity_bytes": capacity,
        "iteration_time_s": result.iteration_time_s,
        "breakdown_s": {c: result.breakdown_s[c] for c in CATEGORIES},
        "hidden_s": result.hidden_s,
        "comm_bytes_per_device": result.comm_bytes_per_device,
        "comm_by_kind": result.comm_by_kind,
        "comm_time_by_level_s": result.comm_time_by_level_s,
        "memory_bytes_per_device": {k: result.memory_bytes_per_device[k] for k in MEMORY_KEYS},
        "memory_by_stage": result.memory_by_stage,
        "stage_times_s": result.stage_times_s,
        "critical_stage": result.critical_stage,
        "params": result.params,
        "model_flops_per_iteration": result.model_flops_per_iteration,
        "hardware_flops_per_iteration": result.hardware_flops_per_iteration,
        "tflops_per_gpu": result.tflops_per_gpu,
        "hardware_tflops_per_gpu": result.hardware_tflops_per_gpu,
        "mfu": result.mfu,
        "megatron_model_flops_per_iteration": result.megatron_model_flops_per_iteration,
        "megatron_tflops_per_gpu": result.megatron_tflops_per_gpu,
        "megatron_mfu": result.megatron_mfu,
        "flops_conventions": FLOPS_CONVENTIONS,
        "gpus": result.gpus,
        "micro_batches": result.micro_batches,
        "host_s": {"exposed": result.extra.get("host_exposed_s", 0.0), "issue": result.extra.get("host_issue_s", 0.0)},
        "formula_latex": formula_latex,
        "terms_latex": terms_latex or {},
        "definitions_latex": definitions_latex or {},
    }


def _gib(x: float) -> str:
    return f"{x / 2**30:9.2f} GiB"


def result_table(result: Result, title: str) -> str:
    total = result.iteration_time_s
    lines = [title, "", f"iteration time      {total:12.4f} s", "", "time by category (exposed)"]
    for c in CATEGORIES:
        secs = result.breakdown_s[c]
        lines.append(f"  {c:<16}{secs:12.4f} s  {100 * secs / total:5.1f} %")
        if c == "compute" and result.extra.get("host_exposed_s"):
            host = result.extra["host_exposed_s"]
            lines.append(f"    of which host  {host:10.4f} s  {100 * host / total:5.1f} %   (issue time over the GPU's, "
                         "and syncs)")
    lines += ["", "communication per device"]
    for c, nbytes in result.comm_bytes_per_device.items():
        lines.append(f"  {c:<16}{nbytes / 1e9:12.3f} GB")
    lines += ["", f"memory, most loaded device (stage {result.extra['peak_memory_stage']})"]
    for k in MEMORY_KEYS:
        lines.append(f"  {k:<16}{_gib(result.memory_bytes_per_device[k])}")
    cap = result.extra["device_memory_bytes"]
    if result.memory_bytes_per_device["total"] > cap:
        lines.append(f"  ! exceeds the device's {_gib(cap).strip()}")
    lines += ["", f"parameters          {result.params / 1e9:12.3f} B",
              f"model FLOPs/iter    {result.model_flops_per_iteration:12.4e}",
              f"hardware FLOPs/iter {result.hardware_flops_per_iteration:12.4e}",
              f"TFLOP/s per GPU     {result.tflops_per_gpu:12.1f}  (model FLOPs, Eq. 3: full attention)",
              f"MFU                 {100 * result.mfu:12.1f} %  (Eq. 3)"]
    if result.megatron_tflops_per_gpu is not None:
        lines += [f"TFLOP/s per GPU     {result.megatron_tflops_per_gpu:12.1f}  (Megatron-LM count: causal attention "
                  "at half)",
                  f"MFU                 {100 * result.megatron_mfu:12.1f} %  (Megatron-LM count)"]
    return "\n".join(lines)
