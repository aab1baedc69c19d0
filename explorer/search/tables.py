"""Numbers of the model's block chain for the search.

A *node* is one block under one split, given the layout its producer hands
it; a *link* is what passes between two neighbouring nodes, on one stage or
across a stage cut. Both are priced by the core -- `block_cost()` for the
block, the plan's boundary rule for the link (redistribution where the splits
differ, point-to-point and scatter/gather where the stages differ), the
compiled block quantities of `program.BLOCK_ARGS` for the numbers -- and kept
as numpy arrays over a vector of micro-batch sizes. Nothing here re-derives a
cost; `tests/test_search_tables.py` checks the stage sums against `evaluate()`.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from explorer.cost import collectives as coll
from explorer.cost import layouts as lay
from explorer.cost.block import block_cost
from explorer.cost.compile import compile_exprs
from explorer.cost.evaluate import hardware_numbers, model_numbers
from explorer.model.graph import build_blocks
from explorer.strategy.placement import tp_level
from explorer.cost.plan import PlacedBlock, block_splits
from explorer.cost.plan import boundary as plan_boundary
from explorer.cost.program import BLOCK_ARGS, SIZE_ARGS
from explorer.cost.quantities import Q, block_exprs
from explorer.symbols import L_t, g_t

_tp_level = lru_cache(maxsize=4096)(tp_level)   # loops over every group of the stage: worth keeping

F, B, PSI, A, GS = range(5)
ROWS = 5
"""Rows of a node's values: forward and backward seconds of one micro-batch
(backward includes recomputation), parameters held per device, activation bytes
kept, and the once-per-iteration gradient all-reduce of batch-split weights (s)."""
F_FROM, F_TO, B_FROM, B_TO = range(4)
"""Rows of a link's values: forward / backward seconds paid by the producer's
and the consumer's stage (a p2p is paid by its sender, a conversion by the
side that needs it: the consumer forward, the producer backward; see program._payer)."""


@dataclass(frozen=True, eq=False)
class Node:
    cost: object          # BlockCost
    split: object         # LayerSplit
    level: int            # machine level of the split's group
    values: np.ndarray    # (5, micro-batch sizes): F, B, PSI, A, GS


class Chain:
    """The block chain of `model` under the global choices of `probe`, for micro-batch sizes `b`.

    `probe` fixes t, d, recompute, sequence parallelism, dtype and scatter/gather
    (d and t place the ranks, so decide which machine level each group crosses);
    its micro-batch is replaced by the vector `b`.
    """

    def __init__(self, model, cluster, probe, b):
        self.model, self.cluster, self.probe = model, cluster, probe
        self.blocks = build_blocks(model)
        self.fixed = block_splits(model, probe, self.blocks)   # embedding / head: tp, megatron
        self.hw = hardware_numbers(cluster, probe.dtype)
        self.b = np.atleast_1d(np.asarray(b, dtype=float))
        self.dims = (self.b,) + model_numbers(model, probe)[1:]
        self._nodes, self._links, self._levels = {}, {}, {}

    def for_probe(self, probe) -> "Chain":
        """The same numbers under another d (and p): node values are shared (they depend on
        the level their group crosses, not on d itself); links are priced again."""
        other = Chain.__new__(Chain)
        other.__dict__.update(self.__dict__, probe=probe, _links={}, _levels={})
        return other

    @property
    def n(self) -> int:
        return len(self.blocks)

    def is_layer(self, i: int) -> bool:
        return self.blocks[i].kind == "layer"

    def level(self, stage: int, degree: int) -> int:
        """Machine level of a `degree`-sized group inside `stage` (the plan's placement rule)."""
        key = (stage, degree)
        if key not in self._levels:
            self._levels[key] = _tp_level(self.cluster, self.probe.tp, self.probe.dp, stage, degree)
        return self._levels[key]

    def node(self, i: int, split, incoming: str, stage: int = 0) -> Node:
        """Block i under `split` (ignored for the embedding and head) on `stage`, after a
        producer giving `incoming`."""
        block = self.blocks[i]
        split = split if block.kind == "layer" else self.fixed[i]
        level = self.level(stage, split.degree)
        key = (block.key, block.kind, split, incoming, level)
        if key not in self._nodes:
            cost = block_cost(block, split.effective_preset, split.overrides,
                              self.probe.sequence_parallel, self.probe.recompute, incoming)
            self._nodes[key] = Node(cost, split, level, self._values(cost, split.degree, level))
        return self._nodes[key]

    def _values(self, cost, degree: int, level: int) -> np.ndarray:
        fn = compile_exprs(("block", cost.key), BLOCK_ARGS, lambda: block_exprs(cost, g_t, L_t))
        hw = self.hw
        q = fn(*self.dims, degree, hw["g"][level], hw["L"][level], hw["F"], hw["eta"], hw["phi"],
               hw["W"], hw["tau"], hw["beta"])
        col = lambda name: np.broadcast_to(np.asarray(q[Q[name]], dtype=float), self.b.shape)
        return np.vstack([col("fwd_compute") + col("fwd_comm"),
                          col("bwd_compute") + col("bwd_comm") + col("recompute"),
                          col("params_dev"), col("act"), col("grad_sync")])

    def chain(self, splits, stages) -> list:
        """Nodes of the whole chain with `splits` (one LayerSplit per layer) on `stages` (per block)."""
        nodes, incoming, layer = [], lay.R, 0
        for i, block in enumerate(self.blocks):
            split = None
            if block.kind == "layer":
                split, layer = splits[layer], layer + 1
            nodes.append(self.node(i, split, incoming, stages[i]))
            incoming = nodes[-1].cost.layout_out
        return nodes

    def link(self, i: int, prev: Node, cur: Node, stage_from: int, stage_to: int) -> np.ndarray:
        """What passes from node i-1 (`prev`, on `stage_from`) to node i (`cur`, on `stage_to`)."""
        key = (self.blocks[i - 1].key, self.blocks[i].key, prev, cur, stage_from, stage_to)
        if key not in self._links:
            self._links[key] = self._link_values(i, prev, cur, stage_from, stage_to)
        return self._links[key]

    def _link_values(self, i, prev, cur, stage_from, stage_to) -> np.ndarray:
        before = PlacedBlock(self.blocks[i - 1], prev.split, stage_from, 0, prev.cost, prev.level)
        after = PlacedBlock(self.blocks[i], cur.split, stage_to, 0, cur.cost, cur.level)
        boundary = plan_boundary(before, after, i, self.probe, self.cluster)
        out = np.zeros((4, self.b.size))
        size_dims = self.dims + (self.hw["beta"],)
        for c, level in zip(boundary.collectives, boundary.levels):
            size = compile_exprs(("size", c.size), SIZE_ARGS, (c.size,))(*size_dims)[0]
            n = int(c.n)
            secs = coll.bytes_per_device(c.kind, np.asarray(size, dtype=float), n) * self.hw["g"][level] \
                + float(coll.latency_steps(c.kind, n)) * self.hw["L"][level]
            forward = c.phase == "fwd"
            by_sender = c.kind == "p2p"
            row = (F_FROM if by_sender else F_TO) if forward else (B_TO if by_sender else B_FROM)
            out[row] += secs
        return out


def stage_sums(chain: Chain, nodes, stages, pp: int) -> np.ndarray:
    """(5, pp, micro-batch sizes): each stage's F, B, PSI, A, GS for nodes placed on `stages`."""
    out = np.zeros((ROWS, pp, chain.b.size))
    for i, node in enumerate(nodes):
        out[:, stages[i]] += node.values
        if i:
            link = chain.link(i, nodes[i - 1], node, stages[i - 1], stages[i])
            out[F, stages[i - 1]] += link[F_FROM]
            out[B, stages[i - 1]] += link[B_FROM]
            out[F, stages[i]] += link[F_TO]
            out[B, stages[i]] += link[B_TO]
    return out


def node_stages(model, strategy) -> tuple:
    """Stage of every block (embedding, layers, head), as the plan places them."""
    from explorer.cost.plan import block_stages
    layers = tuple(stage for stage, _ in block_stages(model, strategy))
    return (0,) + layers + (layers[-1],)
