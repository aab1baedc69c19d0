"""The LaTeX of explain() for `evaluate --json`, from memory, from disk, or built: a fresh process that has
printed a strategy's formulas before prints them again without sympy (explorer.cost.cache, as
explorer.cost.cold does for the compiled functions)."""
from __future__ import annotations

from explorer.cost import cache

_LATEX = cache.BoundedCache(64)


def clear_memory() -> None:
    """Forget the LaTeX this process printed (the disk cache stays): for tests and benchmarks."""
    _LATEX.clear()


def explained_latex(model, strategy, cluster, gpus, result) -> tuple:
    """(total, terms, definitions) LaTeX of explain() for this evaluation."""
    key = repr((model, strategy, cluster, gpus))

    def make():
        stored = cache.load("latex", key)
        if _is_latex(stored):
            return stored[0], stored[1], stored[2]
        from explorer.cost.explain import explain
        sym = explain(model, strategy, cluster, gpus, result)
        value = (sym.total_latex(), sym.latex(), sym.definitions_latex())
        cache.store("latex", key, list(value))
        return value
    return _LATEX.get(key, make)


def _is_latex(stored) -> bool:
    return isinstance(stored, list) and len(stored) == 3 and isinstance(stored[0], str) and \
        all(isinstance(x, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in x.items())
            for x in stored[1:])
