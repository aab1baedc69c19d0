"""Numbers of one block's micro-steps and of the collectives between blocks.

Each block cost's step expressions are lambdified once (bounded lru caches keyed
by the frozen BlockCost / collective tuple) over explorer.program.BLOCK_ARGS and
then called with numbers; nothing here substitutes in a loop. A collective's
time is split into its bandwidth part h*g and its latency (barrier) part
n_steps*L, the two terms of the BSP cost (DESIGN.md, collectives.time).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import sympy as sp

from explorer.cost import collectives as coll
from explorer.cost.evaluate import hardware_numbers, model_numbers
from explorer.cost.program import BLOCK_ARGS


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
    step: object        # block_cost.OpStep
    fwd_s: float
    bwd_s: float
    bwd_weight_s: float
    collectives: tuple  # CollNumbers, ...


@dataclass(frozen=True)
class Context:
    """What turns expressions into numbers for one (model, strategy, cluster)."""

    dims: tuple         # b, s, h, a, a_kv, f, V
    hw: dict            # explorer.evaluate.hardware_numbers
    level_names: tuple

    @classmethod
    def of(cls, model, strategy, cluster) -> "Context":
        return cls(model_numbers(model, strategy), hardware_numbers(cluster, strategy.dtype),
                   tuple(lv.name for lv in cluster.levels))

    def args(self, degree: int, level: int) -> tuple:
        hw = self.hw
        return self.dims + (degree, hw["g"][level], hw["L"][level], hw["F"], hw["eta"], hw["phi"],
                            hw["W"], hw["tau"], hw["beta"])


@lru_cache(maxsize=128)
def _block_fn(cost):
    exprs = []
    for step in cost.steps:
        exprs += [step.fwd_s, step.bwd_s, step.bwd_weight_s]
        exprs += _coll_exprs(step.collectives)
    return sp.lambdify(BLOCK_ARGS, exprs + [cost.params_dev], modules="numpy", cse=True)


@lru_cache(maxsize=256)
def _colls_fn(collectives: tuple):
    return sp.lambdify(BLOCK_ARGS, _coll_exprs(collectives) or [sp.Integer(0)], modules="numpy", cse=True)


def _coll_exprs(collectives) -> list:
    out = []
    for c in collectives:
        out += [c.bytes(), sp.Integer(0) + coll.latency_steps(c.kind, c.n)]   # a sympy number
    return out


def _colls(collectives, levels, values, ctx: Context) -> tuple:
    out = []
    for k, (c, level) in enumerate(zip(collectives, levels)):
        nbytes, steps = float(values[2 * k]), float(values[2 * k + 1])
        out.append(CollNumbers(c, level, nbytes, nbytes * ctx.hw["g"][level], steps * ctx.hw["L"][level]))
    return tuple(out)


def block_numbers(placed, ctx: Context) -> tuple:
    """(StepNumbers per operator, parameters per device) of one PlacedBlock, one micro-batch."""
    values = _block_fn(placed.cost)(*ctx.args(placed.split.degree, placed.level))
    steps, k = [], 0
    for step in placed.cost.steps:
        n = len(step.collectives)
        colls = _colls(step.collectives, [placed.level] * n, values[k + 3:k + 3 + 2 * n], ctx)
        steps.append(StepNumbers(step, float(values[k]), float(values[k + 1]), float(values[k + 2]), colls))
        k += 3 + 2 * n
    return tuple(steps), float(values[k])


def boundary_numbers(boundary, ctx: Context) -> tuple:
    """CollNumbers of a Boundary's collectives (each at its own level), one micro-batch."""
    if not boundary.collectives:
        return ()
    values = _colls_fn(boundary.collectives)(*ctx.args(1, 0))
    return _colls(boundary.collectives, boundary.levels, values, ctx)
