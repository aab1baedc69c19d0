"""Tests that depend neither on the machine nor on their order (issue 25).

No test asserts on a clock: a bound on seconds fails on a slow or busy machine and passes a
regression on a fast one. Tests bound work instead (tests/work.py: calls, compiled functions, peak
memory, events) and benchmarks/ measure the seconds. The scan below reads every tests/*.py and
fails on an `assert` (or an `if ...: pytest.fail / raise`) whose condition reads a clock --
directly, or through a variable assigned from one (`start = time.perf_counter()`, `elapsed = ...`).
Waiting with a deadline (`while time.time() < end:`), sleeping and timeouts stay allowed.

And the session's disk cache is a fresh temporary directory (tests/conftest.py), for this process
and the processes it starts, never the user's ~/.cache/bridging-dl.
"""
from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
CLOCK_FUNCTIONS = {"time", "time_ns", "perf_counter", "perf_counter_ns", "process_time", "process_time_ns",
                   "thread_time", "thread_time_ns", "monotonic", "monotonic_ns", "clock_gettime",
                   "clock_gettime_ns", "default_timer", "timeit", "repeat", "now", "utcnow", "today"}
CLOCK_MODULES = {"time", "timeit", "datetime", "date"}
ELAPSED = re.compile(r"elapsed|duration_wall|wall_s$|cpu_s$", re.I)


def _dotted(node) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return ""


def _clock_imports(tree) -> set:
    """Names bound by `from time import perf_counter` (and timeit, datetime) in the file."""
    return {alias.asname or alias.name for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.module in ("time", "timeit")
            for alias in node.names if alias.name in CLOCK_FUNCTIONS}


def _reads_clock(node, tainted: set, imported: set) -> bool:
    for sub in ast.walk(node):
        if isinstance(sub, ast.Call):
            parts = _dotted(sub.func).split(".")
            if (len(parts) == 1 and parts[0] in imported
                    or len(parts) > 1 and parts[-1] in CLOCK_FUNCTIONS and parts[-2] in CLOCK_MODULES):
                return True
        if isinstance(sub, ast.Name) and sub.id in tainted:
            return True
    return False


def _targets(node) -> list:
    out = []
    for target in (node.targets if isinstance(node, ast.Assign) else [node.target]):
        out += [n.id for n in ast.walk(target) if isinstance(n, ast.Name)]
    return out


def _fails(body) -> bool:
    """A block that fails the test: raise, pytest.fail or assert."""
    for node in (n for statement in body for n in ast.walk(statement)):
        if isinstance(node, (ast.Raise, ast.Assert)):
            return True
        if isinstance(node, ast.Call) and _dotted(node.func).endswith("fail"):
            return True
    return False


def _on_elapsed(test) -> bool:
    """An ordering comparison of something named like a measured duration (result.elapsed_s < 5)."""
    for node in ast.walk(test):
        if isinstance(node, ast.Compare) and any(isinstance(op, (ast.Lt, ast.LtE, ast.Gt, ast.GtE)) for op in node.ops):
            names = [n.id if isinstance(n, ast.Name) else n.attr for side in [node.left, *node.comparators]
                     for n in ast.walk(side) if isinstance(n, (ast.Name, ast.Attribute))]
            if any(ELAPSED.search(name) for name in names):
                return True
    return False


def time_assertions(source: str) -> list:
    """(line, text) of each assertion in `source` that reads a clock or a variable set from one."""
    tree = ast.parse(source)
    imported, found = _clock_imports(tree), []
    scopes = [tree] + [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    for scope in scopes:
        nodes = list(ast.walk(scope)) if scope is not tree else list(ast.iter_child_nodes(tree))
        assigns = [n for n in nodes if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and n.value]
        tainted, grew = set(), True
        while grew:                                      # names set from a clock, or from such names
            before = len(tainted)
            for node in assigns:
                if _reads_clock(node.value, tainted, imported):
                    tainted |= set(_targets(node))
            grew = len(tainted) > before
        for node in nodes:
            if isinstance(node, ast.Assert) and (_reads_clock(node.test, tainted, imported) or _on_elapsed(node.test)):
                found.append((node.lineno, ast.get_source_segment(source, node)))
            elif isinstance(node, ast.If) and _reads_clock(node.test, tainted, imported) and _fails(node.body):
                found.append((node.lineno, ast.get_source_segment(source, node.test)))
    return sorted(set(found))


def test_no_test_asserts_on_wall_clock_or_cpu_time():
    found = [f"tests/{path.name}:{line}: {text}" for path in sorted(TESTS.glob("*.py"))
             for line, text in time_assertions(path.read_text())]
    assert not found, "assert work (tests/work.py), time in benchmarks/:\n" + "\n".join(found)


PLANTED = [
    "import time\ndef test_x():\n    start = time.perf_counter()\n    f()\n    assert time.perf_counter() - start < 1\n",
    "import time\ndef test_x():\n    t0 = time.thread_time()\n    f()\n    elapsed = time.thread_time() - t0\n"
    "    assert elapsed < 2.0\n",
    "from time import monotonic as clock\ndef test_x():\n    a = clock()\n    b, c = a + 1, 2\n    assert b < 5\n",
    "import time\ndef timed(fn):\n    cpu, wall = time.process_time(), time.time()\n    fn()\n"
    "    cpu, wall = time.process_time() - cpu, time.time() - wall\n    assert cpu < 2 and wall < 10, cpu\n",
    "import time, pytest\ndef test_x():\n    s = time.time()\n    f()\n    if time.time() - s > 3:\n"
    "        pytest.fail('slow')\n",
    "import datetime\ndef test_x():\n    t = datetime.datetime.now()\n    f()\n    assert (datetime.datetime.now() - t).seconds < 1\n",
    "def test_x(result):\n    assert result.elapsed_s < 5\n",
]
ALLOWED = [
    "import time\ndef wait(page):\n    end = time.time() + 5\n    while time.time() < end:\n        time.sleep(0.2)\n"
    "    raise AssertionError('still waiting')\n",
    "import time\ndef test_x():\n    start = time.perf_counter()\n    assert f() == 1\n",
    "def test_x(out):\n    assert 'elapsed_s' in out and out['iteration_time_s'] < 5\n",
    "import time\ndef test_x():\n    time.sleep(0.1)\n    assert g(timeout=5)\n",
]


def test_the_scan_finds_planted_time_assertions_and_allows_waiting():
    for source in PLANTED:
        assert time_assertions(source), source
    for source in ALLOWED:
        assert time_assertions(source) == [], source


def test_the_session_uses_a_fresh_private_disk_cache(session_cache):
    from explorer.cost import cache
    user = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "bridging-dl"
    assert os.environ["BRIDGING_DL_CACHE"] == str(session_cache)
    assert session_cache.parent.name.startswith("bridging-dl-tests-") and session_cache != user
    assert cache.directory() == session_cache
    assert not session_cache.parent.stat().st_mode & 0o077           # private: the cache is on, not off
    child = subprocess.run([sys.executable, "-c", "from explorer.cost import cache; print(cache.directory())"],
                           cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)), capture_output=True, text=True,
                           check=True)
    assert child.stdout.strip() == str(session_cache)                 # a CLI or server a test starts: the same
