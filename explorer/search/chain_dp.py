"""Label-setting dynamic programming along the block chain (used by layer_dp and partition).

A *state* is (node chosen for block i, its stage); a *label* is one partial
solution reaching it: its closed stages' F, B - W, W and Y (what follows the
pipeline on that stage), with their sum and maxima for the bounds, and the sums
of the stages still open. A label is dropped when another at its state is no
larger in every component, stage by stage (Pareto dominance: the multi-criteria
labelling of Martins, EJOR 16, 1984), exact for the time evaluate() prices,

    T = max_s (end_s + Y_s(Psi_s, GS_s, B_s)),

end_s the end of stage s's last pass on the schedule's critical path
(explorer.schedules.critical_path; fidelity issue, E8 and E9), since a longest
path never shrinks when a pass grows -- and Y's exposed sync under overlap,
max(0, sync - B_s / v), shrinks by at most what end_s grows (stage s's last pass,
one chunk's backward, lies on the path to it). Past BY_SUMS_MICRO_BATCHES micro-batches per
stage, closed stages are compared by their sum and maxima instead (the critical path departs from
the closed forms only in the pipeline's fill and drain). Memory only grows along the chain,
so over-the-cap labels go at once, and labels whose lower bound (bounds.py)
exceeds the incumbent go too (branch and bound).
"""
from __future__ import annotations

from dataclasses import dataclass
from math import inf

import numpy as np

from explorer.cost import layouts as lay
from explorer.errors import ExplorerError
from explorer.limits import spend
from explorer.schedules import get as schedule_of
from explorer.search.bounds import LowerBound
from explorer.search.labels import Bucket, Label
from explorer.search.objective import param_gather_with
from explorer.search.tables import A, B, B_FROM, B_TO, F, F_FROM, F_TO, GS, PE, PSI, ROWS, W, stage_sums


BY_SUMS_MICRO_BATCHES = 16
"""Beyond this many micro-batches per stage, labels' closed stages are compared by their sum and maxima
(labels.Bucket by_sums): the pipeline's fill and drain, where the critical path departs from the
closed forms, is then at most about (p - 1)/m < 1/16 of the time, and stage-by-stage dominance keeps
~5x more labels (Qwen3-235B on 256 H100s: 104k label extensions against 21k). Every result is still
priced on the critical path."""


@dataclass(frozen=True)
class Setting:
    """The numbers of one global choice that the objective needs."""

    m: int                 # micro-batches per iteration
    chunks: int            # v
    zero: int
    overlap: bool
    schedule: str
    cap_bytes: float       # memory cap per device
    param_gather: bool | None = None   # parameter all-gather under the next forward (None: with overlap, ZeRO-1/2)

    @property
    def gather_hidden(self) -> bool:
        """Is the ZeRO-1/2 parameter all-gather overlapped with the next forward?"""
        return param_gather_with(self.zero, self.overlap, self.param_gather)


@dataclass(frozen=True)
class Solution:
    splits: tuple          # LayerSplit per layer
    stages: tuple          # stage of every block (embedding, layers, head)
    time_s: float
    memory_bytes: float
    exact: bool            # False when labels were cut to max_labels somewhere


class ChainDP:
    """Choose each block's split among `choices[i]` and (if `stages` is None) the cuts."""

    def __init__(self, chain, objective, setting: Setting, choices, stages=None):
        self.chain, self.obj, self.set = chain, objective, setting
        self.choices, self.fixed, self.pp = choices, stages, objective.pp
        self.layers_after = np.cumsum([chain.is_layer(i) for i in range(chain.n)][::-1])[::-1]
        self.last = {s: i for i, s in enumerate(stages)} if stages is not None else None
        self.bound = LowerBound(self._reach(), objective, setting, stages)

    def _reach(self) -> list:
        """Every node each block can take (any split, any layout its producer may hand it, any
        stage it may sit on)."""
        stages = lambda i: (self.fixed[i],) if self.fixed is not None else range(self.pp)
        reach = [{self.chain.node(0, None, lay.R, 0)}]
        for i in range(1, self.chain.n):
            incoming = {prev.cost.layout_out for prev in reach[-1]}     # a node depends on its producer's layout
            reach.append({self._node(i, x, layout, t) for layout in incoming
                          for x in self.choices[i] for t in stages(i)} - {None})
        return reach

    def _node(self, i: int, split, incoming: str, stage: int):
        """Block i under `split` on `stage`, or None when the split does not apply to its operators."""
        return self.chain.try_node(i, split, incoming, stage)

    def _next_stages(self, i: int, s: int):
        if self.fixed is not None:
            return (self.fixed[i],)
        if not self.chain.is_layer(i) or i == 1:
            return (s,)
        after = self.layers_after[i + 1] if i + 1 < self.chain.n else 0
        return tuple(t for t in (s, s + 1) if t < self.pp and after >= self.pp - 1 - t)

    def _closes(self, i: int, s: int, s_next: int) -> bool:
        return s != s_next and (self.fixed is None or self.last[s] == i)

    def _sync(self, open_, s):
        """What follows the pipeline on stage s (explorer.cost.superstep's 'after'); open_ is
        ROWS x pp, or labels x ROWS x pp (then one value per label)."""
        st = self.set
        o = open_[..., s]
        return self.obj.sync(o[..., PSI], o[..., B], o[..., GS], st.m, st.chunks, st.zero, st.overlap,
                             s, st.schedule, fwd=o[..., F], param_gather=st.gather_hidden, psi_e=o[..., PE])

    def _extend(self, parents: list, nodes: list, i: int, prev_s: int, s: int, limit: float) -> list:
        """Block i as nodes[k] on stage s after parents[k] (labels on stage prev_s), every pair at once
        (arrays over the pairs: they share the stages closed before); the new labels within the cap
        and the incumbent, as (pair index, label)."""
        count = len(parents)
        links = {}
        link = np.stack([links.setdefault((id(lb.node), id(nd)), self.chain.link(i, lb.node, nd, prev_s, s)[:, 0])
                         for lb, nd in zip(parents, nodes)])                   # pairs x 4
        open_ = np.stack([lb.open for lb in parents])                # pairs x ROWS x pp
        open_[:, F, prev_s] += link[:, F_FROM]
        open_[:, B, prev_s] += link[:, B_FROM]
        summary = np.array([lb.summary for lb in parents])          # pairs x 4
        done = np.stack([lb.done for lb in parents])                # pairs x 4 x pp
        closed = parents[0].closed
        if self._closes(i - 1, prev_s, s):
            y = np.broadcast_to(self._sync(open_, prev_s), (count,))
            fs, bs, ws = open_[:, F, prev_s], open_[:, B, prev_s], open_[:, W, prev_s]
            done[:, :, prev_s] = np.stack([fs, bs - ws, ws, y], axis=1)
            summary = np.stack([summary[:, 0] + fs + bs, np.maximum(summary[:, 1], fs),
                                np.maximum(summary[:, 2], bs), np.maximum(summary[:, 3], y)], axis=1)
            closed |= 1 << prev_s
            open_[:, :, prev_s] = 0.0
        open_[:, :, s] += np.stack([nd.values[:, 0] for nd in nodes])
        open_[:, F, s] += link[:, F_TO]
        open_[:, B, s] += link[:, B_TO]
        st = self.set
        used = self.obj.memory(open_[:, PSI, s], open_[:, A, s], st.m, st.chunks, st.zero, st.schedule, ranks=s,
                               psi_e=open_[:, PE, s])
        fits = np.flatnonzero(np.broadcast_to(used, (count,)) <= st.cap_bytes)
        if not fits.size:
            return []
        summary, done, open_ = summary[fits], done[fits], open_[fits]
        bound = self.bound(summary, done, open_, closed, i, s, limit)
        keep = np.flatnonzero(bound <= limit)
        if not keep.size:
            return []
        safe = self.bound.safe(open_[keep], closed, i, s).tolist()
        return [(pair, Label(tuple(summary[k].tolist()), done[k], open_[k], closed, float(bound[k]), ok,
                             parents[pair], nodes[pair], s))
                for k, ok, pair in zip(keep.tolist(), safe, fits[keep].tolist())]

    def _step(self, states: dict, i: int, limit: float, split: bool, by_sums: bool) -> dict:
        """The states after block i: every label of every state extended by every node block i can
        take next, in one array pass per pair of stages (from, to), inserted in the order a label at
        a time would insert them (so ties keep the same label)."""
        spend(f"placing block {i} of {self.chain.n} (dynamic programming, {len(states):,} states)")
        pairs = {}                                       # (from stage, to stage) -> (parents, nodes, order)
        order = 0
        for (prev, s), bucket in states.items():
            for x in self.choices[i]:
                for t in self._next_stages(i, s):
                    node = self._node(i, x, prev.cost.layout_out, t)
                    if node is None:
                        continue
                    parents, nodes, orders = pairs.setdefault((s, t), ([], [], []))
                    for label in bucket.labels:
                        parents.append(label)
                        nodes.append(node)
                        orders.append(order)
                        order += 1
        found = []
        for (s, t), (parents, nodes, orders) in pairs.items():
            found += [(orders[pair], label) for pair, label in self._extend(parents, nodes, i, s, t, limit)]
        nxt = {}
        for _, label in sorted(found, key=lambda item: item[0]):
            nxt.setdefault((label.node, label.stage), Bucket(split, by_sums)).insert(label)
        return nxt

    def _seed(self, stages) -> Solution | None:
        """The best uniform split (one option on every layer) on `stages`: a first incumbent."""
        layers = [i for i in range(self.chain.n) if self.chain.is_layer(i)]
        best = None
        for x in [x for x in self.choices[layers[0]] if all(x in self.choices[i] for i in layers)]:
            try:
                nodes = self.chain.chain([x] * len(layers), stages)
            except ExplorerError:
                continue
            sol = self._solution(nodes, tuple(stages), True)
            if sol.memory_bytes <= self.set.cap_bytes and (best is None or sol.time_s < best.time_s):
                best = sol
        return best

    def solve(self, incumbent: float = inf, max_labels: int = 64, seed_stages=None) -> Solution | None:
        """The least-time solution no slower than `incumbent` (None if none fits the cap or beats it).
        `seed_stages` (when the cuts are free) places the uniform splits tried first."""
        placed = self.fixed if self.fixed is not None else seed_stages
        seed = self._seed(placed) if placed is not None else None
        given = incumbent * (1 + 1e-9) if incumbent < inf else inf
        limit = min(given, seed.time_s * (1 + 1e-9)) if seed is not None else given
        start = self.chain.node(0, None, lay.R, 0)
        open_ = np.zeros((ROWS, self.pp))
        open_[:, 0] = start.values[:, 0]
        tied = self.chain.tied(self.pp)          # a tied embedding's copy: constants of stage 0 and the last
        if tied:
            open_[PSI] += tied["Psi_r"][:, 0]
            open_[GS] += tied["GS_r"][:, 0]
        split = schedule_of(self.set.schedule).splits_weight
        by_sums = self.set.m > BY_SUMS_MICRO_BATCHES * self.pp
        first = Bucket(split, by_sums)
        first.insert(Label((0.0, 0.0, 0.0, 0.0), np.zeros((4, self.pp)), open_, 0, 0.0, False, None, start, 0))
        states = {(start, 0): first}
        exact = True
        for i in range(1, self.chain.n):
            nxt = self._step(states, i, limit, split, by_sums)
            for key, bucket in nxt.items():
                if len(bucket.labels) > max_labels:
                    exact = False
                    nxt[key] = bucket.truncated(max_labels)
            states = nxt
        found = self._best(states, exact)
        if seed is not None and (found is None or seed.time_s < found.time_s):
            found = seed
        return found if found is not None and found.time_s <= given else None

    def _finish(self, labels: list) -> np.ndarray:
        """Final iteration times of complete labels, exactly as evaluate() prices them: every stage's
        F, B, W and Y, then max_r (end_r + Y_r) with end_r the schedule's critical path."""
        done = np.stack([lb.done for lb in labels])          # labels x (F, B - W, W, Y) x pp
        for k, label in enumerate(labels):
            for s in range(self.pp):
                if not (label.closed >> s) & 1:
                    o = label.open
                    done[k, :, s] = (o[F, s], o[B, s] - o[W, s], o[W, s], self._sync(o, s))
        st = self.set
        fwd, wgt, after = done[:, 0], done[:, 2], done[:, 3]
        ends = self.obj.stage_ends(fwd, done[:, 1] + wgt, st.m, st.chunks, st.schedule, wgt)
        return (ends + after).max(-1)

    def _best(self, states, exact) -> Solution | None:
        labels = [lb for bucket in states.values() for lb in bucket.labels]
        if not labels:
            return None
        best = labels[int(np.argmin(self._finish(labels)))]
        nodes, stages = [], []
        while best is not None:
            nodes.append(best.node)
            stages.append(best.stage)
            best = best.parent
        nodes.reverse()
        stages.reverse()
        return self._solution(nodes, tuple(stages), exact)

    def _solution(self, nodes, stages, exact) -> Solution:
        sums = stage_sums(self.chain, nodes, stages, self.pp)[:, :, 0]
        st = self.set
        time = float(self.obj.time(sums[F], sums[B], sums[PSI], sums[GS], st.m, st.chunks, st.zero, st.overlap,
                                   st.schedule, sums[W], param_gather=st.gather_hidden, psi_e=sums[PE]))
        memory = float(self.obj.peak_memory(sums[PSI], sums[A], st.m, st.chunks, st.zero, st.schedule, sums[PE]))
        splits = tuple(nd.split for i, nd in enumerate(nodes) if self.chain.is_layer(i))
        return Solution(splits, stages, time, memory, exact)
