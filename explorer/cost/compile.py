"""lambdify once, cache the compiled function (bounded). sympy is imported only to lambdify: a function
found in memory or on disk needs none."""
from __future__ import annotations

import importlib
import threading

import numpy

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
    _numpy_namespace()
    return sp.lambdify(args, exprs, modules=modules, cse=cse, docstring_limit=0, use_imps=False)


NUMPY_IMPORT = "import numpy; from numpy import *; from numpy.linalg import *"
"""sympy's command for lambdify's numpy namespace (sympy/utilities/lambdify.py, MODULES["numpy"], sympy 1.14)."""


def _numpy_namespace() -> None:
    """Fill lambdify's numpy namespace once per process as sympy would, but with numpy's public names listed
    instead of `from numpy import *`: numpy 2 exports its subpackages in __all__ and imports them lazily on first
    access (numpy/__init__.py __getattr__, __numpy_submodules__), so the star import loads f2py, testing, ma,
    random, polynomial, fft... (0.23 s CPU in a fresh process, listed: 2 ms) that no generated
    function reads (explorer.cost.generated._resolve). The namespace gets the same objects under the same names
    otherwise, so lambdify generates and binds exactly the same functions."""
    with _NAMESPACE_LOCK:      # MODULES is sympy's global: two sessions' first compiles must not interleave
        _fill_numpy_namespace(importlib.import_module("sympy.utilities.lambdify"))


_NAMESPACE_LOCK = threading.Lock()


def _fill_numpy_namespace(module) -> None:
    entry = module.MODULES.get("numpy")
    if entry is None or entry[0] != entry[1] or entry[3] != (NUMPY_IMPORT,):
        return          # already filled, or a sympy whose command differs: left to sympy
    lazy = set(getattr(numpy, "__numpy_submodules__", ()))
    names = [n for n in numpy.__all__ if n not in lazy and n.isidentifier()]
    command = f"import numpy; from numpy import {', '.join(names)}; from numpy.linalg import *"
    module.MODULES["numpy"] = entry[:3] + ((command,),)
    try:
        module._import("numpy")
    finally:
        module.MODULES["numpy"] = entry


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
