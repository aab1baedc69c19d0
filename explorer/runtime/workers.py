"""Heavy work off the interpreter that serves the class: a bounded pool of worker processes (issue 31 item 4).

One Streamlit process runs every student's script in one Python interpreter, so a 30-second search
holds up thirty sessions. `WorkerPool` runs such jobs -- searches, PNG/SVG renderings (kaleido), the
reference run -- in a few separate processes instead:

* **bounded**: `size` processes (default min(2, cpu count); `$BRIDGING_DL_WORKERS` sets it, docs/limits.md),
  each a fresh interpreter (`python -c`, as the "spawn" start method does; never a fork of a server
  that runs threads), in a process group of its own, at a lower CPU priority (`WORKER_NICE`), so that
  page reruns keep the cores they need;
* **plain data only**: a job is a name from an allowlist (`JOBS`) and plain-data arguments (dicts, lists,
  strings, numbers, bytes); its result is plain data too (a search's dict, PNG bytes). No function or
  object is ever pickled to a worker; a name outside the allowlist is refused;
* **one job per owner and kind**: an owner (a Streamlit session) has at most one job of each kind
  (search, image, run); a new request replaces the previous one, which is cancelled;
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
import threading
import time
from collections import deque
from dataclasses import asdict, dataclass, field
import queue
import socket
import subprocess
import sys
from multiprocessing import connection
from pathlib import Path
from typing import Any, Callable

import plotly.io as pio

from explorer.cost.evaluate import Result
from explorer.errors import ExplorerError
from explorer.io.clusters import cluster_from_dict, cluster_to_dict
from explorer.io.export import figure_image
from explorer.io.models import model_from_dict
from explorer.io.slides import slide_image
from explorer.io.strategies import strategy_from_dict, strategy_to_dict
from explorer.limits import WorkCancelled, spend, work_budget
from explorer.runtime.calibrate import calibrate
from explorer.runtime.measure import run_strategy
from explorer.search.search import MEMORY_HEADROOM, Candidate, SearchResult, search

WORKERS_ENV = "BRIDGING_DL_WORKERS"
"""Worker processes of the pool: an integer >= 0 (0 = synchronous: jobs run in the caller's thread)."""
MAX_WORKERS = 64
CANCEL_GRACE_S = 0.5
"""A cancelled job that has not stopped at a spend() check by then is terminated (with its children)."""
WORKER_NICE = 10
"""Workers run at this lower CPU priority: a search waits a little, a student's page rerun does not."""
PROGRESS_EVERY_S = 0.1      # a worker sends at most this many progress messages per second (and the last)
TICK_S = 0.05               # the dispatcher's wake-up period (cancel deadlines, owners that left)
MAX_QUEUED = 256            # jobs waiting for a worker, all owners together: beyond, a request is refused
MAX_MESSAGE_CHARS = 400


# ---- plain data --------------------------------------------------------------------------------------
PLAIN_SCALARS = (str, int, float, bool, bytes, type(None))


def plain(value, depth: int = 0):
    """`value` as plain data (dicts with string keys, lists, tuples, str, int, float, bool, bytes, None):
    numpy scalars become Python numbers. ExplorerError for anything else (a function, an object)."""
    if depth > 64:
        raise ExplorerError("a job's data is nested more than 64 levels deep")
    if isinstance(value, PLAIN_SCALARS):
        return value
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):
            raise ExplorerError("a job's data may only have text keys")
        return {k: plain(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v, depth + 1) for v in value]
    if isinstance(value, tuple):
        return tuple(plain(v, depth + 1) for v in value)
    item = getattr(value, "item", None)            # numpy scalar
    if callable(item) and getattr(value, "shape", None) == ():
        return plain(item(), depth + 1)
    raise ExplorerError(f"a job takes and returns plain data only, not {type(value).__name__}")


# ---- the jobs (the allowlist): plain data in, plain data out -----------------------------------------
def _candidate_dict(c: Candidate) -> dict:
    return {"strategy": strategy_to_dict(c.strategy), "iteration_time_s": c.iteration_time_s,
            "peak_memory_bytes": c.peak_memory_bytes, "breakdown_s": c.breakdown_s, "mfu": c.mfu,
            "result": asdict(c.result), "equivalent": [strategy_to_dict(s) for s in c.equivalent],
            "searched_s": c.searched_s, "searched_bytes": c.searched_bytes}


def search_result_to_dict(result: SearchResult) -> dict:
    """A SearchResult as plain data (what a worker sends back); search_result_from_dict inverts it."""
    return plain({"top": [_candidate_dict(c) for c in result.top],
                  "pareto": [_candidate_dict(c) for c in result.pareto],
                  "pruned": dict(result.pruned), "total": result.total, "kept": result.kept,
                  "evaluated": result.evaluated, "refined": result.refined,
                  "memory_cap_bytes": result.memory_cap_bytes, "elapsed_s": result.elapsed_s})


def _candidate(d: dict) -> Candidate:
    return Candidate(strategy_from_dict(d["strategy"]), d["iteration_time_s"], d["peak_memory_bytes"],
                     d["breakdown_s"], d["mfu"], Result(**d["result"]),
                     tuple(strategy_from_dict(s) for s in d["equivalent"]), d["searched_s"], d["searched_bytes"])


def search_result_from_dict(d: dict) -> SearchResult:
    return SearchResult([_candidate(c) for c in d["top"]], [_candidate(c) for c in d["pareto"]], d["pruned"],
                        d["total"], d["kept"], d["evaluated"], d["refined"], d["memory_cap_bytes"], d["elapsed_s"])


def search_job(model: dict, cluster: dict, gpus: int, global_batch: int, max_memory_bytes=None, top: int = 10,
               framework=None, dtype: str = "bf16", progress=None, memory_headroom: float = MEMORY_HEADROOM) -> dict:
    """explorer.search.search of a model and cluster given as dicts (ModelSpec.to_dict, cluster_to_dict)."""
    found = search(model_from_dict(model), cluster_from_dict(cluster), gpus, global_batch, max_memory_bytes, top,
                   progress=progress, framework=framework, dtype=dtype, memory_headroom=memory_headroom)
    return search_result_to_dict(found)


def image_job(figure: str, fmt: str = "png", scale: float = 2.0) -> bytes:
    """A plotly figure (its JSON text) as PNG or SVG bytes (explorer.io.export.figure_image)."""
    return figure_image(pio.from_json(figure, skip_invalid=True), fmt, scale)


def slide_job(figure: str, caption: str = "", fmt: str = "png") -> bytes:
    """A figure (its JSON text) as a 1920x1080 slide (explorer.io.slides.slide_image)."""
    return slide_image(pio.from_json(figure, skip_invalid=True), caption, fmt)


def reference_run_job(model: dict, strategy: dict, procs: int, cluster: dict | None = None,
                      iterations: int = 3) -> dict:
    """The reference run on torch.distributed (explorer.runtime.measure.run_strategy); cluster None:
    calibrate this machine first."""
    spec = cluster_from_dict(cluster) if cluster is not None else \
        cluster_from_dict(calibrate(procs=min(procs, os.cpu_count() or 1)))
    return plain(run_strategy(model_from_dict(model), strategy_from_dict(strategy), procs, spec, iterations))


def pid_job() -> int:
    """The worker's process id (tests: a job runs in another process)."""
    return os.getpid()


def spin_job(seconds: float = 60.0, progress=None) -> int:
    """Busy work for `seconds` (at most 600), checking spend() as a search does (tests: cancellation)."""
    end = time.monotonic() + min(float(seconds), 600.0)
    done = 0
    while time.monotonic() < end:
        spend("spinning")
        done += sum(range(1000))
        if progress:
            progress(0.5, "spinning")
    return os.getpid()


def crash_job(code: int = 70) -> None:
    """The worker process dies at once (tests: a crashed worker gives a message)."""
    os._exit(int(code))


JOBS = {"search": (search_job, "the search"), "image": (image_job, "the image"),
        "slide": (slide_job, "the slide"), "reference_run": (reference_run_job, "the reference run")}
"""The allowlist: job name -> (function, what it is called in messages). Only these run in a worker."""
SELFTEST_JOBS = {"pid": (pid_job, "the pid job"), "spin": (spin_job, "the spin job"),
                 "crash": (crash_job, "the crash job")}
"""Jobs a pool runs only when asked (WorkerPool(jobs=...)): tests of the pool itself."""
_ALL = {**JOBS, **SELFTEST_JOBS}
PROGRESS_JOBS = {"search", "spin"}


def search_request(model, cluster, gpus: int, global_batch: int, max_memory_bytes=None, top: int = 10,
                   framework=None, dtype: str = "bf16", memory_headroom: float = MEMORY_HEADROOM) -> dict:
    """The plain-data arguments of a "search" job (a ModelSpec and a Cluster as their dicts)."""
    return {"model": model.to_dict(), "cluster": cluster_to_dict(cluster), "gpus": int(gpus),
            "global_batch": int(global_batch), "max_memory_bytes": max_memory_bytes, "top": int(top),
            "framework": framework, "dtype": dtype, "memory_headroom": float(memory_headroom)}


def image_request(fig, fmt: str = "png", scale: float = 2.0) -> dict:
    """The plain-data arguments of an "image" job: the figure as its JSON text."""
    return {"figure": fig.to_json(), "fmt": fmt, "scale": float(scale)}


def slide_request(fig, caption: str = "", fmt: str = "png") -> dict:
    return {"figure": fig.to_json(), "caption": str(caption), "fmt": fmt}


def reference_run_request(model, strategy, procs: int, cluster=None, iterations: int = 3) -> dict:
    return {"model": model.to_dict(), "strategy": strategy_to_dict(strategy), "procs": int(procs),
            "cluster": None if cluster is None else cluster_to_dict(cluster), "iterations": int(iterations)}


def _short(text: str) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= MAX_MESSAGE_CHARS else text[:MAX_MESSAGE_CHARS - 1] + "…"


def run_job(name: str, kwargs: dict, progress: Callable[[float, str], None] | None = None) -> tuple:
    """Run allowlisted job `name` here: ("done", result) | ("failed", message) | ("cancelled", message).
    Never raises for the job's own errors (ExplorerError or any other exception)."""
    fn, what = _ALL[name]
    try:
        args = dict(kwargs)
        if name in PROGRESS_JOBS:
            args["progress"] = progress
        return "done", plain(fn(**args))
    except WorkCancelled as err:
        return "cancelled", _short(err)
    except ExplorerError as err:
        return "failed", _short(err)
    except Exception as err:       # noqa: BLE001 -- a job's failure is a message, not a traceback
        return "failed", _short(f"{what} failed ({type(err).__name__}: {err})")


def serve(fd: int, nice: int = WORKER_NICE) -> None:
    """A worker process's main loop (started by WorkerPool as `python -c "...serve(FD)"`): receive
    (job id, name, kwargs) on the connection `fd`, run the job under a work budget that stops once the
    pool sends ("cancel", that id), send its progress and one final message. A reader thread takes the
    pool's messages, so that a cancel arrives while the job computes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)        # Ctrl-C at the server: the pool ends the workers
    try:
        os.nice(nice)
    except (AttributeError, OSError):
        pass
    conn = connection.Connection(fd)
    jobs: queue.Queue = queue.Queue()
    cancelled = [0]

    def read() -> None:
        while True:
            try:
                message = conn.recv()
            except (EOFError, OSError):
                message = None
            if message is None:
                jobs.put(None)
                return
            if message[0] == "cancel":
                cancelled[0] = message[1]
            else:
                jobs.put(message)
    threading.Thread(target=read, daemon=True).start()
    while True:
        message = jobs.get()
        if message is None:
            return
        _, job_id, name, kwargs = message
        last = [0.0]

        def progress(fraction, text, job_id=job_id):
            now = time.monotonic()
            if now - last[0] >= PROGRESS_EVERY_S or fraction >= 1.0:
                last[0] = now
                conn.send(("progress", job_id, float(fraction), _short(text)))

        with work_budget(_ALL[name][1], should_stop=lambda job_id=job_id: cancelled[0] == job_id):
            state, payload = run_job(name, kwargs, progress)
        try:
            conn.send((state, job_id, payload))
        except (EOFError, OSError):
            return
        except Exception as err:        # noqa: BLE001 -- e.g. a result that cannot be sent
            conn.send(("failed", job_id, _short(f"the result could not be sent back ({type(err).__name__})")))


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
ENTRY = "import sys; from explorer.runtime.workers import serve; serve(int(sys.argv[1]))"


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
        unknown = set(self.jobs) - set(_ALL)
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
               meta: Any = None) -> Job:
        """Queue job `name` (an allowlisted name) with plain-data `kwargs` for `owner`; it replaces (and
        cancels) the owner's previous job of the same `kind` (default: the name). ExplorerError if the
        name is not allowed, the arguments are not plain data, or too many jobs wait."""
        if not isinstance(name, str) or name not in self.jobs:
            raise ExplorerError(f"{_short(repr(name))[:80]} is not a job this pool runs "
                                f"({', '.join(sorted(self.jobs))})")
        kwargs = plain(dict(kwargs or {}))
        kind = name if kind is None else kind
        job = Job(next(self._ids), str(owner), kind, name, self.jobs[name][1], kwargs, meta)
        with self._lock:
            if self._closed:
                raise ExplorerError("the worker pool is closed")
            self.cancel(owner, kind)
            if not self.synchronous and len(self._queue) >= self.max_queued:
                raise ExplorerError(f"the server is busy: {len(self._queue)} jobs are waiting; try again in a "
                                    "minute")
            self._by_owner[(job.owner, kind)] = job
            if not self.synchronous:
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
        """Start the workers now (the first job then waits for no process to start)."""
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

    def close(self) -> None:
        """Cancel everything and end the workers."""
        with self._lock:
            self._closed = True
            for (owner, kind) in list(self._by_owner):
                self.cancel(owner, kind)
            workers, self._workers = self._workers, []
        for worker in workers:
            worker.stop()
        if self._thread is not None:
            self._wake()
            self._thread.join(2)

    # -- internals --
    def _run_here(self, job: Job) -> None:
        job.state, job.message, job.pid = RUNNING, "running", os.getpid()

        def progress(fraction, text):
            job.fraction, job.message = float(fraction), _short(text)
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
                waits = [self._wake_r] + [w.conn for w in self._workers]
            try:
                ready = connection.wait(waits, TICK_S)
            except OSError:
                ready = []
            with self._lock:
                if self._closed:
                    return
                for obj in ready:
                    if obj is self._wake_r:
                        while self._wake_r.poll():
                            self._wake_r.recv_bytes()
                for worker in list(self._workers):
                    if worker.conn in ready:
                        self._read(worker)

    def _read(self, worker: _Worker) -> None:
        try:
            while worker.conn.poll():
                kind, job_id, *rest = worker.conn.recv()
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
        except (EOFError, OSError):         # the connection closed: the worker is gone
            self._died(worker)

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
            if not job.finished:
                try:
                    gone = not self.alive(owner)
                except Exception:          # noqa: BLE001 -- a failing check never stops the pool
                    gone = False
                if gone:
                    self.cancel(owner, kind)
                    del self._by_owner[(owner, kind)]

    def _dispatch(self) -> None:
        while len(self._workers) < self.size and (self._queue or self._warm):
            try:
                self._workers.append(_Worker())
            except Exception as err:      # noqa: BLE001 -- no process: the waiting jobs say why
                self._warm = False
                while self._queue and not self._workers:
                    job = self._queue.popleft()
                    self._finish(job, FAILED, error=_short(f"{job.what} could not start a worker process "
                                                           f"({type(err).__name__}: {err})"))
                    job.stopped.set()
                break
        for worker in self._workers:
            if worker.job is None and self._queue:
                job = self._queue.popleft()
                try:
                    worker.conn.send(("job", job.id, job.name, job.kwargs))
                except OSError:
                    self._queue.appendleft(job)
                    continue
                worker.job, worker.deadline = job, None
                job.state, job.message, job.pid = RUNNING, "started", worker.pid

