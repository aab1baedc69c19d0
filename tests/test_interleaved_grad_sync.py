"""The interleaved schedule's overlapped gradient sync, one window per model chunk (fidelity issue,
"DP gradient reduce-scatter bucketed under the backward of every micro-batch chunk", Megatron-LM
--overlap-grad-reduce). Megatron-Core (pipeline_parallel/schedules.py,
forward_backward_pipelining_with_interleaving, backward_step_helper_postprocess) launches model chunk
c's gradient sync r backward passes after its last micro-batch's backward on stage r (align_grad_reduce,
the default), a chunk whose launch falls past the last backward at the stage's end; the chunks' syncs
then run one after another. The closed form (schedules/interleaved.sync_exposed) is checked against
that rule replayed on the explorer's own interleaved order, and through evaluate()."""
import pytest
import sympy as sp

from explorer import Strategy, evaluate, load_cluster, load_model
from explorer.schedules.base import B
from explorer.schedules.interleaved import INTERLEAVED, order
from explorer.symbols import B_r, p, r, v

A100 = load_cluster("dgx-a100-80gb")


def replay(pp: int, m: int, chunks: int, stage: int, sync_s: float, bwd_s: float) -> float:
    """Exposed seconds after stage `stage`'s last pass: each chunk backward takes bwd_s / chunks (no
    waits), chunk c's sync (sync_s / chunks) is launched after the backward `stage` positions past
    chunk c's last one, and the syncs queue in launch order."""
    backwards = [(c, j) for kind, c, j in order(pp, m, chunks)[stage] if kind == B]
    chunk_bwd, piece = bwd_s / chunks, sync_s / chunks
    end = len(backwards) * chunk_bwd
    launches = []
    for c in range(chunks):
        last = max(k for k, (cc, _) in enumerate(backwards) if cc == c)
        at = last + stage
        launches.append(end if at >= len(backwards) else (at + 1) * chunk_bwd)
    clock = 0.0
    for start in sorted(launches):
        clock = max(clock, start) + piece
    return max(0.0, clock - end)


@pytest.mark.parametrize("pp,m,chunks", [(2, 4, 2), (4, 8, 2), (4, 8, 3), (8, 16, 4), (4, 4, 1), (3, 6, 5)])
@pytest.mark.parametrize("ratio", [0.05, 0.4, 1.0, 3.0, 12.0])
def test_closed_form_is_megatrons_launch_rule(pp, m, chunks, ratio):
    rest = sp.Symbol("rest", nonnegative=True)
    fn = sp.lambdify((rest, B_r, p, r, v), INTERLEAVED.exposed_sync(rest))
    bwd = 1.0
    for stage in range(pp):
        want = replay(pp, m, chunks, stage, ratio * bwd, bwd)
        assert float(fn(ratio * bwd, bwd, pp, stage, chunks)) == pytest.approx(want, rel=1e-12, abs=1e-12)


def test_last_chunk_is_always_exposed():
    """Chunk 0's sync is launched after the stage's last backward: at least 1/v of the sync shows."""
    rest = sp.Symbol("rest", nonnegative=True)
    fn = sp.lambdify((rest, B_r, p, r, v), INTERLEAVED.exposed_sync(rest))
    for stage in range(4):
        assert fn(1.0, 100.0, 4, stage, 4) == pytest.approx(0.25)


def test_evaluate_reads_the_per_chunk_windows():
    """gpt3-175b d=16 t=8 p=8, SP, selective recompute, overlapped DP sync: with v = 3 chunks the
    exposed sync on each stage is the closed form at its own B_r, and more is hidden than under one
    chunk's window (what the model charged before); hidden + exposed = the whole sync."""
    model = load_model("gpt3-175b")
    s = Strategy(dp=16, tp=8, pp=8, micro_batch=1, global_batch=1536, schedule="interleaved", chunks=3,
                 sequence_parallel=True, recompute="selective", overlap_dp=True)
    res = evaluate(model, s, A100)
    for stage, row in enumerate(res.stage_times_s):
        total = row["dp_sync_s"]
        want = replay(8, res.micro_batches, 3, stage, total, row["bwd_s"])
        assert row["dp_exposed_s"] == pytest.approx(want, rel=1e-9)
        assert row["dp_exposed_s"] >= total / 3 - 1e-12
        assert row["dp_exposed_s"] < max(0.0, total - row["bwd_s"] / 3)     # the one-chunk window
    j = res.extra["sync_stage"]
    row = res.stage_times_s[j]
    assert res.hidden_s["dp_comm"] == pytest.approx(row["dp_sync_s"] - row["dp_exposed_s"], rel=1e-9)
    assert sum(res.breakdown_s.values()) == pytest.approx(res.iteration_time_s, rel=1e-12)


def test_timeline_draws_each_chunks_sync_from_its_launch():
    """The super-step Gantt of an interleaved stage draws the hidden sync as chunk syncs of 1/v of it,
    each starting no earlier than the end of the backward r passes past its chunk's last one, inside
    the stage's passes, their seconds the model's hidden part on every stage."""
    from explorer.timeline import superstep_events
    model = load_model("gpt-7.5b")
    s = Strategy(dp=8, tp=4, pp=4, micro_batch=1, global_batch=64, schedule="interleaved", chunks=3,
                 sequence_parallel=True, overlap_dp=True)
    res = evaluate(model, s, A100)
    ev = superstep_events(model, s, A100, result=res)
    syncs = ev[(ev["kind"] == "dp_sync") & ev["hidden"]]
    for stage, row in enumerate(res.stage_times_s):
        mine = syncs[syncs["stage"] == stage]
        hidden = row["dp_sync_s"] - row["dp_exposed_s"]
        assert mine["duration_s"].sum() == pytest.approx(hidden, rel=1e-9, abs=1e-12)
        assert len(mine) <= 2 and (mine["duration_s"] <= row["dp_sync_s"] / 3 + 1e-12).all()
        passes = ev[(ev["row"] == f"stage {stage}") & (ev["phase"] != "step")]     # its passes, every part
        assert (mine["end_s"] <= passes["end_s"].max() + 1e-12).all()
    assert syncs["duration_s"].sum() > 0
    assert ev["end_s"].max() == pytest.approx(res.iteration_time_s, rel=1e-9)
