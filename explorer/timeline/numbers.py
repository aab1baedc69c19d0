"""Numbers of one block's micro-steps and of the collectives between blocks.

Read from the cost tree (explorer.cost.tree): each block's step expressions are
lambdified once there (steps_function) and called here with the one numeric
context (explorer.cost.numbers.Numbers); boundary collectives are priced by the
same rule as the tree's (Numbers.collective_seconds). A collective's time is
split into its bandwidth part h*g and its latency (barrier) part n_steps*L, the
two terms of the BSP cost (DESIGN.md, explorer.cost.collectives.time).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from explorer.cost import collectives as coll
from explorer.cost.numbers import Numbers
from explorer.cost.tree import size_function, steps_function


@dataclass(frozen=True)
class CollNumbers:
    coll: coll.Collective
    level: int          # cluster level index
    bytes: float        # sent per device
    transfer_s: float   # bytes * g_level
    barrier_s: float    # latency steps * L_level

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


def context(model, strategy, cluster) -> Numbers:
    """The numeric context of one strategy (explorer.cost.numbers.Numbers)."""
    return Numbers.of(model, strategy.micro_batch, cluster, strategy.dtype)


def _coll(c, level: int, nbytes: float, steps: float, nums: Numbers) -> CollNumbers:
    return CollNumbers(c, level, nbytes, float(nums.collective_seconds(nbytes, 0.0, level)),
                       float(nums.collective_seconds(0.0, steps, level)))


def block_numbers(placed, nums: Numbers) -> tuple:
    """(StepNumbers per operator, parameters per device) of one PlacedBlock, one micro-batch."""
    values = steps_function(placed.cost)(*nums.block_args(placed.split.degree, placed.level,
                                                          getattr(placed, "cp_level", 0)))
    steps, k = [], 0
    for step in placed.cost.steps:
        colls = []
        for j, c in enumerate(step.collectives):
            at = k + 3 + 2 * j
            colls.append(_coll(c, placed.level, float(values[at]), float(values[at + 1]), nums))
        steps.append(StepNumbers(step, float(values[k]), float(values[k + 1]), float(values[k + 2]), tuple(colls)))
        k += 3 + 2 * len(step.collectives)
    params_dev = float(values[k])
    tail = [float(x) for x in values[k + 1:]]      # per operator: recompute, cp exposed, bytes, whole transfer
    steps = [replace(sn, recompute_s=tail[7 * i], cp_fwd_s=tail[7 * i + 1], cp_bwd_s=tail[7 * i + 2],
                     cp_fwd_bytes=tail[7 * i + 3], cp_bwd_bytes=tail[7 * i + 4], cp_fwd_total_s=tail[7 * i + 5],
                     cp_bwd_total_s=tail[7 * i + 6]) for i, sn in enumerate(steps)]
    return tuple(steps), params_dev


def boundary_numbers(boundary, nums: Numbers) -> tuple:
    """CollNumbers of a Boundary's collectives (each at its own level), one micro-batch."""
    if not boundary.collectives:
        return ()
    sizes = size_function(tuple(c.size for c in boundary.collectives))(*nums.size_args())
    return tuple(_coll(c, level, float(coll.bytes_per_device(c.kind, float(size), int(c.n))),
                       float(coll.latency_steps(c.kind, int(c.n))), nums)
                 for c, level, size in zip(boundary.collectives, boundary.levels, sizes))
