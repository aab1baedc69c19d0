"""lambdify once, cache the compiled function (bounded)."""
from __future__ import annotations

from collections import OrderedDict

import sympy as sp


class BoundedCache:
    """A small LRU dict: compiled functions and plans are reused, memory stays bounded."""

    def __init__(self, max_entries: int):
        self.max_entries = max_entries
        self._data: OrderedDict = OrderedDict()

    def get(self, key, make):
        if key in self._data:
            self._data.move_to_end(key)
            return self._data[key]
        value = make()
        self._data[key] = value
        if len(self._data) > self.max_entries:
            self._data.popitem(last=False)
        return value

    def __len__(self):
        return len(self._data)

    def clear(self):
        self._data.clear()


_COMPILED = BoundedCache(512)


def compile_exprs(key, args: tuple, exprs):
    """A numpy function of `args` returning `exprs` (a tuple, or a callable building it
    -- then the expressions are only built on a cache miss), compiled once per key."""
    def make():
        built = exprs() if callable(exprs) else exprs
        return sp.lambdify(args, list(built), modules="numpy", cse=True)
    return _COMPILED.get(key, make)
