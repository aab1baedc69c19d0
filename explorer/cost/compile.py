"""lambdify once, cache the compiled function (bounded)."""
from __future__ import annotations

import sympy as sp

from explorer.cost import generated
from explorer.cost.cache import BoundedCache  # noqa: F401 (re-exported)

_COMPILED = BoundedCache(512)


def compile_exprs(key, args: tuple, exprs):
    """A numpy function of `args` returning `exprs` (a tuple, or a callable building it
    -- then the expressions are only built on a cache miss), compiled once per key. A key of plain
    values (a block's structure) also finds the function lambdify generated in an earlier process
    (explorer.cost.generated: the disk cache), without building the expressions."""
    def make():
        text = generated.plain_key((key, tuple(str(a) for a in args)))
        fn = generated.load_function("fn", text) if text else None
        if fn is None:
            built = exprs() if callable(exprs) else exprs
            # docstring_limit=0: lambdify would otherwise print every expression again, with
            # sympy's term ordering, only to put it in the function's __doc__
            fn = sp.lambdify(args, list(built), modules="numpy", cse=True, docstring_limit=0)
            if text:
                generated.store_function("fn", text, fn)
        return fn
    return _COMPILED.get(key, make)
