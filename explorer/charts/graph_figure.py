"""The operator graph (explorer.graph.build_graph, a networkx DiGraph) as a plotly figure.

Blocks (embedding, layers, head) sit in columns, wrapping every `wrap` blocks;
a collapsed block is one node, an expanded one stacks its operators. Nodes are
coloured by pipeline stage or operator-parallel degree (from the plan); hover
shows shapes, FLOPs, parameters and kept activation bytes, symbolic and with
the current numbers (`values`: symbol -> number, e.g. explain.symbol_values).
"""
from __future__ import annotations

import networkx as nx
import plotly.graph_objects as go
import sympy as sp

from explorer.limits import spend
from explorer.model.graph import build_graph

COLOUR_BY = ("stage", "degree")


def _number(expr, values: dict, cache: dict) -> float:
    if expr not in cache:
        cache[expr] = float(expr.xreplace(values) if isinstance(expr, sp.Basic) else expr)
    return cache[expr]


def _si(x: float, unit: str) -> str:
    for factor, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= factor:
            return f"{x / factor:.3g} {prefix}{unit}"
    return f"{x:.3g} {unit}"


def _shape(shape, values, cache) -> str:
    symbolic = ", ".join(str(dim) for dim in shape)
    numeric = ", ".join(f"{_number(dim, values, cache):.0f}" for dim in shape)
    return f"({symbolic}) = ({numeric})"


def contracted_graph(graph: nx.DiGraph, expanded) -> nx.DiGraph:
    """Operators of collapsed blocks merged into one node named after the block."""
    def keep(node):
        data = graph.nodes[node]
        return expanded == "all" or (data["block"].startswith("layer") and data["layer"] in expanded)
    mapping = {n: (n if keep(n) else graph.nodes[n]["block"]) for n in graph}
    out = nx.DiGraph()
    for n in graph:
        out.add_node(mapping[n])
        out.nodes[mapping[n]].setdefault("members", []).append(n)
    for u, v, data in graph.edges(data=True):
        a, b = mapping[u], mapping[v]
        if a != b:   # a chain edge wins over a residual one between the same two nodes
            residual = data["residual"] and out.edges[a, b]["residual"] if out.has_edge(a, b) else data["residual"]
            out.add_edge(a, b, residual=residual)
    return out


def _positions(the_plan, groups: dict, wrap: int) -> dict:
    """node -> (x, y): block columns left to right, bands of `wrap` columns top to bottom."""
    pos, names = {}, [p.block.name for p in the_plan.blocks]
    y0 = 0.0
    for start in range(0, len(names), wrap):
        band = names[start:start + wrap]
        height = max(len(groups[b]) for b in band)
        for col, block in enumerate(band):
            for row, node in enumerate(groups[block]):
                pos[node] = (col, y0 - row)
        y0 -= height + 1.5
    return pos


def _hover(node, members, graph, placed, values, cache) -> str:
    spend(f"describing operator {node!s:.40} of the graph")
    first = graph.nodes[members[0]]
    total = lambda key: sum(_number(graph.nodes[m][key], values, cache) for m in members)
    head = f"<b>{node}</b>" + ("" if len(members) == 1 else f" ({len(members)} operators)")
    lines = [head, f"stage {placed.stage}, split {placed.split.effective_preset} ×{placed.split.degree}"]
    if len(members) == 1:
        lines += [f"{first['kind']} ({first['role']})", "in " + _shape(first["in_shape"], values, cache),
                  "out " + _shape(first["out_shape"], values, cache)]
    lines += [f"FLOPs fwd {_si(total('flops_fwd'), 'FLOP')}, bwd {_si(total('flops_bwd'), 'FLOP')}",
              f"parameters {_si(total('params'), '')}",
              f"activations kept {_si(total('act_bytes'), 'B')} (one micro-batch, unsplit)"]
    return "<br>".join(lines)


def _edges(g: nx.DiGraph, pos: dict, residual: bool) -> go.Scatter:
    xs, ys = [], []
    for u, v, data in g.edges(data=True):
        if data["residual"] == residual and pos[v][0] >= pos[u][0]:   # no line back across a band wrap
            xs += [pos[u][0], pos[v][0], None]
            ys += [pos[u][1], pos[v][1], None]
    return go.Scatter(x=xs, y=ys, mode="lines", hoverinfo="skip", showlegend=False,
                      line=dict(width=1, color="#B0B0B0", dash="dot" if residual else "solid"))


# Discrete colours (Okabe & Ito 2008, without black): neighbouring stages never look alike.
DISCRETE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#999999")


def discrete_colours(values) -> tuple:
    """(colorscale, cmin, cmax, tick values): one flat colour per distinct value, so stage 0 and 1 (or
    degrees 4 and 8) are told apart at a glance and a single value gets a single colour, not a ramp."""
    distinct = sorted(set(values)) or [0]
    edges = [distinct[0] - 0.5] + [(a + b) / 2 for a, b in zip(distinct, distinct[1:])] + [distinct[-1] + 0.5]
    lo, hi = edges[0], edges[-1]
    scale = []
    for i in range(len(distinct)):
        colour = DISCRETE[i % len(DISCRETE)]
        scale += [[(edges[i] - lo) / (hi - lo), colour], [(edges[i + 1] - lo) / (hi - lo), colour]]
    return scale, lo, hi, distinct


def _stage_boundaries(the_plan, groups: dict, pos: dict) -> go.Scatter:
    """Dashed vertical lines between consecutive blocks on different pipeline stages."""
    xs, ys = [], []
    blocks = the_plan.blocks
    for before, after in zip(blocks, blocks[1:]):
        if before.stage == after.stage:
            continue
        nodes = groups.get(after.block.name, [])
        if not nodes:
            continue
        x, top = pos[nodes[0]]
        bottom = min(pos[n][1] for n in nodes)
        xs += [x - 0.5, x - 0.5, None]
        ys += [top + 0.6, bottom - 0.6, None]
    return go.Scatter(x=xs, y=ys, mode="lines", hoverinfo="skip", showlegend=False, name="stage boundaries",
                      line=dict(width=2, color="#C0392B", dash="dash"))


def graph_figure(the_plan, values: dict, expanded=(), colour_by: str = "stage", wrap: int = 16) -> go.Figure:
    """The plan's model as a graph; `expanded` = layer numbers to show as operators, or 'all'."""
    if colour_by not in COLOUR_BY:
        raise ValueError(f"colour_by must be one of {COLOUR_BY}")
    graph = build_graph(the_plan.model)
    g = contracted_graph(graph, expanded if expanded == "all" else frozenset(expanded))
    placed = {p.block.name: p for p in the_plan.blocks}
    groups = {}
    for node in g:
        groups.setdefault(graph.nodes[g.nodes[node]["members"][0]]["block"], []).append(node)
    pos = _positions(the_plan, groups, wrap)
    cache, nodes = {}, list(g)
    blocks = [placed[graph.nodes[g.nodes[n]["members"][0]]["block"]] for n in nodes]
    colour = [b.stage if colour_by == "stage" else b.split.effective_preset != "replicated" and b.split.degree or 1
              for b in blocks]
    text = [n.split(".")[-1] if "." in n else n.replace("layer", "L") for n in nodes]
    hover = [_hover(n, g.nodes[n]["members"], graph, b, values, cache) for n, b in zip(nodes, blocks)]
    fig = go.Figure([_edges(g, pos, False), _edges(g, pos, True), _stage_boundaries(the_plan, groups, pos)])
    scale, cmin, cmax, ticks = discrete_colours(colour)
    fig.add_scatter(x=[pos[n][0] for n in nodes], y=[pos[n][1] for n in nodes], text=text,
                    mode="markers+text" if len(nodes) <= 400 else "markers", textposition="top center",
                    textfont=dict(size=9), hovertext=hover, hoverinfo="text", showlegend=False,
                    marker=dict(size=14 if len(nodes) <= 400 else 8, color=colour, colorscale=scale, cmin=cmin,
                                cmax=cmax, line=dict(width=1, color="#333"), showscale=True,
                                colorbar=dict(title="stage" if colour_by == "stage" else "TP degree",
                                              tickvals=ticks, ticktext=[str(v) for v in ticks])))
    rows = max(1, int(-min(y for _, y in pos.values())) + 1)
    fig.update_layout(height=min(2400, 160 + 38 * rows), margin=dict(l=10, r=10, t=40, b=10),
                      title=f"{the_plan.model.name}: {len(nodes)} nodes, coloured by {colour_by}",
                      xaxis=dict(visible=False), yaxis=dict(visible=False), plot_bgcolor="white")
    return fig
