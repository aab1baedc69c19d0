"""Heavy work off the interpreter that serves the class: a bounded pool of worker processes (issue 31 item 4).

One Streamlit process runs every student's script in one Python interpreter, so a 30-second search
holds up thirty sessions. `WorkerPool` runs such jobs -- searches, first compiles of a new model structure,
PNG/SVG renderings (kaleido), the reference run -- in a few separate processes instead:

* **bounded**: `size` processes (default min(2, cpu count); `$BRIDGING_DL_WORKERS` sets it, docs/limits.md),
  each a fresh interpreter running explorer/runtime/worker.py (never a fork of a server that runs threads),
  in a process group of its own, at a lower CPU priority;
* **room for pages**: a job a page waits for (`submit(first=True)`: the first compile of a new structure, a
  strategy's formulas, a model's presets, a strategy's timelines) may run on one worker beyond `size`, and at most
  `size` workers run the jobs no page waits for (searches, images, runs), so a page never waits behind a search,
  and a first compile seldom runs in the serving interpreter, where it holds up every session (in a worker, at
  nice 10, it slows only the page that waits for it). The extra worker starts with the others (`start()`), else
  when such a job finds every worker busy; an idle worker holds about 144 MiB. Without it, thirty sessions'
  searches and first compiles held every worker and the next compiles ran in the serving interpreter: 30 diverse
  sessions with searches, 47.3 s of
  serving CPU and page actions p95 5.9 s; with a third worker 37.2 s and 3.8 s; with this one 33.1 s and 3.2 s
  (docs/benchmarks-classroom.md; a third worker for pages only while a search runs: 45.1 s and 5.0 s). If the
  extra worker cannot start, the page jobs waiting for it fail at once (the page then builds what it needed itself);
* **plain data only**: a job is a name from the allowlist (explorer/runtime/jobs.py) and plain-data
  arguments; its result is plain data too. A name outside the pool's allowlist is refused;
* **one job per owner and kind**: an owner (a Streamlit session) has at most one job of each kind
  (search, image, run, compile, explain, presets, superstep, microstep); a new request replaces the previous one,
  which is cancelled;
* **cancellable within 1 s**: a running job's `spend()` checks (explorer/limits.py) see the request at
  their next loop step; a job still running `CANCEL_GRACE_S` later is terminated with its process group;
* **progress**: a job's `progress(fraction, message)` calls reach `Job.fraction` / `Job.message`;
* **crashes are messages**: a worker that dies (killed, out of memory) fails its job with one line, and
  a fresh worker takes its place; an exception inside a job becomes its `error`, never a traceback.

`size=0` is the synchronous mode (`BRIDGING_DL_WORKERS=0`): `submit` runs the job in the caller's thread
before it returns (notebooks, debugging). The app's default, and its tests', is the pool.
"""
from __future__ import annotations

import itertools
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from multiprocessing import connection
from pathlib import Path
from typing import Any, Callable

from explorer.errors import ExplorerError
from explorer.runtime.jobs import ALL_JOBS, JOBS, plain, run_job, short
from explorer.runtime.worker import ENTRY, serve  # noqa: F401 (serve: "from explorer.runtime.workers import serve")

WORKERS_ENV = "BRIDGING_DL_WORKERS"
"""Worker processes of the pool: an integer >= 0 (0 = synchronous: jobs run in the caller's thread)."""
MAX_WORKERS = 64
CANCEL_GRACE_S = 0.5
"""A cancelled job that has not stopped at a spend() check by then is terminated (with its children)."""
TICK_S = 0.05               # the dispatcher's wake-up period (cancel deadlines, owners that left)
MAX_QUEUED = 256            # jobs waiting for a worker, all owners together: beyond, a request is refused


# ---- the pool ---------------------------------------------------------------------------------------
QUEUED, RUNNING, DONE, FAILED, CANCELLED = "queued", "running", "done", "failed", "cancelled"
FINISHED = (DONE, FAILED, CANCELLED)


@dataclass(eq=False)
class Job:
    """One request: its state, progress, and its result (plain data) or its message."""

    id: int
    owner: str
    kind: str
    name: str
    what: str
    kwargs: dict = field(repr=False)
    meta: Any = field(default=None, repr=False)    # the caller's own data (never sent to a worker)
    state: str = QUEUED
    fraction: float = 0.0
    message: str = "waiting for a worker"
    result: Any = field(default=None, repr=False)
    error: str = ""
    pid: int | None = None                          # the worker process that ran it
    shared: bool = False                            # waited on by several sessions: never cancelled for one
    page: bool = False                              # a page waits for it (submit(first=True)): the extra worker
    finished_event: threading.Event = field(default_factory=threading.Event, repr=False)
    stopped: threading.Event = field(default_factory=threading.Event, repr=False)
    """Set once no process runs this job any more (finished, never started, or stopped after a cancel)."""

    @property
    def finished(self) -> bool:
        return self.state in FINISHED

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the job finished (True) or `timeout` seconds passed (False)."""
        return self.finished_event.wait(timeout)


ROOT = Path(__file__).resolve().parents[2]      # the directory that holds the explorer package


class _Worker:
    """One worker: a fresh interpreter (`python -c ENTRY FD`, never a fork of this threaded process), in a
    session of its own so that terminating it ends what it started, and a connection to it."""

    def __init__(self):
        mine, theirs = socket.socketpair()
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
        try:
            self.popen = subprocess.Popen([sys.executable, "-c", ENTRY, str(theirs.fileno())],
                                          pass_fds=(theirs.fileno(),), cwd=ROOT, env=env, start_new_session=True,
                                          stdin=subprocess.DEVNULL)
        finally:
            theirs.close()
        self.conn = connection.Connection(mine.detach())
        self.pid = self.popen.pid
        self.job: Job | None = None
        self.deadline: float | None = None            # terminate after this (a cancel not yet honoured)

    def stop(self) -> None:
        """Terminate the worker and everything it started (its process group)."""
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError, OSError):
            self.popen.kill()
        try:
            self.popen.wait(2)
        except subprocess.TimeoutExpired:
            pass
        self.conn.close()


def default_size() -> int:
    """$BRIDGING_DL_WORKERS, else min(2, the machine's cores)."""
    text = os.environ.get(WORKERS_ENV, "").strip()
    if text:
        if not text.isdigit() or int(text) > MAX_WORKERS:
            raise ExplorerError(f"{WORKERS_ENV} must be an integer from 0 to {MAX_WORKERS}, got {text[:20]!r}")
        return int(text)
    return min(2, os.cpu_count() or 1)


class WorkerPool:
    """A bounded pool of worker processes with one job per (owner, kind); see the module docstring.

    alive(owner) -> bool, when given, is asked every tick for the owners of waiting and running jobs:
    the jobs of an owner that left are cancelled (a Streamlit session whose tab was closed)."""

    def __init__(self, size: int | None = None, jobs: dict | None = None,
                 alive: Callable[[str], bool] | None = None, max_queued: int = MAX_QUEUED):
        self.size = default_size() if size is None else int(size)
        if not 0 <= self.size <= MAX_WORKERS:
            raise ExplorerError(f"a pool has 0 to {MAX_WORKERS} workers, not {size}")
        self.jobs = dict(JOBS if jobs is None else jobs)
        unknown = set(self.jobs) - set(ALL_JOBS)
        if unknown:
            raise ExplorerError(f"no such job: {', '.join(sorted(unknown))}")
        self.alive, self.max_queued = alive, max_queued
        self._lock = threading.RLock()
        self._ids = itertools.count(1)
        self._by_owner: dict = {}                      # (owner, kind) -> Job
        self._queue: deque = deque()
        self._workers: list = []
        self._closed = False
        self._thread = None
        self._warm = False                             # start() asked for every worker before any job
        self.crashes = 0                               # workers that died under a job (not cancelled)
        if self.size:
            self._wake_r, self._wake_w = connection.Pipe(duplex=False)

    @property
    def synchronous(self) -> bool:
        return self.size == 0

    # -- the caller's side --
    def submit(self, owner: str, name: str, kwargs: dict | None = None, kind: str | None = None,
               meta: Any = None, shared: bool = False, first: bool = False) -> Job:
        """Queue job `name` (an allowlisted name) with plain-data `kwargs` for `owner`; it replaces (and
        cancels) the owner's previous job of the same `kind` (default: the name). ExplorerError if the
        name is not allowed, the arguments are not plain data, or too many jobs wait. `shared`: the owner is
        not a session (a structure that several sessions wait for): no `alive` check cancels it. `first`: ahead of
        the waiting jobs (a page waits for it)."""
        if not isinstance(name, str) or name not in self.jobs:
            raise ExplorerError(f"{short(repr(name))[:80]} is not a job this pool runs "
                                f"({', '.join(sorted(self.jobs))})")
        kwargs = plain(dict(kwargs or {}))
        kind = name if kind is None else kind
        job = Job(next(self._ids), str(owner), kind, name, self.jobs[name][1], kwargs, meta, shared=shared,
                  page=bool(first))
        with self._lock:
            if self._closed:
                raise ExplorerError("the worker pool is closed")
            self.cancel(owner, kind)
            if not self.synchronous and len(self._queue) >= self.max_queued:
                raise ExplorerError(f"the server is busy: {len(self._queue)} jobs are waiting; try again in a "
                                    "minute")
            self._by_owner[(job.owner, kind)] = job
            if not self.synchronous:
                if first:
                    self._queue.appendleft(job)
                else:
                    self._queue.append(job)
                self._ensure_thread()
                self._wake()
        if self.synchronous:
            self._run_here(job)
        return job

    def job(self, owner: str, kind: str) -> Job | None:
        """The owner's latest job of `kind` (finished or not), or None."""
        with self._lock:
            return self._by_owner.get((str(owner), kind))

    def forget(self, owner: str, kind: str, job: Job | None = None) -> None:
        """Drop the owner's finished job of `kind` (after its result was read)."""
        with self._lock:
            current = self._by_owner.get((str(owner), kind))
            if current is not None and current.finished and (job is None or current is job):
                del self._by_owner[(str(owner), kind)]

    def cancel(self, owner: str, kind: str) -> bool:
        """Cancel the owner's unfinished job of `kind` (True if there was one). A waiting job never starts;
        a running one stops at its next spend() check, or is terminated CANCEL_GRACE_S later."""
        with self._lock:
            job = self._by_owner.get((str(owner), kind))
            if job is None or job.finished:
                return False
            self._finish(job, CANCELLED, error="cancelled")
            if job in self._queue:
                self._queue.remove(job)
                job.stopped.set()
            for worker in self._workers:
                if worker.job is job:
                    try:
                        worker.conn.send(("cancel", job.id))
                    except OSError:
                        pass
                    worker.deadline = time.monotonic() + CANCEL_GRACE_S
            self._wake()
            return True

    def start(self) -> None:
        """Start the workers now, the one beyond `size` included (the first job then waits for no process to start)."""
        with self._lock:
            if not self.synchronous and not self._closed:
                self._warm = True
                self._ensure_thread()
                self._wake()

    def running(self) -> list:
        """Jobs a worker process is running now (a cancelled one until it has stopped)."""
        with self._lock:
            return [w.job for w in self._workers if w.job is not None]

    def pids(self) -> list:
        with self._lock:
            return [w.pid for w in self._workers]

    @property
    def most_workers(self) -> int:
        """Processes the pool may run at once: `size`, and the page's worker beside them."""
        return self.size + 1 if self.size else 0

    def _room(self, page: bool) -> int:
        """How many more jobs of this sort may run now: a page's job on any worker, the one beyond `size` included;
        a job no page waits for only while fewer than `size` such jobs run."""
        running = [w.job for w in self._workers if w.job is not None]
        if page:
            return self.most_workers - len(running)
        return self.size - sum(not job.page for job in running)

    def free(self) -> int:
        """Page jobs (submit(first=True)) that would start now: the room for them, as far as there are workers
        (idle ones and those not started yet), less the page jobs waiting."""
        with self._lock:
            idle = sum(w.job is None for w in self._workers) + max(0, self.most_workers - len(self._workers))
            return max(0, min(idle, self._room(page=True)) - sum(job.page for job in self._queue))

    def close(self) -> None:
        """Cancel everything and end the workers."""
        with self._lock:
            self._closed = True
            for (owner, kind) in list(self._by_owner):
                self.cancel(owner, kind)
            workers, self._workers = self._workers, []
        if self._thread is not None:        # first the loop thread: it receives on the workers' connections
            self._wake()                    # outside the lock, and stop() closes them
            self._thread.join(2)
        for worker in workers:
            worker.stop()

    # -- internals --
    def _run_here(self, job: Job) -> None:
        job.state, job.message, job.pid = RUNNING, "running", os.getpid()

        def progress(fraction, text):
            job.fraction, job.message = float(fraction), short(text)
        state, payload = run_job(job.name, job.kwargs, progress)
        with self._lock:
            if not job.finished:
                self._finish(job, state, payload)
            job.stopped.set()

    def _finish(self, job: Job, state: str, payload=None, error: str = "") -> None:
        job.state = state
        if state == DONE:
            job.result, job.fraction, job.message = payload, 1.0, "done"
        else:
            job.error = error or str(payload)
            job.message = job.error
        job.kwargs = {}
        job.finished_event.set()

    def _wake(self) -> None:
        if not self.synchronous:
            try:
                self._wake_w.send_bytes(b"")
            except OSError:
                pass

    def _ensure_thread(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._loop, name="bridging-dl-pool", daemon=True)
            self._thread.start()

    def _loop(self) -> None:
        while True:
            with self._lock:
                if self._closed:
                    return
                self._check_owners()
                self._enforce_deadlines()
                self._dispatch()
                workers = list(self._workers)
                waits = [self._wake_r] + [w.conn for w in workers]
            try:
                ready = connection.wait(waits, TICK_S)
            except OSError:
                ready = []
            if self._wake_r in ready:
                while self._wake_r.poll():
                    self._wake_r.recv_bytes()
            # Read (and unpickle) the workers' messages before taking the lock: a result can be megabytes (a
            # timeline), and every page run asking the pool anything waited for the lock meanwhile (py-spy --idle
            # of 100 sessions on one serving process: the waits in offload.result_in_pool for its lock, which waits
            # for this one, were half of the page runs' waiting samples; docs/benchmarks-classroom.md).
            # Only this thread receives on a worker's connection; others only send on it, under the lock.
            messages = [(worker, self._receive(worker)) for worker in workers if worker.conn in ready]
            with self._lock:
                if self._closed:
                    return
                for worker, received in messages:
                    if worker in self._workers:         # not taken away meanwhile (close())
                        self._read(worker, received)

    @staticmethod
    def _receive(worker: _Worker) -> list:
        """Every message waiting on the worker's connection; None last if the connection closed."""
        out = []
        try:
            while worker.conn.poll():
                out.append(worker.conn.recv())
        except (EOFError, OSError):         # the connection closed: the worker is gone
            out.append(None)
        return out

    def _read(self, worker: _Worker, received: list) -> None:
        """Apply the messages `_receive` took from the worker (under the lock)."""
        for message in received:
            if message is None:
                self._died(worker)
                return
            kind, job_id, *rest = message
            job = worker.job
            if job is None or job.id != job_id:
                continue
            if kind == "progress":
                if not job.finished:
                    job.fraction, job.message = rest
                continue
            if not job.finished:
                self._finish(job, kind, rest[0])
            worker.job, worker.deadline = None, None
            job.stopped.set()

    def _died(self, worker: _Worker) -> None:
        self._workers.remove(worker)
        job, worker.job = worker.job, None
        worker.stop()                        # reaps it, and whatever it started (the reference run's ranks)
        if job is None:
            return
        job.stopped.set()
        if not job.finished:
            self.crashes += 1
            code = worker.popen.returncode
            how = f"was killed by signal {-code}" if code is not None and code < 0 else f"exited with code {code}"
            self._finish(job, FAILED, error=f"{job.what} stopped: its worker process {how} (out of memory, or "
                                            "killed); nothing was kept. Try again, or ask for less.")

    def _enforce_deadlines(self) -> None:
        now = time.monotonic()
        for worker in list(self._workers):
            if worker.job is not None and worker.deadline is not None and now > worker.deadline:
                job = worker.job
                self._workers.remove(worker)
                worker.job = None
                worker.stop()
                job.stopped.set()

    def _check_owners(self) -> None:
        if self.alive is None:
            return
        for (owner, kind), job in list(self._by_owner.items()):
            if not job.finished and not job.shared:
                try:
                    gone = not self.alive(owner)
                except Exception:          # noqa: BLE001 -- a failing check never stops the pool
                    gone = False
                if gone:
                    self.cancel(owner, kind)
                    del self._by_owner[(owner, kind)]

    def _next_job(self):
        """The first waiting job an idle worker may take (the room for its sort: `_room`)."""
        for job in self._queue:
            if self._room(job.page) > 0:
                return job
        return None

    def _dispatch(self) -> None:
        busy = sum(w.job is not None for w in self._workers)
        if (len(self._workers) < self.most_workers and busy == len(self._workers) and self._room(page=True) > 0
                and any(job.page for job in self._queue) and not self._spawn()):
            for job in [job for job in self._queue if job.page]:    # no worker for them: the pages build it
                self._queue.remove(job)
                self._finish(job, FAILED, error=f"{job.what} found no free worker process")
                job.stopped.set()
        while len(self._workers) < (self.most_workers if self._warm else self.size) and (self._queue or self._warm):
            if not self._spawn():
                break
        for worker in self._workers:
            if worker.job is None and self._queue:
                job = self._next_job()
                if job is None:
                    break
                self._queue.remove(job)
                try:
                    worker.conn.send(("job", job.id, job.name, job.kwargs))
                except OSError:
                    self._queue.appendleft(job)
                    continue
                worker.job, worker.deadline = job, None
                job.state, job.message, job.pid = RUNNING, "started", worker.pid

    def _spawn(self) -> bool:
        """One more worker process (False, and the waiting jobs failed with the reason, when none starts)."""
        try:
            self._workers.append(_Worker())
            return True
        except Exception as err:      # noqa: BLE001 -- no process: the waiting jobs say why
            self._warm = False
            while self._queue and not self._workers:
                job = self._queue.popleft()
                self._finish(job, FAILED, error=short(f"{job.what} could not start a worker process "
                                                       f"({type(err).__name__}: {err})"))
                job.stopped.set()
            return False
