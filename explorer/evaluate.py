"""Numbers from a compiled program: time by category, bytes, memory, FLOPs.

evaluate(model, strategy, cluster) is the one call the CLI and the pages use.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import sympy as sp

from . import collectives as coll
from . import memory as mem
from . import superstep as ss
from .cluster import BYTES_PER_ELEMENT, Cluster
from .compile import compile_exprs
from .model_spec import ModelSpec
from .program import CATEGORIES, COMM_CATEGORIES, Program, program_for
from .quantities import COMM_KINDS, Q
from .strategy import Strategy
from .symbols import B_max, F_max, S_T, T_star, W_hbm, beta, d, m, p, v

_PIPE = compile_exprs("pipeline", (S_T, F_max, B_max, T_star, m, v), (ss.PIPELINE, ss.BUBBLE))


@dataclass(frozen=True)
class Result:
    """What the model answers for one strategy. Times in seconds, sizes in bytes."""

    iteration_time_s: float
    breakdown_s: dict               # category -> exposed seconds; sums to iteration_time_s
    hidden_s: dict                  # category -> seconds hidden under computation
    comm_bytes_per_device: dict     # category -> bytes sent per device per iteration
    comm_by_kind: list              # rows: category, kind, level, time_s, bytes
    comm_time_by_level_s: dict      # level name -> exposed communication seconds
    memory_bytes_per_device: dict   # params, grads, optimizer, activations, total (most loaded device)
    memory_by_stage: list           # one dict per stage
    stage_times_s: list             # per stage: fwd and bwd seconds of one micro-batch
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


def hardware_numbers(cluster: Cluster, dtype: str) -> dict:
    eff = cluster.efficiency
    return {"F": cluster.device.flops(dtype), "eta": eff.gemm_max, "phi": eff.gemm_half_flops,
            "W": cluster.device.hbm_bandwidth_bytes_per_s * eff.hbm, "tau": eff.kernel_launch_s,
            "beta": BYTES_PER_ELEMENT[dtype],
            "g": [lv.seconds_per_byte for lv in cluster.levels],
            "L": [lv.latency_s for lv in cluster.levels]}


def model_numbers(model: ModelSpec, strategy: Strategy) -> tuple:
    return (strategy.micro_batch, model.seq_len, model.hidden, model.heads, model.kv_heads,
            model.ffn_hidden, model.vocab)


def evaluate(model: ModelSpec, strategy: Strategy, cluster: Cluster, gpus: int | None = None) -> Result:
    """Cost of one training iteration of `model` under `strategy` on `cluster`."""
    strategy.check_fits(model.layers, model.heads if model.is_transformer else None, gpus,
                        model.is_transformer)
    return evaluate_program(program_for(model, strategy, cluster, gpus), model, strategy, cluster)


def _block_values(prog: Program, dims: tuple, hw: dict) -> np.ndarray:
    rows = []
    for kind in prog.kinds:
        args = dims + (kind.degree, hw["g"][kind.level], hw["L"][kind.level], hw["F"], hw["eta"],
                       hw["phi"], hw["W"], hw["tau"], hw["beta"])
        rows.append(np.asarray(kind.fn(*args), dtype=float))
    return np.vstack(rows)


def _boundary_values(prog: Program, dims: tuple, hw: dict, stages: int, levels: int):
    """Per stage: fwd/bwd seconds and bytes by category; time and bytes by (category, kind, level)."""
    fwd = {c: np.zeros(stages) for c in COMM_CATEGORIES}
    bwd = {c: np.zeros(stages) for c in COMM_CATEGORIES}
    nbytes = {c: np.zeros(stages) for c in COMM_CATEGORIES}
    by_kind = {}
    for grp in prog.groups:
        size = float(grp.size_fn(*(dims + (hw["beta"],)))[0])
        sent = float(coll.bytes_per_device(grp.kind, size, grp.n))
        secs = sent * hw["g"][grp.level] + float(coll.latency_steps(grp.kind, grp.n)) * hw["L"][grp.level]
        (fwd if grp.phase == "fwd" else bwd)[grp.category][grp.stage] += grp.count * secs
        nbytes[grp.category][grp.stage] += grp.count * sent
        row = by_kind.setdefault((grp.category, grp.kind, grp.level), np.zeros((2, stages)))
        row[0, grp.stage] += grp.count * secs
        row[1, grp.stage] += grp.count * sent
    return fwd, bwd, nbytes, by_kind


def evaluate_program(prog: Program, model: ModelSpec, strategy: Strategy, cluster: Cluster) -> Result:
    hw = hardware_numbers(cluster, strategy.dtype)
    dims = model_numbers(model, strategy)
    P, M, V_ = strategy.pp, strategy.micro_batches, strategy.chunks
    values = _block_values(prog, dims, hw)                         # kinds x BLOCK_Q
    per_stage = prog.counts @ values                                # stages x BLOCK_Q
    fwd_b, bwd_b, bytes_b, by_kind = _boundary_values(prog, dims, hw, P, len(cluster.levels))
    col = lambda name: per_stage[:, Q[name]]
    fwd = col("fwd_compute") + col("fwd_comm") + sum(fwd_b.values())
    bwd = col("bwd_compute") + col("bwd_comm") + col("recompute") + sum(bwd_b.values())
    total_stage = fwd + bwd
    k = int(np.argmax(total_stage))
    pipeline, bubble = (float(x) for x in _PIPE(total_stage.sum(), fwd.max(), bwd.max(), total_stage[k], M, V_))
    sync = _sync_values(prog, strategy, hw, col("params_dev"), bwd)
    breakdown = {
        "compute": M * (col("fwd_compute") + col("bwd_compute"))[k],
        "recompute": M * col("recompute")[k],
        "op_comm": M * (col("fwd_comm") + col("bwd_comm") + fwd_b["op_comm"] + bwd_b["op_comm"])[k],
        "redistribution": M * (fwd_b["redistribution"] + bwd_b["redistribution"])[k],
        "pp_comm": M * (fwd_b["pp_comm"] + bwd_b["pp_comm"])[k],
        "bubble": bubble,
        "dp_comm": sync["dp_exposed"], "zero_comm": sync["zero"], "optimizer": sync["optimizer"],
    }
    breakdown = {c: float(breakdown[c]) for c in CATEGORIES}
    total = pipeline + sync["dp_exposed"] + sync["zero"] + sync["optimizer"]
    return _result(prog, strategy, cluster, hw, values, per_stage, k, total, breakdown, sync,
                   (fwd_b, bwd_b, bytes_b), by_kind, fwd, bwd)


def _sync_values(prog: Program, strategy: Strategy, hw: dict, params_dev: np.ndarray, bwd: np.ndarray) -> dict:
    fns = compile_exprs(("sync", strategy.zero, strategy.overlap_dp),
                        (ss.G, ss.Psi, d, ss.g_dp, ss.L_dp, ss.B_last, m, ss.K_opt, W_hbm),
                        lambda: (ss.dp_sync(strategy.zero), ss.exposed(ss.dp_sync(strategy.zero), strategy.overlap_dp),
                                 ss.zero_gathers(strategy.zero), ss.optimizer(strategy.zero)))
    level = prog.plan.cluster.level_index(strategy.dp * strategy.tp)
    g, L = hw["g"][level], hw["L"][level]
    k_opt = ss.optimizer_bytes_per_param(hw["beta"])
    rows = [fns(hw["beta"] * psi, psi, strategy.dp, g, L, b_last, strategy.micro_batches, k_opt, hw["W"])
            for psi, b_last in zip(params_dev, bwd)]
    sync, exposed, zero, opt = (np.array([float(r[i]) for r in rows]) for i in range(4))
    j = int(np.argmax(exposed + zero + opt))
    return {"dp_total": sync[j], "dp_exposed": exposed[j], "zero": zero[j], "optimizer": opt[j],
            "stage": j, "level": level, "per_stage": (sync, exposed, zero, opt)}


def _memory(prog: Program, strategy: Strategy, hw: dict, per_stage: np.ndarray) -> list:
    k_opt = mem.optimizer_bytes_per_param(hw["beta"])
    fn = compile_exprs(("memory", strategy.zero, k_opt, strategy.schedule),
                       (mem.Psi, mem.A, mem.r, beta, d, m, p, v),
                       lambda: (*mem.model_states(strategy.zero, k_opt).values(),
                                mem.activations(strategy.schedule)))
    out = []
    for r in range(strategy.pp):
        vals = fn(per_stage[r, Q["params_dev"]], per_stage[r, Q["act"]], r, hw["beta"], strategy.dp,
                  strategy.micro_batches, strategy.pp, strategy.chunks)
        row = dict(zip(("params", "grads", "optimizer", "activations"), (float(x) for x in vals)))
        row["total"] = sum(row.values())
        out.append(row)
    return out


def _result(prog, strategy, cluster, hw, values, per_stage, k, total, breakdown, sync, boundary, by_kind, fwd, bwd):
    fwd_b, bwd_b, bytes_b = boundary
    M, N = strategy.micro_batches, strategy.devices
    col = lambda name: per_stage[:, Q[name]]
    memory = _memory(prog, strategy, hw, per_stage)
    peak = max(range(len(memory)), key=lambda r: memory[r]["total"])
    level_names = [lv.name for lv in cluster.levels]
    dp_bytes = float(coll.bytes_per_device("reduce_scatter" if strategy.zero == 3 else "all_reduce",
                                           hw["beta"] * col("params_dev")[k], strategy.dp))
    zero_bytes = 2 * M * float(coll.bytes_per_device("all_gather", hw["beta"] * col("params_dev")[k], strategy.dp)) \
        if strategy.zero == 3 else 0.0
    comm_bytes = {"op_comm": M * (col("comm_bytes") + bytes_b["op_comm"])[k],
                  "redistribution": M * bytes_b["redistribution"][k], "pp_comm": M * bytes_b["pp_comm"][k],
                  "dp_comm": dp_bytes, "zero_comm": zero_bytes}
    rows = _comm_rows(prog, values, k, M, by_kind, level_names, sync, dp_bytes, zero_bytes, strategy)
    by_level = {name: 0.0 for name in level_names}
    for row in rows:
        by_level[row["level"]] += row["time_s"]
    B_over_b = strategy.global_batch / strategy.micro_batch   # micro-batches over all replicas
    model_flops = B_over_b * float((col("flops_fwd") + col("flops_bwd")).sum())
    hardware_flops = model_flops + B_over_b * float(col("recompute_flops").sum())
    peak_flops = hw["F"]
    return Result(
        iteration_time_s=float(total), breakdown_s=breakdown,
        hidden_s={"dp_comm": float(sync["dp_total"] - sync["dp_exposed"])},
        comm_bytes_per_device={c: float(x) for c, x in comm_bytes.items()}, comm_by_kind=rows,
        comm_time_by_level_s=by_level, memory_bytes_per_device=memory[peak], memory_by_stage=memory,
        stage_times_s=_stage_rows(per_stage, fwd_b, bwd_b, fwd, bwd, sync),
        critical_stage=k, params=float(col("params").sum()), model_flops_per_iteration=model_flops,
        hardware_flops_per_iteration=hardware_flops, tflops_per_gpu=model_flops / (total * N) / 1e12,
        hardware_tflops_per_gpu=hardware_flops / (total * N) / 1e12,
        mfu=model_flops / (total * N * peak_flops), gpus=N, micro_batches=M,
        extra={"peak_memory_stage": peak, "device_memory_bytes": cluster.device.memory_bytes,
               "sync_stage": sync["stage"], "dp_level": sync["level"]})


def _comm_rows(prog, values, k, M, by_kind, level_names, sync, dp_bytes, zero_bytes, strategy) -> list:
    """Communication of the most loaded device split by category, collective and level."""
    rows = []
    for kind_i, kind in enumerate(prog.kinds):
        count = prog.counts[k, kind_i]
        if not count:
            continue
        for name in COMM_KINDS:
            secs = M * count * float(values[kind_i, Q[f"t_{name}"]])
            if secs:
                rows.append({"category": "op_comm", "kind": name, "level": level_names[kind.level],
                             "time_s": secs, "hidden_s": 0.0,
                             "bytes": M * count * float(values[kind_i, Q[f"b_{name}"]])})
    for (category, name, level), arr in by_kind.items():
        if arr[0, k] or arr[1, k]:
            rows.append({"category": category, "kind": name, "level": level_names[level],
                         "time_s": M * float(arr[0, k]), "hidden_s": 0.0, "bytes": M * float(arr[1, k])})
    if strategy.dp > 1:
        rows.append({"category": "dp_comm", "kind": "reduce_scatter" if strategy.zero == 3 else "all_reduce",
                     "level": level_names[sync["level"]], "time_s": float(sync["dp_exposed"]),
                     "hidden_s": float(sync["dp_total"] - sync["dp_exposed"]), "bytes": dp_bytes})
        if strategy.zero == 3:
            rows.append({"category": "zero_comm", "kind": "all_gather", "level": level_names[sync["level"]],
                         "time_s": float(sync["zero"]), "hidden_s": 0.0, "bytes": zero_bytes})
    return _merge(rows)


def _merge(rows):
    merged = {}
    for row in rows:
        key = (row["category"], row["kind"], row["level"])
        if key in merged:
            for f_ in ("time_s", "hidden_s", "bytes"):
                merged[key][f_] += row[f_]
        else:
            merged[key] = dict(row)
    return list(merged.values())


def _stage_rows(per_stage, fwd_b, bwd_b, fwd, bwd, sync) -> list:
    """Per stage, one micro-batch's forward and backward split into their parts (seconds),
    and the stage's own gradient sync, ZeRO gathers and optimizer step."""
    rows = []
    dp_total, dp_exposed, zero, opt = sync["per_stage"]
    for i in range(len(fwd)):
        q = lambda name: float(per_stage[i, Q[name]])
        rows.append({
            "stage": i, "fwd_s": float(fwd[i]), "bwd_s": float(bwd[i]),
            "fwd_compute_s": q("fwd_compute"), "bwd_compute_s": q("bwd_compute"),
            "bwd_weight_s": q("bwd_weight"), "recompute_s": q("recompute"),
            "fwd_op_comm_s": q("fwd_comm") + float(fwd_b["op_comm"][i]),
            "bwd_op_comm_s": q("bwd_comm") + float(bwd_b["op_comm"][i]),
            "fwd_redistribution_s": float(fwd_b["redistribution"][i]),
            "bwd_redistribution_s": float(bwd_b["redistribution"][i]),
            "fwd_pp_comm_s": float(fwd_b["pp_comm"][i]), "bwd_pp_comm_s": float(bwd_b["pp_comm"][i]),
            "dp_sync_s": float(dp_total[i]), "dp_exposed_s": float(dp_exposed[i]),
            "zero_comm_s": float(zero[i]), "optimizer_s": float(opt[i]),
        })
    return rows
