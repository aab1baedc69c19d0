"""Numbers from the cost tree: time by category, bytes, memory, FLOPs.

evaluate(model, strategy, cluster) is the one call the CLI and the pages use;
evaluate_batch() evaluates many strategies at once. Both run the same array
code (axis -1 = candidates): the tree's compiled block quantities, summed per
stage (explorer.cost.numeric.stage_values), then the super-step variant's compiled
terms (explorer.cost.superstep) -- nothing here composes a cost of its own. The
compiled functions come through explorer.cost.cold (memory, then the disk cache,
then built with sympy).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from explorer.cost.megatron_flops import megatron_model_flops
from explorer.cost.numbers import Numbers
from explorer.cost.placement import ep_overlaps, ep_sm_share
from explorer.cost.rows import comm_rows, stage_rows
from explorer.cost.cold import NumericTree, numeric_tree, superstep_function
from explorer.cost.numeric import ep_exposed
from explorer.cost.numeric import (CATEGORIES, MEMORY_PARTS, OUTPUTS, SCALAR_INPUT_NAMES, STAGE_INPUT_NAMES, Q,
                                   expert_dp_ratio, grad_norm_seconds, optimizer_state_bytes, optimizer_update_bytes,
                                   sharded_expert_params, stage_dp_g_L, stage_dp_routes, stage_expert_dp_g_L,
                                   stage_values, structure_key, tied_values)
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
    tree = numeric_tree(model, strategy, cluster)
    return _with_megatron_flops(_result(tree, strategy, cluster, _core(tree, model, [strategy], cluster)), model,
                                strategy, cluster)


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
        core = _core(numeric_tree(model, members[0], cluster), model, members, cluster)
        devices = np.array([s.devices for s in members], dtype=float)
        sup = core["super"]
        out["time"][idx] = sup["iteration"]
        out["mem"][idx] = core["mem_total"][core["peak"], np.arange(len(idx))]
        out["mfu"][idx] = core["model_flops"] / (sup["iteration"] * devices * core["nums"].hw["F"])
        for c in CATEGORIES:
            out["cat"][c][idx] = sup[c]
    return BatchResult(out["time"], out["cat"], out["mem"], out["mfu"])


def _dp_g_L(cluster, strategies, stages: int) -> tuple:
    """stages x candidates: the seconds per byte and latency of each stage's data-parallel groups
    (explorer.cost.numeric.stage_dp_g_L)."""
    pairs = [stage_dp_g_L(cluster, s.mesh, stages) for s in strategies]
    return np.array([gs for gs, _ in pairs]).T, np.array([ls for _, ls in pairs]).T


def _expert_dp_g_L(cluster, strategies, stages: int) -> tuple:
    """stages x candidates: seconds per byte and latency of each stage's expert-data-parallel groups
    (MoE; explorer.cost.numeric.stage_expert_dp_g_L)."""
    pairs = [stage_expert_dp_g_L(cluster, s, stages) for s in strategies]
    return np.array([gs for gs, _ in pairs]).T, np.array([ls for _, ls in pairs]).T


def _core(tree: NumericTree, model: ModelSpec, strategies: list, cluster: Cluster) -> dict:
    """All numbers for candidates sharing a tree and a super-step variant; axis -1 = candidates."""
    first = strategies[0]
    C = len(strategies)
    micro = np.array([s.micro_batch for s in strategies], dtype=float)
    M = np.array([s.micro_batches for s in strategies], dtype=float)
    nums = Numbers.of(model, micro, cluster, first.dtype)
    hw = nums.hw
    values = tree.block_values(nums)                                      # kinds x Q x C
    per_stage = tree.stage_quantities(values)                              # stages x Q x C
    fwd_b, bwd_b, bytes_b, by_kind, sends = tree.boundary_values(nums, C)
    ep_max = np.maximum if ep_overlaps(model, first) else None    # expert-parallel overlap (moe_terms.py)
    ep_sms = ep_sm_share(model, first, cluster)                      # its dispatch kernels' SMs (fused_dispatch.py)
    stage = stage_values(per_stage, fwd_b, bwd_b, tied_values(tree.tied, first.tp, tree.stages, nums), sends, ep_max,
                         ep_sms)
    stage["g_r"], stage["L_r"] = _dp_g_L(cluster, strategies, tree.stages)
    stage["r"] = np.arange(tree.stages, dtype=float)[:, None]
    # the gradients are reduced (and ZeRO shards them) over dp x cp (Megatron-LM's data-parallel group
    # "with context parallel"); m = B / (b dp) micro-batches stays that of the dp replicas
    scalars = {"m": M, "v": first.chunks, "p": first.pp, "d": np.array([s.dp * s.cp for s in strategies], dtype=float),
               "beta": hw["beta"], "W_{hbm}": hw["W"], "K_{opt}": optimizer_update_bytes(hw["beta"]),
               "T_{norm}": np.array([grad_norm_seconds(cluster, s.mesh, s.zero, s.dtype) for s in strategies])}
    if model.is_moe:     # the expert weights' own data-parallel group: d / e replicas
        stage["g^e_r"], stage["L^e_r"] = _expert_dp_g_L(cluster, strategies, tree.stages)
        scalars["e"] = np.array([expert_dp_ratio(s) for s in strategies], dtype=float)   # d / e: expert-DP size
        stage["Psi^e_r"] = sharded_expert_params(stage["Psi^e_r"], np.array([s.ep for s in strategies], dtype=float))
    fn = superstep_function(first.schedule, first.zero, first.overlap_dp, optimizer_state_bytes(hw["beta"]),
                            model.is_moe, **options_of(first))
    sup = dict(zip(OUTPUTS, fn(*[stage.get(name, 0.0) for name in STAGE_INPUT_NAMES],
                               *[scalars.get(name, 1.0) for name in SCALAR_INPUT_NAMES])))
    shape = per_stage[:, 0].shape
    sup = {k: (x if np.shape(x) == (shape if k in _PER_STAGE else (C,)) else
               np.broadcast_to(x, shape if k in _PER_STAGE else (C,))) for k, x in sup.items()}
    memory = {part: sup[f"memory_{part}"] for part in MEMORY_PARTS}
    mem_total = sum(memory.values())
    over_b = np.array([s.global_batch for s in strategies], dtype=float) / micro   # micro-batches, all replicas
    col = lambda name: per_stage[:, Q[name]]
    model_flops = over_b * (col("flops_fwd") + col("flops_bwd")).sum(axis=0)
    hardware_flops = model_flops + over_b * col("recompute_flops").sum(axis=0)
    return {"nums": nums, "values": values, "per_stage": per_stage, "M": M, "super": sup, "stage": stage,
            "boundary": (fwd_b, bwd_b, bytes_b), "by_kind": by_kind, "memory": memory,
            "mem_total": mem_total, "peak": np.argmax(mem_total, axis=0), "model_flops": model_flops,
            "hardware_flops": hardware_flops, "ep_max": ep_max, "ep_sms": ep_sms}


_PER_STAGE = ("stage_end", "dp_sync", "dp_exposed", "zero_gather", "optimizer_step", "after", "dp_bytes", "zero_bytes",
              "zero_gather_pass", "zero_bytes_pass", "zero_exposed", "zero_pass_fwd_exposed",
              "zero_pass_bwd_exposed") + \
    tuple(f"memory_{part}" for part in MEMORY_PARTS)


def _result(tree: NumericTree, strategy: Strategy, cluster: Cluster, core: dict) -> Result:
    """The single-strategy Result: candidate 0 of the arrays."""
    sup = {k: x[..., 0] for k, x in core["super"].items()}
    M, N, hw = strategy.micro_batches, strategy.devices, core["nums"].hw
    k, j = int(sup["critical_stage"]), int(sup["sync_stage"])     # (ints: numpy argmax)
    per_stage = core["per_stage"][:, :, 0]
    fwd_b, bwd_b, bytes_b = ({c: a[:, 0] for c, a in part.items()} for part in core["boundary"])
    fwd_x, bwd_x = ep_exposed(per_stage, fwd_b, bwd_b, core["ep_max"], core["ep_sms"])   # what EP overlap leaves
    ep_all = fwd_b["ep_comm"][k] + bwd_b["ep_comm"][k]
    ep_share = float(fwd_x["ep_comm"][k] + bwd_x["ep_comm"][k]) / ep_all if core["ep_max"] and ep_all > 0 else None
    memory = [{name: float(core["memory"][name][i, 0]) for name in MEMORY_PARTS} for i in range(strategy.pp)]
    for row in memory:
        row["total"] = sum(row.values())
    peak = int(core["peak"][0])
    total = float(sup["iteration"])
    dp_bytes, zero_bytes = float(sup["dp_bytes"][j]), float(sup["zero_bytes"][j])
    comm_bytes = {"op_comm": M * (per_stage[k, Q["comm_bytes"]] + bytes_b["op_comm"][k]),
                  "ep_comm": M * bytes_b["ep_comm"][k], "redistribution": M * bytes_b["redistribution"][k],
                  "pp_comm": M * bytes_b["pp_comm"][k], "dp_comm": dp_bytes, "zero_comm": zero_bytes,
                  "cp_comm": M * per_stage[k, Q["cp_bytes"]]}
    level_names = core["nums"].level_names
    by_kind = {key: arr[:, :, 0] for key, arr in core["by_kind"].items()}
    dp_route = stage_dp_routes(cluster, strategy.mesh, strategy.pp)[j]
    dp_level = top_level(dp_route)
    sync = {"dp_total": float(sup["dp_sync"][j]), "dp_exposed": float(sup["dp_exposed"][j]),
            "zero": float(sup["zero_gather"][j]), "zero_exposed": float(sup["zero_exposed"][j]), "route": dp_route,
            "per_stage": (sup["dp_sync"], sup["dp_exposed"], sup["zero_gather"], sup["optimizer_step"],
                          sup["stage_end"]),
            "per_pass": (sup["zero_gather_pass"], sup["zero_bytes_pass"], sup["zero_pass_fwd_exposed"],
                         sup["zero_pass_bwd_exposed"])}
    sends_exposed, sends_hidden = float(sup["pp_sends_exposed"]), float(sup["pp_sends_hidden"])
    sends_share = sends_exposed / (sends_exposed + sends_hidden) if sends_exposed + sends_hidden > 0 else None
    rows = comm_rows(tree, core["values"][:, :, 0], k, M, by_kind, core["nums"], sync, dp_bytes, zero_bytes,
                     strategy, sends_share, ep_share)
    by_level = {name: 0.0 for name in level_names}
    for row in rows:
        by_level[row["level"]] += row["time_s"]
    stage = {name: np.asarray(core["stage"][name])[:, 0] for name in ("F_r", "B_r")}
    model_flops, hardware_flops = float(core["model_flops"][0]), float(core["hardware_flops"][0])
    return Result(
        iteration_time_s=total, breakdown_s={c: float(sup[c]) for c in CATEGORIES},
        hidden_s={"op_comm": M * float(per_stage[k, Q["hidden_comm"]]),
                  "dp_comm": sync["dp_total"] - sync["dp_exposed"],
                  "zero_comm": sync["zero"] - sync["zero_exposed"],
                  "cp_comm": M * max(0.0, float(per_stage[k, Q["cp_total"]] - per_stage[k, Q["cp_fwd"]]
                                                - per_stage[k, Q["cp_bwd"]])),
                  "pp_comm": sends_hidden,     # the MoE all-to-alls under the partner pass (Strategy.overlap_ep)
                  "ep_comm": M * float(ep_all - fwd_x["ep_comm"][k] - bwd_x["ep_comm"][k])},
        comm_bytes_per_device={c: float(x) for c, x in comm_bytes.items()}, comm_by_kind=rows,
        comm_time_by_level_s=by_level, memory_bytes_per_device=memory[peak], memory_by_stage=memory,
        stage_times_s=stage_rows(per_stage, fwd_x, bwd_x, stage, sync, (sup["dp_bytes"], sup["zero_bytes"]),
                                 {name: np.asarray(core["stage"][name])[:, 0] for name in ("S^f_r", "S^b_r")}),
        critical_stage=k, params=float(per_stage[:, Q["params"]].sum()),
        model_flops_per_iteration=model_flops, hardware_flops_per_iteration=hardware_flops,
        tflops_per_gpu=model_flops / (total * N) / 1e12, hardware_tflops_per_gpu=hardware_flops / (total * N) / 1e12,
        mfu=model_flops / (total * N * hw["F"]), gpus=N, micro_batches=M,
        extra={"peak_memory_stage": peak, "device_memory_bytes": cluster.device.memory_bytes,
               "sync_stage": j, "dp_level": dp_level, "dp_route": dp_route, "pp_sends_exposed_s": sends_exposed,
               # the host side (explorer/model/kernels.py), part of `compute`: what the host's issue time and the
               # synchronisation stalls add on the critical stage's m micro-batches, and its whole issue time
               "host_exposed_s": M * float(per_stage[k, Q["host_fwd_exposed"]] + per_stage[k, Q["host_bwd_exposed"]]),
               "host_issue_s": M * float(per_stage[k, Q["host_fwd"]] + per_stage[k, Q["host_bwd"]])})
