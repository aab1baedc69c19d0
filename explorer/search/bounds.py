"""Lower bounds of the final iteration time from a partial solution (chain_dp's branch and bound).

What is still to come adds, block by block, at least the least F, B, F+B and
PSI of any node the block can take (links add nothing negative). Bounds only
drop labels that cannot beat the incumbent, so they never change the optimum;
tests/test_search_dp.py checks that against brute force.
"""
from __future__ import annotations

import numpy as np

from explorer.schedules import get as schedule_of
from explorer.search.tables import A, B, F, GS, PE, PSI, W


EXACT_BOUND_MICRO_BATCHES = 4
"""With fixed stages and at most this many micro-batches per stage, a label that survives the closed
bounds is bounded again by the critical path of its least values (where the pipeline's fill and
drain, about (p - 1)/m of the time, is worth the dearer bound)."""


class LowerBound:
    """bound(summaries, dones, open sums, closed mask, block i, stage s) <= the best final time of
    each label (vectorised over the labels of one state)."""

    def __init__(self, reach, objective, setting, stages):
        self.obj, self.set, self.pp, self.fixed = objective, setting, objective.pp, stages
        self.split_weight = schedule_of(setting.schedule).splits_weight
        self._masks = {}
        least = lambda nodes, f: min(float(f(nd.values[:, 0])) for nd in nodes)
        low = np.array([[least(nodes, lambda x: x[F]), least(nodes, lambda x: x[B]),
                         least(nodes, lambda x: x[F] + x[B]), least(nodes, lambda x: x[PSI]),
                         least(nodes, lambda x: x[GS]), least(nodes, lambda x: x[PE])] for nodes in reach])
        high = np.array([[max(float(nd.values[k, 0]) for nd in nodes) for k in (PSI, A, PE)] for nodes in reach])
        self.rest, self.rest_stage = self._rest(low, stages)     # columns F, B, F+B, PSI, GS, PE (least)
        self.most, self.most_stage = self._rest(high, stages)    # columns PSI, A, PE (largest)

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

    def safe(self, open_, closed, i, s) -> np.ndarray:
        """Per label (open_: labels x ROWS x pp): would every open stage stay within the cap even if
        the rest took its largest nodes?"""
        st = self.set
        if self.fixed is not None:
            ranks = np.flatnonzero(self._open(closed))
            psi, act, psi_e = (open_[:, [PSI, A, PE]] + self.most_stage[i])[:, :, ranks].transpose(1, 0, 2)
        else:
            ranks = s
            psi, act, psi_e = (open_[:, [PSI, A, PE], s] + self.most[i]).T
        used = self.obj.memory(psi, act, st.m, st.chunks, st.zero, st.schedule, ranks=ranks, psi_e=psi_e)
        return np.all(np.reshape(used, (open_.shape[0], -1)) <= st.cap_bytes, axis=1)

    def _peaks(self, summary, open_, i, s):
        """Per label: least final per-stage F, B, F+B and the least max F, max B, max (F+B)."""
        fb, rest = open_[:, F] + open_[:, B], self.rest[i]
        if self.fixed is not None:
            f_st, b_st = open_[:, F] + self.rest_stage[i, 0], open_[:, B] + self.rest_stage[i, 1]
            fb_st = fb + self.rest_stage[i, 2]
            return (f_st, b_st, fb_st, np.maximum(summary[:, 1], f_st.max(-1)), np.maximum(summary[:, 2], b_st.max(-1)),
                    fb_st.max(-1))
        share = self.pp - s                    # the rest spreads over this stage and the later ones
        f_low = np.maximum.reduce([summary[:, 1], open_[:, F, s], (open_[:, F, s] + rest[0]) / share])
        b_low = np.maximum.reduce([summary[:, 2], open_[:, B, s], (open_[:, B, s] + rest[1]) / share])
        return open_[:, F], open_[:, B], fb, f_low, b_low, np.maximum(fb[:, s], (fb[:, s] + rest[2]) / share)

    def __call__(self, summary, done, open_, closed, i, s, limit: float = np.inf) -> np.ndarray:
        """Per label, a lower bound of the final iteration time, max_r (end_r + Y_r) (each stage's end
        on the schedule's critical path plus what follows it, explorer.cost.superstep), from paths
        every schedule has: a stage cannot start before the forwards of the stages ahead of it have
        passed one micro-batch on (Σ_{l<r} F_l / v), then runs its own m micro-batches' passes,
        m (F_r + B_r), then its synchronisation Y_r; and the first micro-batch passes through every
        stage forward and back (Σ_r (F_r + B_r)). Closed stages (`done`: F, B, W, Y) count exactly;
        open ones with the least the rest of the chain can add, their Y with its overlap windows
        unbounded (it only shrinks as the windows grow). The labels of one state share `closed`
        (the stages close in order); summary is labels x 4, done labels x 4 x pp, open_ labels x
        ROWS x pp. Past `limit` (the incumbent) the cheap part is returned as it stands."""
        st, v, m = self.set, self.set.chunks, self.set.m
        f_st, b_st, fb_st, f_low, b_low, fb_low = self._peaks(summary, open_, i, s)
        total = summary[:, 0] + (open_[:, F] + open_[:, B]).sum(-1) + self.rest[i, 2]
        bound = np.maximum(total, m * fb_low)
        closed_mask = ~self._open(closed)
        fwd_all = done[:, 0] + open_[:, F]                       # closed exact, open so far (a lower bound)
        ahead = _before(fwd_all) / v
        if closed_mask.any():
            bound = np.maximum(bound, (ahead + m * (done[:, 0] + done[:, 1]) + done[:, 3])[:, closed_mask].max(-1))
        is_open = self._open(closed)
        ranks = np.flatnonzero(is_open)
        if ranks.size:
            psi, split, psi_e = (open_[:, [PSI, GS, PE]] + self.rest_stage[i, 3:6])[:, :, is_open].transpose(1, 0, 2)
            hides = st.zero == 3 or st.gather_hidden or st.overlap
            bwd = np.full(psi.shape, 1e300) if hides else open_[:, B][:, is_open]
            y = self.obj.sync(psi, bwd, split, m, v, st.zero, st.overlap, ranks, st.schedule,
                              fwd=1e300 if hides else 0.0, param_gather=st.gather_hidden, psi_e=psi_e)
            bound = np.maximum(bound, (ahead[:, is_open] + m * fb_st[:, is_open] + y).max(-1))
        if not self.split_weight:
            # then the last micro-batch's backward climbs from stage r's last pass to stage 0, which
            # synchronises after it: Σ_{l<r} F_l / v + m (F_r + B_r) + Σ_{l<r} B_l / v + Y_0
            per_stage = np.where(is_open, fb_st, done[:, 0] + done[:, 1] + done[:, 2])
            bwd_low = np.where(is_open, b_st, done[:, 1] + done[:, 2])
            y0 = done[:, 3, 0] if not is_open[0] else y[:, 0]
            bound = np.maximum(bound, (ahead + m * per_stage + _before(bwd_low) / v).max(-1) + y0)
        if self.fixed is None or m > EXACT_BOUND_MICRO_BATCHES * self.pp:
            return bound
        # stages fixed: every stage's least final F, B and Y are known, and the critical path is
        # monotone in each, so the exact time of those least values bounds it (tighter, dearer)
        near = np.flatnonzero(bound <= limit)
        if not near.size:
            return bound
        ys = done[near, 3].copy()
        if ranks.size:
            ys[:, is_open] = y[near]
        if self.split_weight:     # B - W and W passes each at least what they hold already
            b_open, w_open = open_[near, B], open_[near, W]
        else:                     # W plays no part: B at its least final value
            b_open, w_open = b_st[near], 0.0
        fwd = np.where(is_open, f_st[near], done[near, 0])
        bwd = np.where(is_open, b_open, done[near, 1] + done[near, 2])
        ends = self.obj.stage_ends(fwd, bwd, m, v, st.schedule, np.where(is_open, w_open, done[near, 2]))
        bound[near] = np.maximum(bound[near], (ends + ys).max(-1))
        return bound


def _before(x: np.ndarray) -> np.ndarray:
    """Σ_{l<r} x_l along the last axis (stages)."""
    return np.concatenate([np.zeros(x.shape[:-1] + (1,)), np.cumsum(x, axis=-1)[..., :-1]], axis=-1)
