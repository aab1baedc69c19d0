"""The super-step timeline agrees with the symbolic cost (DESIGN.md invariant).

The cost model's pipeline term is each stage's end on the schedule's critical path, exact for
any stage costs (fidelity issue, E8; tests/test_critical_path.py); a difference would be
reported, not hidden. The sync, ZeRO and optimizer events follow the cost model's per-stage
numbers, each stage's from its own last pass (E9).
"""
import dataclasses

import pytest

from explorer import ExplorerError, Strategy, evaluate, load_cluster, load_model
from explorer.timeline import compare, makespan, superstep_events

GPT3, A100 = load_model("gpt3-175b"), load_cluster("dgx-a100-80gb")


def strat(**kw):
    base = dict(dp=2, tp=8, pp=8, micro_batch=1, global_batch=32, schedule="1f1b")
    return Strategy(**{**base, **kw})


def run(model, strategy, cluster, schedule=None):
    result = evaluate(model, strategy, cluster)
    events = superstep_events(model, strategy, cluster, schedule=schedule, result=result)
    return events, result, compare(events, result, schedule or strategy.schedule, strategy.schedule)


@pytest.mark.parametrize("kw", [dict(), dict(recompute="full"), dict(sequence_parallel=True, recompute="selective"),
                                dict(overlap_dp=True, zero=1), dict(global_batch=6, dp=6, tp=4, pp=4)])
def test_gpipe_matches_the_cost_model_for_any_stages(kw):
    ev, result, cmp = run(GPT3, strat(schedule="gpipe", **kw), A100)
    assert abs(cmp["relative_difference"]) <= 1e-9
    assert cmp["bubble_timeline_s"] == pytest.approx(cmp["bubble_model_s"], rel=1e-9)


@pytest.mark.parametrize("schedule,chunks", [("1f1b", 1), ("interleaved", 2), ("interleaved", 3)])
def test_1f1b_and_interleaved_on_gpt3(schedule, chunks):
    """GPT-3's heaviest stage (the head) has both the largest F and B: the model is exact here."""
    ev, result, cmp = run(GPT3, strat(schedule=schedule, chunks=chunks, global_batch=48), A100)
    assert abs(cmp["relative_difference"]) <= 1e-9
    assert cmp["difference_s"] == cmp["timeline_s"] - cmp["model_s"]


def test_unequal_stages_report_both_numbers():
    """A heavy first stage followed by a light last one: 1F1B finishes before GPipe's flow-shop
    bound (max F + max B); the model follows the critical path, so it agrees (fidelity issue, E8)."""
    model = load_model("tiny-gpt")
    cluster = load_cluster("classroom")
    s = Strategy(dp=1, tp=1, pp=2, micro_batch=1, global_batch=8, stage_map=(0, 0, 0, 1))
    ev, result, cmp = run(model, s, cluster)
    assert set(cmp) >= {"timeline_s", "model_s", "difference_s", "relative_difference", "note"}
    assert cmp["timeline_s"] == pytest.approx(makespan(ev))
    assert cmp["model_s"] == result.iteration_time_s
    assert cmp["difference_s"] == pytest.approx(cmp["timeline_s"] - cmp["model_s"])
    assert abs(cmp["relative_difference"]) <= 1e-9
    gpipe = evaluate(model, s.with_(schedule="gpipe"), cluster)
    assert result.iteration_time_s < 0.99 * gpipe.iteration_time_s


def test_compute_and_comm_per_stage_match_the_breakdown():
    """On the critical stage, m x the per-micro-batch parts = the breakdown's categories."""
    ev, result, _ = run(GPT3, strat(recompute="full"), A100)
    crit = ev[(ev.stage == result.critical_stage) & ~ev.hidden].groupby("category").duration_s.sum()
    for category in ("compute", "recompute", "op_comm", "pp_comm"):
        assert crit.get(category, 0.0) == pytest.approx(result.breakdown_s[category], rel=1e-9)
    sync = ev[ev.stage == result.extra["sync_stage"]].groupby("category").duration_s.sum()
    assert sync["optimizer"] == pytest.approx(result.breakdown_s["optimizer"], rel=1e-9)


def test_sync_and_optimizer_after_each_stages_last_pass():
    """Fidelity issue, E9: a stage synchronises when its own last backward ends, not at the end of
    the whole pipeline."""
    s = strat(dp=4, global_batch=64)
    ev, result, cmp = run(GPT3, s, A100)
    step = ev[ev.phase == "step"]
    assert set(step.kind) == {"dp_sync", "optimizer"}
    passes = ev[ev.phase.isin(["fwd", "bwd"]) & ~ev.hidden]
    for stage, own in step.groupby("stage"):
        assert own.start_s.min() == pytest.approx(passes[passes.stage == stage].end_s.max(), rel=1e-12)
    assert step.start_s.min() < cmp["pipeline_timeline_s"] - 1e-3
    for row in result.stage_times_s:
        mine = step[step.stage == row["stage"]].set_index("kind").duration_s
        assert mine["dp_sync"] == pytest.approx(row["dp_exposed_s"])
        assert mine["optimizer"] == pytest.approx(row["optimizer_s"])
    assert step[step.kind == "dp_sync"].level.unique().tolist() == [A100.levels[result.extra["dp_level"]].name]
    assert (step[step.kind == "dp_sync"].bytes > 0).all()


def test_overlapped_sync_is_drawn_hidden_under_the_last_backward():
    ev, result, cmp = run(GPT3, strat(dp=4, global_batch=64, overlap_dp=True, zero=1), A100)
    assert abs(cmp["relative_difference"]) <= 1e-9
    hidden = ev[ev.hidden]
    assert len(hidden) == 8 and set(hidden.kind) == {"dp_sync"}
    assert all(r.endswith(" · dp") for r in hidden.row)
    for _, h in hidden.iterrows():
        row = result.stage_times_s[h.stage]
        assert h.duration_s == pytest.approx(row["dp_sync_s"] - row["dp_exposed_s"])
        last_bwd = ev[(ev.stage == h.stage) & (ev.phase == "bwd") & ~ev.hidden].end_s.max()
        assert h.end_s == pytest.approx(last_bwd)


def test_zero3_gathers_before_every_pass():
    """ZeRO-3 (pp = 1): 2m gathers, one before each forward and backward (Rajbhandari et al. SC'20 Sec 7);
    without prefetch all exposed (with it, tests/test_overlaps.py)."""
    model, cluster = load_model("llama2-7b"), load_cluster("h200")
    s = Strategy(dp=8, tp=1, pp=1, micro_batch=2, global_batch=64, zero=3, overlap_dp=True, zero_prefetch=False)
    ev, result, cmp = run(model, s, cluster)
    gathers = ev[ev.kind == "zero_gather"]
    assert len(gathers) == 2 * s.micro_batches
    assert gathers.duration_s.sum() == pytest.approx(result.breakdown_s["zero_comm"], rel=1e-9)
    assert abs(cmp["relative_difference"]) <= 1e-9


def test_zb_h1_is_shorter_than_the_1f1b_model_and_says_so():
    ev, result, cmp = run(GPT3, strat(global_batch=64), A100, schedule="zb-h1")
    assert cmp["model_schedule"] == "1f1b" and "drawn as zb-h1 from a 1f1b strategy" in cmp["note"] and "_s " not in cmp["note"]
    assert cmp["timeline_s"] < cmp["model_s"]
    assert cmp["bubble_timeline_s"] < cmp["bubble_model_s"]
    weights = ev[ev.kind == "weight"]
    assert len(weights) == 8 * 32
    per_stage = weights.groupby("stage").duration_s.sum()
    for row in result.stage_times_s:
        assert per_stage[row["stage"]] == pytest.approx(32 * row["bwd_weight_s"])


def test_schedule_must_fit_the_strategy():
    with pytest.raises(ExplorerError, match="zb-h1 is drawn from a 1f1b strategy"):
        superstep_events(GPT3, strat(schedule="gpipe"), A100, schedule="zb-h1")
    with pytest.raises(ExplorerError, match="differs"):
        superstep_events(GPT3, strat(), A100, schedule="gpipe")


def test_free_communication_leaves_computation_only():
    """A cluster with free communication: no communication events, and still the model's time."""
    free = dataclasses.replace(A100, levels=tuple(dataclasses.replace(lv, bandwidth_bytes_per_s=1e30, latency_s=0.0)
                                                  for lv in A100.levels))
    for schedule in ("gpipe", "1f1b"):
        ev, result, cmp = run(GPT3, strat(schedule=schedule), free)
        assert ev[ev.category.isin(["op_comm", "pp_comm", "redistribution"])].duration_s.sum() < 1e-9
        assert abs(cmp["relative_difference"]) <= 1e-9


@pytest.mark.parametrize("schedule", ["1f1b", "interleaved", "zb-h1"])
def test_the_agreement_reads_a_frame_a_table_and_their_columns_alike(schedule):
    """compare() reads the events' columns once (a DataFrame's text columns are converted on every read): the same
    numbers from the page's DataFrame, the library's EventTable and the columns themselves."""
    from explorer.timeline.events import columns_of
    from explorer.timeline.superstep import superstep_table
    strategy = strat(schedule=schedule, chunks=2) if schedule == "interleaved" else strat(schedule=schedule)
    result = evaluate(GPT3, strategy, A100)
    table = superstep_table(GPT3, strategy, A100, result=result)
    kinds = (table, table.to_frame(), columns_of(table.to_frame()))
    assert compare(*kinds[:1], result, schedule) == compare(kinds[1], result, schedule) \
        == compare(kinds[2], result, schedule)
