"""Numbers of one block's micro-steps and of the collectives between blocks.

Read from the cost tree (explorer.cost.tree): each block's step expressions are
lambdified once there (steps_function) and called here with the one numeric
context (explorer.cost.numbers.Numbers); boundary collectives are priced by the
same rule as the tree's (Numbers.collective_seconds). A collective's time is
split into its bandwidth part h*g and its latency (barrier) part n_steps*L, the
two terms of the BSP cost (DESIGN.md, explorer.cost.collectives.time).
"""
from __future__ import annotations

from dataclasses import dataclass

from explorer.cost import collectives as coll
from explorer.cost.numbers import Numbers
from explorer.cost.tree import decode_steps, size_function, steps_function
from explorer.strategy.mesh import top_level
from explorer.timeline.layout import context  # noqa: F401 (re-exported: the micro-steps read it here)


@dataclass(frozen=True)
class CollNumbers:
    coll: coll.Collective
    route: tuple        # fan-in per machine level of the group (mesh.group_route)
    bytes: float        # sent per device
    transfer_s: float   # bytes * g of the group (its levels at once), less what computation hides
    barrier_s: float    # latency steps * L of the outermost level crossed
    hidden_s: float = 0.0  # seconds hidden under the computation it overlaps with (not drawn)

    @property
    def level(self) -> int:
        """The outermost machine level the group crosses."""
        return top_level(self.route)

    def levels(self) -> tuple:
        """The machine levels that carry part of its bytes."""
        return tuple(i for i, w in enumerate(coll.level_shares(self.coll.kind, self.route)) if w)

    @property
    def time_s(self) -> float:
        return self.transfer_s + self.barrier_s


@dataclass(frozen=True)
class StepNumbers:
    step: object        # block.OpStep
    fwd_s: float
    bwd_s: float
    bwd_weight_s: float
    collectives: tuple  # CollNumbers, ...
    recompute_s: float = 0.0     # forward work the backward kernel redoes (FlashAttention)
    cp_fwd_s: float = 0.0        # exposed context-parallel exchange, forward (category cp_comm)
    cp_bwd_s: float = 0.0
    cp_fwd_bytes: float = 0.0    # bytes sent per device
    cp_bwd_bytes: float = 0.0
    cp_fwd_total_s: float = 0.0  # the whole transfer, the part hidden under the attention included
    cp_bwd_total_s: float = 0.0


def _coll(c, route: tuple, nbytes: float, steps: float, nums: Numbers, kind: str | None = None,
          hidden: float = 0.0) -> CollNumbers:
    """A collective's exposed transfer (its hidden part taken off the bandwidth term first), barrier
    and hidden seconds; exposed transfer + barrier = the cost's max(0, time - computation under)."""
    kind = kind or c.kind
    transfer = float(nums.collective_seconds(nbytes, 0.0, kind, route))
    barrier = float(nums.collective_seconds(0.0, steps, kind, route))
    cut = min(hidden, transfer)
    return CollNumbers(c, route, nbytes, transfer - cut, barrier - (hidden - cut), hidden)


def block_numbers(placed, nums: Numbers, cp_algo: str = "ring") -> tuple:
    """(StepNumbers per operator, parameters per device) of one PlacedBlock, one micro-batch: the block's
    step_exprs values read by name (explorer.cost.tree.decode_steps)."""
    values = steps_function(placed.cost)(*nums.block_args(placed.split.degree, placed.route, placed.cp_route,
                                                          cp_algo))
    decoded, params_dev = decode_steps(placed.cost, values)
    steps = []
    for step, sv in zip(placed.cost.steps, decoded):
        colls = tuple(_coll(c, placed.route, nbytes, latency, nums, "all_reduce", hidden)
                      for c, (nbytes, latency, hidden) in zip(step.collectives, sv.collectives))
        steps.append(StepNumbers(step, sv.fwd_s, sv.bwd_s, sv.bwd_weight_s, colls, **sv.cp))
    return tuple(steps), params_dev


def boundary_numbers(boundary, nums: Numbers) -> tuple:
    """CollNumbers of a Boundary's collectives (each at its own level), one micro-batch."""
    if not boundary.collectives:
        return ()
    sizes = size_function(tuple(c.size for c in boundary.collectives))(*nums.size_args())
    return tuple(_coll(c, route, float(coll.bytes_per_device(c.kind, float(size), int(c.n))),
                       float(coll.latency_steps(c.kind, int(c.n))), nums)
                 for c, route, size in zip(boundary.collectives, boundary.routes, sizes))
