"""First compiles of a new model structure in the worker pool (issue 31 items 4-5): explorer/runtime/offload.py
with explorer.cost.cold.compile_elsewhere, as app.py installs it around each page run (app_pages/jobs.py)."""
import dataclasses
import threading
import time

import pytest

from app_pages import jobs
from app_util import errors, open_page
from explorer import Strategy, evaluate, load_cluster, load_model
from explorer.cost import cold
from explorer.cost.cold import compile_elsewhere
from explorer.errors import ExplorerError
from explorer.limits import WorkCancelled, work_budget
from explorer.cost.numeric import structure_key
from explorer.runtime.jobs import JOBS, SELFTEST_JOBS, compile_request, same_key
from explorer.runtime.offload import COMPILE_KIND, EXPLAIN_KIND, compiles_in, explains_in, structure_owner
from explorer.runtime import explanation as X
from explorer.runtime.workers import WorkerPool
from waiting import JOB_WAIT_S, spinning, wait_until
from work import measure



@pytest.fixture(scope="module")
def pool():
    shared = WorkerPool(2, jobs={**JOBS, **SELFTEST_JOBS})
    shared.start()
    yield shared
    shared.close()


def unseen(width: int):
    """llama2-7b made a structure no test evaluated (its own hidden size and 3 layers more)."""
    base = load_model("llama2-7b")
    return dataclasses.replace(base, name=f"offload-{width}", hidden=base.hidden + 8 * base.heads * width,
                               layers=base.layers + 3)


STRATEGY = Strategy(dp=2, tp=2, pp=5, micro_batch=1, global_batch=20, schedule="interleaved", chunks=7)


def key_of(model, cluster) -> str:
    """The key text of STRATEGY's cost tree on `model` and `cluster` (what a compile job is asked to store under)."""
    return repr(structure_key(model, STRATEGY, cluster))


def too_precise(cluster):
    """`cluster` with a constant of 13+ significant digits: a cluster file keeps 12, so it does not survive plain
    data (a worker would cost another cluster)."""
    return dataclasses.replace(cluster, device=dataclasses.replace(cluster.device,
                                                                   memory_bytes=cluster.device.memory_bytes + 1e-3))


def test_a_first_compile_runs_in_a_worker_and_gives_the_same_numbers(pool):
    model, cluster = unseen(1), load_cluster("dgx-a100-80gb")
    asked = []
    compile_fn = compiles_in(pool, on_wait=asked.append)
    with compile_elsewhere(compile_fn):
        there = measure(evaluate, model, STRATEGY, cluster)
    assert there.error is None, there.error
    assert there.compiled == 0, there               # nothing lambdified in this process: the worker did it
    assert "cost/tree.py:build" not in there.by_function            # nor the tree built
    assert asked == ["the first compile of this model structure"]
    assert pool.job("any", COMPILE_KIND) is None     # the finished job was forgotten (bounded)
    cold.clear_memory()
    here = measure(evaluate, model, STRATEGY, cluster)   # the same structure, read back from the disk cache
    assert here.compiled == 0
    cold.clear_memory()
    with compile_elsewhere(None):                    # built here from nothing: the same numbers
        rebuilt = evaluate(dataclasses.replace(model, name="offload-rebuilt"), STRATEGY, cluster)
    assert there.value.iteration_time_s == pytest.approx(here.value.iteration_time_s, rel=1e-12)
    assert there.value.breakdown_s == pytest.approx(rebuilt.breakdown_s, rel=1e-12)


def test_sessions_asking_for_one_structure_share_one_compile(pool):
    model, cluster = unseen(2), load_cluster("dgx-a100-80gb")
    submitted, submit = [], pool.submit

    def counting_submit(*args, **kwargs):
        job = submit(*args, **kwargs)
        submitted.append(job)
        return job
    pool.submit = counting_submit
    results, compile_fn = [], compiles_in(pool)

    def session():
        with compile_elsewhere(compile_fn):
            results.append(evaluate(model, STRATEGY, cluster).iteration_time_s)
    try:
        threads = [threading.Thread(target=session) for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(JOB_WAIT_S)
    finally:
        del pool.submit
    assert len(results) == 3 and len(set(results)) == 1
    assert len(submitted) == 1 and submitted[0].shared and submitted[0].state == "done"


def test_a_session_that_leaves_stops_waiting_at_its_next_step():
    busy = WorkerPool(1, jobs={**JOBS, **SELFTEST_JOBS})       # its one worker busy: the compile job waits
    try:
        spinning = busy.submit("someone-else", "spin", {"seconds": 120})
        left = threading.Event()
        model, cluster = unseen(3), load_cluster("dgx-a100-80gb")
        request = compile_request(model, STRATEGY, cluster, repr(structure_key(model, STRATEGY, cluster)))
        queued = busy.submit(structure_owner(request), "compile", request, kind=COMPILE_KIND, shared=True)
        outcome = []

        def page_run():
            with work_budget("this page", should_stop=left.is_set), compile_elsewhere(compiles_in(busy)):
                try:
                    evaluate(model, STRATEGY, cluster)
                    outcome.append("finished")
                except WorkCancelled as err:
                    outcome.append(str(err))
        thread = threading.Thread(target=page_run)
        thread.start()
        time.sleep(0.3)
        left.set()
        thread.join(JOB_WAIT_S)
        assert not thread.is_alive() and len(outcome) == 1 and "first compile" in outcome[0], outcome
        assert queued.state == "cancelled" and queued.stopped.is_set()   # nobody waits for it: cancelled unrun
        assert not spinning.finished
    finally:
        busy.close()


def test_without_a_pool_or_a_disk_cache_the_tree_is_built_here(monkeypatch):
    model, cluster = unseen(4), load_cluster("dgx-a100-80gb")
    with compile_elsewhere(compiles_in(WorkerPool(0))):         # synchronous pool: never offloads
        work = measure(evaluate, model, STRATEGY, cluster)
    assert work.error is None and work.compiled >= 0
    asked = []
    monkeypatch.setenv("BRIDGING_DL_CACHE", "off")
    cold.clear_memory()
    with compile_elsewhere(lambda *args: asked.append(args) or True):
        evaluate(unseen(5), STRATEGY, cluster)
    assert asked == []                                          # nowhere to share a tree: not asked


def test_a_key_text_matches_only_the_same_numbers():
    assert same_key("Efficiency(gemm_half_flops=250000000.0, hbm=0.846)", "Efficiency(gemm_half_flops=250000000, "
                    "hbm=0.846)")
    assert not same_key("gemm_half_flops=250000000.5", "gemm_half_flops=250000000")
    assert not same_key("hidden=10.0", "hidden=100") and not same_key("v1.0.3", "v1.0.2")


def test_the_app_sends_a_new_structure_to_its_pool_and_reruns_cleanly(monkeypatch):
    pool, submitted, shown = jobs.pool(), [], []
    submit = pool.submit
    pool.submit = lambda *args, **kwargs: submitted.append(args[1]) or submit(*args, **kwargs)
    show = jobs._show_wait
    monkeypatch.setattr(jobs, "_show_wait", lambda what: shown.append((what, jobs._WAIT_SLOT.get() is not None))
                        or show(what))
    try:
        at = open_page()
        at.session_state["model"] = unseen(6)
        at.switch_page("app_pages/cost.py").run()
        assert not at.exception and not errors(at), (at.exception, errors(at))
        at.switch_page("app_pages/strategy.py").run()      # its presets: cached functions that evaluate
        at.switch_page("app_pages/cost.py").run()          # a cached value replayed: nothing drawn while waiting
        assert not at.exception and not errors(at), (at.exception, errors(at))
    finally:
        del pool.submit
    assert "compile" in submitted and "explain" in submitted      # the Cost page's formulas were built there too
    assert "offload-6" in " ".join(c.value for c in at.caption)
    # the sidebar strategy's own evaluation (compute.current, outside any cached function) showed its wait
    assert ("the first compile of this model structure", True) in shown, shown


def test_a_wait_is_drawn_only_where_a_page_asked_for_it_and_then_cleared():
    drawn = []

    class Slot:
        def info(self, text):
            drawn.append(text)

        def empty(self):
            drawn.append(None)

    jobs._show_wait("the first compile of this model structure")      # no slot: inside a cached function
    assert drawn == []
    with jobs.compile_waits_shown(Slot()):
        jobs._show_wait("the first compile of this model structure")
    assert drawn == [jobs.WAIT_TEXT.format(what="the first compile of this model structure"), None]
    assert "first time" in drawn[0] and jobs._WAIT_SLOT.get() is None


def test_a_page_never_waits_behind_a_search_it_takes_the_pages_worker():
    """Searches fill the pool's `size` workers; a first compile takes the worker kept for pages beside them, in
    another process, and the searches keep theirs (explorer/runtime/workers.py)."""
    busy = WorkerPool(1, jobs={**JOBS, **SELFTEST_JOBS})
    try:
        search = spinning(busy, "someone-else")
        assert busy.free() == 1                      # the page's worker
        model, cluster = unseen(7), load_cluster("dgx-a100-80gb")
        with compile_elsewhere(compiles_in(busy)):
            work = measure(evaluate, model, STRATEGY, cluster)
        assert work.error is None and "cost/tree.py:build" not in work.by_function, work     # built there
        assert search.state == "running" and len(busy.pids()) == 2
    finally:
        busy.close()


def test_when_the_pages_worker_is_busy_too_the_page_compiles_itself_at_once(monkeypatch):
    """Every worker busy (a search, a long page job) and few page runs in this interpreter: the page builds the tree
    itself at once; nothing of it goes to the pool (it never waited for a job)."""
    from explorer.runtime import offload
    monkeypatch.setattr(offload, "BUSY_ACTIONS", 10 ** 6)       # however many page runs this test process has
    busy = WorkerPool(1, jobs={**JOBS, **SELFTEST_JOBS})
    try:
        spinning(busy, "someone-else")
        spinning(busy, "a-structure", first=True)
        assert busy.free() == 0
        model, cluster = unseen(9), load_cluster("dgx-a100-80gb")
        waited = []
        with compile_elsewhere(compiles_in(busy, on_wait=waited.append)):
            work = measure(evaluate, model, STRATEGY, cluster)
        assert work.error is None and work.by_function.get("cost/tree.py:build") == 1, work   # built here, at once
        assert waited == [] and not busy._queue
    finally:
        busy.close()


def test_when_the_interpreter_is_busy_the_page_waits_a_while_then_compiles_itself(monkeypatch):
    """Every worker busy and BUSY_ACTIONS page runs sharing the interpreter: the compile waits in the queue for
    PAGE_QUEUE_S, ahead of the searches, then is dropped, and the page builds the tree itself; nothing of it is left
    in the pool."""
    from explorer.runtime import offload
    monkeypatch.setattr(offload, "BUSY_ACTIONS", 0)
    busy = WorkerPool(1, jobs={**JOBS, **SELFTEST_JOBS})
    try:
        spinning(busy, "someone-else")
        spinning(busy, "a-structure", first=True)
        assert busy.free() == 0
        model, cluster = unseen(11), load_cluster("dgx-a100-80gb")
        owner = structure_owner(compile_request(model, STRATEGY, cluster, key_of(model, cluster)))
        seen = []
        with compile_elsewhere(compiles_in(busy, on_wait=lambda what: seen.append(busy.job(owner, COMPILE_KIND)))):
            work = measure(evaluate, model, STRATEGY, cluster)
        assert work.error is None and work.by_function.get("cost/tree.py:build") == 1, work   # built here
        assert seen and seen[0] is not None and seen[0].state == "cancelled"      # it was queued, then dropped
        assert busy.job(owner, COMPILE_KIND) is None and not busy._queue
    finally:
        busy.close()


def test_a_page_job_queued_behind_other_pages_jobs_runs_in_a_worker_when_one_comes_free(monkeypatch):
    """The page's worker busy with a short page job: the next page's compile waits for it instead of compiling in
    the serving interpreter, where it would hold up every session. (PAGE_QUEUE_S raised: a loaded machine may take
    longer than the real one to hand the worker over; what is checked is the wait, not its bound.)"""
    from explorer.runtime import offload
    monkeypatch.setattr(offload, "PAGE_QUEUE_S", JOB_WAIT_S)
    monkeypatch.setattr(offload, "BUSY_ACTIONS", 0)        # as when many sessions' runs share the interpreter
    busy = WorkerPool(1, jobs={**JOBS, **SELFTEST_JOBS})
    try:
        spinning(busy, "someone-else")
        warm = busy.submit("a-structure", "pid", first=True)        # the page's worker started and imported
        assert warm.wait(JOB_WAIT_S) and warm.state == "done"
        short_page = busy.submit("a-structure", "spin", {"seconds": 2}, first=True)
        assert wait_until(lambda: short_page.state == "running", JOB_WAIT_S)    # on the page's worker, not queued
        assert busy.free() == 0
        model, cluster = unseen(10), load_cluster("dgx-a100-80gb")
        owner = structure_owner(compile_request(model, STRATEGY, cluster, key_of(model, cluster)))
        states = []
        with compile_elsewhere(compiles_in(busy, on_wait=lambda what: states.append(busy.job(owner, COMPILE_KIND).state))):
            work = measure(evaluate, model, STRATEGY, cluster)
        assert states == ["queued"]                                  # it waited for the page's worker
        assert work.error is None and "cost/tree.py:build" not in work.by_function, work     # built there
        assert short_page.state == "done"
    finally:
        busy.close()


def test_a_second_first_compile_takes_the_worker_beyond_size_not_the_serving_interpreter():
    """A compile in the serving interpreter holds up every session; in a worker only its own page: with one
    compile running on a pool of size 1, the next one still goes to a worker, the third finds none."""
    busy = WorkerPool(1, jobs={**JOBS, **SELFTEST_JOBS})
    try:
        spinning(busy, "a-structure", first=True)
        assert busy.free() == 1
        spinning(busy, "another-structure", first=True)
        assert busy.free() == 0 and len(busy.pids()) == 2
    finally:
        busy.close()


def test_the_pages_worker_never_runs_a_search():
    """At most `size` workers run the jobs pages do not wait for: a second search waits, the page's worker idle."""
    pool = WorkerPool(1, jobs={**JOBS, **SELFTEST_JOBS})
    try:
        first = pool.submit("student-1", "spin", {"seconds": 120})
        second = pool.submit("student-2", "spin", {"seconds": 120})
        assert wait_until(lambda: first.state == "running", JOB_WAIT_S)
        page = pool.submit("a-structure", "pid", first=True)
        assert page.wait(JOB_WAIT_S) and page.state == "done"
        assert first.state == "running" and second.state == "queued" and len(pool.pids()) == 2
        pool.cancel("student-1", "spin")
        assert wait_until(lambda: second.state == "running", JOB_WAIT_S)
    finally:
        pool.close()


def test_a_strategys_formulas_are_built_in_a_worker_and_read_back(pool):
    model, cluster = unseen(8), load_cluster("dgx-a100-80gb")
    asked = []
    with X.explain_elsewhere(explains_in(pool, on_wait=asked.append)):
        there = measure(X.explanation, model, STRATEGY, cluster)
    assert there.error is None, there.error
    assert "cost/explain.py:explain" not in there.by_function, there       # no sympy explanation in this process
    assert asked == ["the formulas of this strategy"]
    assert pool.job("any", EXPLAIN_KIND) is None
    X.clear_memory()
    again = measure(X.explanation, model, STRATEGY, cluster)                # read back from the disk cache
    assert "cost/explain.py:explain" not in again.by_function and again.value == there.value
    here = X.build(model, STRATEGY, cluster)                                # built here: the same text
    assert here == there.value and here.stage == there.value.stage
    assert set(here.latex()) >= {"compute", "bubble"} and here.total_latex().startswith("T_{iter} = ")
    assert any(tex == "m" for tex, _ in here.legend)


def test_a_stored_explanation_is_read_only_when_it_is_one():
    made = X.Explanation(2, {"compute": "a"}, {"P": "b"}, "T", (("m", "micro-batches"),))
    assert X.from_plain(X.to_plain(made)) == made
    for bad in (None, [], {"stage": "2"}, dict(X.to_plain(made), latex={"compute": 5}),
                dict(X.to_plain(made), legend=[["m"]])):
        assert X.from_plain(bad) is None


def test_when_the_pages_worker_cannot_start_a_page_job_fails_at_once(monkeypatch):
    """No process for the page's worker (the machine out of processes): the page's job fails with one line instead
    of waiting behind the searches, and the page builds what it needed itself."""
    from explorer.runtime import workers as W
    busy = WorkerPool(1, jobs={**JOBS, **SELFTEST_JOBS})
    try:
        search = spinning(busy, "someone-else")

        def no_process():
            raise OSError(11, "Resource temporarily unavailable")
        monkeypatch.setattr(W, "_Worker", no_process)
        page = busy.submit("a-structure", "pid", first=True)
        assert page.wait(JOB_WAIT_S) and page.state == "failed" and "no free worker" in page.error
        assert search.state == "running"
    finally:
        monkeypatch.undo()
        busy.close()


def test_a_models_presets_are_built_in_a_worker_as_they_are_built_here(pool):
    """The Strategy page's presets of a new model (up to ten evaluations, with first compiles) come from the
    "presets" job, equal to strategy_presets here; without a pool they are built here."""
    from explorer.io.presets import strategy_presets
    from explorer.runtime.jobs import presets_request
    from explorer.runtime.offload import PRESETS_KIND, presets_in
    model, cluster = unseen(11), load_cluster("dgx-a100-80gb")
    there = measure(presets_in, pool, model, cluster, 16, 64, 1)
    assert there.error is None, there.error
    assert there.compiled == 0, there                # no compile in this process, nor an evaluation
    assert "cost/evaluation.py:build_evaluation" not in there.by_function, sorted(there.by_function)[:20]
    assert pool.job(structure_owner(presets_request(model, cluster, 16, 64, 1)), PRESETS_KIND) is None   # forgotten
    here = strategy_presets(model, cluster, 16, 64, 1)
    assert there.value == here and any(p.strategy is not None for p in here.values())
    assert presets_in(None, model, cluster, 16, 64, 1) == here


def test_a_cancelled_run_is_not_cached_as_presets_that_do_not_fit():
    """WorkCancelled is an ExplorerError: strategy_presets let it through (a cached "does not fit" for a run that was
    only cancelled would be shown to every session), as fallback_strategy does."""
    from explorer.io.presets import strategy_presets
    stop = threading.Event()
    stop.set()
    with pytest.raises(WorkCancelled):
        with work_budget("the presets", should_stop=stop.is_set):
            strategy_presets(unseen(12), load_cluster("dgx-a100-80gb"), 16, 64, 1)


def test_presets_are_built_here_when_the_cluster_does_not_survive_plain_data(pool, monkeypatch):
    from explorer.io.presets import strategy_presets
    from explorer.runtime import offload
    model, cluster = unseen(13), load_cluster("dgx-a100-80gb")
    sent = []
    monkeypatch.setattr(offload, "result_in_pool", lambda *a, **k: sent.append(a))
    precise = too_precise(cluster)
    assert offload.presets_in(pool, model, precise, 16, 64, 1) == strategy_presets(model, precise, 16, 64, 1)
    assert sent == []
    monkeypatch.setattr(offload.cache, "directory", lambda: None)           # no disk cache: built here too
    assert offload.presets_in(pool, model, cluster, 16, 64, 1) == strategy_presets(model, cluster, 16, 64, 1)
    assert sent == []


def test_a_strategys_timelines_are_built_in_a_worker_as_they_are_built_here(pool):
    """The Timelines page's super-step and micro-step views of a new strategy come from the "superstep" and
    "microstep" jobs: the same events, figure and agreement as built here, with no timeline built in this process;
    a timeline beyond the limits gives the library's message; without a pool they are built here."""
    import plotly.io as pio
    from explorer.charts.timeline_views import microstep_view, superstep_view
    from explorer.charts.wire import wire_figure
    from explorer.runtime.jobs import timeline_request
    from explorer.runtime.offload import timeline_in
    model, cluster = unseen(14), load_cluster("dgx-a100-80gb")
    for level, kwargs, build in (("superstep", {"schedule": "interleaved"}, superstep_view),
                                 ("microstep", {"layer": 2, "op": None}, microstep_view)):
        there = measure(timeline_in, pool, level, model, STRATEGY, cluster, **kwargs)
        assert there.error is None, there.error
        built = [f for f in there.by_function if f.startswith(("timeline/superstep.py", "timeline/microstep.py",
                                                                "charts/gantt.py", "cost/evaluation.py"))]
        assert built == [], built                    # only the events' DataFrame is made here (events.py to_frame)
        assert pool.job(structure_owner(timeline_request(model, STRATEGY, cluster, **kwargs)), level) is None
        here = build(model, STRATEGY, cluster, **kwargs)
        assert there.value["events"].equals(here["events"])
        assert pio.to_json(wire_figure(there.value["figure"]).to_dict(), validate=False) == \
            pio.to_json(wire_figure(here["figure"]).to_dict(), validate=False)
        assert there.value.get("agreement") == here.get("agreement")
        assert timeline_in(None, level, model, STRATEGY, cluster, **kwargs)["events"].equals(here["events"])
    huge = Strategy(dp=1, tp=1, pp=8, micro_batch=1, global_batch=2 ** 16)
    with pytest.raises(ExplorerError, match="MAX_TIMELINE_EVENTS"):
        timeline_in(pool, "superstep", model, huge, cluster, schedule="1f1b")


def test_timelines_are_built_here_when_the_configuration_does_not_survive_plain_data(pool, monkeypatch):
    from explorer.runtime import offload
    model, cluster = unseen(15), load_cluster("dgx-a100-80gb")
    sent = []
    monkeypatch.setattr(offload, "result_in_pool", lambda *a, **k: sent.append(a))
    precise = too_precise(cluster)
    assert len(offload.timeline_in(pool, "microstep", model, STRATEGY, precise, layer=0, op=None)["events"])
    assert sent == []
    monkeypatch.setattr(offload.cache, "directory", lambda: None)           # no disk cache: built here too
    assert len(offload.timeline_in(pool, "superstep", model, STRATEGY, cluster, schedule="interleaved")["events"])
    assert sent == []


def test_a_timeline_wait_stops_when_its_session_has_left_and_the_job_is_cancelled(pool, monkeypatch):
    """A page run whose session left stops waiting for its timeline at its next step (WorkCancelled, which the
    Timelines page lets through: app_pages/compute.py superstep_or_refusal) and nobody waits for the job: cancelled."""
    from explorer.runtime.offload import timeline_in
    from explorer.runtime.jobs import timeline_request
    model, cluster = unseen(16), load_cluster("dgx-a100-80gb")
    long = Strategy(dp=1, tp=1, pp=8, micro_batch=1, global_batch=1024)      # ~10^5 events: a second's work
    evaluate(model, long, cluster)                                           # its tree here (and on disk)
    submitted, submit = [], pool.submit
    monkeypatch.setattr(pool, "submit", lambda *a, **k: submitted.append(submit(*a, **k)) or submitted[-1])
    left = threading.Event()
    left.set()
    with work_budget("this page", should_stop=left.is_set):
        with pytest.raises(WorkCancelled, match="super-step timeline"):
            timeline_in(pool, "superstep", model, long, cluster, schedule="1f1b")
    assert len(submitted) == 1 and submitted[0].name == "superstep"
    assert wait_until(lambda: submitted[0].finished, JOB_WAIT_S) and submitted[0].state == "cancelled"
    owner = structure_owner(timeline_request(model, long, cluster, schedule="1f1b"))
    assert pool.job(owner, "superstep") is None
