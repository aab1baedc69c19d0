"""Tables (pandas) from a Result: what the charts draw and the CSV exports hold.

>>> from explorer import load_model, load_cluster, Strategy, evaluate
>>> r = evaluate(load_model("tiny-gpt"), Strategy(dp=2, tp=2, pp=2, global_batch=8), load_cluster("classroom"))
>>> round(float(breakdown_table(r)["seconds"].sum()) / r.iteration_time_s, 12)
1.0
"""
from __future__ import annotations

import pandas as pd

from explorer.cost.superstep import CATEGORIES
from explorer.hardware.units import GIB
from explorer.search.report import MEGATRON_MFU_COLUMN

CATEGORY_LABELS = {"compute": "compute", "recompute": "recompute", "op_comm": "TP / operator comm",
                   "ep_comm": "EP all-to-all",
                   "redistribution": "redistribution", "pp_comm": "PP point-to-point", "bubble": "bubble",
                   "dp_comm": "DP gradient sync", "zero_comm": "ZeRO gathers", "optimizer": "optimizer",
                   "cp_comm": "CP context exchange"}
ROW_LABELS = {"host": "host issuing kernels"}
"""Gantt categories that are no cost category: the micro-step Gantt's host row (explorer.timeline.microstep
HOST_CATEGORY)."""
TRACE_LABELS = {**CATEGORY_LABELS, **ROW_LABELS}
"""Every category a chart draws -> the name classroom mode shows."""
COMM_PREFIX = {"op_comm": "TP", "ep_comm": "EP", "redistribution": "redistribution", "pp_comm": "PP",
               "dp_comm": "DP", "zero_comm": "ZeRO", "cp_comm": "CP"}
KIND_LABELS = {"all_reduce": "all-reduce", "all_gather": "all-gather", "reduce_scatter": "reduce-scatter",
               "all_to_all": "all-to-all", "p2p": "point-to-point",
               "reshard": "re-shard exchange"}
MEMORY_PARTS = ("params", "grads", "optimizer", "activations")


def breakdown_table(result) -> pd.DataFrame:
    """Exposed seconds by category (they sum to the iteration time) and their share."""
    total = result.iteration_time_s
    return pd.DataFrame({
        "category": list(CATEGORIES),
        "label": [CATEGORY_LABELS[c] for c in CATEGORIES],
        "seconds": [result.breakdown_s[c] for c in CATEGORIES],
        "share_%": [100 * result.breakdown_s[c] / total for c in CATEGORIES],
    })


def comm_label(category: str, kind: str) -> str:
    """'DP all-reduce', 'TP all-gather', 'PP point-to-point', 'ZeRO all-gather', ..."""
    if category == "pp_comm" and kind == "all_gather":
        return "PP scatter/gather (all-gather)"
    return f"{COMM_PREFIX.get(category, category)} {KIND_LABELS.get(kind, kind)}"


def comm_table(result, node_level: str) -> pd.DataFrame:
    """Result.comm_by_kind with a readable type and scope (intra-node = within `node_level`)."""
    rows = [{"type": comm_label(r["category"], r["kind"]), "category": r["category"], "kind": r["kind"],
             "level": r["level"], "scope": "intra-node" if r["level"] == node_level else "inter-node",
             "exposed_s": float(r["time_s"]), "hidden_s": float(r["hidden_s"]), "bytes": float(r["bytes"])}
            for r in result.comm_by_kind]
    columns = ["type", "category", "kind", "level", "scope", "exposed_s", "hidden_s", "bytes"]
    return pd.DataFrame(rows, columns=columns)


COMM_LABELS = {"type": "communication", "level": "machine level", "scope": "scope", "exposed_s": "exposed (s)",
               "hidden_s": "hidden under compute (s)", "bytes": "bytes sent per device"}
"""comm_table's columns as a page shows them (its category and kind ids stay in the CSV: the type says both)."""


def readable_comm_table(table: pd.DataFrame) -> pd.DataFrame:
    """comm_table as a page shows it: words, not ids (a lecturer's walk read op_comm, all_gather, exposed_s)."""
    return table.drop(columns=["category", "kind"]).rename(columns=COMM_LABELS)


def memory_table(result, capacity_bytes: float) -> pd.DataFrame:
    """Per stage (its most loaded device): GiB by part, total and the share of capacity."""
    rows = []
    for stage, mem in enumerate(result.memory_by_stage):
        row = {"stage": stage}
        row.update({f"{part}_GiB": mem[part] / GIB for part in MEMORY_PARTS})
        row["total_GiB"] = mem["total"] / GIB
        row["capacity_%"] = 100 * mem["total"] / capacity_bytes
        rows.append(row)
    return pd.DataFrame(rows)


SUMMARY_LABELS = {"strategy": "strategy", "iteration_s": "iteration (s)", "mfu_%": "MFU (%)",
                  "tflops_per_gpu": "TFLOP/s per GPU", "peak_memory_GiB": "peak memory (GiB)",
                  "rank": "#", "iteration_time_s": "iteration (s)", "peak_memory_gib": "peak memory (GiB)",
                  MEGATRON_MFU_COLUMN: "Megatron MFU (%)", "global_batch": "B (sequences)",
                  "hidden_comm_s": "hidden communication (s)",
                  **{f"{c}_s": f"{CATEGORY_LABELS[c]} (s)" for c in CATEGORIES}}
"""Readable column names of summary_table and of the search's rows (explorer/search/report.py rows): what a class
reads on the projector; the CSV and the CLI's JSON keep the short ones."""


def readable_columns(table: pd.DataFrame) -> pd.DataFrame:
    """The table with SUMMARY_LABELS as column names (the CSV keeps the short ones)."""
    return table.rename(columns=SUMMARY_LABELS)


def summary_table(results: dict, batches: dict | None = None) -> pd.DataFrame:
    """label -> Result, as one row each: totals side by side (the Compare page); `batches`: label -> the strategy's
    global batch B, a column when given (an iteration of another B is other work: a lecturer's walk compared 20.89
    s with 20.75 s where a preset had moved B from 1,536 to 2,048). The categories are exposed seconds; the hidden
    communication is a column of its own."""
    rows = []
    for label, r in results.items():
        row = {"strategy": label, "iteration_s": r.iteration_time_s, "mfu_%": 100 * r.mfu,
               "tflops_per_gpu": r.tflops_per_gpu, "peak_memory_GiB": r.memory_bytes_per_device["total"] / GIB}
        if batches is not None:
            row["global_batch"] = batches[label]
        row.update({f"{c}_s": r.breakdown_s[c] for c in CATEGORIES})
        row["hidden_comm_s"] = sum(r.hidden_s.values())
        rows.append(row)
    return pd.DataFrame(rows)
