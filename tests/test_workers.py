"""The pool of worker processes that takes heavy work off the serving interpreter (issue 31 item 4):
explorer/runtime/workers.py, and the Search page running its search there (app_pages/jobs.py)."""
import os

import pytest

from app_util import errors, open_page
from explorer import load_cluster, load_model
from explorer.errors import ExplorerError
from explorer.runtime.jobs import (JOBS, SELFTEST_JOBS, image_request, plain, search_request,
                                   search_result_from_dict, search_result_to_dict)
from explorer.runtime.workers import WorkerPool
from waiting import JOB_WAIT_S, wait_until
from explorer.search import search



@pytest.fixture(scope="module")
def pool():
    shared = WorkerPool(2, jobs={**JOBS, **SELFTEST_JOBS})
    shared.start()
    yield shared
    shared.close()


def started(pool, owner: str, name: str, kwargs=None):
    """A job that a worker has begun (its first progress message arrived)."""
    job = pool.submit(owner, name, kwargs)
    assert wait_until(lambda: job.state == "running" and job.fraction > 0, JOB_WAIT_S), job
    return job


def test_a_job_runs_in_another_process(pool):
    job = pool.submit("student-1", "pid")
    assert job.wait(JOB_WAIT_S), job
    assert job.state == "done" and isinstance(job.result, int)
    assert job.result != os.getpid() and job.result in pool.pids()


def test_a_new_request_of_the_same_session_cancels_the_previous_one(pool):
    first = started(pool, "student-2", "spin", {"seconds": 120})
    second = pool.submit("student-2", "spin", {"seconds": 0.01})
    assert first.state == "cancelled" and first.error == "cancelled"
    assert first.stopped.wait(JOB_WAIT_S)
    assert second.wait(JOB_WAIT_S) and second.state == "done"
    assert pool.job("student-2", "spin") is second


def test_other_sessions_are_not_replaced(pool):
    mine = started(pool, "student-3", "spin", {"seconds": 120})
    other = pool.submit("student-4", "pid")
    assert other.wait(JOB_WAIT_S) and other.state == "done"
    assert mine.state == "running"
    pool.cancel("student-3", "spin")


def test_cancel_stops_a_long_job_within_a_second(pool):
    job = started(pool, "student-5", "spin", {"seconds": 120})
    assert pool.cancel("student-5", "spin")
    assert job.finished and job.state == "cancelled"
    assert wait_until(lambda: job.stopped.is_set() and job not in pool.running(), 1.0), pool.running()
    after = pool.submit("student-5", "pid")                   # the pool goes on
    assert after.wait(JOB_WAIT_S) and after.state == "done"


def test_a_job_outside_the_allowlist_or_with_code_is_refused(pool):
    for name in ("os.system", "__import__", "eval", "", None, "run_job"):
        with pytest.raises(ExplorerError, match="not a job this pool runs"):
            pool.submit("student-6", name, {"command": "touch PWNED"})
    with pytest.raises(ExplorerError, match="plain data"):
        pool.submit("student-6", "spin", {"seconds": lambda: 1})
    with pytest.raises(ExplorerError, match="plain data"):
        plain({"x": object()})
    production = WorkerPool(0)
    with pytest.raises(ExplorerError, match="not a job this pool runs"):
        production.submit("student-6", "crash")                # test jobs are off unless asked for


def test_a_crashed_worker_gives_a_message_and_is_replaced(pool):
    job = pool.submit("student-7", "crash")
    assert job.wait(JOB_WAIT_S)
    assert job.state == "failed"
    assert "worker process exited with code 70" in job.error and "Traceback" not in job.error
    after = pool.submit("student-7", "pid")
    assert after.wait(JOB_WAIT_S) and after.state == "done"


def test_a_search_in_a_worker_equals_the_search_here(pool):
    model, cluster = load_model("tiny-gpt"), load_cluster("classroom")
    job = pool.submit("student-8", "search", search_request(model, cluster, 8, 16, top=5))
    assert job.wait(JOB_WAIT_S) and job.state == "done", job.error
    there = search_result_from_dict(job.result)
    here = search(model, cluster, 8, 16, top=5)
    assert [c.strategy for c in there.top] == [c.strategy for c in here.top]
    assert [c.iteration_time_s for c in there.top] == pytest.approx([c.iteration_time_s for c in here.top])
    assert search_result_from_dict(search_result_to_dict(here)) == here
    assert job.fraction == 1.0


def test_a_failing_search_gives_its_message(pool):
    job = pool.submit("student-9", "search", search_request(load_model("tiny-gpt"), load_cluster("classroom"),
                                                             8, 16, max_memory_bytes=-1.0))
    assert job.wait(JOB_WAIT_S) and job.state == "failed"
    assert "memory cap must be a positive finite number" in job.error


def test_the_synchronous_mode_runs_in_the_callers_thread():
    sync = WorkerPool(0, jobs={**JOBS, **SELFTEST_JOBS})
    job = sync.submit("student-10", "pid")
    assert job.finished and job.result == os.getpid()


def test_the_size_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv("BRIDGING_DL_WORKERS", "3")
    assert WorkerPool().size == 3
    monkeypatch.setenv("BRIDGING_DL_WORKERS", "many")
    with pytest.raises(ExplorerError, match="BRIDGING_DL_WORKERS"):
        WorkerPool()


# ---- the Search page: its search runs in the pool --------------------------------------------------
def _search_page(model: str, cluster: str, gpus: int, batch: int):
    at = open_page()
    at.session_state["model"] = load_model(model)
    at.session_state["cluster"] = load_cluster(cluster)
    at.session_state["w_search_gpus"] = gpus
    at.session_state["w_search_batch"] = batch
    at.switch_page("app_pages/search.py").run()
    at.button[0].click().run()
    assert not at.exception and not errors(at), (at.exception, errors(at))
    return at


def _progress_bars(at) -> list:
    return [e for e in at.get("progress")]


def test_the_search_page_searches_in_a_worker_and_shows_progress():
    at = _search_page("tiny-gpt", "classroom", 8, 16)
    job = at.session_state["worker_jobs"]["search"]
    assert job.pid != os.getpid() or job.state == "queued"
    if not job.finished:
        assert _progress_bars(at) and at.button(key="w_cancel_search")
    assert job.wait(JOB_WAIT_S), job
    at.run()                                  # what the progress fragment's rerun does once the job is done
    assert not at.exception and not errors(at)
    assert at.session_state["search_result"]["result"].top
    assert "search" not in at.session_state["worker_jobs"] and not _progress_bars(at)
    assert at.session_state["search_result"]["model"].name == "tiny-gpt"
    assert job.pid != os.getpid()


def test_the_search_page_cancels_a_large_search():
    at = _search_page("gpt3-175b", "dgx-a100-80gb", 1024, 1536)
    job = at.session_state["worker_jobs"]["search"]
    assert not job.finished and _progress_bars(at)
    at.button(key="w_cancel_search").click().run()
    assert not at.exception and not errors(at)
    assert job.state == "cancelled"
    assert any("cancelled" in i.value for i in at.info)
    assert at.session_state["search_result"] is None and not _progress_bars(at)
    assert job.stopped.wait(JOB_WAIT_S)


def test_an_image_is_rendered_in_a_worker(pool):
    import plotly.graph_objects as go
    job = pool.submit("student-11", "image", image_request(go.Figure(go.Bar(x=["a"], y=[1])), "svg"), kind="svg")
    assert job.wait(JOB_WAIT_S), job
    assert job.state == "done", job.error
    assert isinstance(job.result, bytes) and b"<svg" in job.result[:400]
