"""Heavy work in one pool of worker processes shared by every session (explorer.facade.WorkerPool, issue 31
item 4): searches, PNG/SVG images and the reference run leave the interpreter that serves the class.

A session has at most one job of each kind (its handle: `st.session_state[S.WORKER_JOBS][kind]`); a new
request replaces the previous one. While a job runs, `progress` draws a fragment that polls it every
POLL_S seconds (a bar, its message and a Cancel button) and reruns the page once it has finished; the page
reads the finished job with `take`. The pool cancels the jobs of a session whose tab was closed.
`compiles_in_pool` (app.py, around each run) sends the first compile of a new model structure, and the formulas of
a new strategy (the Cost page's symbolic explanation), to the pool too.
`BRIDGING_DL_WORKERS` sets the pool's size (docs/limits.md); 0 runs jobs in the page's own thread.
"""
from __future__ import annotations

from contextlib import ExitStack, contextmanager, nullcontext
from contextvars import ContextVar
import os

import streamlit as st
from streamlit.runtime import Runtime
from streamlit.runtime.scriptrunner import get_script_run_ctx

from explorer.facade import WORKERS_ENV, ExplorerError, Job, WorkerPool, compile_elsewhere, compiles_in
from explorer.facade import explain_elsewhere, explains_in
from app_pages import state as S
from app_pages.text import plain

POLL_S = 0.5                 # how often a running job's fragment asks the pool how far it got
DOWNLOAD_TIMEOUT_S = 120.0   # an image that takes longer is abandoned (the browser gets an error)


def _alive(owner: str) -> bool:
    """Is this Streamlit session still connected? (Asked by the pool's thread; no Runtime under AppTest.)"""
    return not Runtime.exists() or Runtime.instance().is_active_session(owner)


@st.cache_resource(show_spinner=False, max_entries=2)
def _shared(setting: str) -> WorkerPool:
    pool = WorkerPool(alive=_alive)           # its size from $BRIDGING_DL_WORKERS (the cache key)
    pool.start()
    return pool


def pool() -> WorkerPool:
    """The pool every session of this server process shares."""
    return _shared(os.environ.get(WORKERS_ENV, ""))


def pool_or_none() -> WorkerPool | None:
    """pool(), or None where $BRIDGING_DL_WORKERS is bad (the pages that start jobs say what is wrong with it):
    for work a page can do itself."""
    try:
        return pool()
    except ExplorerError:
        return None


WAIT_TEXT = ("**Waiting for {what}** in a worker process: only the first time anyone evaluates this structure "
             "(a few seconds); everyone else's pages go on meanwhile.")
_WAIT_SLOT: ContextVar = ContextVar("compile_wait_slot", default=None)


def _show_wait(what: str) -> None:
    """compiles_in's on_wait: the notice, in the placeholder of the innermost `compile_waits_shown`, if any."""
    slot = _WAIT_SLOT.get()
    if slot is not None:
        slot.info(WAIT_TEXT.format(what=plain(what)))


@contextmanager
def compile_waits_shown(slot):
    """Within this context (outside any cached function: the sidebar strategy's own evaluation,
    app_pages/compute.py `current`), a wait for a first compile in the pool says so in `slot` (an
    st.empty()), cleared when the context ends. Elsewhere the wait draws nothing: inside a cached function
    an element drawn would break the cache's replay (Streamlit's CacheReplayClosureError), and the
    browser shows the run as running."""
    token = _WAIT_SLOT.set(slot)
    try:
        yield
    finally:
        _WAIT_SLOT.reset(token)
        slot.empty()


def compiles_in_pool():
    """A context for one page run: the first compile of a model structure nobody evaluated yet runs in the
    pool (explorer/runtime/offload.py) while this run waits without holding the interpreter; with a
    synchronous pool (BRIDGING_DL_WORKERS=0) it runs here, as before. Where the page asked for it
    (`compile_waits_shown`), the wait is shown. A bad $BRIDGING_DL_WORKERS leaves the compiles here: the
    pages that start jobs say what is wrong with it."""
    try:
        shared = pool()
    except ExplorerError:
        return nullcontext()
    stack = ExitStack()
    stack.enter_context(compile_elsewhere(compiles_in(shared, on_wait=_show_wait)))
    stack.enter_context(explain_elsewhere(explains_in(shared, on_wait=_show_wait)))   # the Cost page's formulas
    return stack


def owner() -> str:
    ctx = get_script_run_ctx()
    return ctx.session_id if ctx is not None else "no-session"


def _handles() -> dict:
    return st.session_state.setdefault(S.WORKER_JOBS, {})


def start(kind: str, name: str, kwargs: dict, meta=None) -> Job:
    """Queue job `name` for this session (replacing its previous job of `kind`); synchronous pools have
    finished it when this returns."""
    job = pool().submit(owner(), name, kwargs, kind=kind, meta=meta)
    _handles()[kind] = job
    return job


def current(kind: str) -> Job | None:
    return _handles().get(kind)


def running(kind: str) -> bool:
    job = current(kind)
    return job is not None and not job.finished


def take(kind: str) -> Job | None:
    """This session's job of `kind` once it has finished (then forgotten), else None."""
    job = current(kind)
    if job is None or not job.finished:
        return None
    del _handles()[kind]
    pool().forget(job.owner, kind, job)
    return job


def cancel(kind: str) -> None:
    """Cancel button callback: the job stops within a second; the page then shows it was cancelled."""
    job = current(kind)
    if job is not None:
        pool().cancel(job.owner, kind)


@st.fragment(run_every=POLL_S)
def progress(kind: str, label: str) -> None:
    """The running job's bar, message and Cancel button, polled every POLL_S s; the page reruns once the
    job has finished (the page's own run reads it with `take`)."""
    job = current(kind)
    if job is None or job.finished:
        st.rerun()
    waiting = job.state == "queued"
    st.progress(min(1.0, max(0.0, job.fraction)),
                text=f"{label}: {'waiting for a free worker' if waiting else plain(job.message)}")
    st.button("Cancel", key=f"w_cancel_{kind}", on_click=cancel, args=(kind,),
              help="stops the work within a second")


def deferred(name: str, make_kwargs, kind: str | None = None):
    """A download's data callable: job `name` with `make_kwargs()` (called when the student clicks) runs
    in the pool as this session's job of `kind` (default: the name); the browser waits for its bytes
    (Streamlit calls this outside the script's thread)."""
    who, shared, kind = owner(), pool(), kind or name

    def run() -> bytes:
        job = shared.submit(who, name, make_kwargs(), kind=kind)
        if not job.wait(DOWNLOAD_TIMEOUT_S):
            shared.cancel(who, kind)
            raise ExplorerError(f"{job.what} took more than {DOWNLOAD_TIMEOUT_S:g} s")
        if job.state != "done":
            raise ExplorerError(job.error)
        return job.result
    return run
