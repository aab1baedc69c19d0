"""run_strategy: the reference run of a strategy, compared with the cost model.

Measured bytes per device per category are summed over one iteration's recorded
calls with the model's bus-bandwidth factors (explorer/cost/collectives.py
bytes_per_device: what a device sends; a receive sends nothing). The model
reports communication "per device" at one stage: op_comm, redistribution and
pp_comm at its critical stage, dp_comm and zero_comm at its sync stage
(explorer/cost/evaluate.py); the measured value of a category is the largest over
the ranks of that same stage. Calls the model does not have are recorded with
modelled=False and a note, and counted apart (`unmodelled_bytes_per_device`):
measured - unmodelled must equal the model exactly.
"""
from __future__ import annotations

import os

from explorer.cost.collectives import bytes_per_device
from explorer.cost.evaluate import evaluate
from explorer.cost.tree import cost_tree
from explorer.errors import ExplorerError
from explorer.hardware.cluster import Cluster
from explorer.io.clusters import cluster_from_dict, cluster_to_dict
from explorer.io.strategies import strategy_to_dict
from explorer.model.spec import ModelSpec
from explorer.runtime.config import Config
from explorer.strategy.strategy import Strategy

COMM_CATEGORIES = ("op_comm", "redistribution", "pp_comm", "dp_comm", "zero_comm")
RUN_SCHEDULES = ("gpipe", "1f1b", "interleaved")
"""The schedules the run follows (explorer/runtime/train.py runs the schedule object's own order)."""
STAGE_OF = {"op_comm": "critical", "redistribution": "critical", "pp_comm": "critical",
            "dp_comm": "sync", "zero_comm": "sync"}
MAX_ITERATIONS = 20
MAX_PROCS = 16
MAX_RUN_PARAMS = 50_000_000   # ~12 l h^2 + V h: fp32 weights + gradients <= 400 MB per rank, a CPU run of minutes


def run_params(model: ModelSpec) -> int:
    """Approximate parameter count (12 l h^2 + (V + s) h) used to refuse models too large to run here."""
    return 12 * model.layers * model.hidden ** 2 + (model.vocab + model.seq_len) * model.hidden


def check_runnable(model: ModelSpec, strategy: Strategy, procs: int, iterations: int) -> None:
    """Refuse, in one line, what the reference run does not implement."""
    if model.family != "gpt":
        raise ExplorerError(f"the reference run trains GPT models only, got family '{model.family}'")
    if run_params(model) > MAX_RUN_PARAMS:
        raise ExplorerError(f"model {model.name!r} has about {run_params(model):,} parameters; the reference run "
                            f"takes at most {MAX_RUN_PARAMS:,} (use tiny-gpt or a small model file)")
    if not 1 <= iterations <= MAX_ITERATIONS:
        raise ExplorerError(f"--iterations must be between 1 and {MAX_ITERATIONS}, got {iterations}")
    if not 1 <= procs <= MAX_PROCS:
        raise ExplorerError(f"--procs must be between 1 and {MAX_PROCS}, got {procs}")
    if procs != strategy.devices:
        raise ExplorerError(f"--procs {procs} must equal dp x tp x pp = {strategy.devices}")
    odd = [i for i, split in enumerate(strategy.layer_splits)
           if split.overrides or split.effective_preset not in ("megatron", "replicated")
           or split.degree not in (1, strategy.tp)]
    mixed = len({split.degree for split in strategy.layer_splits}) > 1
    side_grads = strategy.pp > 1 or (strategy.sequence_parallel and strategy.tp > 1)
    unsupported = [(odd, f"per-layer split of layer {odd[0] if odd else 0} (only Megatron over all t, or replicated)"),
                   (mixed and strategy.sequence_parallel, "sequence parallelism with per-layer splits"),
                   (strategy.schedule not in RUN_SCHEDULES, f"schedule '{strategy.schedule}'"),
                   (strategy.zero > 1, f"ZeRO stage {strategy.zero}"),
                   (strategy.overlap_dp, "overlapped gradient sync"),
                   (strategy.dtype == "fp16", "fp16 (it needs loss scaling)"),
                   (strategy.dtype == "fp8", "fp8 (it needs Transformer Engine's kernels on a GPU)"),
                   (strategy.dtype == "bf16" and strategy.grad_dtype == "fp32" and side_grads,
                    "fp32 gradients of a bf16 model with pipeline or sequence parallelism (the cost model prices "
                    "the tied-embedding and norm-gradient all-reduces in bf16, Megatron-LM in its fp32 main_grad)")]
    for flag, what in unsupported:
        if flag:
            raise ExplorerError(f"the reference run does not implement {what} yet; "
                                "it runs DP (ZeRO-1), TP (Megatron, sequence parallel; per layer Megatron or "
                                "replicated), PP (gpipe, 1f1b, interleaved), recomputation (selective, full), "
                                "in fp32 or bf16")
    t = strategy.tp
    for name, value in (("heads", model.heads), ("vocab", model.vocab), ("seq_len", model.seq_len),
                        ("ffn_hidden", model.ffn_hidden)):
        if value % t:
            raise ExplorerError(f"model {name} {value} is not divisible by tp {t}")


def config_for(model: ModelSpec, strategy: Strategy, cluster: Cluster, iterations: int, seed: int) -> Config:
    plan = cost_tree(model, strategy, cluster).plan
    stages = [[] for _ in range(strategy.pp)]
    chunks = [[[] for _ in range(strategy.chunks)] for _ in range(strategy.pp)]
    for placed in plan.blocks:
        stages[placed.stage].append(placed.block.name)
        chunks[placed.stage][placed.chunk].append(placed.block.name)
    reduce_in = "fp32" if strategy.grad_dtype == "fp32" else strategy.dtype
    return Config(hidden=model.hidden, heads=model.heads, ffn_hidden=model.ffn_hidden, seq_len=model.seq_len,
                  vocab=model.vocab, layers=model.layers, dp=strategy.dp, tp=strategy.tp, pp=strategy.pp,
                  micro_batch=strategy.micro_batch, global_batch=strategy.global_batch,
                  schedule=strategy.schedule, scatter_gather=strategy.scatters_sends,
                  sequence_parallel=strategy.sequence_parallel, zero=strategy.zero,
                  layer_degrees=tuple(split.degree for split in strategy.layer_splits),
                  stage_blocks=tuple(tuple(s) for s in stages), iterations=iterations, seed=seed,
                  chunks=strategy.chunks, chunk_blocks=tuple(tuple(tuple(c) for c in s) for s in chunks)
                  if strategy.chunks > 1 else (), dtype=strategy.dtype, grad_dtype=reduce_in,
                  recompute=strategy.recompute)


def rank_bytes(record: dict, iteration: int) -> tuple:
    """({category: bytes sent}, {category: bytes sent by unmodelled calls}) of one rank in one iteration."""
    sent, unmodelled = dict.fromkeys(COMM_CATEGORIES, 0.0), dict.fromkeys(COMM_CATEGORIES, 0.0)
    for call in record["calls"]:
        if call["iteration"] != iteration or call["role"] == "recv":
            continue
        nbytes = float(bytes_per_device(call["kind"], call["size_bytes"], call["n"]))
        sent[call["category"]] += nbytes
        if not call["modelled"]:
            unmodelled[call["category"]] += nbytes
    return sent, unmodelled


def per_device(records: list, result, iteration: int) -> tuple:
    """(measured, unmodelled, by_rank): bytes per device per category at the model's stages."""
    stage = {"critical": result.critical_stage, "sync": int(result.extra.get("sync_stage", result.critical_stage))}
    measured, unmodelled = dict.fromkeys(COMM_CATEGORIES, 0.0), dict.fromkeys(COMM_CATEGORIES, 0.0)
    by_rank = []
    for rec in records:
        sent, extra = rank_bytes(rec, iteration)
        by_rank.append({"rank": rec["rank"], "tp": rec["tp"], "dp": rec["dp"], "pp": rec["pp"], **sent})
        for cat in COMM_CATEGORIES:
            if rec["pp"] == stage[STAGE_OF[cat]] and sent[cat] >= measured[cat]:
                measured[cat], unmodelled[cat] = sent[cat], extra[cat]
    return measured, unmodelled, by_rank


def unmodelled_calls(records: list, iteration: int) -> list:
    """The kinds of call the model does not have, with the bytes a device sends for them per iteration."""
    rows = {}
    for rec in records:
        for call in rec["calls"]:
            if call["iteration"] == iteration and not call["modelled"] and call["role"] != "recv":
                key = (call["category"], call["op"], call["kind"], call["note"])
                per_rank = rows.setdefault(key, {})
                per_rank[rec["rank"]] = per_rank.get(rec["rank"], 0.0) + float(
                    bytes_per_device(call["kind"], call["size_bytes"], call["n"]))
    return [{"category": c, "op": op, "kind": kind, "note": note, "max_bytes_per_device": max(v.values())}
            for (c, op, kind, note), v in sorted(rows.items())]


def events(records: list, iteration: int) -> list:
    """Measured intervals of one iteration, seconds from its start (earliest rank), one row per interval."""
    begin = min(rec["iterations"][iteration][0] for rec in records)
    rows = []
    for rec in records:
        label = f"rank {rec['rank']} (stage {rec['pp']})"
        for span in rec["spans"]:
            if span["iteration"] == iteration and span["kind"] != "op":
                rows.append({"row": label, "rank": rec["rank"], "stage": rec["pp"], "kind": span["kind"],
                             "category": "optimizer" if span["kind"] == "optimizer" else "compute",
                             "operator": span["op"], "phase": span["phase"], "micro_batch": span["micro_batch"],
                             "start_s": span["start_s"] - begin, "end_s": span["end_s"] - begin, "bytes": 0.0})
        for call in rec["calls"]:
            if call["iteration"] == iteration:
                sent = 0.0 if call["role"] == "recv" else float(bytes_per_device(call["kind"], call["size_bytes"],
                                                                                 call["n"]))
                rows.append({"row": label, "rank": rec["rank"], "stage": rec["pp"],
                             "kind": "recv" if call["role"] == "recv" else call["kind"],
                             "category": call["category"], "operator": call["op"], "phase": call["phase"],
                             "micro_batch": call["micro_batch"], "start_s": call["start_s"] - begin,
                             "end_s": call["end_s"] - begin, "bytes": sent})
    return sorted(rows, key=lambda r: (r["rank"], r["start_s"]))


def operator_spans(records: list, iteration: int) -> list:
    """Per-operator forward spans of one iteration (micro-step level), seconds from its start."""
    begin = min(rec["iterations"][iteration][0] for rec in records)
    return [{"rank": rec["rank"], "stage": rec["pp"], "operator": s["op"], "micro_batch": s["micro_batch"],
             "start_s": s["start_s"] - begin, "end_s": s["end_s"] - begin}
            for rec in records for s in rec["spans"]
            if s["iteration"] == iteration and s["kind"] == "op"]


def time_by_category(records: list, rank: int, iteration: int) -> dict:
    """Seconds one rank spent per cost category in one iteration: each call's duration in its category
    (a receive's wait included), compute = the forward/backward passes less the calls inside them,
    optimizer = its spans, bubble = the rest of the iteration (waiting with nothing to do)."""
    rec = records[rank]
    begin, end = rec["iterations"][iteration]
    out = {"compute": 0.0, "op_comm": 0.0, "redistribution": 0.0, "pp_comm": 0.0, "dp_comm": 0.0,
           "zero_comm": 0.0, "optimizer": 0.0}
    passes = [(s["start_s"], s["end_s"]) for s in rec["spans"]
              if s["iteration"] == iteration and s["kind"] in ("forward", "backward")]
    for s in rec["spans"]:
        if s["iteration"] == iteration and s["kind"] in ("forward", "backward", "optimizer"):
            out["optimizer" if s["kind"] == "optimizer" else "compute"] += s["end_s"] - s["start_s"]
    for c in rec["calls"]:
        if c["iteration"] == iteration:
            out[c["category"]] += c["end_s"] - c["start_s"]
            if any(a <= c["start_s"] and c["end_s"] <= b for a, b in passes):
                out["compute"] -= c["end_s"] - c["start_s"]
    out["bubble"] = max(0.0, (end - begin) - sum(out.values()))
    return out


def iteration_times(records: list) -> list:
    """Seconds per iteration: first rank's start to the last rank's end."""
    count = len(records[0]["iterations"])
    return [max(r["iterations"][i][1] for r in records) - min(r["iterations"][i][0] for r in records)
            for i in range(count)]


SHARING_ROUNDS = 12      # fixed-point rounds of the processor-sharing estimate (converges in a few)


def calibrated_slots(cluster: Cluster, cores: int) -> int | None:
    """Ranks that compute at full calibrated speed at once: the cores for a one-process calibration
    ('cpu thread'), k for one made with k processes at once; None for a cluster not calibrated here."""
    from explorer.runtime.calibrate import CPU_DEVICE
    name = cluster.device.name
    if name == CPU_DEVICE:
        return cores
    prefix, suffix = f"{CPU_DEVICE}, ", " ranks at once"
    if name.startswith(prefix) and name.endswith(suffix) and name[len(prefix):-len(suffix)].isdigit():
        return int(name[len(prefix):-len(suffix)])
    return None


def _scaled(cluster: Cluster, share: float, label: str) -> Cluster:
    d = cluster_to_dict(cluster)
    d["device"]["peak_tflops"] = {k: v * share for k, v in d["device"]["peak_tflops"].items()}
    d["device"]["hbm_bandwidth_gbps"] *= share
    d["name"] = f"{cluster.name} ({label})"
    return cluster_from_dict(d)


def shared_prediction(model: ModelSpec, strategy: Strategy, cluster: Cluster, procs: int,
                      cores: int | None = None) -> tuple:
    """(cluster, Result) of the prediction when more ranks than calibrated slots share the CPU.

    Processor sharing: a rank computes a fraction u of the iteration (compute, recompute and optimizer
    over the iteration time, from the model itself) and waits otherwise; procs*u ranks compete for the
    slots on average, so each gets share = min(1, slots / (procs u)) of its calibrated FLOP/s and memory
    bandwidth -- a fixed point (u depends on the share), iterated with damping. Clusters not calibrated
    here (GPU presets) are used as they are.
    """
    slots = calibrated_slots(cluster, cores or os.cpu_count() or 1)
    result = evaluate(model, strategy, cluster, procs)
    if slots is None or procs <= slots:
        return cluster, result
    share, shared = slots / procs, cluster
    for _ in range(SHARING_ROUNDS):
        shared = _scaled(cluster, share, f"{procs} ranks sharing {slots} slots at {share:.2f} each")
        result = evaluate(model, strategy, shared, procs)
        b = result.breakdown_s
        busy = (b["compute"] + b["recompute"] + b["optimizer"]) / result.iteration_time_s
        share = (share * min(1.0, slots / (procs * max(busy, 1e-9)))) ** 0.5     # damped step
    return shared, result


def run_strategy(model: ModelSpec, strategy: Strategy, procs: int, cluster: Cluster, iterations: int = 3,
                 seed: int = 1234) -> dict:
    """Train `model` under `strategy` on `procs` processes and set measured next to modelled numbers."""
    from explorer.runtime.launch import run_ranks, run_single
    check_runnable(model, strategy, procs, iterations)
    predicted_on, result = shared_prediction(model, strategy, cluster, procs)
    cfg = config_for(model, strategy, predicted_on, iterations, seed)
    records = run_ranks(cfg, procs)
    single = run_single(cfg)
    last = iterations - 1
    measured, unmodelled, by_rank = per_device(records, result, last)
    model_bytes = {c: float(result.comm_bytes_per_device.get(c, 0.0)) for c in COMM_CATEGORIES}
    parallel = [sum(r["losses"][i] for r in records if r["pp"] == cfg.pp - 1 and r["tp"] == 0)
                for i in range(iterations)]
    times = iteration_times(records)
    critical_rank = next(r["rank"] for r in records if r["pp"] == result.critical_stage)
    warm = times[1:] or times
    rel = max(abs(a - b) / max(abs(b), 1e-30) for a, b in zip(parallel, single))
    return {
        "model": model.name, "model_spec": model.to_dict(), "procs": procs, "backend": records[0]["backend"],
        "iterations": iterations,
        "seed": seed, "strategy": strategy_to_dict(strategy),
        "measured_bytes_per_device": measured, "model_bytes_per_device": model_bytes,
        "unmodelled_bytes_per_device": unmodelled,
        "bytes_match": all(measured[c] - unmodelled[c] == model_bytes[c] for c in COMM_CATEGORIES),
        "unmodelled_calls": unmodelled_calls(records, last), "bytes_by_rank": by_rank,
        "loss_parallel": parallel, "loss_single": single, "loss_max_relative_difference": rel,
        "iteration_time_s": {"measured": sum(warm) / len(warm), "predicted": result.iteration_time_s,
                             "measured_per_iteration": times},
        "predicted_breakdown_s": result.breakdown_s,
        "measured_breakdown_s": {"rank": critical_rank, **time_by_category(records, critical_rank, last)},
        "cluster": {"name": predicted_on.name, "source": predicted_on.source},
        "cluster_file": cluster_to_dict(predicted_on),
        "events": events(records, last), "operator_spans": operator_spans(records, last),
    }
