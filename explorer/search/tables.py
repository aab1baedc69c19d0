"""Numbers of the model's block chain for the search.

A *node* is one block under one split, given the layout its producer hands
it; a *link* is what passes between two neighbouring nodes, on one stage or
across a stage cut. Both are priced by the core -- `block_cost()` for the
block (through its summary, explorer.cost.summary, which a later process finds on disk without
building sympy expressions), the plan's boundary rule for the link (explorer.cost.plan.boundary_parts:
redistribution where the splits differ, point-to-point and scatter/gather where the stages differ),
the compiled block quantities of the cost tree (explorer.cost.tree) for the numbers -- and kept
as numpy arrays over a vector of micro-batch sizes. Nothing here re-derives a
cost; `tests/test_search_tables.py` checks the stage sums against `evaluate()`.
"""
from __future__ import annotations

from dataclasses import dataclass
import numpy as np

from explorer.cost import collectives as coll
from explorer.cost import layouts as lay
from explorer.cost.fused_dispatch import fused_factor
from explorer.cost.numbers import Numbers
from explorer.cost.boundary import boundary_parts, part_route, payer_side, same_split
from explorer.cost.numeric import (COMM_CATEGORIES, block_quantity, cp_group_route, ep_group_route,
                                   exposed_all_to_alls, holds_layer_activations, sharded_expert_params, stage_values,
                                   tied_place, tied_values)
from explorer.cost.placement import block_ends, block_place, block_splits, block_stages, expert_options, host_options
from explorer.cost.summary import block_function, block_summary, summarise
from explorer.errors import ExplorerError
from explorer.limits import WorkCancelled
from explorer.cost.outline import block_outlines
from explorer.strategy.mesh import group_route

NODE_INPUTS = ("F_r", "B_r", "Psi_r", "A_r", "GS_r", "W_r", "Psi^e_r", "E^f_r", "E^b_r", "C^f_r", "C^b_r", "A^l_r")
"""Rows of a node's values, by the super-step's stage inputs they are (composed by
explorer.cost.numeric.stage_values from the block's quantities, as evaluate() composes a stage): forward and
backward seconds of one micro-batch (backward includes recomputation; with experts both include the block's
all-to-alls), the dense parameters held per device, activation bytes kept, the once-per-iteration gradient
all-reduce of batch-split weights, the weight-gradient part of the backward (zero-bubble schedules), and the
expert parameters per device after the ep sharding (they synchronise over their own expert-data-parallel
group; 0 without experts); then what expert-parallel overlap reads (explorer.cost.numeric.ep_exposed): the
forward's and the backward's all-to-alls (within F_r and B_r) and the forward's and the backward's compute; last
the block's activations again as A^l_r, 0 for the head (the largest layer of a stage: numeric.layer_activations).
A stage's inputs are its nodes' and links' sums: stage_values is linear in its blocks and boundaries, but for
expert-parallel overlap, which takes max(sigma E, E - C) of a stage's sums (ep_overlapped), and A^l_r, the
largest of its nodes' (stage_sums)."""
F, B, PSI, A, GS, W, PE, EF, EB, CF, CB, AL = (NODE_INPUTS.index(name) for name in (
    "F_r", "B_r", "Psi_r", "A_r", "GS_r", "W_r", "Psi^e_r", "E^f_r", "E^b_r", "C^f_r", "C^b_r", "A^l_r"))
ROWS = len(NODE_INPUTS)
F_FROM, F_TO, B_FROM, B_TO = range(4)
"""Rows of a link's values: forward / backward seconds paid by the producer's
and the consumer's stage (who pays: explorer.cost.boundary.payer_side, as the cost tree reads it)."""
PAID_BY = {("fwd", "from"): F_FROM, ("fwd", "to"): F_TO, ("bwd", "from"): B_FROM, ("bwd", "to"): B_TO}
S_FROM, S_TO = 4, 5
"""Further rows of a link: the point-to-point sends within F_FROM (the producer's forward send) and
B_TO (the consumer's backward send), which overlapped sends take out of the passes."""
STAGE_SUMS = NODE_INPUTS + ("S^f_r", "S^b_r")
"""Rows of stage_sums, by the super-step's stage inputs they are: a node's rows, then each stage's forward and
backward point-to-point sends (within F_r, B_r)."""
SF, SB = STAGE_SUMS.index("S^f_r"), STAGE_SUMS.index("S^b_r")
STAGE_ROWS = len(STAGE_SUMS)


@dataclass(frozen=True, eq=False)
class Node:
    cost: object          # BlockSummary (explorer.cost.summary) of its BlockCost
    split: object         # LayerSplit
    route: tuple          # the split's group's fan-in per machine level
    values: np.ndarray    # (ROWS, micro-batch sizes): F, B, PSI, A, GS, W, PE


class Chain:
    """The block chain of `model` under the global choices of `probe`, for micro-batch sizes `b`.

    `probe` fixes t, d, recompute, sequence parallelism, dtype and scatter/gather
    (d and t place the ranks, so decide which machine level each group crosses);
    its micro-batch is replaced by the vector `b`.
    """

    def __init__(self, model, cluster, probe, b):
        self.model, self.cluster, self.probe = model, cluster, probe
        self.blocks = block_outlines(model)     # the blocks' names, kinds and keys (no sympy from a warm cache)
        self.fixed = block_splits(model, probe, self.blocks)   # embedding / head: tp, megatron
        self.data_without_grad = self.blocks[0].without_params  # no gradient goes back into the input data
        self.b = np.atleast_1d(np.asarray(b, dtype=float))
        self.nums = Numbers.of(model, self.b, cluster, probe.dtype)
        self.hw = self.nums.hw
        self._nodes, self._links, self._levels, self._placed = {}, {}, {}, {}
        self._priced, self._parts = {}, {}

    def for_probe(self, probe) -> "Chain":
        """The same numbers under another d (and p): node values are shared (they depend on
        the route of their group, not on d itself), and so are links (they depend on d and the
        stages only through the routes of their groups: Chain.link)."""
        other = Chain.__new__(Chain)
        other.__dict__.update(self.__dict__, probe=probe, _links={}, _levels={}, _placed={})
        return other

    def tied(self, pp: int) -> dict:
        """A tied embedding's per-stage additions under the probe's t and d with `pp` stages."""
        key = ("tied", pp)
        if key not in self._links:
            probe = self.probe if self.probe.pp == pp else None
            self._links[key] = {} if probe is None else tied_values(
                tied_place(self.model, probe, self.cluster), probe.tp, pp, self.nums)
        return self._links[key]

    @property
    def n(self) -> int:
        return len(self.blocks)

    def is_layer(self, i: int) -> bool:
        return self.blocks[i].kind == "layer"

    def route(self, stage: int, degree: int) -> tuple:
        """Route of a `degree`-sized group inside `stage` (the plan's placement rule)."""
        key = (stage, degree)
        if key not in self._levels:
            self._levels[key] = group_route(self.cluster, self.probe.mesh, "tp", degree, pp=stage)
        return self._levels[key]

    def node(self, i: int, split, incoming: str, stage: int = 0) -> Node:
        """Block i under `split` (ignored for the embedding and head) on `stage`, after a
        producer giving `incoming`."""
        found = self.try_node(i, split, incoming, stage)
        if found is None:
            error = self._placed[(i, split, incoming, stage)]
            raise type(error)(*error.args)
        return found

    def try_node(self, i: int, split, incoming: str, stage: int = 0) -> Node | None:
        """node(), or None when the split does not apply to the block's operators. Memoised by
        (i, split, incoming, stage): the DPs ask for the same node hundreds of thousands of times."""
        placed = (i, split, incoming, stage)
        found = self._placed.get(placed)
        if found is None:
            try:
                found = self._node(i, split, incoming, stage)
            except WorkCancelled:
                raise                           # stopped, not refused: nothing remembered
            except ExplorerError as error:      # refused: remembered, refused again when asked
                found = error
            self._placed[placed] = found
        return None if isinstance(found, ExplorerError) else found

    def _node(self, i: int, split, incoming: str, stage: int) -> Node:
        block = self.blocks[i]
        split = split if block.kind == "layer" else self.fixed[i]
        route = self.route(stage, split.degree)
        cp_route = cp_group_route(self.cluster, self.probe, stage) if self.probe.cp > 1 else ()
        key = (block.key, block.kind, split, incoming, route, cp_route)
        moe = self.model.is_moe and self.probe.ep > 1      # MoE: experts over ep, all-to-alls over its route
        if moe:
            key += (self.probe.ep, self.probe.etp, ep_group_route(self.cluster, self.probe, stage))
        if key not in self._nodes:
            args = (block, split.effective_preset, split.overrides, self.probe.sequence_parallel,
                    self.probe.recompute, incoming, self.probe.cp, self.probe.cp_algo, self.probe.overlap_tp)
            if moe:     # the experts' load and all-to-alls: the BlockCost itself (sympy, imported here only: a
                from explorer.cost.block import block_cost   # dense search from a warm disk cache imports none)
                from explorer.cost.tree import expert_seconds
                full = block_cost(block.block(), *args[1:], **expert_options(self.model, self.probe),
                                  **host_options(self.model, self.probe))
                cost = summarise(block.block(), full)
                # the all-to-alls over the ep group's route, priced as evaluate() prices ep_comm
                a2a = expert_seconds(full, split.degree, key[-1], self.probe.ep,
                                     self.probe.recompute == "full" and block.kind == "layer", self.nums,
                                     fused_factor(self.model, self.probe, key[-1]))
            else:       # a dense block: its summary, from the disk cache without sympy where it is there
                cost = block_summary(*args, **host_options(self.model, self.probe))
                a2a = (0.0, 0.0)
            values = self._values(cost, split.degree, route, cp_route, a2a, holds_layer_activations(block.kind))
            self._nodes[key] = Node(cost, split, route, values)
        return self._nodes[key]

    def _values(self, cost, degree: int, route: tuple, cp_route: tuple = (), a2a: tuple = (0.0, 0.0),
                layer: bool = True) -> np.ndarray:
        """The block's rows (NODE_INPUTS) as the super-step reads them: the one composition of a stage
        (explorer.cost.numeric.stage_values) of this block alone, its all-to-alls `a2a` (forward, backward
        seconds) in ep_comm; Psi^e_r after the ep sharding (sharded_expert_params), as evaluate() reads it; A^l_r its
        activations unless its block does not count (`layer` False: numeric.holds_layer_activations, the head)."""
        q = block_function(cost)(*self.nums.block_args(degree, route, cp_route, self.probe.cp_algo))
        one = np.array([np.broadcast_to(np.asarray(x, dtype=float), self.b.shape) for x in q])[None]  # 1 x Q x C
        zero = np.zeros((1, self.b.size))
        fwd_b, bwd_b = ({c: zero for c in COMM_CATEGORIES} for _ in range(2))
        fwd_b["ep_comm"], bwd_b["ep_comm"] = zero + a2a[0], zero + a2a[1]
        stage = stage_values(one, fwd_b, bwd_b, layer_act=block_quantity(one, "act") if layer else None)
        stage["Psi^e_r"] = sharded_expert_params(stage["Psi^e_r"], self.probe.ep)
        return np.vstack([stage[name] for name in NODE_INPUTS])

    def chain(self, splits, stages) -> list:
        """Nodes of the whole chain with `splits` (one LayerSplit per layer) on `stages` (per block)."""
        nodes, incoming, layer, last = [], lay.R, 0, None
        for i, block in enumerate(self.blocks):
            split = None
            if block.kind == "layer":
                split, layer = splits[layer], layer + 1
            asked = (block.key, split, incoming, stages[i])
            if asked != last:       # a run of like layers (same block, split, input, stage): one node
                node, last = self.node(i, split, incoming, stages[i]), asked
                incoming = node.cost.layout_out
            nodes.append(node)
        return nodes

    def link(self, i: int, prev: Node, cur: Node, stage_from: int, stage_to: int) -> np.ndarray:
        """What passes from node i-1 (`prev`, on `stage_from`) to node i (`cur`, on `stage_to`).

        Priced once per what it is made of: the plan's boundary parts between the two nodes
        (explorer.cost.plan.boundary_parts), the routes of their groups and the producer's output
        array -- so links of other stages and other d with the same routes share one pricing
        (for_probe keeps them)."""
        key = (i, prev, cur, stage_from, stage_to)
        found = self._links.get(key)
        if found is None:
            parts = self.parts(i, prev, cur, stage_from != stage_to)
            routes = tuple(self.part_route(part, stage_from, stage_to) for part in parts)
            priced = (prev.cost.key, parts, routes)
            found = self._priced.get(priced)
            if found is None:
                found = self._priced[priced] = self._link_values(prev, parts, routes)
            self._links[key] = found
        return found

    def parts(self, i: int, prev: Node, cur: Node, crosses: bool) -> tuple:
        """The boundary parts between node i-1 and node i (explorer.cost.plan.boundary_parts)."""
        key = (i == 1, prev, cur, crosses)
        found = self._parts.get(key)
        if found is None:
            found = self._parts[key] = boundary_parts(
                prev.cost.layout_out, cur.cost.layout_in, cur.cost.returned_grad, prev.split.degree,
                cur.split.degree, same_split(prev.split, cur.split), not (i == 1 and self.data_without_grad),
                crosses, self.probe.tp, self.probe.scatters_sends)
        return found

    def part_route(self, part, stage_from: int, stage_to: int) -> tuple:
        """The route of a boundary part's group (explorer.cost.plan.part_route), memoised."""
        if part.side == "pair":
            key = ("pair", stage_from, stage_to)
            if key not in self._levels:
                self._levels[key] = part_route(part, stage_from, stage_to, self.probe, self.cluster)
            return self._levels[key]
        return self.route(part.stage(stage_from, stage_to), part.n)

    def _link_values(self, prev, parts: tuple, routes: tuple) -> np.ndarray:
        """The parts in numbers: each moves its fraction of the producer's output array (of the local
        s/cp tokens), at its group's route."""
        out = np.zeros((6, self.b.size))
        if not parts:
            return out
        args = self.nums.size_args()
        beta = args[-1]             # bytes per element: SIZE_ARGS (explorer.cost.tree) end with it
        size = np.asarray(prev.cost.out_elements(*args)[0], dtype=float) * beta / self.probe.cp
        for part, route in zip(parts, routes):
            sent = coll.bytes_per_device(part.kind, size * float(part.fraction), part.n)
            secs = self.nums.collective_seconds(sent, float(coll.latency_steps(part.kind, part.n)), part.kind, route)
            row = PAID_BY[(part.phase, payer_side(part.kind, part.phase))]
            out[row] += secs
            if part.kind == "p2p" and part.category == "pp_comm":
                out[S_FROM if part.phase == "fwd" else S_TO] += secs
        return out


def stage_sums(chain: Chain, nodes, stages, pp: int) -> np.ndarray:
    """(STAGE_ROWS, pp, micro-batch sizes): each stage's F, B, PSI, A, GS, W, PE for nodes placed on `stages`
    (with a tied embedding's copy and gradient all-reduce, explorer.cost.tree.tied_values), and the
    point-to-point sends SF, SB within its F and B."""
    out = np.zeros((STAGE_ROWS, pp, chain.b.size))
    tied = chain.tied(pp)
    if tied:
        out[PSI] += tied["Psi_r"]
        out[GS] += tied["GS_r"]
    # a run of equal (node, stage) -- a uniform split's layers on one stage -- adds its values once,
    # times its length
    n = len(nodes)
    ids = np.fromiter(map(id, nodes), dtype=np.int64, count=n)
    at = np.asarray(stages)
    same = np.zeros(n, dtype=bool)
    same[1:] = (ids[1:] == ids[:-1]) & (at[1:] == at[:-1])
    starts = np.flatnonzero(~same)
    counts = np.diff(np.append(starts, n)).astype(float)
    np.add.at(out[:ROWS].transpose(1, 0, 2), at[starts],
              counts[:, None, None] * np.stack([nodes[j].values for j in starts]))
    out[AL] = 0.0                                # the largest node's, not their sum
    np.maximum.at(out[AL], at[starts], np.stack([nodes[j].values[AL] for j in starts]))
    if n < 2:
        return out
    # links: one per distinct (producer node, consumer node, their stages) -- the link's value
    # depends on nothing else (Chain.link's key) -- times how often that pair occurs
    pairs = np.stack([ids[:-1], ids[1:], at[:-1], at[1:]], axis=1)
    _, first, times = np.unique(pairs, axis=0, return_index=True, return_counts=True)
    where = first + 1                            # link i joins block i-1 to block i
    links = np.stack([chain.link(i, nodes[i - 1], nodes[i], stages[i - 1], stages[i]) for i in where.tolist()])
    links = links * times[:, None, None]
    s_from, s_to = at[where - 1], at[where]
    np.add.at(out[F], s_from, links[:, F_FROM])
    np.add.at(out[B], s_from, links[:, B_FROM])
    np.add.at(out[F], s_to, links[:, F_TO])
    np.add.at(out[B], s_to, links[:, B_TO])
    np.add.at(out[SF], s_from, links[:, S_FROM])
    np.add.at(out[SB], s_to, links[:, S_TO])
    return out


def ep_overlapped(sums: np.ndarray, share: float) -> np.ndarray:
    """Stage sums (axis 1: STAGE_SUMS' rows; any other axes: options, micro-batch sizes, stages) as expert-parallel
    overlap leaves them (Strategy.overlap_ep): each stage's forward with its all-to-alls E^f_r exposed only by
    max(sigma E^f_r, E^f_r - C^b_r) under the partner pass's backward compute, its backward likewise under the
    forward's -- explorer.cost.numeric.exposed_all_to_alls of the stage's sums, as stage_values composes an
    evaluated stage (`share` sigma: explorer.cost.fused_dispatch.overlap_exposed_fraction of the family's dispatcher
    and CUDA graphs).
    Not a sum of the blocks' values: the search prices it on whole stages only (the sweep), not in the DPs'
    partial sums."""
    out = sums.copy()
    for row, a2a, partner in ((F, EF, CB), (B, EB, CF)):
        out[:, row] += exposed_all_to_alls(sums[:, a2a], sums[:, partner], share, np.maximum) - sums[:, a2a]
    return out


def node_stages(model, strategy) -> tuple:
    """Stage of every block (embedding, layers, MTP modules, head), as the plan places them."""
    places, ends = block_stages(model, strategy), block_ends(model, strategy)
    return tuple(block_place(o.kind, o.layer, places, ends)[0] for o in block_outlines(model))
