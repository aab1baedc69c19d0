"""What a pipeline schedule is, and the pass kinds its orders use.

A schedule's formulas are sympy expressions built on first use (`formulas`), so
that the rules and the numeric path (names, flags, orders) never import sympy."""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Callable

F, B, W = 0, 1, 2
PASS_NAMES = ("forward", "backward", "weight")
"""Pass kinds: F forward, B backward (input gradient only when the schedule splits the
weight gradient off), W weight gradient (zero-bubble schedules)."""


def input_of(kind: int, i: int, c: int, j: int, p: int, v: int):
    """The pass (stage, kind, chunk, micro-batch) whose end pass (kind, stage i, chunk c, micro-batch j)
    waits for, or None: a forward for the same chunk's forward on the stage before, or on the first
    stage the previous chunk's on the last stage; a backward for the next stage's, or on the last
    stage the next chunk's on the first, the last chunk's for its own forward; W only for its own B,
    which every order runs earlier on the same stage. The one dependency rule of the timeline's
    simulation and of the critical path (Narayanan et al. SC'21 Sec 2.2)."""
    if kind == F:
        if i > 0:
            return (i - 1, F, c, j)
        return None if c == 0 else (p - 1, F, c - 1, j)
    if kind == B:
        if i < p - 1:
            return (i + 1, B, c, j)
        return (0, B, c + 1, j) if c < v - 1 else (i, F, c, j)
    return None


def _aggregates() -> dict:
    import sympy as sp

    from explorer.symbols import B_max, B_r, F_max, F_r, S_T, StageMax, StageSum, T_star, W_r, X_max, X_sum
    return {
        S_T: StageSum(F_r + B_r),          # Σ_T: sum over stages of one micro-batch's forward + backward
        F_max: StageMax(F_r),              # the slowest forward
        B_max: StageMax(B_r),              # the slowest backward
        T_star: StageMax(F_r + B_r),       # T_*: the most loaded stage's forward + backward
        X_sum: StageSum(sp.Max(F_r, B_r - W_r, F_r + B_r - 2 * W_r)),   # zero-bubble schedules' warm-up terms
        X_max: StageMax(sp.Max(F_r, B_r - W_r, F_r + B_r - 2 * W_r)),
    }


def __getattr__(name: str):
    """AGGREGATES: the stage reductions a schedule's formulas use, as named aggregates of the
    per-stage symbols (built with sympy on first use)."""
    if name == "AGGREGATES":
        globals()["AGGREGATES"] = value = _aggregates()
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@dataclass(frozen=True)
class Schedule:
    """One pipeline schedule. makespan and bubble are its closed forms in the AGGREGATES symbols
    (Σ_T, F_max, ...) and m, v, p: exact for equal stages (GPipe's for any), what the search's
    partition DP prices from stage sums. stage_end, in_flight and overlap_window are per stage (r,
    F_r, B_r, W_r): stage_end is the end of stage r's last pass, the exact critical path (fidelity
    issue, E8) that the super-step reads. `formulas()` returns those five sympy expressions (and,
    optionally, `sync_exposed`: rest -> the exposed part of an overlapped sync); they are read as
    attributes."""

    name: str
    title: str
    source: str                       # paper and section the order and formulas come from
    order: Callable                   # (p, m, v) -> per stage, a list of (pass, chunk, micro_batch)
    formulas: Callable                # () -> {makespan, bubble, in_flight, overlap_window, stage_end}
    chunked: bool = False             # v > 1 model chunks per stage
    splits_weight: bool = False       # the backward is split into B (input grad) and W (weight grad)
    min_stages: int = 1
    micro_batches_multiple_of_stages: bool = False
    micro_batches_at_least_stages: bool = False
    warmup: Callable | None = None    # (p, r, v) -> forwards stage r runs before its first backward when
    #                                   micro-batches are plenty (None: read off the order)

    @cached_property
    def _formulas(self) -> dict:
        return self.formulas()

    @property
    def makespan(self):
        """Seconds from the first forward to the last backward pass (sympy)."""
        return self._formulas["makespan"]

    @property
    def stage_end(self):
        """Per stage: seconds from the first forward to the end of stage r's last pass (sympy)."""
        return self._formulas["stage_end"]

    @property
    def bubble(self):
        """Idle seconds of the most loaded stage in that span (sympy)."""
        return self._formulas["bubble"]

    @property
    def in_flight(self):
        """Micro-batches whose activations stage r holds at its peak (sympy)."""
        return self._formulas["in_flight"]

    @property
    def overlap_window(self):
        """Per stage: seconds the gradient sync may hide under (sympy)."""
        return self._formulas["overlap_window"]

    @cached_property
    def backwards_adjacent(self) -> bool:
        """On one stage, do two micro-batches' backwards run back to back (GPipe), or does a forward
        come between them (1F1B)? Read off the schedule's own order for p = 1, m = 2."""
        passes = [kind for kind, _, _ in self.order(1, 2, 1)[0] if kind != W]
        first = passes.index(B)
        return passes[first + 1] == B

    def exposed_sync(self, rest):
        """Per stage: the part of the overlapped gradient sync `rest` (seconds, sympy) left after
        stage r's last pass: the schedule's own rule `sync_exposed(rest)` where its syncs start at
        several points (interleaved chunks), else what exceeds overlap_window."""
        rule = self._formulas.get("sync_exposed")
        if rule is not None:
            return rule(rest)
        from explorer.symbols import QuickMax
        return QuickMax(0, rest - self.overlap_window)
