"""Waiting for a worker process in tests of the pool (tests/test_workers.py, tests/test_offload.py): a condition
polled until it holds, under a bound generous enough for a worker's first imports on a busy machine."""
from __future__ import annotations

import time

JOB_WAIT_S = 120          # a generous bound on a job that must finish (a worker's first imports included)


def wait_until(condition, timeout: float) -> bool:
    """Poll `condition` until it holds or `timeout` seconds have passed."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if condition():
            return True
        time.sleep(0.01)
    return condition()


def spinning(pool, owner: str, first: bool = False):
    """A long selftest "spin" job of `owner` that a worker has started (`first`: a job a page waits for)."""
    job = pool.submit(owner, "spin", {"seconds": 120}, first=first)
    assert wait_until(lambda: job.state == "running", JOB_WAIT_S), job
    return job
