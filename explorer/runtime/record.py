"""What a rank records: every collective and point-to-point call, and compute spans.

Times are time.perf_counter() seconds (CLOCK_MONOTONIC on Linux: one clock for
all processes of a machine), so ranks' records line up without a clock sync.
Sizes follow explorer/cost/collectives.py: `size_bytes` is the whole array S
(all-reduce: the tensor; all-gather: the gathered output; reduce-scatter: the
input; p2p: the tensor sent) and `n` the group size, so the bytes a device sends
are collectives.bytes_per_device(kind, S, n) -- the model's own factors.
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Call:
    """One communication call on one rank."""

    kind: str            # all_reduce, all_gather, reduce_scatter, all_to_all, p2p
    role: str            # 'collective', 'send' or 'recv' (a recv sends nothing)
    category: str        # DESIGN.md cost category (op_comm, pp_comm, dp_comm, ...)
    op: str              # operator or boundary that needs it
    phase: str           # fwd, bwd or step
    size_bytes: int      # whole array S (see the module docstring)
    n: int               # group size
    iteration: int
    micro_batch: int     # -1 outside a micro-batch
    start_s: float
    end_s: float
    modelled: bool       # False: a call the cost model does not have (see `note`)
    note: str = ""


@dataclass(frozen=True)
class Span:
    """One compute interval on one rank."""

    kind: str            # forward, backward (a stage's pass), op (one operator's forward), optimizer
    op: str              # operator (op) or the stage's blocks joined by '+' 
    phase: str
    iteration: int
    micro_batch: int
    start_s: float
    end_s: float


class Recorder:
    """Collects one rank's calls and spans; `state` holds the current iteration and micro-batch."""

    def __init__(self):
        self.calls: list = []
        self.spans: list = []
        self.iteration = -1
        self.micro_batch = -1
        self.phase = "fwd"
        self.iteration_bounds: list = []     # (start_s, end_s) per iteration
        self.sync = None                     # on a GPU: torch.cuda.synchronize, so a span ends with its kernels

    def now(self) -> float:
        if self.sync is not None:
            self.sync()
        return time.perf_counter()

    def call(self, kind, role, category, op, size_bytes, n, start_s, end_s, modelled=True, note="", phase=None):
        self.calls.append(Call(kind, role, category, op, phase or self.phase, int(size_bytes), int(n),
                               self.iteration, self.micro_batch, start_s, end_s, modelled, note))

    def span(self, kind, op, start_s, end_s, phase=None):
        self.spans.append(Span(kind, op, phase or self.phase, self.iteration, self.micro_batch, start_s, end_s))

    def to_dict(self) -> dict:
        return {"calls": [asdict(c) for c in self.calls], "spans": [asdict(s) for s in self.spans],
                "iterations": [list(b) for b in self.iteration_bounds]}
