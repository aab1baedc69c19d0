"""The tornado chart of a prediction's sensitivities: what the iteration time depends on.

One row per constant of the cluster file (the largest elasticities first, explorer.validation.sensitivity):
a bar for the constant raised by 1 %: the per cent by which the iteration time changes (the elasticity
d ln T / d ln c, linear to first order), with the categories whose terms carry the change in the hover text; each
constant named in words with its path (constant_name).
"""
from __future__ import annotations

import plotly.graph_objects as go

from explorer.charts.palette import DEFAULT
from explorer.charts.tables import CATEGORY_LABELS

SLOWER, FASTER = DEFAULT["redistribution"], DEFAULT["compute"]


CONSTANT_WORDS = {"peak_tflops": "peak", "gemm_max": "GEMM efficiency", "gemm_half_flops": "GEMM size at half efficiency",
                  "bandwidth_gbps": "bandwidth", "bandwidth_efficiency": "bandwidth efficiency", "latency_us": "latency",
                  "hbm_bandwidth_gbps": "HBM bandwidth", "hbm": "HBM efficiency", "kernel_launch_s": "kernel launch",
                  "host_launch_s": "host issue per kernel", "host_sync_s": "host synchronisation",
                  "memory_gib": "memory", "gemm_max_fp8": "FP8 GEMM efficiency"}
"""A cluster file's constant (its path's last parts) as a person reads it; the path stays beside it."""


def constant_name(path: str) -> str:
    """'levels.node.latency_us' -> 'node latency (levels.node.latency_us)'; 'device.peak_tflops.bf16' -> 'bf16
    peak (device.peak_tflops.bf16)'; a path of no known constant: the path."""
    parts = path.split(".")
    if parts[0] == "levels" and len(parts) == 3 and parts[2] in CONSTANT_WORDS:
        words = f"{parts[1]} {CONSTANT_WORDS[parts[2]]}"
    elif parts[0] == "device" and len(parts) == 3 and parts[1] in CONSTANT_WORDS:
        words = f"{parts[2]} {CONSTANT_WORDS[parts[1]]}"
    elif parts[-1] in CONSTANT_WORDS:
        words = CONSTANT_WORDS[parts[-1]]
    else:
        return path
    return f"{words} ({path})"


def tornado_figure(sens: dict, top: int = 10, title: str = "What this number depends on") -> go.Figure:
    """sens: explorer.validation.sensitivity.sensitivity(...). The `top` constants by elasticity size, one bar each:
    the change of the iteration time when the constant rises by 1 % (red: slower, blue: faster; lowering it by 1 %
    is the same bar mirrored, to first order -- two mirrored bars a row said nothing more and hid the direction)."""
    rows = [(name, x) for name, x in sens["elasticities"].items() if x][:top]
    names = [constant_name(name) for name, _ in rows]
    hover = [_parts(sens, name) for name, _ in rows]
    fig = go.Figure()
    values = [x for _, x in rows]
    fig.add_bar(y=names, x=values, orientation="h", name="constant +1 %", customdata=hover,
                marker_color=[SLOWER if v > 0 else FASTER for v in values],
                hovertemplate="%{y} +1 %: iteration time %{x:+.3f} %<br>%{customdata}<extra></extra>")
    fig.update_layout(title=title, showlegend=False, height=max(260, 110 + 32 * len(rows)),
                      margin=dict(l=10, r=10, t=60, b=10))
    # two short lines: in one, its end was cut at the chart's edge (a walk, 1280x720 and classroom mode)
    fig.update_xaxes(title="iteration time change, %, for the constant +1 %<br>red: slower · blue: faster",
                     zeroline=True, zerolinewidth=2, automargin=True)
    fig.update_yaxes(autorange="reversed", automargin=True)
    return fig


def _parts(sens: dict, name: str) -> str:
    """The categories carrying a constant's elasticity, largest first (hover text)."""
    parts = sorted(((c, row[name]) for c, row in sens["by_category"].items() if row.get(name)),
                   key=lambda item: -abs(item[1]))
    return "<br>".join(f"{CATEGORY_LABELS.get(c, c)}: {x:+.3f}" for c, x in parts[:4])


__all__ = ["constant_name", "tornado_figure"]
