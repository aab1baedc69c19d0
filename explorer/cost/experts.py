"""Expert parallelism (issue 11): the busiest device's load and the expert layers' all-to-alls.

An MoE layer's experts are spread over the `ep` devices of an expert-parallel group
(Megatron-Core; Lepikhin et al., GShard, ICLR'21 Sec 2.2); tokens travel to the device
holding their experts and back by two all-to-alls per layer and pass (dispatch, combine),
priced as the category ep_comm at the machine level the ep group crosses
(explorer.cost.plan.ep_group_route). The block's own cost (explorer.cost.block) holds the
all-to-alls symbolically; here they become the tree's collective groups.
"""
from __future__ import annotations

from dataclasses import replace

import sympy as sp

from explorer.cost.fused_dispatch import fused_factor
from explorer.symbols import t


def expert_load(model, ep: int) -> float:
    """The busiest ep device's routed tokens over the average (>= 1; the factor on its expert time
    and all-to-all bytes).

    * capacity factor c (model.moe_capacity_factor > 0): every expert takes c x its fair share,
      padded (Fedus et al., Switch Transformer, JMLR'22 Sec 2.2, Eq. 3; Megatron-Core
      moe_pad_expert_input_to_capacity): c;
    * a what-if share sigma of the busiest expert (model.expert_load_share > 0): its device holds
      it and E/ep - 1 experts at the average of the rest, (1 - sigma)/(E - 1) each:
      ep (sigma + (E/ep - 1)(1 - sigma)/(E - 1)) -- 1 when ep = 1 (one device holds every expert);
    * otherwise force-balanced, dropless routing, as the Megatron-Bridge benchmarks run: 1.
    """
    if not model.is_moe:
        return 1.0
    if model.moe_capacity_factor:
        return float(model.moe_capacity_factor)
    share, E = model.expert_load_share, model.experts
    if not share or E == 1:
        return 1.0
    return max(1.0, ep * (share + (E / ep - 1) * (1 - share) / (E - 1)))


def expert_collectives(the_plan, block_index: int | None = None):
    """(Collective, route, stage) of every all-to-all of the plan's expert layers, sizes at the
    layer's operator-parallel degree (block_expert_collectives); the fused dispatchers send a token once per
    remote NVLink domain (explorer/cost/fused_dispatch.py)."""
    replay, ep = the_plan.strategy.recompute == "full", the_plan.strategy.ep
    if ep <= 1:
        return
    blocks = the_plan.blocks if block_index is None else the_plan.blocks[block_index:block_index + 1]
    for placed in blocks:
        for c in block_expert_collectives(placed.cost, placed.split.degree, ep,
                                          replay and placed.block.kind == "layer",
                                          fused_factor(the_plan.model, the_plan.strategy, placed.ep_route)):
            yield c, placed.ep_route, placed.stage


def block_expert_collectives(cost, degree: int, ep: int, replay: bool, fused=1):
    """The all-to-alls of one block (its BlockCost's ep_collectives) at its operator-parallel `degree` and a
    group of `ep`: the plan's (expert_collectives) and the search's chain of nodes alike. `replay`: under full
    recomputation the backward pass replays the forward's dispatch and combine (Korthikanti et al. Sec 5: the
    whole layer is recomputed), counted in ep_comm. `fused`: the fused dispatchers' bytes over the all-to-all's
    (explorer.cost.fused_dispatch.fused_factor)."""
    if ep <= 1:
        return
    for c in cost.ep_collectives:
        c = ep_sized(c, degree, ep, fused)
        yield c
        if replay and c.phase == "fwd":
            yield replace(c, phase="bwd", op=c.op + " (recomputed)")


def ep_sized(c, degree: int, ep: int, fused=1):
    """Collective `c` of a block's ep_collectives at the layer's operator-parallel `degree` and the group of
    `ep`: an all-to-all's buffer is the device's own (block._routed_a2a), times `fused` for the fused dispatchers
    (explorer/cost/fused_dispatch.py fused_factor); the all-gather dispatcher's gathered array is ep devices' tokens
    (explorer/cost/moe_terms.py gather_collectives)."""
    size = c.size.subs(t, degree)
    if c.kind == "all_to_all" and fused != 1:
        size = size * sp.Rational(fused.numerator, fused.denominator)
    return replace(c, size=size if c.kind == "all_to_all" else size * ep, n=sp.Integer(ep))
