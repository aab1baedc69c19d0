"""Numbers from a compiled program: time by category, bytes, memory, FLOPs.

evaluate(model, strategy, cluster) is the one call the CLI and the pages use;
evaluate_batch() evaluates many strategies of one structure at once. Both run
the same array code (axis -1 = candidates): lambdified block quantities, summed
per stage with numpy, composed with the lambdified super-step formulas.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from explorer.cost import collectives as coll
from explorer.cost import memory as mem
from explorer.cost import superstep as ss
from explorer.hardware.cluster import BYTES_PER_ELEMENT, Cluster
from explorer.cost.compile import compile_exprs
from explorer.errors import ExplorerError
from explorer.model.spec import ModelSpec
from explorer.strategy.placement import dp_level
from explorer.cost.program import CATEGORIES, COMM_CATEGORIES, Program, program_for, structure_key
from explorer.cost.quantities import Q
from explorer.cost.rows import comm_rows, stage_rows
from explorer.strategy.strategy import Strategy
from explorer.symbols import B_max, F_max, S_T, T_star, W_hbm, beta, d, m, p, v

_PIPE = compile_exprs("pipeline", (S_T, F_max, B_max, T_star, m, v), (ss.PIPELINE, ss.BUBBLE))


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


@dataclass(frozen=True)
class BatchResult:
    """Many strategies of one structure evaluated together (arrays, one entry per strategy)."""

    iteration_time_s: np.ndarray
    breakdown_s: dict               # category -> array
    peak_memory_bytes: np.ndarray   # most loaded device
    mfu: np.ndarray


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


def _check(model: ModelSpec, strategy: Strategy, cluster: Cluster, gpus) -> None:
    strategy.check_fits(model.layers, model.heads if model.is_transformer else None, gpus,
                        model.is_transformer, model.kv_heads if model.is_transformer else None)
    if strategy.devices > cluster.max_devices:
        raise ExplorerError(f"{strategy.devices} devices is more than cluster '{cluster.name}' has "
                            f"({cluster.max_devices})")


def evaluate(model: ModelSpec, strategy: Strategy, cluster: Cluster, gpus: int | None = None) -> Result:
    """Cost of one training iteration of `model` under `strategy` on `cluster`."""
    _check(model, strategy, cluster, gpus)
    prog = program_for(model, strategy, cluster, gpus)
    core = _core(prog, model, [strategy], cluster)
    return _result(prog, strategy, cluster, core)


def evaluate_batch(model: ModelSpec, strategies, cluster: Cluster, gpus: int | None = None) -> BatchResult:
    """Evaluate many strategies; those sharing a compiled program (same structure and machine
    levels) and the same (zero, overlap_dp) run as one numpy batch. Same numbers as evaluate()."""
    strategies = list(strategies)
    n = len(strategies)
    out = {"time": np.zeros(n), "mem": np.zeros(n), "mfu": np.zeros(n),
           "cat": {c: np.zeros(n) for c in CATEGORIES}}
    groups = {}
    for i, s in enumerate(strategies):
        _check(model, s, cluster, gpus)
        key = (structure_key(model, s, cluster, gpus), s.zero, s.overlap_dp)
        groups.setdefault(key, []).append(i)
    for idx in groups.values():
        members = [strategies[i] for i in idx]
        core = _core(program_for(model, members[0], cluster, gpus), model, members, cluster)
        devices = np.array([s.devices for s in members], dtype=float)
        out["time"][idx] = core["total"]
        out["mem"][idx] = core["mem_total"][core["peak"], np.arange(len(idx))]
        out["mfu"][idx] = core["model_flops"] / (core["total"] * devices * core["hw"]["F"])
        for c in CATEGORIES:
            out["cat"][c][idx] = core["breakdown"][c]
    return BatchResult(out["time"], out["cat"], out["mem"], out["mfu"])


def _column(values) -> callable:
    return lambda name: values[:, Q[name]]


def _core(prog: Program, model: ModelSpec, strategies: list, cluster: Cluster) -> dict:
    """All numbers for candidates sharing a program and a (zero, overlap) pair; axis -1 = candidates."""
    first = strategies[0]
    hw = hardware_numbers(cluster, first.dtype)
    C = len(strategies)
    micro = np.array([s.micro_batch for s in strategies], dtype=float)
    M = np.array([s.micro_batches for s in strategies], dtype=float)
    dims = (micro,) + model_numbers(model, first)[1:]
    values = _block_values(prog, dims, hw, C)                            # kinds x Q x C
    per_stage = np.einsum("sk,kqc->sqc", prog.counts, values)            # stages x Q x C
    col = _column(per_stage)
    fwd_b, bwd_b, bytes_b, by_kind = _boundary_values(prog, dims, hw, first.pp, C)
    fwd = col("fwd_compute") + col("fwd_comm") + sum(fwd_b.values())
    bwd = col("bwd_compute") + col("bwd_comm") + col("recompute") + sum(bwd_b.values())
    total_stage = fwd + bwd
    k = np.argmax(total_stage, axis=0)
    cand = np.arange(C)
    at_k = lambda x: x[k, cand]
    pipeline, bubble = _PIPE(total_stage.sum(axis=0), fwd.max(axis=0), bwd.max(axis=0), at_k(total_stage),
                             M, first.chunks)
    sync = _sync_values(prog, strategies, hw, col("params_dev"), bwd, M, col("grad_sync"))
    breakdown = {
        "compute": M * at_k(col("fwd_compute") + col("bwd_compute")),
        "recompute": M * at_k(col("recompute")),
        "op_comm": M * at_k(col("fwd_comm") + col("bwd_comm") + fwd_b["op_comm"] + bwd_b["op_comm"]),
        "redistribution": M * at_k(fwd_b["redistribution"] + bwd_b["redistribution"]),
        "pp_comm": M * at_k(fwd_b["pp_comm"] + bwd_b["pp_comm"]),
        "bubble": np.maximum(np.broadcast_to(bubble, (C,)), 0.0),   # exact 0 when p = 1, not -1e-14
        "dp_comm": sync["dp_exposed"], "zero_comm": sync["zero"], "optimizer": sync["optimizer"],
    }
    total = pipeline + sync["dp_exposed"] + sync["zero"] + sync["optimizer"]
    memory = _memory(strategies, hw, per_stage, M)
    mem_total = sum(memory.values())
    over_b = np.array([s.global_batch for s in strategies], dtype=float) / micro   # micro-batches, all replicas
    model_flops = over_b * (col("flops_fwd") + col("flops_bwd")).sum(axis=0)
    hardware_flops = model_flops + over_b * col("recompute_flops").sum(axis=0)
    return {"hw": hw, "values": values, "per_stage": per_stage, "k": k, "M": M, "total": total,
            "breakdown": breakdown, "sync": sync, "boundary": (fwd_b, bwd_b, bytes_b), "by_kind": by_kind,
            "fwd": fwd, "bwd": bwd, "memory": memory, "mem_total": mem_total,
            "peak": np.argmax(mem_total, axis=0), "model_flops": model_flops, "hardware_flops": hardware_flops}


def _block_values(prog: Program, dims: tuple, hw: dict, C: int) -> np.ndarray:
    out = np.empty((len(prog.kinds), len(Q), C))
    for i, kind in enumerate(prog.kinds):
        args = dims + (kind.degree, hw["g"][kind.level], hw["L"][kind.level], hw["F"], hw["eta"],
                       hw["phi"], hw["W"], hw["tau"], hw["beta"])
        for j, x in enumerate(kind.fn(*args)):
            out[i, j] = x
    return out


def _boundary_values(prog: Program, dims: tuple, hw: dict, stages: int, C: int):
    """Per stage: fwd/bwd seconds and bytes by category; time and bytes by (category, kind, level)."""
    fwd = {c: np.zeros((stages, C)) for c in COMM_CATEGORIES}
    bwd = {c: np.zeros((stages, C)) for c in COMM_CATEGORIES}
    nbytes = {c: np.zeros((stages, C)) for c in COMM_CATEGORIES}
    by_kind = {}
    if not prog.groups:
        return fwd, bwd, nbytes, by_kind
    arr = prog.arrays
    sizes = np.empty((int(arr["size"].max()) + 1, C))
    for i, x in enumerate(prog.sizes_fn(*(dims + (hw["beta"],)))):
        sizes[i] = x
    sent = arr["factor"][:, None] * sizes[arr["size"]]                       # groups x C
    secs = sent * np.array(hw["g"])[arr["level"]][:, None] + \
        (arr["steps"] * np.array(hw["L"])[arr["level"]])[:, None]
    secs *= arr["count"][:, None]
    sent *= arr["count"][:, None]
    for i, grp in enumerate(prog.groups):
        (fwd if grp.phase == "fwd" else bwd)[grp.category][grp.stage] += secs[i]
        nbytes[grp.category][grp.stage] += sent[i]
        row = by_kind.setdefault((grp.category, grp.kind, grp.level), np.zeros((2, stages, C)))
        row[0, grp.stage] += secs[i]
        row[1, grp.stage] += sent[i]
    return fwd, bwd, nbytes, by_kind


def _sync_values(prog: Program, strategies, hw: dict, params_dev, bwd, M, split_sync) -> dict:
    """Per stage and candidate: gradient sync (total and exposed), ZeRO gathers, optimizer."""
    first = strategies[0]
    fns = compile_exprs(("sync", first.zero, first.overlap_dp),
                        (ss.G, ss.Psi, d, ss.g_dp, ss.L_dp, ss.B_last, m, ss.K_opt, W_hbm, ss.T_split),
                        lambda: (ss.dp_sync(first.zero), ss.exposed(ss.dp_sync(first.zero), first.overlap_dp),
                                 ss.zero_gathers(first.zero), ss.optimizer(first.zero)))
    cluster = prog.plan.cluster
    levels = np.array([[dp_level(cluster, s.tp, s.dp, stage) for s in strategies]
                       for stage in range(bwd.shape[0])])                  # stages x candidates
    g = np.array(hw["g"])[levels]
    L = np.array(hw["L"])[levels]
    dp = np.array([s.dp for s in strategies], dtype=float)
    k_opt = ss.optimizer_bytes_per_param(hw["beta"])
    last_backward = bwd / first.chunks    # the last backward pass is one chunk's (interleaving)
    out = fns(hw["beta"] * params_dev, params_dev, dp, g, L, last_backward, M, k_opt, hw["W"], split_sync)
    total, exposed, zero, opt = (np.broadcast_to(np.asarray(x, dtype=float), bwd.shape) for x in out)
    j = np.argmax(exposed + zero + opt, axis=0)
    cand = np.arange(bwd.shape[1])
    return {"dp_total": total[j, cand], "dp_exposed": exposed[j, cand], "zero": zero[j, cand],
            "optimizer": opt[j, cand], "stage": j, "level": levels[j, cand],
            "per_stage": (total, exposed, zero, opt)}


def _memory(strategies, hw: dict, per_stage: np.ndarray, M) -> dict:
    """Per stage and candidate: bytes of params, grads, optimizer states, activations."""
    first = strategies[0]
    k_opt = mem.optimizer_bytes_per_param(hw["beta"])
    fn = compile_exprs(("memory", first.zero, k_opt, first.schedule),
                       (mem.Psi, mem.A, mem.r, beta, d, m, p, v),
                       lambda: (*mem.model_states(first.zero, k_opt).values(),
                                mem.activations(first.schedule)))
    stages = per_stage.shape[0]
    rank = np.arange(stages, dtype=float)[:, None]
    dp = np.array([s.dp for s in strategies], dtype=float)
    vals = fn(per_stage[:, Q["params_dev"]], per_stage[:, Q["act"]], rank, hw["beta"], dp, M,
              first.pp, first.chunks)
    shape = per_stage[:, 0].shape
    return dict(zip(("params", "grads", "optimizer", "activations"),
                    (np.broadcast_to(np.asarray(x, dtype=float), shape) for x in vals)))


def _result(prog: Program, strategy: Strategy, cluster: Cluster, core: dict) -> Result:
    """The single-strategy Result: candidate 0 of the arrays."""
    at0 = lambda x: float(np.asarray(x)[..., 0]) if np.ndim(x) else float(x)
    hw, M, N = core["hw"], strategy.micro_batches, strategy.devices
    k, sync = int(core["k"][0]), {key: (val[..., 0] if isinstance(val, np.ndarray) else val)
                                  for key, val in core["sync"].items() if key != "per_stage"}
    per_stage = core["per_stage"][:, :, 0]
    fwd_b, bwd_b, bytes_b = (({c: a[:, 0] for c, a in part.items()}) for part in core["boundary"])
    memory = [{name: float(core["memory"][name][r, 0]) for name in core["memory"]} for r in range(strategy.pp)]
    for row in memory:
        row["total"] = sum(row.values())
    peak = int(core["peak"][0])
    total = at0(core["total"])
    grads = hw["beta"] * per_stage[:, Q["params_dev"]]          # gradient (and parameter) bytes per stage
    dp_stage = coll.bytes_per_device("reduce_scatter" if strategy.zero == 3 else "all_reduce", grads, strategy.dp) \
        + per_stage[:, Q["grad_sync_bytes"]]
    zero_stage = 2 * M * coll.bytes_per_device("all_gather", grads, strategy.dp) * (strategy.zero == 3)
    j = int(sync["stage"])      # dp and ZeRO traffic of the stage whose sync time is reported
    dp_bytes, zero_bytes = float(dp_stage[j]), float(zero_stage[j])
    comm_bytes = {"op_comm": M * (per_stage[k, Q["comm_bytes"]] + bytes_b["op_comm"][k]),
                  "redistribution": M * bytes_b["redistribution"][k], "pp_comm": M * bytes_b["pp_comm"][k],
                  "dp_comm": dp_bytes, "zero_comm": zero_bytes}
    level_names = [lv.name for lv in cluster.levels]
    by_kind = {key: arr[:, :, 0] for key, arr in core["by_kind"].items()}
    sync0 = dict(sync, level=int(sync["level"]), stage=int(sync["stage"]),
                 per_stage=tuple(a[:, 0] for a in core["sync"]["per_stage"]))
    rows = comm_rows(prog, core["values"][:, :, 0], k, M, by_kind, level_names, sync0, dp_bytes, zero_bytes, strategy)
    by_level = {name: 0.0 for name in level_names}
    for row in rows:
        by_level[row["level"]] += row["time_s"]
    model_flops, hardware_flops = at0(core["model_flops"]), at0(core["hardware_flops"])
    return Result(
        iteration_time_s=total, breakdown_s={c: at0(core["breakdown"][c]) for c in CATEGORIES},
        hidden_s={"dp_comm": float(sync0["dp_total"] - sync0["dp_exposed"])},
        comm_bytes_per_device={c: float(x) for c, x in comm_bytes.items()}, comm_by_kind=rows,
        comm_time_by_level_s=by_level, memory_bytes_per_device=memory[peak], memory_by_stage=memory,
        stage_times_s=stage_rows(per_stage, fwd_b, bwd_b, core["fwd"][:, 0], core["bwd"][:, 0], sync0,
                                 (dp_stage, zero_stage)),
        critical_stage=k, params=float(per_stage[:, Q["params"]].sum()),
        model_flops_per_iteration=model_flops, hardware_flops_per_iteration=hardware_flops,
        tflops_per_gpu=model_flops / (total * N) / 1e12, hardware_tflops_per_gpu=hardware_flops / (total * N) / 1e12,
        mfu=model_flops / (total * N * hw["F"]), gpus=N, micro_batches=M,
        extra={"peak_memory_stage": peak, "device_memory_bytes": cluster.device.memory_bytes,
               "sync_stage": sync0["stage"], "dp_level": sync0["level"]})
