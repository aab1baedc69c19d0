"""lambdify once, cache the compiled function (bounded). sympy is imported only to lambdify: a function
found in memory or on disk needs none."""
from __future__ import annotations

from explorer.cost import generated
from explorer.cost.cache import BoundedCache  # noqa: F401 (re-exported)
from explorer.limits import spend

_COMPILED = BoundedCache(512)


def compile_cache() -> BoundedCache:
    """The functions compiled in this process, by key (explorer.cost.cold.clear_memory empties it)."""
    return _COMPILED


def lambdify(args, exprs, modules="numpy", cse: bool = True):
    """sympy.lambdify as every cost function is compiled: common subexpressions shared (cse), no
    docstring (lambdify would print every expression a second time, with sympy's term ordering, only
    for __doc__: ~0.3 s of a cold validate), no search for implemented_function (use_imps: none is
    used; the walk over every node cost ~0.6 s of a cold search)."""
    import sympy as sp
    spend("compiling the cost formulas")
    return sp.lambdify(args, exprs, modules=modules, cse=cse, docstring_limit=0, use_imps=False)


def compile_exprs(key, args, exprs, disk_key=None, names: tuple | None = None):
    """A numpy function of `args` returning `exprs` (a tuple, or a callable building it
    -- then the expressions are only built on a cache miss), compiled once per key. A key of plain
    values (a block's structure) also finds the function lambdify generated in an earlier process
    (explorer.cost.generated: the disk cache), without building the expressions; `disk_key` (a
    callable giving plain values) stands in for a key that is not plain, made only on a miss.
    `names`: the arguments' names, when `args` is a callable giving the symbols (made only on a miss)."""
    def make():
        plain = disk_key() if disk_key is not None else key
        text = generated.plain_key((plain, names if names is not None else tuple(str(a) for a in args)))
        fn = generated.load_function("fn", text) if text else None
        if fn is None:
            built = exprs() if callable(exprs) else exprs
            fn = lambdify(args() if callable(args) else args, list(built))
            if text:
                generated.store_function("fn", text, fn)
        return fn
    return _COMPILED.get(key, make)
