"""The key one BlockCost is kept under (explorer.cost.block.block_cost) and its summary and compiled function
found by (explorer.cost.summary, the disk cache): plain values, no sympy."""
from __future__ import annotations


def cost_key(block, preset: str, overrides: tuple, sequence_parallel: bool, recompute: str,
             incoming: str, cp: int = 1, cp_algo: str = "ring", overlap_tp: bool = False, load: float = 1.0,
             experts_by_seq: bool = False, host: tuple = ()) -> tuple:
    """The key block_cost() keeps one BlockCost under: the block's structure and every argument its
    expressions depend on (plain values: the disk cache finds its compiled functions by it)."""
    key = (block.key, block.kind, preset, overrides, sequence_parallel, recompute, incoming)
    if cp > 1:
        key += (cp, cp_algo)
    if overlap_tp:
        key += ("overlap_tp",)
    if block.routed:
        key += ((float(load), experts_by_seq),)
    if host:      # the host side's recipe (explorer/model/kernels.py Recipe), when not the eager default
        key += (("host",) + tuple(host),)
    return key
