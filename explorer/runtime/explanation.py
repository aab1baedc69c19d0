"""The Cost page's symbolic explanation as plain text, built once per strategy, in a worker process where it can.

explorer.cost.explain.explain() composes a strategy's cost tree as sympy expressions and prints them: 30-80 ms
for a one-stage model, 0.6-1.1 s for gpt3-175b at p = 32 (benchmarks/bench_explain.py), on the interpreter that
serves the class (issue 31). What the Cost page and the Export page show of it is text: each category's LaTeX,
the definitions', the total's, the stage they describe and the symbols' legend -- an `Explanation`.
`explanation()` looks it up in memory (bounded), then in the disk cache (explorer.cost.cache: HMAC-checked,
bounded), then asks the function installed by `explain_elsewhere` (the app's worker pool:
explorer/runtime/offload.py `explains_in`, which runs the allowlisted "explain" job, explorer/runtime/jobs.py,
and waits without holding the interpreter), and only then builds it here; what is built is stored on disk, so
the next process, a worker's or the server's, reads it back. One composition: the text is explain()'s own.
"""
from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from explorer.cost import cache
from explorer.cost.explain import explain
from explorer.io.glossary import legend_of
from explorer.limits import spend

KIND = "explanation"      # its kind in the disk cache


@dataclass(frozen=True)
class Explanation:
    """explain()'s printed view: what pages show (the SymbolicCost's printing methods, same names)."""

    stage: int               # the most loaded stage the terms describe
    terms_latex: dict        # category -> LaTeX (SymbolicCost.latex)
    definitions: dict        # LaTeX symbol -> LaTeX (SymbolicCost.definitions_latex)
    total: str               # SymbolicCost.total_latex
    legend: tuple            # (LaTeX, meaning) of every symbol used (explorer.io.glossary.legend_of)

    def latex(self) -> dict:
        return dict(self.terms_latex)

    def definitions_latex(self) -> dict:
        return dict(self.definitions)

    def total_latex(self) -> str:
        return self.total


def explanation_key(model, strategy, cluster) -> str:
    """The key text of a strategy's explanation (the objects' reprs: every field that changes a formula)."""
    return repr((model, strategy, cluster))


def build(model, strategy, cluster) -> Explanation:
    """explain() of the strategy, printed (sympy: the slow part)."""
    spend(f"building the formulas of {model.name!s:.40}")
    sym = explain(model, strategy, cluster)
    return Explanation(int(sym.stage), sym.latex(), sym.definitions_latex(), sym.total_latex(),
                       tuple((str(tex), str(text)) for tex, text in legend_of(sym)))


def to_plain(x: Explanation) -> dict:
    return {"stage": x.stage, "latex": x.terms_latex, "definitions": x.definitions, "total": x.total,
            "legend": [list(row) for row in x.legend]}


def _texts(d) -> bool:
    return isinstance(d, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in d.items())


def from_plain(d) -> Explanation | None:
    """The Explanation a stored entry holds, or None when it is not one (a foreign or older entry)."""
    if not (isinstance(d, dict) and isinstance(d.get("stage"), int) and _texts(d.get("latex"))
            and _texts(d.get("definitions")) and isinstance(d.get("total"), str)
            and isinstance(d.get("legend"), list)
            and all(isinstance(r, list) and len(r) == 2 and all(isinstance(x, str) for x in r)
                    for r in d["legend"])):
        return None
    return Explanation(d["stage"], dict(d["latex"]), dict(d["definitions"]), d["total"],
                       tuple((tex, text) for tex, text in d["legend"]))


def stored(key_text: str) -> Explanation | None:
    return from_plain(cache.load(KIND, key_text))


def store(key_text: str, x: Explanation) -> bool:
    return cache.store(KIND, key_text, to_plain(x))


_MEMORY = cache.BoundedCache(64)
_ELSEWHERE: ContextVar = ContextVar("explorer_explain_elsewhere", default=None)


def clear_memory() -> None:
    """Forget the explanations this process holds (the disk cache stays): for tests and benchmarks."""
    _MEMORY.clear()


@contextmanager
def explain_elsewhere(explain_fn):
    """Inside the block, an explanation found neither in memory nor on disk is first asked of
    `explain_fn(model, strategy, cluster, key_text) -> bool` (True: another process built it and stored it
    in the disk cache under `key_text`, where it is then read). A context variable: this thread's work only."""
    token = _ELSEWHERE.set(explain_fn)
    try:
        yield
    finally:
        _ELSEWHERE.reset(token)


def explanation(model, strategy, cluster) -> Explanation:
    """The strategy's Explanation: from memory, from disk, from another process, or built here."""
    key = explanation_key(model, strategy, cluster)

    def make() -> Explanation:
        found = cache.stored_or_elsewhere(stored, _ELSEWHERE.get(), model, strategy, cluster, key)
        if found is not None:
            return found
        made = build(model, strategy, cluster)
        store(key, made)
        return made
    return _MEMORY.get(key, make)
