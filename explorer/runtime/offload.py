"""First compiles of a new model structure, and a strategy's formulas, in the worker pool (issue 31 items 4-5).

The first evaluation of a structure nobody has evaluated (a new model, a new t or p, a new layer map) builds
its cost tree with sympy and lambdifies it: up to seconds of one core, in the interpreter that serves every
session of the class. `compiles_in(pool)` gives the function that explorer.cost.cold.compile_elsewhere
installs for one page run: on a miss in memory and on disk, the tree is compiled by the allowlisted "compile"
job (explorer/runtime/jobs.py) in a worker process, which stores it in the disk cache (explorer/cost/cache.py);
the page's own thread waits for it without holding the interpreter (an Event wait: the other sessions' runs go
on), then loads the stored tree.

* **one compile per structure**: the job's owner is the structure (a digest of its arguments), not a
  session, so that thirty students opening the same new model wait for one compile; such a job is `shared`
  (the pool's check of leaving sessions skips it);
* **cancellable**: the waiting thread calls spend() every WAIT_STEP_S, so a session that leaves or reruns
  stops waiting within that step (its work budget raises WorkCancelled); when the last page run waiting for
  a job stops waiting, the job is cancelled (the worker stops at its next spend() check, or is killed
  CANCEL_GRACE_S later: explorer/runtime/workers.py);
* **never long in the queue**: a page's job goes ahead of the waiting jobs no page waits for (searches,
  images), so a page never waits behind a search; when every worker is busy, the page does the work itself at
  once, except a compile or a strategy's formulas while other page runs share the interpreter (`patient`,
  BUSY_ACTIONS): those are queued (the newest page job first) and wait for at most PAGE_QUEUE_S first;
* **formulas too**: `explains_in(pool)` does the same for the symbolic explanation of a strategy (the "explain"
  job, explorer/runtime/explanation.py), owned by the strategy;
* **and presets**: `presets_in(pool, ...)` builds the Strategy page's presets of a model (the "presets" job: a
  dozen or more evaluations and the first compiles of the structures they try) and returns them
  (`result_in_pool`: any job whose result the page needs, owned by its arguments);
* **and timelines**: `timeline_in(pool, "superstep" | "microstep", ...)` has the Timelines page's events and Gantt
  of a strategy built there (explorer/charts/timeline_views.py: plain data back, the figure in its wire form);
* **the same tree or none**: the job stores the tree under the caller's key text when its own key text names
  the same tree (explorer.runtime.jobs.same_key: equal numbers written alike) and returns the key it stored
  under; a different key (an object that did not survive plain data), a tree too large for the disk cache, a
  failed job or a synchronous pool: the caller builds the tree itself, as without a pool.
"""
from __future__ import annotations

import hashlib
import json
import threading
import time

from explorer.charts.timeline_views import microstep_view, superstep_view, view_from_plain
from explorer.cost import cache
from explorer.cost.cold import tree_is_stored
from explorer.errors import ExplorerError
from explorer.io.clusters import cluster_from_dict
from explorer.io.models import model_from_dict
from explorer.io.presets import strategy_presets
from explorer.io.strategies import strategy_from_dict
from explorer.limits import actions_running, check_timeline_passes, spend
from explorer.runtime.workers import QUEUED
from explorer.runtime.jobs import compile_request, presets_from_plain, presets_request, timeline_request

COMPILE_KIND = "compile"
EXPLAIN_KIND = "explain"            # the job kind of a strategy's formulas (explorer/runtime/explanation.py)
PRESETS_KIND = "presets"            # the job kind of a model's presets (the Strategy page)
TIMELINE_VIEWS = {"superstep": superstep_view, "microstep": microstep_view}   # a Timelines job's name (its kind too)
STRUCTURE_OWNER = "structure:"      # + a digest of a job's arguments: the owner of a shared job (compile, ...)
WAIT_STEP_S = 0.05                  # how often a waiting page run checks whether its session still wants it
BUSY_ACTIONS = 2
PAGE_QUEUE_S = 0.5
"""When every worker is busy and at least BUSY_ACTIONS page runs share this interpreter (another run than its own), a
page's job waits in the queue for at most PAGE_QUEUE_S before the page does the work itself. Page jobs take 0.03-2 s
and three workers run them, so one usually starts within a tenth of a second. Done in the serving interpreter, the
same work holds up every run that shares it. When 30 sessions opened their links within 10 s, each page built what
no free worker took at once (a strategy's formulas: 7 % of that interpreter's time), and page actions waited for it.
A page run alone in the interpreter does the work itself at once: nobody else waits for it, and a lone student does
not wait behind searches. A job still queued after PAGE_QUEUE_S is dropped (cancelled when no other page waits for
it) and the page does the work itself, as it does at once when the job cannot even be queued (MAX_QUEUED). Only the
`patient` jobs wait so: a first compile and a strategy's formulas, sympy work that costs a worker what it costs
here. A timeline or the presets need the cost trees that this interpreter holds already, and a worker would load
them from disk first (queued too, they made the first pass no faster: docs/benchmarks-classroom.md)."""
_LOCK = threading.Lock()            # one check-then-submit at a time (two sessions, one structure: one job)
_WAITING: dict = {}                 # (owner, kind) -> page runs waiting for its job (the last one to leave cancels it)


def structure_owner(kwargs: dict) -> str:
    """The owner of the shared job with these arguments (explorer.runtime.jobs.compile_request, presets_request):
    every page run asking for the same arguments waits for one job."""
    return STRUCTURE_OWNER + hashlib.sha256(json.dumps(kwargs, sort_keys=True).encode()).hexdigest()[:32]


def result_in_pool(pool, job_name: str, kwargs: dict, kind: str, on_wait=None, patient: bool = False):
    """Allowlisted job `job_name` with `kwargs` run in `pool` as the shared job of kind `kind` (its owner a digest of
    `kwargs`: callers asking the same share one job), waited for without holding the interpreter (see the module
    docstring); its result, or None when it did not run there (a synchronous pool, every worker busy, the queue
    full, still queued after PAGE_QUEUE_S, a failed or cancelled job): the caller then does the work itself.
    `patient`: when every worker is busy, wait for one (PAGE_QUEUE_S at most) if BUSY_ACTIONS page runs share this
    interpreter."""
    if pool.synchronous:
        return None
    owner = structure_owner(kwargs)
    with _LOCK:
        job = pool.job(owner, kind)
        if job is None or job.state in ("failed", "cancelled"):
            if not pool.free() and (not patient or actions_running() < BUSY_ACTIONS):
                return None             # every worker busy, and waiting does not pay: doing it here is sooner
            try:                        # ahead of every waiting job (the newest page job first)
                job = pool.submit(owner, job_name, kwargs, kind=kind, shared=True, first=True)
            except ExplorerError:       # too many jobs waiting: doing it here is sooner
                return None
        _WAITING[(owner, kind)] = _WAITING.get((owner, kind), 0) + 1
    try:
        if not job.finished and on_wait is not None:
            on_wait(job.what)
        queued_since = time.monotonic()
        while not job.wait(WAIT_STEP_S):
            spend(f"waiting for {job.what} in a worker process")
            if job.state == QUEUED and time.monotonic() - queued_since > PAGE_QUEUE_S:
                return None             # no worker came free (long jobs): doing it here is sooner
    finally:
        with _LOCK:
            _WAITING[(owner, kind)] -= 1
            if not _WAITING[(owner, kind)]:     # nobody waits any more: a job still running is cancelled
                del _WAITING[(owner, kind)]
                pool.cancel(owner, kind)
        pool.forget(owner, kind, job)           # a cancelled wait too (the pool keeps no finished job)
    return job.result if job.state == "done" else None


def _in_pool(pool, job_name: str, kind: str, on_wait=None):
    """The function (model, strategy, cluster, key_text) -> bool that runs allowlisted job `job_name` (a "compile"
    or an "explain": both store what they built in the disk cache under the caller's key text and return
    {"key", "stored"}) in `pool` (result_in_pool)."""
    def run(model, strategy, cluster, key_text: str) -> bool:
        if pool.synchronous:
            return False
        result = result_in_pool(pool, job_name, compile_request(model, strategy, cluster, key_text), kind, on_wait,
                                patient=True)
        return bool(isinstance(result, dict) and result.get("stored") and result.get("key") == key_text)
    return run


def compiles_in(pool, on_wait=None):
    """The compile function for explorer.cost.cold.compile_elsewhere that compiles in `pool` (a WorkerPool).
    `on_wait(what)`, when given, is called once before waiting (the page shows that it waits)."""
    return _in_pool(pool, "compile", COMPILE_KIND, on_wait)


def presets_in(pool, model, cluster, gpus: int, global_batch: int, micro_batch: int = 1) -> dict:
    """The Strategy page's presets (explorer.io.presets.strategy_presets: a dozen or more evaluations of a model's
    recipes, with the first compiles of their structures) built by the "presets" job in `pool` (result_in_pool), or
    here: when `pool` is None or synchronous, when the job did not run there, when the disk cache is off (the trees
    the worker compiled would not reach this process, which would compile them again for the preset applied), or
    when the model or cluster does not come back equal from plain data (a cluster file's constants are written with
    12 significant digits: the worker would cost another cluster)."""
    if pool is not None and not pool.synchronous and cache.directory() is not None:
        request = presets_request(model, cluster, gpus, global_batch, micro_batch)
        rows = result_in_pool(pool, "presets", request, PRESETS_KIND) if _survives(request, model, cluster) else None
        if rows is not None:
            try:
                return presets_from_plain(rows)
            except ExplorerError:
                pass                        # not what the job returns: built here
    return strategy_presets(model, cluster, gpus, global_batch, micro_batch)


def _survives(request: dict, model, cluster, strategy=None) -> bool:
    """Do the model, cluster (and strategy) come back equal from the plain data of a job's `request`? Else a worker
    would cost another configuration: a cluster file keeps 12 significant digits."""
    try:
        return (model_from_dict(request["model"]) == model and cluster_from_dict(request["cluster"]) == cluster
                and (strategy is None or strategy_from_dict(request["strategy"]) == strategy))
    except ExplorerError:
        return False


def timeline_in(pool, level: str, model, strategy, cluster, **kwargs) -> dict:
    """The Timelines page's view at `level` ("superstep": kwargs schedule; "microstep": layer, op) of a strategy
    (explorer/charts/timeline_views.py), built by the job of that name in `pool` (result_in_pool) or here: when
    `pool` is None or synchronous, when no worker is free, when the disk cache is off (a worker would compile the
    cost tree this process holds already), when the configuration does not survive plain data, when its cost tree
    is too large for the disk cache (a worker would compile it again: hundreds of stages), or when
    the job failed (a timeline beyond the limits: the build here says so, in the library's words; the passes' count
    is checked first, so that the commonest refusal costs nothing here)."""
    build = TIMELINE_VIEWS[level]
    if level == "superstep":
        check_timeline_passes(strategy)     # 2 m v p beyond MAX_TIMELINE_EVENTS: refused before any work
    if pool is not None and not pool.synchronous and cache.directory() is not None:
        request = timeline_request(model, strategy, cluster, **kwargs)
        travels = _survives(request, model, cluster, strategy) and tree_is_stored(model, strategy, cluster)
        data = result_in_pool(pool, level, request, level) if travels else None
        if data is not None:
            try:
                return view_from_plain(data)
            except ExplorerError:
                pass                        # not what the job returns: built here
    return build(model, strategy, cluster, **kwargs)


def explains_in(pool, on_wait=None):
    """The function for explorer.runtime.explanation.explain_elsewhere that builds a strategy's formulas in
    `pool` (the "explain" job), as compiles_in does the first compile of a structure."""
    return _in_pool(pool, "explain", EXPLAIN_KIND, on_wait)
