"""Pareto front of iteration time vs peak memory per device (both minimised).

>>> import numpy as np
>>> pareto_front(np.array([3.0, 1.0, 2.0, 2.0]), np.array([1.0, 3.0, 2.0, 5.0])).tolist()
[1, 2, 0]
"""
from __future__ import annotations

import numpy as np


def pareto_front(time_s: np.ndarray, memory_bytes: np.ndarray) -> np.ndarray:
    """Indices of the non-dominated points, fastest first; of equal points the first is kept.

    Sort by time (then memory); a point is on the front when its memory is
    below every faster point's -- the classic two-objective sweep (Kung, Luccio
    & Preparata, J. ACM 1975).
    """
    time_s, memory_bytes = np.asarray(time_s, float), np.asarray(memory_bytes, float)
    if time_s.size == 0:
        return np.zeros(0, dtype=int)
    order = np.lexsort((memory_bytes, time_s))
    mem_sorted = memory_bytes[order]
    best_before = np.minimum.accumulate(np.r_[np.inf, mem_sorted[:-1]])
    return order[mem_sorted < best_before]


def dominated(time_s, memory_bytes, i: int, j: int) -> bool:
    """Does point j dominate point i (no worse in both, better in one)?"""
    return bool(time_s[j] <= time_s[i] and memory_bytes[j] <= memory_bytes[i]
                and (time_s[j] < time_s[i] or memory_bytes[j] < memory_bytes[i]))
