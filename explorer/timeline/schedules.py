"""The order in which each pipeline stage runs its passes (one iteration), from the registry.

An order is, per stage, a list of (pass, chunk, micro_batch) with pass F
(forward), B (backward; input gradient only under ZB-H1) or W (ZB-H1's weight
gradient). Each schedule's order lives with the rest of the schedule
(explorer.schedules); start times come from simulate.py.
"""
from __future__ import annotations

from explorer.schedules import NAMES as SCHEDULES
from explorer.schedules import get
from explorer.schedules.base import B, F, PASS_NAMES, W
from explorer.schedules.gpipe import order as gpipe
from explorer.schedules.interleaved import order as interleaved
from explorer.schedules.one_f_one_b import order as one_f_one_b
from explorer.schedules.zb_h1 import order as zb_h1

__all__ = ["B", "F", "PASS_NAMES", "SCHEDULES", "W", "gpipe", "interleaved", "one_f_one_b", "order_for", "zb_h1"]


def order_for(schedule: str, p: int, m: int, v: int = 1) -> list:
    """The per-stage order of `schedule` (one of SCHEDULES)."""
    return get(schedule).order(p, m, v)
