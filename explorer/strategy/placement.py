"""Where each rank sits, and which machine level each communication group crosses.

Ranks follow Megatron-LM's order: tensor (operator) parallel fastest, then data
parallel, then pipeline stage -- rank = stage*d*t + replica*t + tp_index
(Narayanan et al. SC'21 Sec 3; Megatron-LM initialize_model_parallel). A group
crosses level i when its ranks do not all sit in one unit of that level; units
are contiguous rank ranges, so the lowest and highest rank decide.
"""
from __future__ import annotations

from functools import lru_cache

from explorer.hardware.cluster import Cluster


@lru_cache(maxsize=4096)
def span_level(cluster: Cluster, low: int, high: int) -> int:
    """The innermost level one of whose units holds every rank from low to high."""
    unit = 1
    for i, level in enumerate(cluster.levels):
        unit *= level.fanout
        if low // unit == high // unit:
            return i
    return len(cluster.levels) - 1


@lru_cache(maxsize=4096)
def tp_level(cluster: Cluster, tp: int, dp: int, stage: int, degree: int) -> int:
    """Slowest level crossed by the degree-sized groups inside the stage's tp blocks."""
    if degree <= 1:
        return 0
    first = stage * dp * tp
    return max(span_level(cluster, first + r * tp + g * degree, first + r * tp + (g + 1) * degree - 1)
               for r in range(dp) for g in range(tp // degree))


@lru_cache(maxsize=4096)
def dp_level(cluster: Cluster, tp: int, dp: int, stage: int) -> int:
    """Slowest level crossed by the stage's data-parallel groups (one per tp index)."""
    if dp <= 1:
        return 0
    first = stage * dp * tp
    return max(span_level(cluster, first + i, first + (dp - 1) * tp + i) for i in range(tp))


@lru_cache(maxsize=4096)
def p2p_level(cluster: Cluster, tp: int, dp: int, stage_from: int, stage_to: int) -> int:
    """Slowest level crossed by the point-to-point pairs between two stages."""
    width = dp * tp
    low, high = sorted((stage_from, stage_to))
    return max(span_level(cluster, low * width + x, high * width + x) for x in range(width))


def levels_signature(cluster: Cluster, strategy, degrees) -> tuple:
    """Everything about levels a compiled program bakes in (tp and p2p levels per stage)."""
    return _signature(cluster, strategy.tp, strategy.dp, strategy.pp, strategy.chunks > 1,
                      tuple(sorted(set(degrees) | {strategy.tp})))


@lru_cache(maxsize=1024)
def _signature(cluster: Cluster, tp: int, dp: int, pp: int, wraps: bool, degrees: tuple) -> tuple:
    tp_levels = tuple(tp_level(cluster, tp, dp, s, k) for s in range(pp) for k in degrees)
    pairs = {(s, (s + 1) % pp) for s in range(pp)} if wraps else {(s, s + 1) for s in range(pp - 1)}
    p2p = tuple(p2p_level(cluster, tp, dp, a, b) for a, b in sorted(pairs))
    return tp_levels, p2p
