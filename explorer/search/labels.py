"""Labels of chain_dp and the bucket that keeps a state's non-dominated ones."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from explorer.search.tables import A, B, F, GS, PE, PSI, W


@dataclass(frozen=True, eq=False)
class Label:
    summary: tuple         # closed stages: (sum F+B, max F, max B, max Y) -- what the bounds read
    done: np.ndarray       # (4, pp) closed stages' F, B - W, W and Y (what follows the pipeline); open ones 0
    open: np.ndarray       # (ROWS, pp) sums of the open stages (closed columns are 0)
    closed: int            # bitmask of closed stages
    bound: float           # lower bound of the final time
    safe: bool             # even the largest completion stays within the memory cap
    parent: "Label | None"
    node: object
    stage: int


class Bucket:
    """One state's labels, none dominated by another; their keys kept as arrays.

    a dominates b when its closed stages' F, B and Y and its open stages' F, B, PSI, GS and PE sums
    are no larger, stage by stage (B - W and W apart for a zero-bubble schedule, whose W passes
    run on their own), and its activations are no larger -- unless a is
    safe, when activations cannot matter. Stage by stage, because the iteration time follows the
    schedule's critical path (explorer.schedules.critical_path), which grows with every pass's
    duration but is no function of the stage sums and maxima alone. With `by_sums` (long pipelines,
    chain_dp.BY_SUMS_MICRO_BATCHES) the closed stages are compared by (sum F+B, max F, max B, max Y)
    instead: exact for the closed-form makespan, and off the critical path only by its fill and drain.
    """

    def __init__(self, split_weight: bool = False, by_sums: bool = False):
        self.split_weight = split_weight     # W matters apart from B (zero-bubble schedules) only
        self.by_sums = by_sums               # closed stages compared by their sum and maxima only
        self.labels: list = []
        self._core = self._act = self._safe = None

    def insert(self, label: Label) -> None:
        o, done = label.open, label.done
        if self.by_sums:
            core = np.concatenate([label.summary, o[F], o[B]] + ([o[W]] if self.split_weight else []) +
                                  [o[PSI], o[GS], o[PE]])
        elif self.split_weight:
            core = np.concatenate([done.ravel(), o[F], o[B] - o[W], o[W], o[PSI], o[GS], o[PE]])
        else:
            core = np.concatenate([done[0], done[1] + done[2], done[3], o[F], o[B], o[PSI], o[GS], o[PE]])
        act = label.open[A]
        if self.labels:
            beaten = (self._core <= core).all(1) & (self._safe | (self._act <= act).all(1))
            if beaten.any():
                return
            keep = ~((core <= self._core).all(1) & (label.safe | (act <= self._act).all(1)))
            self.labels = [lb for lb, k in zip(self.labels, keep) if k]
            self._core, self._act, self._safe = self._core[keep], self._act[keep], self._safe[keep]
            self._core, self._act = np.vstack([self._core, core]), np.vstack([self._act, act])
            self._safe = np.append(self._safe, label.safe)
        else:
            self._core, self._act, self._safe = core[None], act[None], np.array([label.safe])
        self.labels.append(label)

    def truncated(self, count: int) -> "Bucket":
        """The `count` labels of least bound (a heuristic cut: the result may not be exact)."""
        out = Bucket(self.split_weight, self.by_sums)
        for label in sorted(self.labels, key=lambda lb: lb.bound)[:count]:
            out.insert(label)
        return out
