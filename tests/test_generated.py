"""explorer/cost/generated.py: lambdify's functions as stored source, executed again (each text compiled once)."""
import sympy

from explorer.cost.generated import _compiled, function_of, source_of


def test_a_stored_source_gives_the_same_function_and_is_compiled_once_per_process():
    x, y = sympy.symbols("x y")
    fn = sympy.lambdify((x, y), sympy.Max(x, y) * 2 + sympy.sqrt(x), modules="numpy")
    stored = source_of(fn)
    assert stored and stored["name"] == fn.__name__
    stored = {**stored, "source": stored["source"] + "\n# test_generated\n"}     # a text no other test compiled
    before = _compiled.cache_info()
    first, second = function_of(stored), function_of(stored)
    after = _compiled.cache_info()
    assert after.misses == before.misses + 1 and after.hits == before.hits + 1
    assert first is not second and first(4.0, 3.0) == second(4.0, 3.0) == fn(4.0, 3.0) == 10.0
    assert first.cached_source["source"] == stored["source"]


def test_a_damaged_source_gives_none():
    assert function_of({"source": "def f(:\n", "name": "f", "names": []}) is None
    assert function_of({"source": "def f(): return 1\n", "name": "g", "names": []}) is None
