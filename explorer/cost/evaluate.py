"""Numbers from the cost tree: time by category, bytes, memory, FLOPs.

evaluate(model, strategy, cluster) is the one call the CLI and the pages use;
evaluate_batch() evaluates many strategies at once. Both read the one numeric
evaluation (explorer.cost.evaluation.Evaluation, axis -1 = candidates): the tree's
compiled block quantities, summed per stage (explorer.cost.numeric.stage_values),
then the super-step variant's compiled terms (explorer.cost.superstep), by name --
nothing here composes a cost of its own. The compiled functions come through
explorer.cost.cold (memory, then the disk cache, then built with sympy).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from explorer.cost.evaluation import Evaluation, build_evaluation
from explorer.cost.megatron_flops import megatron_model_flops
from explorer.cost.placement import ep_overlaps
from explorer.cost.rows import comm_rows, stage_rows
from explorer.cost.numeric import CATEGORIES, MEMORY_PARTS, expert_dp_route, stage_dp_routes, structure_key
from explorer.hardware.cluster import Cluster
from explorer.limits import check_work
from explorer.model.spec import ModelSpec
from explorer.strategy import rules
from explorer.strategy.mesh import top_level
from explorer.strategy.strategy import Strategy
from explorer.strategy.strategy import GRAD_BYTES, options_of  # noqa: F401


@dataclass(frozen=True)
class Result:
    """What the model answers for one strategy. Times in seconds, sizes in bytes."""

    iteration_time_s: float
    breakdown_s: dict               # category -> exposed seconds; sums to iteration_time_s
    hidden_s: dict                  # category -> seconds hidden under computation
    comm_bytes_per_device: dict     # category -> bytes sent per device per iteration
    comm_by_kind: list              # rows: category, kind, level, time_s, hidden_s, bytes
    comm_time_by_level_s: dict      # level name -> exposed communication seconds
    memory_bytes_per_device: dict   # params, grads, optimizer, activations, total (most loaded device)
    memory_by_stage: list           # one dict per stage
    stage_times_s: list             # per stage: one micro-batch's fwd/bwd seconds and their parts
    critical_stage: int
    params: float
    model_flops_per_iteration: float
    hardware_flops_per_iteration: float
    tflops_per_gpu: float
    hardware_tflops_per_gpu: float
    mfu: float
    gpus: int
    micro_batches: int
    extra: dict = field(default_factory=dict)
    # The same throughput in Megatron-LM's FLOPs count (explorer.cost.megatron_flops: causal attention core at
    # half, padded vocabulary), what Megatron-LM's and Megatron-Bridge's logs print; model_flops_per_iteration,
    # tflops_per_gpu and mfu above count Narayanan et al. 2021 Eq. 3 (full attention). None for non-causal models.
    megatron_model_flops_per_iteration: float | None = None
    megatron_tflops_per_gpu: float | None = None
    megatron_mfu: float | None = None


@dataclass(frozen=True)
class BatchResult:
    """Many strategies evaluated together (arrays, one entry per strategy)."""

    iteration_time_s: np.ndarray
    breakdown_s: dict               # category -> array
    peak_memory_bytes: np.ndarray   # most loaded device
    mfu: np.ndarray


def evaluate(model: ModelSpec, strategy: Strategy, cluster: Cluster, gpus: int | None = None) -> Result:
    """Cost of one training iteration of `model` under `strategy` on `cluster`."""
    check_work(model, strategy, cluster)     # sizes and magnitudes within explorer/limits.py
    rules.check(model, strategy, gpus, cluster)
    return result_of(build_evaluation(model, [strategy], cluster), model, strategy, cluster)


def result_of(ev: Evaluation, model: ModelSpec, strategy: Strategy, cluster: Cluster) -> Result:
    """The Result of a single strategy's Evaluation (explorer.cost.evaluation.evaluation: checked as evaluate()).
    The Evaluation stays beside the Result (evaluation_of), so the timeline reads it instead of rebuilding it."""
    result = _with_megatron_flops(_result(ev, strategy, cluster), model, strategy, cluster)
    object.__setattr__(result, _EVALUATION, ev)
    return result


_EVALUATION = "_evaluation"
"""The attribute that keeps a Result's Evaluation: not a dataclass field, so asdict() and fields() (the search
workers' JSON, explorer/runtime/jobs.py; the finiteness check, explorer/limits.py) see only the Result's data."""


def evaluation_of(result: Result) -> Evaluation | None:
    """The Evaluation `result` was read from (result_of), or None for a Result built otherwise (e.g. one that came
    back from a worker process as data)."""
    return getattr(result, _EVALUATION, None)


def _with_megatron_flops(result: Result, model: ModelSpec, strategy: Strategy, cluster: Cluster) -> Result:
    """The Result with its throughput also in Megatron-LM's FLOPs count (explorer.cost.megatron_flops)."""
    flops = megatron_model_flops(model, strategy.global_batch, strategy.tp)
    if flops is None:
        return result
    seconds = result.iteration_time_s * result.gpus
    return replace(result, megatron_model_flops_per_iteration=flops, megatron_tflops_per_gpu=flops / seconds / 1e12,
                   megatron_mfu=flops / (seconds * cluster.device.flops(strategy.dtype)))


def evaluate_batch(model: ModelSpec, strategies, cluster: Cluster, gpus: int | None = None) -> BatchResult:
    """Evaluate many strategies; those sharing a tree (same structure and machine levels) and a
    super-step variant (ZeRO stage, overlap) run as one numpy batch. Same numbers as evaluate()."""
    strategies = list(strategies)
    n = len(strategies)
    out = {"time": np.zeros(n), "mem": np.zeros(n), "mfu": np.zeros(n),
           "cat": {c: np.zeros(n) for c in CATEGORIES}}
    groups = {}
    for i, s in enumerate(strategies):
        rules.check(model, s, gpus, cluster)
        groups.setdefault((structure_key(model, s, cluster), s.zero, s.overlap_dp, s.grad_dtype,
                           tuple(sorted(options_of(s).items())), ep_overlaps(model, s)), []).append(i)
    for idx in groups.values():
        members = [strategies[i] for i in idx]
        ev = build_evaluation(model, members, cluster)
        devices = np.array([s.devices for s in members], dtype=float)
        iteration = ev.output("iteration")
        out["time"][idx] = iteration
        out["mem"][idx] = ev.memory_total[ev.peak_stage, np.arange(len(idx))]
        out["mfu"][idx] = ev.model_flops / (iteration * devices * ev.nums.hw["F"])
        for c in CATEGORIES:
            out["cat"][c][idx] = ev.output(c)
    return BatchResult(out["time"], out["cat"], out["mem"], out["mfu"])


NOISE = 1e-12
"""A category below this fraction of the iteration is float noise of the differences that compose it (a bubble of
5e-16 s with one stage: makespan - m T_* in floats) and is reported as 0."""


def _noise_free(seconds: float, total: float) -> float:
    return 0.0 if abs(seconds) <= NOISE * abs(total) else seconds


def _result(ev: Evaluation, strategy: Strategy, cluster: Cluster) -> Result:
    """The single-strategy Result: candidate 0 of the Evaluation's arrays."""
    one = lambda x: x[..., 0]
    out = lambda name: one(ev.output(name))
    M, N, hw = strategy.micro_batches, strategy.devices, ev.nums.hw
    k, j = int(out("critical_stage")), int(out("sync_stage"))     # (ints: numpy argmax)
    q = lambda name: one(ev.stage_q(name))                         # per stage, one micro-batch
    fwd_b, bwd_b = ({c: one(a) for c, a in part.items()} for part in (ev.boundary.fwd_s, ev.boundary.bwd_s))
    bytes_b = {c: one(a) for c, a in ev.boundary.bytes.items()}
    fwd_x, bwd_x = ({c: one(a) for c, a in part.items()} for part in ev.exposed_boundary())   # EP overlap's
    ep_all = fwd_b["ep_comm"][k] + bwd_b["ep_comm"][k]
    ep_exposed_share = (float(fwd_x["ep_comm"][k] + bwd_x["ep_comm"][k]) / ep_all
                        if ev.ep_overlap and ep_all > 0 else None)
    memory = [{name: float(ev.memory(name)[i, 0]) for name in MEMORY_PARTS} for i in range(strategy.pp)]
    for row in memory:
        row["total"] = sum(row.values())
    peak = int(ev.peak_stage[0])
    total = float(out("iteration"))
    dp_bytes, zero_bytes = float(out("dp_bytes")[j]), float(out("zero_bytes")[j])
    comm_bytes = {"op_comm": M * (q("comm_bytes")[k] + bytes_b["op_comm"][k]),
                  "ep_comm": M * bytes_b["ep_comm"][k], "redistribution": M * bytes_b["redistribution"][k],
                  "pp_comm": M * bytes_b["pp_comm"][k], "dp_comm": dp_bytes, "zero_comm": zero_bytes,
                  "cp_comm": M * q("cp_bytes")[k]}
    level_names = ev.nums.level_names
    dp_route = stage_dp_routes(cluster, strategy.mesh, strategy.pp)[j]
    # the expert weights' own data-parallel group (MoE): their sync and gathers cross its levels (rows.py)
    expert_route = expert_dp_route(cluster, strategy, j) if float(out("dp_sync_experts")[j]) > 0 else dp_route
    dp_level = max(top_level(dp_route), top_level(expert_route))
    sync = {"dp_total": float(out("dp_sync")[j]), "dp_exposed": float(out("dp_exposed")[j]),
            "experts_total": float(out("dp_sync_experts")[j]), "experts_bytes": float(out("dp_bytes_experts")[j]),
            "zero_experts": float(out("zero_gather_experts")[j]),
            "zero_experts_bytes": float(out("zero_bytes_experts")[j]), "experts_route": expert_route,
            "zero": float(out("zero_gather")[j]), "zero_exposed": float(out("zero_exposed")[j]), "route": dp_route,
            "per_stage": (out("dp_sync"), out("dp_exposed"), out("zero_gather"), out("optimizer_step"),
                          out("stage_end")),
            "per_pass": (out("zero_gather_pass"), out("zero_bytes_pass"), out("zero_pass_fwd_exposed"),
                         out("zero_pass_bwd_exposed"))}
    sends_exposed, sends_hidden = float(out("pp_sends_exposed")), float(out("pp_sends_hidden"))
    sends_share = sends_exposed / (sends_exposed + sends_hidden) if sends_exposed + sends_hidden > 0 else None
    rows = comm_rows(ev, k, M, sync, dp_bytes, zero_bytes, strategy, sends_share, ep_exposed_share)
    by_level = {name: 0.0 for name in level_names}
    for row in rows:
        by_level[row["level"]] += row["time_s"]
    model_flops, hardware_flops = float(ev.model_flops[0]), float(ev.hardware_flops[0])
    return Result(
        iteration_time_s=total, breakdown_s={c: _noise_free(float(out(c)), total) for c in CATEGORIES},
        hidden_s={"op_comm": M * float(q("hidden_comm")[k]),
                  "dp_comm": sync["dp_total"] - sync["dp_exposed"],
                  "zero_comm": sync["zero"] - sync["zero_exposed"],
                  "cp_comm": M * max(0.0, float(q("cp_total")[k] - q("cp_fwd")[k] - q("cp_bwd")[k])),
                  "pp_comm": sends_hidden,     # the MoE all-to-alls under the partner pass (Strategy.overlap_ep)
                  "ep_comm": M * float(ep_all - fwd_x["ep_comm"][k] - bwd_x["ep_comm"][k])},
        comm_bytes_per_device={c: float(x) for c, x in comm_bytes.items()}, comm_by_kind=rows,
        comm_time_by_level_s=by_level, memory_bytes_per_device=memory[peak], memory_by_stage=memory,
        stage_times_s=stage_rows(ev, fwd_x, bwd_x, sync, (out("dp_bytes"), out("zero_bytes"))),
        critical_stage=k, params=float(q("params").sum()),
        model_flops_per_iteration=model_flops, hardware_flops_per_iteration=hardware_flops,
        tflops_per_gpu=model_flops / (total * N) / 1e12, hardware_tflops_per_gpu=hardware_flops / (total * N) / 1e12,
        mfu=model_flops / (total * N * hw["F"]), gpus=N, micro_batches=M,
        extra={"peak_memory_stage": peak, "device_memory_bytes": cluster.device.memory_bytes,
               "sync_stage": j, "dp_level": dp_level, "dp_route": dp_route, "expert_dp_route": expert_route,
               "pp_sends_exposed_s": sends_exposed,
               # the host side (explorer/model/kernels.py), part of `compute`: what the host's issue time and the
               # synchronisation stalls add on the critical stage's m micro-batches, and its whole issue time
               "host_exposed_s": M * float(q("host_fwd_exposed")[k] + q("host_bwd_exposed")[k]),
               "host_issue_s": M * float(q("host_fwd")[k] + q("host_bwd")[k])})
