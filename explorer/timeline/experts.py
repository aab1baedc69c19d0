"""Numbers of the expert layers' all-to-alls (MoE dispatch and combine, category ep_comm) for the
timelines: each priced over its ep group's route by the cost model's own rule
(Numbers.collective_seconds), split into its transfer h*g and its latency steps*L."""
from __future__ import annotations

from explorer.cost import collectives as coll
from explorer.cost.experts import expert_collectives
from explorer.cost.numbers import Numbers
from explorer.cost.tree import size_function
from explorer.timeline.numbers import CollNumbers


def _numbers(c, route: tuple, size: float, nums: Numbers) -> CollNumbers:
    sent = float(coll.bytes_per_device(c.kind, size, int(c.n)))
    steps = float(coll.latency_steps(c.kind, int(c.n)))
    return CollNumbers(c, route, sent, float(nums.collective_seconds(sent, 0.0, c.kind, route)),
                       float(nums.collective_seconds(0.0, steps, c.kind, route)))


def expert_numbers(the_plan, nums: Numbers, block_index: int | None = None) -> list:
    """(CollNumbers, stage) of every all-to-all of the plan (or of one block), one micro-batch."""
    found = list(expert_collectives(the_plan, block_index))
    if not found:
        return []
    sizes = size_function(tuple(c.size for c, _, _ in found))(*nums.size_args())
    return [(_numbers(c, route, float(size), nums), stage) for (c, route, stage), size in zip(found, sizes)]
