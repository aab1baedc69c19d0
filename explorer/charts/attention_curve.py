"""The attention kernel's efficiency curve of a cluster: fraction of peak against tokens per kernel call.

Drawn from explorer/hardware/attention.py (the same constants the cost tree prices with) for the
model's head dimension and mask, forward and backward, with the published benchmark points of the
kernel (assets/attention_kernels.json) and a marker at the strategy's tokens per call (s, or s/cp
for a ring step under context parallelism). The Cost page shows it with its source as the caption.
"""
from __future__ import annotations

import numpy as np

from explorer.charts.spec_figure import SpecFigure
from explorer.charts.palette import DEFAULT
from explorer.cost.numbers import hardware_numbers
from explorer.hardware import attention as att

TOKENS = np.geomspace(256, 262144, 120)


def kernel_head_dim(model) -> float:
    """The fused kernel's head dimension as the cost tree takes it (explorer/model/graph: head_dim,
    h/a, or the mean of latent attention's query/key and value sizes)."""
    if model.kv_lora_rank:
        return (model.qk_nope_head_dim + model.qk_rope_head_dim + model.v_head_dim) / 2
    return float(model.head_dim or model.hidden / model.heads)


def attention_curve_figure(model, strategy, cluster) -> tuple:
    """(figure, caption): the efficiency of the cluster's attention kernel by tokens per call."""
    hw = hardware_numbers(cluster, strategy.dtype, model.softmax_type)
    p, d = hw["attention"], kernel_head_dim(model)
    causal = model.family != "bert"
    attn = "bf16" if strategy.dtype == "fp8" else strategy.dtype
    found = att.kernel_for(cluster.device.name, attn, model.softmax_type)
    data = [dict(type="scatter", x=TOKENS, y=att.efficiency(p, TOKENS, d, causal, backward), mode="lines",
                 name=f"{name} ({'causal' if causal else 'no mask'}, head dim {d:g})", line=dict(color=colour))
            for backward, name, colour in ((False, "forward", DEFAULT["compute"]),
                                           (True, "backward", DEFAULT["recompute"]))]
    if found:
        for direction, mask, head_dim, n, eta in att.published_points(found[1], att.kernels()["seq_lens"]):
            data.append(dict(type="scatter", x=[n], y=[eta], mode="markers", showlegend=False,
                             marker=dict(symbol="circle-open", color="gray"),
                             hovertemplate=f"published {direction}, {'causal' if mask else 'no mask'}, head dim "
                                           f"{head_dim}: %{{y:.3f}} at %{{x}} tokens<extra></extra>"))
    n = att.call_tokens(model.seq_len, strategy.cp, strategy.cp_algo)
    # the whole figure in one call (explorer/charts/breakdown.py _figure); the strategy's tokens per call a dotted
    # vertical line with its label at the top right of it, as plotly's add_vline draws them
    fig = SpecFigure(dict(data=data, layout=dict(
        xaxis=dict(type="log", title=dict(text="tokens per kernel call")),
        yaxis=dict(title=dict(text="fraction of the 16-bit peak"), rangemode="tozero"),
        height=320, margin=dict(l=40, r=20, t=30, b=40),
        shapes=[dict(type="line", x0=n, x1=n, xref="x", y0=0, y1=1, yref="y domain",
                     line=dict(dash="dot", color="gray"))],
        annotations=[dict(showarrow=False, text=f"this strategy: {n:,.0f} tokens per call", x=n, xanchor="left",
                          xref="x", y=1, yanchor="top", yref="y domain")])))
    if found:
        name, entry = found
        caption = (f"{entry['kernel']} on {cluster.device.name} (kernel {name}): curve fitted to the published points "
                   f"(circles; mean error {100 * entry['fit']['error']['mean']:.1f} %, max "
                   f"{100 * entry['fit']['error']['max']:.1f} %). Source: {entry['source']}")
    else:
        caption = (f"No published attention-kernel benchmark is bundled for {cluster.device.name} in {attn}: the "
                   f"kernel is priced like a GEMM, at {p['eta_f']:.3g} of peak for every size "
                   "(assets/attention_kernels.json lists the kernels).")
    return fig, caption
