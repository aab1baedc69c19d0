"""A work budget per action, and cancellation (issue 31 item 3): long library work checks
explorer.limits.spend() in its loops; past its CPU budget an action stops with a message naming what it was
doing, and once its caller asks (a session that left, or a newer rerun) it stops at the next check.
Work is counted in checks and on a fake clock, never timed."""
import dataclasses
import types

import pytest

from explorer.errors import ExplorerError
from explorer.io.clusters import load_cluster
from explorer.io.models import load_model
from explorer.limits import WorkCancelled, spend, work_budget
from explorer.strategy.strategy import Strategy

CLASSROOM = load_cluster("classroom")


class FakeClock:
    """CPU seconds that advance by `step` at every reading."""

    def __init__(self, step: float):
        self.now, self.step = 0.0, step

    def __call__(self) -> float:
        self.now += self.step
        return self.now


class StopAfter:
    """should_stop: False for the first `n` questions, then True."""

    def __init__(self, n: int):
        self.n, self.asked = n, 0

    def __call__(self) -> bool:
        self.asked += 1
        return self.asked > self.n


def test_spend_without_a_budget_does_nothing():
    for _ in range(3):
        spend("anything")


def test_past_the_budget_the_action_stops_naming_what_it_was_doing():
    with work_budget("the Cost page", cpu_s=1.0, clock=FakeClock(0.3)) as budget:
        spend("step one")                    # 0.3 s used (the start read 0.3)
        spend("step two")
        with pytest.raises(ExplorerError, match="the Cost page needs more than the 1 s .* while step four"):
            spend("step three")
            spend("step four")
    assert budget.checks == 4
    spend("after the block")                 # the budget ended with its block


def test_long_work_says_what_it_is_doing_every_few_seconds():
    """Issue 31: nothing holds a core > 10 s without saying so (a cold `explorer validate`: 10-24 s of CPU)."""
    from explorer.limits import NOTICE_EVERY_CPU_S
    heard = []
    with work_budget("explorer validate", cpu_s=30.0, clock=FakeClock(NOTICE_EVERY_CPU_S / 2 + 0.1),
                     notify=heard.append):
        for n in range(6):                  # 2.6, 5.2, 7.8, 10.4, 13.0, 15.6, 18.2 s read at the checks
            spend(f"building tree {n}")
    assert heard == ["explorer validate: 5 s of computation so far, now building tree 1 (it stops past 30 s)",
                     "explorer validate: 10 s of computation so far, now building tree 3 (it stops past 30 s)",
                     "explorer validate: 16 s of computation so far, now building tree 5 (it stops past 30 s)"]
    with work_budget("quiet", clock=FakeClock(0.1), notify=heard.append):
        spend("short work")
    assert len(heard) == 3, "short work says nothing"


def test_the_cli_says_on_stderr_what_a_long_command_does(capsys, monkeypatch):
    from explorer import limits
    from explorer.cli.main import main
    monkeypatch.setattr(limits, "NOTICE_EVERY_CPU_S", 0.0)        # every check of the search is long
    code = main(["search", "--model", "tiny-gpt", "--cluster", "classroom", "--gpus", "8", "--global-batch", "16"])
    captured = capsys.readouterr()
    notices = [line for line in captured.err.splitlines() if line.startswith("explorer search: ")]
    assert code == 0 and notices and all(" s of computation so far, now " in line for line in notices)
    assert any("now searching (t=" in line for line in notices) and "so far" not in captured.out


def test_a_caller_that_asks_to_stop_stops_the_work_at_the_next_check():
    with work_budget("a search", should_stop=StopAfter(2)) as budget:
        spend("a")
        spend("b")
        with pytest.raises(WorkCancelled, match="a search was cancelled while c"):
            spend("c")
    assert budget.checks == 3 and isinstance(WorkCancelled("x"), ExplorerError)


def test_budgets_nest_and_restore():
    with work_budget("outer", should_stop=lambda: False):
        with work_budget("inner", should_stop=lambda: True):
            with pytest.raises(WorkCancelled, match="inner"):
                spend("x")
        spend("outer goes on")


def test_a_search_checks_often_and_stops_when_asked():
    from explorer.search import search
    model = load_model("tiny-gpt")
    with work_budget("count", should_stop=lambda: False) as counting:
        search(model, CLASSROOM, gpus=8, global_batch=16, top=3)
    assert counting.checks >= 5                       # every group of families, critical paths, refinements
    stop = StopAfter(1)
    with work_budget("a search", should_stop=stop) as budget:
        with pytest.raises(WorkCancelled):
            search(model, CLASSROOM, gpus=8, global_batch=16, top=3)
    assert budget.checks == 2 < counting.checks       # stopped at the second check, not at the end


def test_a_first_compile_of_an_unseen_structure_can_be_cancelled(tmp_path, monkeypatch):
    from explorer.cost import cold
    from explorer.cost.evaluate import evaluate
    monkeypatch.setenv("BRIDGING_DL_CACHE", str(tmp_path / "cache"))     # nothing on disk or in memory
    cold.clear_memory()
    unseen = dataclasses.replace(load_model("tiny-gpt"), name="unseen", hidden=8 * 123, heads=8)
    with work_budget("the first evaluation", should_stop=lambda: True):
        with pytest.raises(WorkCancelled):
            evaluate(unseen, Strategy(dp=2, tp=2, pp=2, micro_batch=1, global_batch=8), CLASSROOM)
    evaluate(unseen, Strategy(dp=2, tp=2, pp=2, micro_batch=1, global_batch=8), CLASSROOM)   # and runs later


def test_the_cli_stops_a_command_past_its_budget_in_one_line(capsys):
    from explorer.cli.main import main
    code = main(["--max-cpu-s", "1e-9", "search", "--model", "tiny-gpt", "--cluster", "classroom", "--gpus", "8",
                 "--global-batch", "16"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "explorer search needs more than" in err
    for bad in ("0", "-1", "nan", "inf", "x"):
        assert main(["--max-cpu-s", bad, "presets"]) == 2
    assert "--max-cpu-s" in capsys.readouterr().err


def test_stop_requested_reads_streamlits_own_requests(monkeypatch):
    """The app's should_stop, against Streamlit's ScriptRequests: a pending STOP (the websocket closed:
    disconnect_session -> request_script_stop) or RERUN (a newer widget change) stops the work."""
    from streamlit.runtime.scriptrunner_utils.script_requests import RerunData, ScriptRequests
    from app_pages import budget
    requests = ScriptRequests()
    monkeypatch.setattr(budget, "get_script_run_ctx", lambda: types.SimpleNamespace(script_requests=requests))
    assert not budget.stop_requested()
    requests.request_rerun(RerunData())
    assert budget.stop_requested()
    requests.request_stop()
    assert budget.stop_requested()
    monkeypatch.setattr(budget, "get_script_run_ctx", lambda: None)     # outside a script run: never
    assert not budget.stop_requested()


def test_a_page_whose_session_left_ends_quietly(monkeypatch, tmp_path):
    """The Cost page of an unseen model (compiles) with the session gone: the run ends, no exception box.
    Unseen whatever ran before in this process: an empty disk cache, the in-memory trees and explanations
    cleared, and compiles in this interpreter (BRIDGING_DL_WORKERS=0), where the budget is asked."""
    from app_pages import budget
    from explorer.cost import cold, explained
    monkeypatch.setenv("BRIDGING_DL_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("BRIDGING_DL_WORKERS", "0")
    cold.clear_memory()
    explained.clear_memory()
    from explorer.io.share import encode
    from tests.app_util import open_page
    unseen = dataclasses.replace(load_model("tiny-gpt"), name="left-behind", hidden=8 * 127, heads=8)
    query = encode(unseen, CLASSROOM, Strategy(dp=2, tp=2, pp=2, micro_batch=1, global_batch=8))
    asked = StopAfter(0)
    monkeypatch.setattr(budget, "stop_requested", asked)
    at = open_page("cost", query=query)
    assert not at.exception and asked.asked >= 1       # the library asked, and the run ended quietly


def test_validate_takes_a_budget_per_case_unless_one_is_given(monkeypatch, capsys):
    """A cold `explorer validate` compiles every published run's structure (12.8 s of CPU quiet, 24 s at load 12
    for 158 cases): its batch gets CASE_CPU_S a case, at least one action's, with the action's notices; an
    explicit --max-cpu-s stays the limit."""
    from explorer.cli.main import main
    from explorer.limits import CASE_CPU_S, MAX_ACTION_CPU_S, MAX_BATCH_CPU_S, _BUDGET
    seen = []

    def fake_validate(cases, cluster):
        budget = _BUDGET.get()
        seen.append((budget.what, budget.cpu_s, budget.notify is not None))
        return []

    monkeypatch.setattr("explorer.validation.validate", fake_validate)
    monkeypatch.setattr("explorer.validation.load_all_cases", lambda groups: list(range(200)))
    monkeypatch.setattr("explorer.validation.load_megatron_bridge", lambda: ([], []))
    assert main(["validate", "--json"]) == 0
    assert seen[-1] == ("explorer validate (200 cases; --max-cpu-s sets another limit)", 200 * CASE_CPU_S, True)
    monkeypatch.setattr("explorer.validation.load_all_cases", lambda groups: list(range(3)))
    assert main(["validate", "--json"]) == 0
    assert seen[-1][1] == MAX_ACTION_CPU_S                                  # never less than one action's
    monkeypatch.setattr("explorer.validation.load_all_cases", lambda groups: list(range(100_000)))
    assert main(["validate", "--json"]) == 0
    assert seen[-1][1] == MAX_BATCH_CPU_S != 100_000 * CASE_CPU_S          # nor more than a bounded batch's
    assert main(["--max-cpu-s", "7", "validate", "--json"]) == 0
    assert seen[-1] == ("explorer validate", 7.0, True)                    # the user's limit, the action's budget
    capsys.readouterr()


def test_a_batch_budget_keeps_the_actions_cancellation(monkeypatch):
    from explorer.limits import batch_budget, spend
    with work_budget("an action", should_stop=lambda: True):
        with batch_budget("a batch", 100.0):
            with pytest.raises(WorkCancelled):
                spend("working")
    with batch_budget("alone", 1e-12) as budget:         # no action around it: its own clock, no notices
        assert budget.notify is None
        with pytest.raises(ExplorerError):
            spend("working")
