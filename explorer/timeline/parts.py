"""The parts a super-step pass is drawn as, in order, each in one DESIGN.md category: ZeRO-3 gather,
recomputation, computation, operator-parallel collectives, expert all-to-alls, context-parallel
exchange, redistribution, point-to-point send."""
from __future__ import annotations

import numpy as np

from explorer.timeline.schedules import PASS_NAMES

PART_CATEGORIES = ("zero_comm", "recompute", "compute", "op_comm", "ep_comm", "cp_comm", "redistribution", "pp_comm")
ZERO_PART, RECOMPUTE_PART, COMPUTE_PART, OP_PART, CP_PART, SEND_PART = 0, 1, 2, 3, 5, 7
PART_KINDS = np.array([["zero_gather", name, name, name, name, "cp_exchange", name, "send"] for name in PASS_NAMES],
                      dtype=object)
"""passes x parts: the event kind of each part of each pass."""
