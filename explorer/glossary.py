"""The symbols of the Cost page's formulas in words, and the textbook formula beside each term.

Meanings follow ../shared/DESIGN.md and explorer/symbols.py (one meaning per symbol); machine-level
symbols (g_node, L_cluster, ...) are named after the cluster's levels.

>>> import sympy as sp
>>> legend_rows([sp.Symbol("m")])
[('m', 'micro-batches per iteration, B / (b d)')]
>>> legend_rows([sp.Symbol("g_{node}")])[0][1]
'seconds per byte at the node level (1 / bandwidth)'
"""
from __future__ import annotations

import re

import sympy as sp

MEANINGS = {
    "b": "micro-batch size (sequences)", "B": "global batch size (sequences)", "s": "sequence length (tokens)",
    "h": "hidden size", "a": "attention heads", "a_{kv}": "key/value heads", "f": "FFN hidden size",
    "V": "vocabulary size", "l": "layers",
    "d": "data-parallel degree", "t": "operator (tensor) parallel degree", "p": "pipeline stages",
    "v": "model chunks per stage (interleaved schedule)", "m": "micro-batches per iteration, B / (b d)",
    "F": "peak FLOP/s of a device for the training dtype", "eta": "achieved fraction of F on large GEMMs",
    "phi": "GEMM FLOPs at which efficiency is half of η", "W_{hbm}": "HBM bytes/s actually achieved",
    "beta": "bytes per element of the training dtype (2 for bf16)", "tau_k": "kernel launch overhead (s)",
    "Sigma_T": "sum over stages of one micro-batch's forward + backward time (s)",
    "F_{max}": "forward time of the slowest stage, one micro-batch (s)",
    "B_{max}": "backward time of the slowest stage, one micro-batch (s)",
    "T_*": "forward + backward time of the most loaded stage, one micro-batch (s)",
    "Psi": "parameters per device on the synchronising stage",
}
_LEVEL = re.compile(r"^([gL])_\{?([A-Za-z0-9-]+)\}?$")

# Textbook forms of the categories whose symbolic term is a composition of many parts.
TEXTBOOK = {
    "bubble": (r"\frac{T_{\mathrm{bubble}}}{T_{\mathrm{ideal}}} = \frac{p-1}{v\,m} \;\;(v = 1 \text{ without "
               r"interleaving})", "Huang et al. (GPipe) 2019; Narayanan et al. SC'21 Sec. 2.2"),
    "dp_comm": (r"T = 2\,\frac{d-1}{d}\,\Psi\beta\,g + 2(d-1)\,L \;\;\text{(ring all-reduce)}",
                "Patarasuk & Yuan, JPDC 2009; Thakur et al., IJHPCA 2005"),
    "op_comm": (r"T = 4\,l_{\mathrm{stage}}\, m \cdot 2\,\frac{t-1}{t}\, b s h \beta\, g \;\;\text{(4 all-reduces per "
                r"layer)}", "Shoeybi et al., Megatron-LM 2019, Sec. 3"),
    "pp_comm": (r"T \approx 2\,m\,\frac{b s h \beta}{t}\, g \;\;\text{(each micro-batch's activations forward, "
                r"gradients back; scatter/gather)}", "Narayanan et al. SC'21 Sec. 4.1"),
    "zero_comm": (r"T_{\mathrm{ZeRO\text{-}3}} \approx 1.5 \times T_{\mathrm{all\text{-}reduce}}",
                  "Rajbhandari et al., ZeRO, SC'20 Sec. 7"),
}


def meaning(name: str) -> str | None:
    if name in MEANINGS:
        return MEANINGS[name]
    level = _LEVEL.match(name)
    if level:
        kind, where = level.groups()
        return (f"seconds per byte at the {where} level (1 / bandwidth)" if kind == "g"
                else f"latency of one step at the {where} level (s)")
    return None


def legend_rows(symbols) -> list:
    """(LaTeX, meaning) of each symbol that has one, sorted by LaTeX."""
    rows = {(sp.latex(sym), meaning(sym.name)) for sym in symbols if meaning(sym.name)}
    return sorted(rows, key=lambda row: row[0].lower())


def legend_of(symbolic_cost) -> list:
    """The legend of a SymbolicCost (explain()): every symbol its terms use, the bubble's included."""
    symbols = set(symbolic_cost.total.free_symbols)
    for expr in symbolic_cost.terms.values():
        symbols |= expr.free_symbols
    for sym, expr in symbolic_cost.definitions.items():
        symbols |= {sym} | expr.free_symbols
    symbols |= {sp.Symbol(n) for n in ("Sigma_T", "F_{max}", "B_{max}", "T_*", "m", "v")}
    return legend_rows(symbols)
