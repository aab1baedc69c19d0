"""The symbol glossary (assets/glossary.json): every symbol of the cost formulas with its meaning,
unit and source, for the Cost page and the LaTeX export; the legend of one explained cost and the
textbook formula beside each term (the Cost page, the lessons).

>>> next(g for g in glossary() if g["symbol"] == "m")["unit"]
'count'
"""
from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path

import sympy as sp

GLOSSARY = Path(__file__).resolve().parents[2] / "assets" / "glossary.json"
FIELDS = ("symbol", "latex", "meaning", "unit", "source")


@lru_cache(maxsize=1)
def _load() -> tuple:
    entries = json.loads(GLOSSARY.read_text(encoding="utf-8"))
    return tuple({key: str(entry[key]) for key in FIELDS} for entry in entries)


def glossary() -> list:
    """Entries (symbol, latex, meaning, unit, source), in the order of the file."""
    return [dict(entry) for entry in _load()]


_LEVEL = re.compile(r"^([gL])_\{?([A-Za-z0-9-]+)\}?$")
_STAGE_END = re.compile(r"^T\^\{end\}_\{?(\d+)\}?$")

# The bubble has one meaning on every page (issue 30): the cost model's bubble category, the critical stage's
# idle time in one iteration (explorer/cost/superstep.py), in seconds or as a share of the iteration. The two
# other measures of pipeline idleness the app shows are named apart from it:
BUBBLE_MEANING = ("the bubble: the critical stage's idle time in one iteration (the pipeline filling and "
                  "draining), the cost model's bubble category; its share is of the iteration time")
IDLE_TO_IDEAL = "idle-to-ideal ratio"       # (p-1)/(v m): the textbook's idle time over the bubble-free time
STAGES_IDLE = "idle share of all stages"   # a timeline's idle seconds, every stage's, over stages x makespan

# Textbook forms of the categories whose symbolic term is a composition of many parts.
TEXTBOOK = {
    "compute": (r"T \approx m\, l_{\mathrm{stage}}\, \frac{72\, b s h^2 \left(1 + \frac{s}{6h}\right)}{t\, F \eta}"
                r" \;\;\text{(forward + backward)}",      # short: it fits a 1280 px projector (the explanation: the source)
                "Narayanan et al. SC'21 Eq. 3 without the recomputation's forward: a dense layer's forward is "
                "24 b s h^2 (1 + s/6h) FLOPs, its backward twice that (72 = 3 x 24); Korthikanti et al. 2022 Sec. 4"),
    "bubble": (r"\frac{T_{\mathrm{bubble}}}{T_{\mathrm{ideal}}} = \frac{p-1}{v\,m} \;\;(v = 1 \text{ without "
               r"interleaving})", "Huang et al. (GPipe) 2019; Narayanan et al. SC'21 Sec. 2.2"),
    "dp_comm": (r"T = 2\,\frac{d-1}{d}\,\Psi\beta\,g + 2(d-1)\,L \;\;\text{(ring all-reduce)}",
                "Patarasuk & Yuan, JPDC 2009; Thakur et al., IJHPCA 2005"),
    "op_comm": (r"T = 4\,l_{\mathrm{stage}}\, m \cdot 2\,\frac{t-1}{t}\, b s h \beta\, g \;\;\text{(4 all-reduces per "
                r"layer)}", "Shoeybi et al., Megatron-LM 2019, Sec. 3"),
    "pp_comm": (r"T \approx 2\,m\,\frac{b s h \beta}{t}\, g \;\;\text{(each micro-batch's activations forward, "
                r"gradients back; scatter/gather)}", "Narayanan et al. SC'21 Sec. 4.1"),
    "ep_comm": (r"T = 4\, l_{\mathrm{moe}}\, m \cdot \frac{e-1}{e}\, \frac{b s k h \beta}{t}\, g \;\;\text{(dispatch + "
                r"combine, fwd + bwd)}",
                "Lepikhin et al., GShard, ICLR'21 Sec. 2.2; Megatron-Core MoEAlltoAllTokenDispatcher"),
    "zero_comm": (r"T_{\mathrm{ZeRO\text{-}3}} \approx 1.5 \times T_{\mathrm{all\text{-}reduce}}",
                  "Rajbhandari et al., ZeRO, SC'20 Sec. 7"),
    "cp_comm": (r"T = l_{\mathrm{stage}}\, m\, (cp-1) \left[\max(0, K\!V g_c - T_{\mathrm{attn}}/cp) + "
                r"\max(0, 2 K\!V g_c - T'_{\mathrm{attn}}/cp)\right],\; K\!V = \frac{2 b s h \beta\, a_{kv}}{a\, t\, cp}"
                r"\;\;\text{(ring: K/V around the cp ring, hidden under attention)}",
                "Liu et al., Ring Attention 2023; Megatron-LM context parallelism (Transformer Engine)"),
}
DENSE_ONLY = ("compute",)
"""TEXTBOOK forms that hold for dense transformer layers only: an MoE layer runs k of E experts of their own width
(and a router, a dispatch and a combine), which 72 b s h^2 does not count (a lecturer's walk: Qwen3-30B-A3B's
compute 1.004 s beside a form that gives 0.52 s). The Cost page leaves them out for MoE models."""



@lru_cache(maxsize=1)
def _by_latex() -> dict:
    return {entry["latex"]: entry["meaning"] for entry in _load()}


def meaning(name: str) -> str | None:
    """The glossary's meaning of the sympy symbol called `name` (levels: g_node, L_cluster, ...)."""
    found = _by_latex().get(sp.latex(sp.Symbol(name)))
    if found:
        return found
    end = _STAGE_END.match(name)
    if end:
        return f"time at which stage {end.group(1)}'s last pass ends (the schedule's critical path)"
    level = _LEVEL.match(name)
    if level:
        kind, where = level.groups()
        return (f"seconds per byte at the {where} level (1 / bandwidth)" if kind == "g"
                else f"latency of one step at the {where} level (s)")
    return None


def legend_rows(symbols) -> list:
    """(LaTeX, meaning) of each symbol that has one, sorted by LaTeX.

    >>> legend_rows([sp.Symbol("m")])[0][0]
    'm'
    """
    rows = {(sp.latex(sym), meaning(sym.name)) for sym in symbols if meaning(sym.name)}
    return sorted(rows, key=lambda row: (row[0].lower(), row))     # ties (L and l) in one order everywhere


def legend_of(symbolic_cost) -> list:
    """The legend of a SymbolicCost (explain()): every symbol its terms use, the bubble's included."""
    symbols = set(symbolic_cost.total.free_symbols)
    for expr in list(symbolic_cost.terms.values()) + list(symbolic_cost.compact.values()):
        symbols |= expr.free_symbols
    for sym, expr in symbolic_cost.definitions.items():
        symbols |= {sym} | expr.free_symbols
    return legend_rows(symbols)
