"""ZeRO-2/3 with the sync overlapped: a gradient reduce-scatter after every micro-batch's backward (E2),
each launched under its own backward and queued on the data-parallel link, which the prefetched
gathers share (gradient_sync.sharded_sync_exposed; DeepSpeed overlap_comm, PyTorch FSDP, Megatron FSDP).
The closed form is checked against a fluid replay of that queue over the schedule's own order at
p = 1, and through evaluate()."""
import pytest
import sympy as sp

from explorer import Strategy, evaluate, load_cluster, load_model
from explorer.cost.superstep import sharded_sync_exposed
from explorer.schedules import get as schedule_of
from explorer.schedules.base import B, F
from explorer.symbols import B_r, F_r, m

A100 = load_cluster("dgx-a100-80gb")


def replay(schedule: str, micro: int, fwd: float, bwd: float, rs: float, others: float,
           hid_f: float, hid_b: float) -> float:
    """Passes back to back in the schedule's order (one stage); in each pass the link first carries
    its hidden gather, then is free; reduce-scatter j may run from the start of backward j, in order,
    split over free intervals; `others` after the last. Seconds past the last pass."""
    free, clock, ready = [], 0.0, []
    for kind, _, _ in schedule_of(schedule).order(1, micro, 1)[0]:
        secs, hid = (fwd, hid_f) if kind == F else (bwd, hid_b)
        if kind == B:
            ready.append(clock)
        free.append((clock + hid, clock + secs))
        clock += secs
    end = clock
    free.append((end, float("inf")))
    jobs = [(t, rs) for t in ready]
    jobs[-1] = (jobs[-1][0], rs + others)
    link = 0.0
    for start, work in jobs:
        link = max(link, start)
        for lo, hi in free:
            if hi <= link or work <= 0:
                continue
            lo = max(lo, link)
            take = min(work, hi - lo)
            work -= take
            link = lo + take
    return max(0.0, link - end)


@pytest.mark.parametrize("schedule", ["1f1b", "gpipe"])
@pytest.mark.parametrize("micro", [1, 2, 5, 16])
@pytest.mark.parametrize("rs,others,hid_f,hid_b", [(0.1, 0.0, 0.0, 0.0), (0.5, 0.2, 0.0, 0.0), (0.9, 0.0, 0.3, 0.5),
                                                   (2.5, 0.3, 0.4, 0.9), (0.2, 1.0, 0.1, 0.2)])
def test_closed_form_is_the_queue(schedule, micro, rs, others, hid_f, hid_b):
    fwd, bwd = 0.4, 1.0
    x, y, z, hf, hb = sp.symbols("rs others rest hf hb", nonnegative=True)
    expr = sharded_sync_exposed(schedule_of(schedule), x, z, hf, hb)
    fn = sp.lambdify((x, z, hf, hb, F_r, B_r, m), expr)
    got = float(fn(rs, micro * rs + others, hid_f, hid_b, fwd, bwd, micro))
    assert got == pytest.approx(replay(schedule, micro, fwd, bwd, rs, others, hid_f, hid_b), abs=1e-12)


def test_zero3_hides_each_micro_batchs_reduce_scatter():
    """gpt-7.5b on 64 A100s, ZeRO-3 with prefetch, b=1, B=1024 (m = 16): the sixteen reduce-scatters
    take far longer than one backward, so the one-window rule exposed most of them; queued under the
    compute after each backward (each with its gathers fits in F + B) they hide, but for the part of
    the last one its backward cannot take; exposed + hidden is the whole sync."""
    model = load_model("gpt-7.5b")
    s = Strategy(dp=64, tp=1, pp=1, micro_batch=1, global_batch=1024, zero=3, zero_prefetch=True, overlap_dp=True)
    res = evaluate(model, s, A100)
    row = res.stage_times_s[0]
    assert res.micro_batches == 16
    rs = row["dp_sync_s"] / 16
    assert 2 * row["zero_pass_s"] + rs < row["fwd_s"] + row["bwd_s"]
    assert row["dp_exposed_s"] < 0.1 * max(0.0, row["dp_sync_s"] - row["bwd_s"])      # the one-window rule
    assert row["dp_exposed_s"] == pytest.approx(max(0.0, rs - (row["bwd_s"] - row["zero_pass_s"])), abs=1e-12)
    assert res.hidden_s["dp_comm"] == pytest.approx(row["dp_sync_s"] - row["dp_exposed_s"], rel=1e-9)
    assert sum(res.breakdown_s.values()) == pytest.approx(res.iteration_time_s, rel=1e-12)
    off = evaluate(model, s.with_(overlap_dp=False), A100)
    assert res.iteration_time_s < off.iteration_time_s


def test_the_gathers_take_their_share_of_the_link():
    """gpt-18.4b t=4 on 128 A100s, ZeRO-3 with prefetch, m = 4: each pass's gather (0.19 s) fills the
    link under its pass, so the reduce-scatters find little free link time: more is exposed than the
    one-window rule (which let the last backward hide a gather and a reduce-scatter at once) said."""
    model = load_model("gpt-18.4b")
    s = Strategy(dp=32, tp=4, pp=1, micro_batch=1, global_batch=128, zero=3, zero_prefetch=True, overlap_dp=True,
                 sequence_parallel=True)
    row = evaluate(model, s, A100).stage_times_s[0]
    assert row["zero_pass_s"] > row["fwd_s"]
    assert row["dp_exposed_s"] > max(0.0, row["dp_sync_s"] - row["bwd_s"]) > 0
    assert row["dp_exposed_s"] <= row["dp_sync_s"]


def test_timeline_draws_one_hidden_reduce_scatter_per_backward():
    """The super-step Gantt shows the hidden sync as m reduce-scatters on row 'stage 0 · dp', each from
    its backward's start, their seconds and bytes the model's hidden part; the iteration is unchanged."""
    from explorer.timeline import superstep_events
    model = load_model("gpt-7.5b")
    s = Strategy(dp=64, tp=1, pp=1, micro_batch=1, global_batch=1024, zero=3, zero_prefetch=True, overlap_dp=True)
    res = evaluate(model, s, A100)
    ev = superstep_events(model, s, A100, result=res)
    syncs = ev[(ev["kind"] == "dp_sync") & ev["hidden"]]
    backwards = ev[(ev["kind"] == "backward") & (ev["stage"] == 0)]
    assert len(syncs) == res.micro_batches == len(backwards)
    assert sorted(syncs["start_s"]) == pytest.approx(sorted(backwards["start_s"]), abs=1e-12)
    assert syncs["duration_s"].sum() == pytest.approx(res.hidden_s["dp_comm"], rel=1e-9)
    assert ev["end_s"].max() == pytest.approx(res.iteration_time_s, rel=1e-9)
