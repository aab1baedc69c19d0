"""Schedules as objects (issue 25 item 2): a schedule defined only here runs through evaluate, the
search, the timeline and the app's picker; DualPipeV (DeepSeek-V3 report Sec 3.2.1, Table 2) is a
first-class schedule; no code outside explorer/schedules/ branches on a schedule's name."""
from __future__ import annotations

import pathlib
import re
from collections import Counter

import numpy as np
import pytest

from explorer import Strategy, evaluate, load_cluster, load_model
from explorer.schedules import Schedule, get, gpipe
from explorer.schedules.critical_path import stage_ends
from explorer.schedules.registry import register
from explorer.search import search
from explorer.timeline import compare, superstep_events
from explorer.timeline.simulate import simulate

ROOT = pathlib.Path(__file__).resolve().parents[1]

TOY = Schedule(name="toy-gpipe", title="toy GPipe", source="a schedule defined in a test (GPipe's order)",
               order=gpipe.order, formulas=gpipe.formulas, warmup=gpipe.warmup, closed_form_exact=True)


def test_a_schedule_defined_in_a_test_runs_everywhere():
    model, cluster = load_model("tiny-gpt"), load_cluster("classroom")
    s = Strategy(dp=1, tp=2, pp=2, micro_batch=1, global_batch=8, schedule="gpipe")
    with register(TOY):
        from explorer.facade import schedule_drawn_as, schedule_names
        toy = s.with_(schedule="toy-gpipe")
        r, ref = evaluate(model, toy, cluster), evaluate(model, s, cluster)
        assert r.iteration_time_s == pytest.approx(ref.iteration_time_s, rel=1e-12)
        ev = superstep_events(model, toy, cluster, result=r)
        assert abs(compare(ev, r, "toy-gpipe")["relative_difference"]) < 1e-9
        assert "toy-gpipe" in schedule_names() and schedule_drawn_as("toy-gpipe") == ["toy-gpipe"]
        found = search(model, cluster, 8, 8, top=400)
    without = search(model, cluster, 8, 8, top=400)
    assert "toy-gpipe" not in __import__("explorer.facade").facade.schedule_names()
    # the toy's points are GPipe's again: searched and kept (in the top list, a tie with GPipe's is shown once)
    assert found.total > without.total and found.kept > without.kept and found.evaluated > without.evaluated
    assert found.top[0].iteration_time_s == pytest.approx(without.top[0].iteration_time_s, rel=1e-12)


DV = get("dualpipev")


def simulated(p, m, f, b, w):
    durations = np.stack([f / 2, (b - w) / 2, w / 2], axis=1)
    return simulate(DV.order(p, m, 2), durations, 2, m, rule=DV.input_of)


@pytest.mark.parametrize("p", [2, 3, 4, 5, 8])
@pytest.mark.parametrize("extra", [0, 1, 7])
def test_dualpipev_order_runs_every_pass_once_after_its_input(p, extra):
    m = 2 * p + extra
    orders = DV.order(p, m, 2)
    for r, order in enumerate(orders):
        assert Counter(order) == Counter((k, c, j) for k in range(3) for c in range(2) for j in range(m))
    rng = np.random.default_rng(p + extra)
    f, b = rng.uniform(0.5, 1.5, p), rng.uniform(1.0, 3.0, p)
    w = 0.3 * b
    sim = simulated(p, m, f, b, w)
    end = {(i, k, c, j): e for i, k, c, j, e in zip(sim["stage"], sim["pass"], sim["chunk"], sim["micro_batch"],
                                                   sim["end_s"])}
    for i, k, c, j, s in zip(sim["stage"], sim["pass"], sim["chunk"], sim["micro_batch"], sim["start_s"]):
        dep = DV.input_of(int(k), int(i), int(c), int(j), p, 2)
        if dep is not None:
            assert s >= end[dep] - 1e-12
    # the simulated makespan is the critical path's, stage by stage
    ends = np.array([sim["end_s"][sim["stage"] == i].max() for i in range(p)])
    assert stage_ends("dualpipev", f, b, w, m, 2) == pytest.approx(ends, rel=1e-12)


def test_dualpipev_places_chunks_in_a_v():
    """Stage 0 holds the first and the last model chunk; chunk 0 flows down, chunk 1 back up."""
    assert [DV.place(k, 4, 2) for k in range(8)] == [(0, 0), (1, 0), (2, 0), (3, 0), (3, 1), (2, 1), (1, 1), (0, 1)]
    assert DV.input_of(0, 3, 1, 0, 4, 2) == (3, 0, 0, 0)       # the turn: chunk 1's forward after chunk 0's
    assert DV.input_of(1, 0, 1, 0, 4, 2) == (0, 0, 1, 0)       # the loss on stage 0


@pytest.mark.parametrize("F,B,W", [(1.0, 2.0, 0.0), (1.0, 2.0, 0.5), (1.0, 2.0, 1.0), (1.0, 1.0, 0.2), (1.0, 3.0, 0.5)])
def test_dualpipev_bubble_is_at_most_table_2s_with_the_pair_run_in_turn(F, B, W):
    """Table 2 (DeepSeek-V3 report): bubble (PP/2 - 1)(F&B + B - 3W) per device in chunk times, PP = 2p.
    Run one pass at a time (F&B = F + B; chunk = half a stage) it reads (p-1)(F + 2B - 3W)/2 in stage
    times; the order's simulated bubble is at most that when B >= F (the report's setting) and does not
    depend on m."""
    for p in (2, 3, 4, 6):
        bubbles = []
        for m in (2 * p, 2 * p + 3, 5 * p):
            f, b, w = np.full(p, F), np.full(p, B), np.full(p, W)
            bubbles.append(simulated(p, m, f, b, w)["end_s"].max() - m * (F + B))
        assert bubbles == pytest.approx([bubbles[0]] * 3, rel=1e-12)
        assert 0 < bubbles[0] <= (p - 1) * (F + 2 * B - 3 * W) / 2 + 1e-12


@pytest.mark.parametrize("p", [2, 4, 8])
def test_dualpipev_keeps_pp_plus_one_chunks_in_flight(p):
    """Table 2: PP + 1 activations (chunks, PP = 2p) on every device: counted off the order, and the
    schedule's in_flight (in stages' micro-batches: (2p + 1)/2)."""
    from explorer.symbols import m as m_, p as p_, v as v_
    m = 3 * p
    for order in DV.order(p, m, 2):
        held = peak = 0
        for kind, _, _ in order:
            held += 1 if kind == 0 else (-1 if kind == 1 else 0)
            peak = max(peak, held)
        assert peak == 2 * p + 1
    assert float(DV.in_flight.subs({m_: m, p_: p, v_: 2})) == (2 * p + 1) / 2


def test_dualpipev_is_a_first_class_schedule():
    """Evaluated, refused below 2p micro-batches or with other chunk counts, drawn in the timeline equal
    to the cost model, and found by the search."""
    from explorer.errors import ExplorerError
    model, cluster = load_model("tiny-gpt"), load_cluster("classroom")
    s = Strategy(dp=1, tp=2, pp=2, micro_batch=1, global_batch=8, schedule="dualpipev", chunks=2)
    r = evaluate(model, s, cluster)
    assert r.iteration_time_s > 0 and sum(r.breakdown_s.values()) == pytest.approx(r.iteration_time_s)
    ev = superstep_events(model, s, cluster, result=r)
    assert (ev.kind == "weight").sum() == 2 * 2 * 8
    assert abs(compare(ev, r, "dualpipev")["relative_difference"]) < 1e-9
    with pytest.raises(ExplorerError, match="num_ranks"):
        Strategy(dp=1, tp=2, pp=2, micro_batch=1, global_batch=3, schedule="dualpipev", chunks=2)
    with pytest.raises(ExplorerError, match="exactly 2"):
        Strategy(dp=1, tp=2, pp=2, micro_batch=1, global_batch=8, schedule="dualpipev", chunks=3)
    found = search(model, cluster, 8, 8, top=400)
    assert "dualpipev" in {c.strategy.schedule for c in found.top}


ALLOWED = {
    # a framework's own schedule names and what it accepts (exporters, runners), validation rows
    "explorer/codegen/", "explorer/runtime/", "explorer/validation/", "explorer/cli/", "explorer/lessons/",
    "app_pages/measured.py", "app_pages/lesson_view.py",
}


def test_no_schedule_name_branch_outside_the_schedules_package():
    """`schedule == "..."` / `!= "..."` on a registered schedule's name appears only in explorer/schedules/
    and in the named places that speak a framework's or a lesson's own names."""
    pattern = re.compile(r"schedule\w*\s*[!=]=\s*[\"'](gpipe|1f1b|interleaved|zb-h1|dualpipev)[\"']")
    found = []
    for path in list((ROOT / "explorer").rglob("*.py")) + list((ROOT / "app_pages").rglob("*.py")) + [ROOT / "app.py"]:
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith("explorer/schedules/") or any(rel.startswith(a) for a in ALLOWED):
            continue
        found += [f"{rel}: {line.strip()}" for line in path.read_text().splitlines() if pattern.search(line)]
    assert found == []


def test_the_timelines_page_draws_dualpipev():
    """The app's schedule picker lists DualPipeV and the Timelines page draws it, equal to the cost model."""
    import sys
    sys.path.insert(0, str(ROOT / "tests"))
    from app_util import metric, open_page
    at = open_page("timeline")
    assert "dualpipev" in at.sidebar.selectbox(key="w_schedule").options
    at.sidebar.selectbox(key="w_schedule").set_value("dualpipev").run()
    assert not at.exception
    assert metric(at, "Timeline makespan") == metric(at, "Cost model")
    assert "dualpipev" in at.radio(key="w_timeline_schedule").options
