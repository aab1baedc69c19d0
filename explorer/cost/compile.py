"""lambdify once, cache the compiled function (bounded)."""
from __future__ import annotations

import sympy as sp

from explorer.cost.cache import BoundedCache  # noqa: F401 (re-exported)

_COMPILED = BoundedCache(512)


def compile_exprs(key, args: tuple, exprs):
    """A numpy function of `args` returning `exprs` (a tuple, or a callable building it
    -- then the expressions are only built on a cache miss), compiled once per key."""
    def make():
        built = exprs() if callable(exprs) else exprs
        return sp.lambdify(args, list(built), modules="numpy", cse=True)
    return _COMPILED.get(key, make)
