"""Functions lambdify generated, as source that can be stored and executed again.

lambdify writes a Python function for an expression; its source and the global
names it reads (numpy's functions, the stage reductions) are what the disk cache
(explorer.cost.cache) keeps. `source_of` accepts a function only when every
global it reads resolves here to the very object lambdify bound it to, so that
`function_of` -- executing that source, and only after the cache verified the
entry's HMAC -- gives the same function: the same expressions, compiled once.
"""
from __future__ import annotations

import builtins
import functools
import inspect
import linecache

import numpy as np

from explorer.cost import cache
from explorer.cost.reductions import STAGE_FUNCTIONS


def plain_key(value) -> str | None:
    """repr(value) when it is made of str, int, float, bool, None and tuples only (the same text in
    every process), else None."""
    if isinstance(value, tuple):
        parts = [plain_key(x) for x in value]
        return None if None in parts else "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"
    return repr(value) if value is None or isinstance(value, (str, int, float, bool)) else None


def load_function(kind: str, text: str):
    """A compiled function stored under (kind, text), or None."""
    stored = cache.load(kind, text)
    return function_of(stored) if isinstance(stored, dict) else None


def store_function(kind: str, text: str, fn) -> None:
    source = source_of(fn)
    if source:
        cache.store(kind, text, source)


def _resolve(name: str):
    if name in STAGE_FUNCTIONS:
        return STAGE_FUNCTIONS[name]
    if name == "numpy":
        return np
    if name == "reduce":
        return functools.reduce
    if hasattr(np, name):
        return getattr(np, name)
    if hasattr(builtins, name):
        return getattr(builtins, name)
    raise KeyError(name)


def _global_names(code) -> set:
    names = set(code.co_names)
    for const in code.co_consts:
        if inspect.iscode(const):
            names |= _global_names(const)
    return names


def _source(fn) -> str:
    """The text lambdify generated: the whole of the pseudo-file it registered in linecache (that
    file holds just this function), read directly -- inspect.getsource would tokenize it again."""
    code = fn.__code__
    entry = linecache.cache.get(code.co_filename)
    if code.co_filename.startswith("<lambdifygenerated-") and code.co_firstlineno == 1 and entry:
        return "".join(entry[2])
    return inspect.getsource(fn)


def source_of(fn):
    """{source, names} of a lambdify-generated function, when every global it reads resolves here to
    the very object lambdify bound it to (then executing the source gives the same function)."""
    if isinstance(getattr(fn, "cached_source", None), dict):     # itself loaded from the cache
        return fn.cached_source
    try:
        source = _source(fn)
    except (OSError, TypeError):
        return None
    names = sorted(_global_names(fn.__code__))
    for name in names:
        try:
            if _resolve(name) is not fn.__globals__.get(name, getattr(builtins, name, None)):
                return None
        except KeyError:
            return None
    return {"source": source, "name": fn.__name__, "names": names}


@functools.lru_cache(maxsize=2048)
def _compiled(source: str):
    """The code object of a stored source. Many cache entries hold the same text (the disk cache of a 30-session
    class: 2,516 stored functions, 372 distinct texts), and compiling it was 4.7 % of the serving interpreter's CPU
    under 100 sessions (py-spy, benchmarks/bench_load.py --diverse): each text is compiled once per process. At most
    2,048 code objects of a few KB each."""
    return compile(source, "<bridging-dl cache>", "exec")


def function_of(stored):
    """The function a verified cache entry's source defines (explorer.cost.cache checked its HMAC)."""
    try:
        namespace = {name: _resolve(name) for name in stored["names"]}
        namespace["__builtins__"] = {}
        code = _compiled(stored["source"])
        exec(code, namespace)   # our own generated source, HMAC-verified (explorer.cost.cache)
        fn = namespace[stored["name"]]
        fn.cached_source = {"source": stored["source"], "name": stored["name"], "names": list(stored["names"])}
        return fn
    except Exception:           # a stale or damaged entry: rebuild instead
        return None
