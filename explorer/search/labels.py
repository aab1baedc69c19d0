"""Labels of chain_dp and the bucket that keeps a state's non-dominated ones."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from explorer.search.tables import A, B, F, GS, PSI


@dataclass(frozen=True, eq=False)
class Label:
    summary: tuple         # closed stages: (sum F+B, max F, max B, max Y)
    open: np.ndarray       # (ROWS, pp) sums of the open stages (closed columns are 0)
    closed: int            # bitmask of closed stages
    bound: float           # lower bound of the final time
    safe: bool             # even the largest completion stays within the memory cap
    parent: "Label | None"
    node: object
    stage: int


class Bucket:
    """One state's labels, none dominated by another; their keys kept as arrays.

    a dominates b when a's summary and its F, B, PSI and GS sums are no larger and
    its activations are no larger -- unless a is safe, when activations cannot matter.
    """

    def __init__(self):
        self.labels: list = []
        self._core = self._act = self._safe = None

    def insert(self, label: Label) -> None:
        core = np.concatenate([label.summary, label.open[[F, B, PSI, GS]].ravel()])
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
        out = Bucket()
        for label in sorted(self.labels, key=lambda lb: lb.bound)[:count]:
            out.insert(label)
        return out
