"""Measured vs modelled: a reference run's super-step Gantt over the model's, and bytes per category.

The run (explorer/runtime/measure.py run_strategy, or its saved JSON) holds the
measured intervals of its last iteration per rank; the model's are
explorer.timeline.superstep_events for the same model, strategy and cluster.
"""
from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from explorer.charts.palette import CATEGORY_COLOURS
from explorer.io.projector import time_axis
from explorer.charts.tables import CATEGORY_LABELS

COMM = ("op_comm", "redistribution", "pp_comm", "dp_comm", "zero_comm")
DRAW_ORDER = ("bubble", "compute", "optimizer") + COMM     # communication drawn over the passes holding it


def model_rows(model_events: pd.DataFrame) -> list:
    """The model's super-step events as plain rows (row label 'model · stage i')."""
    return [{"row": f"model · stage {int(e.stage)}", "stage": int(e.stage), "kind": e.kind, "category": e.category,
             "start_s": float(e.start_s), "end_s": float(e.end_s), "micro_batch": int(e.micro_batch),
             "operator": e.operator} for e in model_events.itertuples() if not e.hidden]


def gantt_overlay(measured: list, modelled: list, normalise: bool = False,
                  title: str = "Super-step: measured (ranks) vs model (stages)") -> go.Figure:
    """Horizontal bars (base = start) per row: each stage's model row above its ranks' measured rows.
    normalise: times as % of each side's own iteration, so shapes compare when the scales differ."""
    ends = {"measured": max((r["end_s"] for r in measured), default=1.0) or 1.0,
            "model": max((r["end_s"] for r in modelled), default=1.0) or 1.0}
    stages = sorted({r["stage"] for r in measured + modelled})
    order = []
    for stage in stages:
        order += sorted({r["row"] for r in modelled if r["stage"] == stage})
        order += sorted({r["row"] for r in measured if r["stage"] == stage},
                        key=lambda label: int(label.split()[1]))
    fig = go.Figure()
    unit = "% of the iteration" if normalise else "ms"
    for source, rows in (("model", modelled), ("measured", measured)):
        for category in DRAW_ORDER:
            part = [r for r in rows if r["category"] == category]
            if not part:
                continue
            scale = 100.0 / ends[source] if normalise else 1e3
            fig.add_trace(go.Bar(
                orientation="h", y=[r["row"] for r in part], base=[r["start_s"] * scale for r in part],
                x=[(r["end_s"] - r["start_s"]) * scale for r in part],
                name=CATEGORY_LABELS.get(category, category), legendgroup=category,
                showlegend=source == "model" or not any(m["category"] == category for m in modelled),
                marker={"color": CATEGORY_COLOURS.get(category, "#888888"),
                        "pattern": {"shape": "" if source == "model" else "/"}},
                customdata=[[r["kind"], r["micro_batch"], r.get("operator", ""), source] for r in part],
                hovertemplate="%{customdata[3]}: %{customdata[0]} mb %{customdata[1]} %{customdata[2]}"
                              f"<br>%{{base:.3g}} {unit} + %{{x:.3g}}<extra></extra>"))
    fig.update_layout(title=title, barmode="overlay", height=140 + 28 * len(order),
                      xaxis=dict(time_axis(unit) if unit == "ms" else {}, title=f"time ({unit})"), legend_title="category",
                      yaxis={"categoryorder": "array", "categoryarray": list(reversed(order))})
    return fig


def bytes_table(run: dict) -> pd.DataFrame:
    """Bytes per device per category: measured, the part the model does not have, model, and whether
    measured minus that part equals the model exactly."""
    rows = []
    for cat in COMM:
        measured = run["measured_bytes_per_device"][cat]
        extra = run["unmodelled_bytes_per_device"][cat]
        model = run["model_bytes_per_device"][cat]
        rows.append({"category": CATEGORY_LABELS.get(cat, cat), "measured (bytes)": measured,
                     "not in the model (bytes)": extra, "model (bytes)": model,
                     "measured - not modelled = model": measured - extra == model})
    return pd.DataFrame(rows)


def loss_table(run: dict) -> pd.DataFrame:
    return pd.DataFrame({"iteration": range(1, len(run["loss_parallel"]) + 1),
                         "loss, parallel run": run["loss_parallel"], "loss, one process": run["loss_single"]})


def microstep_overlay(run: dict, model_events: pd.DataFrame, layer: int, normalise: bool = False) -> go.Figure:
    """One layer's forward on its operator-parallel group, micro-batch 0 of data-parallel replica 0:
    the measured operator spans and collectives per rank (each from its own first operator) under the
    model's micro-step (explorer.timeline.microstep_events, forward phase)."""
    prefix = f"layer{layer}."
    replica0 = {r["rank"] for r in run.get("bytes_by_rank", []) if r["dp"] == 0}
    picked = [{"rank": s["rank"], "stage": s["stage"], "kind": "compute", "category": "compute",
               "operator": s["operator"][len(prefix):], "start_s": s["start_s"], "end_s": s["end_s"]}
              for s in run.get("operator_spans", []) if s["operator"].startswith(prefix) and s["micro_batch"] == 0]
    picked += [{"rank": e["rank"], "stage": e["stage"], "kind": e["kind"], "category": e["category"],
                "operator": e["operator"][len(prefix):], "start_s": e["start_s"], "end_s": e["end_s"]}
               for e in run["events"] if e["operator"].startswith(prefix) and e["micro_batch"] == 0
               and e["phase"] == "fwd" and e["category"] != "compute"]
    picked = [r for r in picked if not replica0 or r["rank"] in replica0]
    origin = {}
    for r in picked:
        origin[r["rank"]] = min(origin.get(r["rank"], r["start_s"]), r["start_s"])
    measured = [{**r, "row": f"rank {r['rank']} (stage {r['stage']})", "micro_batch": 0,
                 "start_s": r["start_s"] - origin[r["rank"]], "end_s": r["end_s"] - origin[r["rank"]]}
                for r in picked]
    stage = measured[0]["stage"] if measured else 0
    fwd = model_events[model_events["phase"] == "fwd"]
    modelled = [{"row": f"model · {e.row}", "stage": stage, "kind": e.kind, "category": e.category,
                 "start_s": float(e.start_s), "end_s": float(e.end_s), "micro_batch": 0, "operator": e.operator}
                for e in fwd.itertuples()]
    return gantt_overlay(measured, modelled, normalise,
                         title=f"Micro-step: layer {layer} forward, micro-batch 0 — measured (ranks) vs model")


def time_table(run: dict) -> pd.DataFrame:
    """Seconds per category in one iteration: the model's, and one rank's of the model's critical stage
    (measured_breakdown_s; absent from runs saved before it existed)."""
    measured = run.get("measured_breakdown_s", {})
    rows = []
    for cat, model in run.get("predicted_breakdown_s", {}).items():
        if model or measured.get(cat):
            rows.append({"category": CATEGORY_LABELS.get(cat, cat), "model (ms)": 1e3 * model,
                         f"measured, rank {measured.get('rank', '?')} (ms)": 1e3 * measured.get(cat, 0.0)})
    return pd.DataFrame(rows)
