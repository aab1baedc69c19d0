"""An MoE block's all-to-alls in seconds for the search's chain of nodes, priced as the cost tree prices them
(explorer.cost.tree.size_function, Numbers.collective_seconds). Builds sympy expressions: the search
imports it only for a model with experts."""
from __future__ import annotations

import numpy as np

from explorer.cost import collectives as coll
from explorer.cost.experts import ep_sized
from explorer.cost.tree import size_function


def a2a_seconds(cost, degree: int, route: tuple, nums, recompute: str, ep: int, fused=1) -> tuple:
    """(forward, backward) seconds of one block's all-to-alls for one micro-batch (arrays over the
    micro-batch sizes of `nums`), priced as the tree prices them (Numbers.collective_seconds): for
    the search's chain of nodes, which adds them to the block's F and B. `fused`: the dispatcher's bytes over
    the all-to-all's (explorer.cost.fused_dispatch.fused_factor)."""
    colls = [ep_sized(c, degree, ep, fused) for c in cost.ep_collectives]
    if not colls or ep <= 1:
        return 0.0, 0.0
    sizes = size_function(tuple(c.size for c in colls))(*nums.size_args())
    out = {"fwd": 0.0, "bwd": 0.0}
    for c, size in zip(colls, sizes):
        n = int(c.n)
        sent = coll.bytes_per_device(c.kind, np.asarray(size, dtype=float), n)
        secs = nums.collective_seconds(sent, float(coll.latency_steps(c.kind, n)), c.kind, route)
        out[c.phase] = out[c.phase] + secs
        if recompute == "full" and c.phase == "fwd":     # replayed in the backward (expert_collectives)
            out["bwd"] = out["bwd"] + secs
    return out["fwd"], out["bwd"]
