"""Lower bounds of the final iteration time from a partial solution (chain_dp's branch and bound).

What is still to come adds, block by block, at least the least F, B, F+B and
PSI of any node the block can take (links add nothing negative). Bounds only
drop labels that cannot beat the incumbent, so they never change the optimum;
tests/test_search_dp.py checks that against brute force.
"""
from __future__ import annotations

import numpy as np

from explorer.search.tables import A, B, F, GS, PSI


class LowerBound:
    """bound(summary, open sums, closed mask, block i, stage s) <= the best final time."""

    def __init__(self, reach, objective, setting, stages):
        self.obj, self.set, self.pp, self.fixed = objective, setting, objective.pp, stages
        self._masks = {}
        pipe = lambda peak: float(objective.pipeline_total(0.0, peak, 0.0, setting.m, setting.chunks, setting.schedule))
        self.slope = pipe(1.0) - pipe(0.0)     # the pipeline formula's slope in max F + max B
        least = lambda nodes, f: min(float(f(nd.values[:, 0])) for nd in nodes)
        low = np.array([[least(nodes, lambda x: x[F]), least(nodes, lambda x: x[B]),
                         least(nodes, lambda x: x[F] + x[B]), least(nodes, lambda x: x[PSI]),
                         least(nodes, lambda x: x[GS])] for nodes in reach])
        high = np.array([[max(float(nd.values[k, 0]) for nd in nodes) for k in (PSI, A)] for nodes in reach])
        self.rest, self.rest_stage = self._rest(low, stages)     # columns F, B, F+B, PSI, GS (least)
        self.most, self.most_stage = self._rest(high, stages)    # columns PSI, A (largest)

    def _open(self, closed: int) -> np.ndarray:
        """Mask of the stages not yet closed (bit k of `closed`), one array per distinct mask."""
        if closed not in self._masks:
            self._masks[closed] = np.array([not (closed >> k) & 1 for k in range(self.pp)])
        return self._masks[closed]

    def _rest(self, per_block, stages):
        """Sums over the blocks after i: in all (n, k) and on each stage (n, k, pp)."""
        n, k = per_block.shape
        rest = np.vstack([np.cumsum(per_block[::-1], axis=0)[::-1][1:], np.zeros((1, k))])
        rest_stage = np.zeros((n, k, self.pp))
        if stages is not None:
            for i in range(n - 2, -1, -1):
                rest_stage[i] = rest_stage[i + 1]
                rest_stage[i, :, stages[i + 1]] += per_block[i + 1]
        return rest, rest_stage

    def safe(self, open_, closed, i, s) -> bool:
        """Would every open stage stay within the cap even if the rest took its largest nodes?"""
        st = self.set
        if self.fixed is not None:
            ranks = np.flatnonzero(self._open(closed))
            psi, act = (open_[[PSI, A]] + self.most_stage[i])[:, ranks]
        else:
            ranks, (psi, act) = s, open_[[PSI, A], s] + self.most[i]
        used = self.obj.memory(psi, act, st.m, st.chunks, st.zero, st.schedule, ranks=ranks)
        return bool(np.all(used <= st.cap_bytes))

    def _peaks(self, summary, open_, i, s):
        """Least final per-stage F, B, F+B and the least max F, max B, max (F+B)."""
        fb, rest = open_[F] + open_[B], self.rest[i]
        if self.fixed is not None:
            f_st, b_st = open_[F] + self.rest_stage[i, 0], open_[B] + self.rest_stage[i, 1]
            fb_st = fb + self.rest_stage[i, 2]
            return f_st, b_st, fb_st, max(summary[1], f_st.max()), max(summary[2], b_st.max()), fb_st.max()
        share = self.pp - s                    # the rest spreads over this stage and the later ones
        f_low = max(summary[1], open_[F, s], (open_[F, s] + rest[0]) / share)
        b_low = max(summary[2], open_[B, s], (open_[B, s] + rest[1]) / share)
        return open_[F], open_[B], fb, f_low, b_low, max(fb[s], (fb[s] + rest[2]) / share)

    def __call__(self, summary, open_, closed, i, s, limit: float = np.inf) -> float:
        """The pipeline formula is linear in max F + max B (slope c), which is at least
        max(max F bound + max B bound, max (F_s + B_s) bound). Under overlap the exposed
        sync of stage s is at least S_s - B_s / v (S_s: the sync not overlapped); the
        pipeline pays B_s at least at that rate -- c from the max term, plus 1/v from the
        sum when the stages are fixed -- so sum/v + c F_s + (c - 1/v) B_s + S_s bounds it too.
        Once the bound exceeds `limit` (the incumbent) it is returned as it stands."""
        st, c, v = self.set, self.slope, self.set.chunks
        f_st, b_st, fb_st, f_low, b_low, fb_low = self._peaks(summary, open_, i, s)
        total = summary[0] + (open_[F] + open_[B]).sum() + self.rest[i, 2]
        is_open = self._open(closed)
        ranks = np.flatnonzero(is_open)
        psi, split = ((open_[[PSI, GS]] + self.rest_stage[i, 3:5])[:, is_open])
        hides = st.zero == 3      # ZeRO-3 prefetch: open windows (F_s, B_s still grow) bound nothing; take them unbounded
        gather = st.gather_hidden  # ZeRO-1/2 parameter all-gather under the next forward: its window unbounded too
        bwd = np.full(psi.shape, 1e300) if st.overlap or hides else open_[B][is_open]
        y = self.obj.sync(psi, bwd, split, st.m, v, st.zero, st.overlap, ranks, st.schedule,
                          fwd=1e300 if hides or gather else 0.0, param_gather=gather).max(initial=summary[3])
        base = float(self.obj.pipeline_total(total, 0.0, 0.0, st.m, st.chunks, st.schedule))
        bound = base + c * max(f_low + b_low, fb_low, summary[1] + summary[2]) + y
        if bound > limit:       # pruned already: the tighter per-stage bound would change nothing
            return bound
        if st.overlap and not hides and (c >= 1 / v or self.fixed is not None):
            f_o, b_o, fb_o = f_st[is_open], b_st[is_open], fb_st[is_open]
            # the whole sync (less the parameter gather, taken as wholly hidden, when it overlaps)
            whole = self.obj.sync(psi, b_o, split, st.m, v, st.zero, False, ranks, st.schedule,
                                  fwd=1e300 if gather else 0.0, param_gather=gather)
            per_stage = np.maximum(c * f_o + (c - 1 / v) * b_o, (c - 1 / v) * fb_o + f_o / v) + whole
            bound = max(bound, base + float(per_stage.max()))
        return bound
