"""Work a call does, counted the same on every machine (issue 25: tests bound work, not seconds).

`measure(fn, *args)` runs fn under cProfile (and, when asked, tracemalloc) and returns a `Work`:
  calls      function calls (Python functions, builtins and generator resumptions) profiled in this
             thread -- and, with threads=True, in the threads fn starts (an AppTest script run);
  compiled   functions compiled by sympy.lambdify (the expensive, cold part of an evaluation);
  collections garbage-collector passes during the call (gc.callbacks);
  peak_bytes the most memory held at once during the call (tracemalloc; only with memory=True).
These depend on the code and its inputs, not on how fast or busy the machine is, so a bound on them
fails for a regression (more work) and never for a slow or shared machine. How fast the explorer
runs is measured in benchmarks/ (bench_limits for the bounded cases; bench_core, bench_cold, ...).

>>> work = measure(sorted, range(1000))
>>> work.calls, work.compiled, work.error
(1, 0, None)
>>> measure(int, "x").error.__class__.__name__
'ValueError'
"""
from __future__ import annotations

import cProfile
import gc
import pstats
import threading
import tracemalloc
from dataclasses import dataclass, field


CALLS_PER_COMPILED = 400_000
"""Calls one compiled function may cost on a cold cache: building its sympy expressions and lambdify
(measured 2026-12: 100,000-250,000, e.g. a cold `validate` 5.8 M calls for 22 functions). Bounds on
work that may start cold allow this much per function compiled, and bound the number compiled."""


@dataclass
class Work:
    value: object = None
    error: BaseException | None = None
    calls: int = 0
    compiled: int = 0
    collections: int = 0
    peak_bytes: int | None = None
    by_function: dict = field(default_factory=dict, repr=False)

    def allowance(self, calls: int) -> int:
        """`calls` plus CALLS_PER_COMPILED for each function this work compiled (a cold cache)."""
        return calls + CALLS_PER_COMPILED * self.compiled

    def __str__(self) -> str:
        top = sorted(self.by_function.items(), key=lambda kv: -kv[1])[:8]
        peak = f", peak {self.peak_bytes:,} B" if self.peak_bytes is not None else ""
        return (f"{self.calls:,} calls, {self.compiled} compiled, {self.collections} gc passes{peak}; "
                f"most called: {top}")


def _counts(profiles) -> tuple:
    calls, by_function = 0, {}
    for profile in profiles:
        stats = pstats.Stats(profile)
        calls += stats.total_calls
        for (filename, _line, name), (_cc, nc, *_rest) in stats.stats.items():
            if name == "<method 'disable' of '_lsprof.Profiler' objects>":
                calls -= nc                  # the profiler's own switch-off
                continue
            where = f"{'/'.join(filename.split('/')[-2:]) if filename != '~' else ''}:{name}"
            by_function[where] = by_function.get(where, 0) + nc
    return calls, by_function


def measure(fn, *args, memory: bool = False, threads: bool = False, errors=(Exception,), **kwargs) -> Work:
    """fn(*args, **kwargs) with its work counted; an exception of `errors` is kept in Work.error."""
    profiles = [cProfile.Profile()]
    work = Work()

    def on_collect(phase, _info):
        if phase == "start":
            work.collections += 1

    def in_thread(*_):                       # first event of a thread started by fn: profile it too
        profile = cProfile.Profile()
        profiles.append(profile)
        profile.enable()                     # replaces this hook in that thread

    if threads:
        threading.setprofile(in_thread)
    if memory:
        tracemalloc.start()
        tracemalloc.reset_peak()
    gc.callbacks.append(on_collect)
    profiles[0].enable()
    try:
        work.value = fn(*args, **kwargs)
    except errors as err:            # noqa: B030 (a tuple of exception classes)
        work.error = err
    finally:
        profiles[0].disable()
        gc.callbacks.remove(on_collect)
        if threads:
            threading.setprofile(None)
        if memory:
            work.peak_bytes = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
    work.calls, work.by_function = _counts(profiles)
    work.compiled = work.by_function.get("utilities/lambdify.py:lambdify", 0)
    return work
