"""The device mesh: named axes (dp, tp, pp; cp and ep follow), a rank order, and the route of
each communication group through the machine levels.

Ranks are numbered with the first axis of the order varying fastest -- Megatron-LM's
default order tp-cp-ep-dp-pp gives rank = stage*d*t + replica*t + tp_index (Narayanan
et al. SC'21 Sec 3; Megatron-LM initialize_model_parallel / RankGenerator). A group
crosses machine level i when its ranks do not all sit in one unit of that level; units
are contiguous rank ranges, so a group's lowest and highest rank decide (span_level).
A group's *route* is its fan-in at every level: how many ranks share a node, how many
nodes it spans, ... (group_route); hierarchical collectives are priced level by level
from it (explorer.cost.collectives.level_shares). No axis is hard-coded outside this
module: every group is "the ranks along one axis with the other coordinates fixed".
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

AXES = ("tp", "cp", "ep", "dp", "pp")
DEFAULT_ORDER = "-".join(AXES)


@dataclass(frozen=True)
class Mesh:
    """Axis sizes in rank order, fastest-varying first: ((name, size), ...)."""

    axes: tuple

    @classmethod
    def of(cls, order: str = DEFAULT_ORDER, **sizes) -> "Mesh":
        names = order.split("-")
        return cls(tuple((name, int(sizes.get(name, 1))) for name in names))

    @property
    def devices(self) -> int:
        n = 1
        for _, size in self.axes:
            n *= size
        return n

    def size(self, axis: str) -> int:
        return dict(self.axes)[axis]

    def stride(self, axis: str) -> int:
        """Rank distance between neighbours along `axis`."""
        out = 1
        for name, size in self.axes:
            if name == axis:
                return out
            out *= size
        raise KeyError(axis)

    def rank(self, **coords) -> int:
        return sum(coords.get(name, 0) * self.stride(name) for name, _ in self.axes)

    def bases(self, axis: str, **fixed) -> list:
        """Rank of index 0 along `axis` for every combination of the other axes' coordinates
        (those named in `fixed` held at the given value)."""
        return self.base_array(axis, **fixed).tolist()

    def base_array(self, axis: str, **fixed) -> np.ndarray:
        """bases() as an integer array, in the same order (the first other axis outermost), built by
        broadcasting: a mesh of 10,000 replicas has 10,000 bases per group, priced for every candidate."""
        out = np.zeros(1, dtype=np.int64)
        for name, size in self.axes:
            if name != axis:
                values = np.array([fixed[name]] if name in fixed else range(size), dtype=np.int64)
                out = (out[:, None] + values[None, :] * self.stride(name)).ravel()
        return out


@lru_cache(maxsize=4096)
def span_level(cluster, low: int, high: int) -> int:
    """The innermost level one of whose units holds every rank from low to high; ranks beyond the
    levels' fanouts sit on more units of the outermost level (the network grows with the run)."""
    for i, unit in enumerate(cluster.units):
        if low // unit == high // unit:
            return i
    return len(cluster.levels) - 1


@lru_cache(maxsize=8192)
def group_level(cluster, mesh: Mesh, axis: str, size: int | None = None, **fixed) -> int:
    """Slowest level crossed by the groups along `axis` (or by its consecutive sub-groups of
    `size` indices, e.g. a layer split over part of the tp group), other coordinates free
    except those in `fixed` (e.g. pp=stage)."""
    n = mesh.size(axis)
    size = n if size is None else size
    if size <= 1:
        return 0
    step = mesh.stride(axis)
    starts = (mesh.base_array(axis, **fixed)[:, None] + np.arange(n // size)[None, :] * size * step).ravel()
    return max_span_level(cluster, starts, starts + (size - 1) * step)


@lru_cache(maxsize=8192)
def pair_level(cluster, mesh: Mesh, axis: str, i: int, j: int) -> int:
    """Slowest level crossed by the point-to-point pairs between indices i and j of `axis`
    (pipeline stages sending to each other), one pair per combination of the other axes."""
    low, high = sorted((i, j))
    step = mesh.stride(axis)
    bases = mesh.base_array(axis)
    return max_span_level(cluster, bases + low * step, bases + high * step)


def max_span_level(cluster, lows: np.ndarray, highs: np.ndarray) -> int:
    """max over k of span_level(cluster, lows[k], highs[k]), at once: the innermost level one of whose units
    holds each pair (span_level is monotone: a pair inside a unit of level i is inside one of every outer level)."""
    for i, unit in enumerate(cluster.units):
        if np.array_equal(lows // unit, highs // unit):
            return i
    return len(cluster.levels) - 1


def top_level(route: tuple) -> int:
    """The outermost level a route crosses (0 for a group inside one device's node, or of one rank)."""
    for i in range(len(route) - 1, -1, -1):
        if route[i] > 1:
            return i
    return 0


def _route_of(cluster, ranks: list) -> tuple:
    """Fan-in per level of one group: ranks per innermost unit, units per next unit, ... The
    outermost level holds the whole run (it grows with the run), so its fan-in is what is left."""
    counts = [len(ranks)]
    for unit in cluster.units[:-1]:
        counts.append(len({rank // unit for rank in ranks}))
    counts.append(1)
    return tuple(counts[i] / counts[i + 1] if counts[i] % counts[i + 1] else counts[i] // counts[i + 1]
                 for i in range(len(cluster.levels)))


@lru_cache(maxsize=8192)
def group_route(cluster, mesh: Mesh, axis: str, size: int | None = None, **fixed) -> tuple:
    """Route of the groups along `axis` (or of consecutive sub-groups of `size` indices), other
    coordinates free except those in `fixed`: the fan-in at each machine level, innermost first
    (its product is the group size). Of several groups the one spread widest (most units at the
    outermost levels) decides, as the slowest group decides a BSP step."""
    n = mesh.size(axis)
    size = n if size is None else size
    if size <= 1:
        return (1,) * len(cluster.levels)
    step = mesh.stride(axis)
    routes = {_route_of(cluster, [base + (g * size + k) * step for k in range(size)])
              for base in mesh.bases(axis, **fixed) for g in range(n // size)}
    return max(routes, key=lambda route: tuple(reversed(route)))


@lru_cache(maxsize=8192)
def joint_route(cluster, mesh: Mesh, axes: tuple, **fixed) -> tuple:
    """Route of the groups spanned by several axes together (all their index combinations, the
    other coordinates fixed): e.g. dp x cp, the ranks that reduce gradients under context
    parallelism (Megatron-LM's data-parallel-with-cp group). The widest group decides."""
    present = [axis for axis in axes if mesh.size(axis) > 1]
    if len(present) <= 1:
        return group_route(cluster, mesh, present[0] if present else axes[0], **fixed)
    offsets = [sum(c * mesh.stride(axis) for axis, c in zip(present, combo))
               for combo in itertools.product(*(range(mesh.size(axis)) for axis in present))]
    routes = {_route_of(cluster, [base + o for o in offsets])
              for base in mesh.bases(present[0], **fixed) if all(
                  (base // mesh.stride(axis)) % mesh.size(axis) == 0 for axis in present[1:])}
    return max(routes, key=lambda route: tuple(reversed(route)))


@lru_cache(maxsize=8192)
def pair_route(cluster, mesh: Mesh, axis: str, i: int, j: int) -> tuple:
    """Route of the point-to-point pairs between indices i and j of `axis`: fan-in 2 at the
    level they cross."""
    level = pair_level(cluster, mesh, axis, i, j)
    return tuple(2 if k == level else 1 for k in range(len(cluster.levels)))
