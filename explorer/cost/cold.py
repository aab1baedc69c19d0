"""The cost tree's compiled functions for evaluate(), from memory, from disk, or built.

A fresh process should not rebuild sympy expressions to evaluate a strategy it
(or an earlier process) has already seen. `numeric_tree` returns what evaluate()
needs of a cost tree (explorer.cost.tree.CostTree): its block kinds' compiled
functions with their degree and route, the block counts per stage and the
boundary groups' arrays. `superstep_function` returns the super-step variant's
compiled terms (explorer.cost.superstep.Variant.function(OUTPUTS)). Each is
looked up in memory, then on disk (explorer.cost.cache: private, HMAC-checked,
bounded); only on a miss is the tree built with sympy -- and its functions'
source, exactly what lambdify generated for the same expressions, is stored so
the next process executes that source again: one composition, cached.
`explorer.cost.explained.explained_latex` does the same for the LaTeX of `evaluate --json`.
"""
from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

import numpy as np

from explorer.cost import cache
from explorer.limits import spend
from explorer.cost.compile import compile_cache
from explorer.cost.generated import function_of, source_of
from explorer.cost.numeric import OUTPUTS, block_values, boundary_levels, boundary_values, structure_key


@dataclass(frozen=True)
class NumericKind:
    degree: int
    route: tuple        # fan-in per machine level of the block's operator group
    fn: object          # BLOCK_ARGS -> BLOCK_Q values (explorer.cost.tree.block_function)
    cp_route: tuple = ()  # its context-parallel group's route (() without cp)
    collective_kinds: tuple = ()  # the kinds of its operators' collectives, each once (the timeline's levels)


@dataclass(frozen=True, eq=False)
class NumericTree:
    """The numbers-only view of a CostTree (same functions, same arrays)."""

    stages: int
    kinds: tuple        # NumericKind, ...
    counts: np.ndarray  # stages x kinds
    arrays: dict | None  # the boundary groups' arrays (CostTree.arrays), None without groups
    size_fn: object
    n_sizes: int
    cp_algo: str = "ring"
    tied: tuple | None = None   # (last stage, route) of a tied embedding's copy (tree.TiedCopy), or None

    def block_values(self, nums) -> np.ndarray:
        return block_values(self.kinds, nums, self.cp_algo)

    def stage_quantities(self, values: np.ndarray) -> np.ndarray:
        """stages x BLOCK_Q x candidates: each stage's blocks' quantities summed (`values`, kinds x BLOCK_Q x
        candidates, from block_values) -- the one sum of blocks into stages that evaluate() and the
        timeline read (stage_values then adds the boundaries)."""
        return np.einsum("sk,kqc->sqc", self.counts, values)

    def boundary_values(self, nums, C: int):
        return boundary_values(self.stages, self.arrays, self.size_fn, self.n_sizes, nums, C)

    def boundary_levels(self, levels: int) -> np.ndarray:
        return boundary_levels(self.stages, self.arrays, levels)


_TREES = cache.BoundedCache(64)
_VARIANTS = cache.BoundedCache(64)
RESULTS = cache.BoundedCache(128)
"""Checked evaluations (explorer/cost/checked.py): (repr of model, strategy and cluster, gpus) -> Result; here so that
clear_memory forgets them with the trees they were computed from. A Result is ~46 KiB at p = 8 (gpt3-175b) and
keeps its Evaluation's cost tree alive (0.3-1.4 MiB), so only strategies of at most REMEMBERED_STAGES virtual stages
are remembered: the bound is then ~128 x 1.6 MiB (a 126-stage llama3.1-405b Result alone is 350 KiB, a 1,024-stage
one 2.7 MiB)."""
REMEMBERED_STAGES = 64
"""p x v of the largest strategy whose Result RESULTS keeps (the Megatron-LM and Megatron-Bridge runs have <= 64)."""


def clear_memory() -> None:
    """Forget what this process loaded or built (the disk cache stays), compiled functions included, so that
    the next evaluation is as cold as a fresh process's: for tests and benchmarks."""
    for store in (_TREES, _VARIANTS, RESULTS, compile_cache()):
        store.clear()


def numeric_tree(model, strategy, cluster) -> NumericTree:
    key = structure_key(model, strategy, cluster)
    return _TREES.get(key, lambda: _tree(repr(key), model, strategy, cluster))


def superstep_function(schedule: str, zero: int, overlap: bool, k_states: int, moe: bool = False,
                       grad_bytes: int | None = None, **options):
    """(STAGE_INPUTS + SCALAR_INPUTS) -> the OUTPUTS terms of the super-step variant; options: the
    overlaps that are on and the precision recipe's memory options, plain values (Strategy.options_of)."""
    key = (schedule, int(zero), bool(overlap), int(k_states), bool(moe), grad_bytes, OUTPUTS) + \
        tuple(sorted((k, on) for k, on in options.items() if on))
    return _VARIANTS.get(key, lambda: _variant(key))


def _variant(key: tuple):
    text = repr(("superstep",) + key)
    stored = cache.load("superstep", text)
    fn = function_of(stored) if stored else None
    if fn is not None:
        return fn
    from explorer.cost.superstep import variant
    spend(f"compiling the super-step terms of the {key[0]} schedule (ZeRO-{key[1]}; not seen before)")
    fn = variant(*key[:5], grad_bytes=key[5], **dict(key[7:])).function(OUTPUTS)
    source = source_of(fn)
    if source:
        cache.store("superstep", text, source)
    return fn


_ELSEWHERE: ContextVar = ContextVar("explorer_compile_elsewhere", default=None)


@contextmanager
def compile_elsewhere(compile_fn):
    """Inside the block, a cost tree found neither in memory nor on disk is first asked of
    `compile_fn(model, strategy, cluster, key_text) -> bool` (True: another process built the tree of
    `key_text` and stored it in the disk cache, where it is then loaded): the app's worker pool
    (explorer/runtime/offload.py), so that the first compile of a new structure leaves the interpreter that
    serves the class (issue 31). A context variable: only the work of this thread (one session's page run)."""
    token = _ELSEWHERE.set(compile_fn)
    try:
        yield
    finally:
        _ELSEWHERE.reset(token)


def _stored_tree(text: str) -> NumericTree | None:
    stored = cache.load("tree", text)
    if stored:
        try:
            return _tree_from(stored)
        except (KeyError, TypeError, ValueError, IndexError):
            pass
    return None


def _tree(text: str, model, strategy, cluster) -> NumericTree:
    found = cache.stored_or_elsewhere(_stored_tree, _ELSEWHERE.get(), model, strategy, cluster, text)
    if found is not None:
        return found
    from explorer.cost.tree import cost_tree
    spend(f"building the cost tree of {model.name!s:.40} (a structure not seen before)")
    full = cost_tree(model, strategy, cluster)
    groups = bool(full.groups)
    tied = None if full.tied is None else (full.tied.last, full.tied.route)
    kinds = tuple(NumericKind(k.degree, k.route, k.fn, k.cp_route,
                              tuple(dict.fromkeys(c.kind for step in k.cost.steps for c in step.collectives)))
                  for k in full.kinds)
    tree = NumericTree(full.plan.stages, kinds,
                       full.counts, full.arrays if groups else None, full.size_fn if groups else None,
                       len(full.sizes), strategy.cp_algo, tied)
    entry = _tree_entry(tree)
    if entry:
        cache.store("tree", text, entry)
    return tree


MAX_STORED_NUMBERS = 200_000
"""Trees with more array entries than this (hundreds of stages) stay in memory only."""


def _numbers(tree: NumericTree) -> int:
    return tree.counts.size + sum(x.size for x in (tree.arrays or {}).values() if isinstance(x, np.ndarray))


def tree_is_stored(model, strategy, cluster) -> bool:
    """Is the strategy's cost tree small enough for the disk cache (MAX_STORED_NUMBERS), where another process loads
    it instead of compiling it again (explorer/runtime/offload.py)? Its tree is this process's (built if need be)."""
    return _numbers(numeric_tree(model, strategy, cluster)) <= MAX_STORED_NUMBERS


def _tree_entry(tree: NumericTree):
    if _numbers(tree) > MAX_STORED_NUMBERS:
        return None
    kinds = [[k.degree, list(k.route), source_of(k.fn), list(k.cp_route), list(k.collective_kinds)]
             for k in tree.kinds]
    size = source_of(tree.size_fn) if tree.size_fn is not None else None
    if any(k[2] is None for k in kinds) or (tree.size_fn is not None and size is None):
        return None
    arrays = None if tree.arrays is None else {
        name: ({"array": x.tolist(), "dtype": str(x.dtype), "shape": list(x.shape)} if isinstance(x, np.ndarray)
               else [list(item) for item in x]) for name, x in tree.arrays.items()}
    tied = None if tree.tied is None else [tree.tied[0], list(tree.tied[1])]
    return {"stages": tree.stages, "kinds": kinds, "counts": _encode(tree.counts), "arrays": arrays,
            "size_fn": size, "n_sizes": tree.n_sizes, "cp_algo": tree.cp_algo, "tied": tied}


def _encode(x: np.ndarray) -> dict:
    return {"array": x.tolist(), "dtype": str(x.dtype), "shape": list(x.shape)}


def _decode(d: dict) -> np.ndarray:
    if d["dtype"] not in ("float64", "int64"):
        raise ValueError(d["dtype"])
    return np.array(d["array"], dtype=d["dtype"]).reshape(d["shape"])


def _tree_from(stored: dict) -> NumericTree:
    kinds = []
    for degree, route, source, cp_route, collective_kinds in stored["kinds"]:
        fn = function_of(source)
        if fn is None:
            raise ValueError("block function")
        if not all(isinstance(k, str) for k in collective_kinds):
            raise ValueError("collective kinds")
        kinds.append(NumericKind(int(degree), _route(route), fn, _route(cp_route), tuple(collective_kinds)))
    arrays, size_fn = None, None
    if stored["arrays"] is not None:
        arrays = {name: _decode(x) if isinstance(x, dict) else [tuple(item) for item in x]
                  for name, x in stored["arrays"].items()}
        size_fn = function_of(stored["size_fn"])
        if size_fn is None:
            raise ValueError("size function")
    tied = stored["tied"]
    if tied is not None:
        tied = (int(tied[0]), _route(tied[1]))
    if stored["cp_algo"] not in ("ring", "ulysses"):
        raise ValueError("cp_algo")
    return NumericTree(int(stored["stages"]), tuple(kinds), _decode(stored["counts"]), arrays, size_fn,
                       int(stored["n_sizes"]), stored["cp_algo"], tied)


def _route(values) -> tuple:
    """A stored route: whole fan-ins as ints, the average fan-in of an uneven group as a float
    (explorer.strategy.mesh.group_route)."""
    return tuple(int(c) if float(c).is_integer() else float(c) for c in values)
