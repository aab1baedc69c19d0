"""Overlaps of the parameter gathers (issue 10, "Overlaps, each shown as exposed vs hidden"):
Megatron-LM --overlap-param-gather (distributed optimizer, ZeRO-1 over dp) and ZeRO-3 prefetch
(DeepSpeed stage3_prefetch_bucket_size, FSDP forward/backward_prefetch). Each: hidden + exposed =
the whole gather, exposed = max(0, gather - window), and turning it on never makes a step slower."""
import pytest

from explorer import Strategy, evaluate, load_cluster, load_model

A100 = load_cluster("dgx-a100-80gb")
H200 = load_cluster("h200")




@pytest.mark.parametrize("schedule,chunks", [("1f1b", 1), ("interleaved", 2)])
def test_param_gather_hides_under_the_first_forward(schedule, chunks):
    """gpt3-175b t=8 p=8 d=16, ZeRO-1 (Megatron's distributed optimizer): the all-gather of the
    updated bf16 parameters, (d-1)/d beta Psi, runs under the first micro-batch's forward of one model
    chunk (F_r / v); exposed = max(0, gather - F_r / v), hidden = the rest; bytes unchanged."""
    model = load_model("gpt3-175b")
    s = Strategy(dp=16, tp=8, pp=8, micro_batch=1, global_batch=1536, zero=1, schedule=schedule, chunks=chunks)
    off, on = evaluate(model, s, A100), evaluate(model, s.with_(overlap_param_gather=True), A100)
    j = on.extra["sync_stage"]
    assert j == off.extra["sync_stage"]
    row_off, row_on = off.stage_times_s[j], on.stage_times_s[j]
    total = row_off["dp_sync_s"]
    assert row_on["dp_sync_s"] == pytest.approx(total, rel=1e-12)             # the whole gather still counted
    # ZeRO-1 with gradients at beta: all-reduce = reduce-scatter + all-gather, halves of equal time
    gather = total / 2
    window = row_on["fwd_s"] / chunks
    assert row_on["dp_exposed_s"] == pytest.approx(gather + max(0.0, gather - window), rel=1e-9)
    assert on.hidden_s["dp_comm"] == pytest.approx(total - row_on["dp_exposed_s"], rel=1e-9)
    assert on.hidden_s["dp_comm"] == pytest.approx(min(gather, window), rel=1e-9)
    assert on.hidden_s["dp_comm"] > 0
    assert on.comm_bytes_per_device == off.comm_bytes_per_device
    assert on.iteration_time_s == pytest.approx(off.iteration_time_s - on.hidden_s["dp_comm"], rel=1e-9)
    assert sum(on.breakdown_s.values()) == pytest.approx(on.iteration_time_s, rel=1e-12)


def test_param_gather_with_grad_overlap_and_fp32_grads():
    """With --overlap-grad-reduce too and fp32 gradients the two overlaps add up: exposed =
    max(0, reduce-scatter - window_bwd) + max(0, all-gather - F_r); never slower than either alone."""
    model = load_model("gpt-7.5b")
    base = Strategy(dp=8, tp=1, pp=4, micro_batch=1, global_batch=64, zero=1, grad_dtype="fp32")
    times = {(dp_o, pg): evaluate(model, base.with_(overlap_dp=dp_o, overlap_param_gather=pg), A100).iteration_time_s
             for dp_o in (False, True) for pg in (False, True)}
    assert times[(True, True)] <= min(times.values()) + 1e-12
    assert times[(False, True)] < times[(False, False)]


def test_param_gather_is_a_no_op_without_a_parameter_all_gather():
    """ZeRO-0 all-reduces gradients (no parameter gather); ZeRO-3 gathers in zero_comm: unchanged."""
    model = load_model("gpt-1.7b")
    for zero in (0, 3):
        s = Strategy(dp=8, tp=1, pp=1, micro_batch=1, global_batch=32, zero=zero, zero_prefetch=False)
        assert evaluate(model, s.with_(overlap_param_gather=True), H200).iteration_time_s == \
            evaluate(model, s, H200).iteration_time_s


@pytest.mark.parametrize("model_name,global_batch", [("llama2-7b", 64), ("gpt-1.7b", 32)])
def test_zero3_prefetch_exposes_only_what_the_pass_compute_does_not_hide(model_name, global_batch):
    """ZeRO-3: per pass, the all-gather of the parameters runs under the layers' compute (prefetch);
    zero_comm exposed = m (max(0, G - F_r) + max(0, G - B_r)), hidden = 2 m G - exposed."""
    model = load_model(model_name)
    s = Strategy(dp=8, tp=1, pp=1, micro_batch=2, global_batch=global_batch, zero=3)
    assert s.zero_prefetch                                    # DeepSpeed's default: prefetch on
    off, on = evaluate(model, s.with_(zero_prefetch=False), H200), evaluate(model, s, H200)
    row = on.stage_times_s[0]
    M, G = on.micro_batches, row["zero_pass_s"]
    total = 2 * M * G
    assert off.breakdown_s["zero_comm"] == pytest.approx(total, rel=1e-9)
    assert off.hidden_s["zero_comm"] == 0
    exposed = M * (max(0.0, G - row["fwd_s"]) + max(0.0, G - row["bwd_s"]))
    assert on.breakdown_s["zero_comm"] == pytest.approx(exposed, rel=1e-9, abs=1e-15)
    assert on.hidden_s["zero_comm"] + on.breakdown_s["zero_comm"] == pytest.approx(total, rel=1e-9)
    assert on.hidden_s["zero_comm"] > 0
    assert on.iteration_time_s == pytest.approx(off.iteration_time_s - on.hidden_s["zero_comm"], rel=1e-9)
    assert on.comm_bytes_per_device == off.comm_bytes_per_device
    hidden_row = [r for r in on.comm_by_kind if r["category"] == "zero_comm"]
    assert sum(r["hidden_s"] for r in hidden_row) == pytest.approx(on.hidden_s["zero_comm"], rel=1e-9)


def test_zero3_prefetch_exposes_the_excess_when_the_gather_is_longer():
    """A slow network (the gather longer than the compute): exposed = m (G - F_r + G - B_r) > 0."""
    model = load_model("gpt-1.7b")
    s = Strategy(dp=16, tp=1, pp=1, micro_batch=1, global_batch=16, zero=3, zero_prefetch=True)
    r = evaluate(model, s, A100)
    row = r.stage_times_s[0]
    G = row["zero_pass_s"]
    expected = r.micro_batches * (max(0.0, G - row["fwd_s"]) + max(0.0, G - row["bwd_s"]))
    assert r.breakdown_s["zero_comm"] == pytest.approx(expected, rel=1e-9, abs=1e-15)


@pytest.mark.parametrize("kw", [dict(zero=3, zero_prefetch=True), dict(zero=1, overlap_param_gather=True),
                                dict(zero=1, overlap_param_gather=True, overlap_dp=True)])
def test_timeline_agrees_with_the_cost_model_under_gather_overlaps(kw):
    """The super-step timeline draws only the exposed part of each gather: its makespan equals the
    cost model's iteration time (GPipe: exact for any stages)."""
    from explorer.timeline import compare, superstep_events
    model = load_model("gpt-1.7b")
    s = Strategy(dp=8, tp=1, pp=1 if kw["zero"] == 3 else 2, micro_batch=1, global_batch=32, schedule="gpipe", **kw)
    result = evaluate(model, s, A100)
    events = superstep_events(model, s, A100, result=result)
    cmp = compare(events, result, "gpipe", "gpipe")
    assert abs(cmp["relative_difference"]) <= 1e-9



def test_search_prices_zero3_with_prefetch_as_evaluate_does():
    """The search's objective (explorer.search.objective) reads the same prefetch term: every ZeRO-3
    candidate it returns carries evaluate()'s time of the Strategy it names (prefetch on)."""
    from explorer.search.search import search
    model = load_model("gpt-1.7b")
    found = search(model, H200, 8, 64, top=40, refine_top=0)
    zero3 = [c for c in found.top if c.strategy.zero == 3]
    assert zero3, "no ZeRO-3 candidate in the top list"
    for c in zero3:
        assert c.strategy.zero_prefetch
        assert evaluate(model, c.strategy, H200).iteration_time_s == pytest.approx(c.iteration_time_s, rel=1e-9)


def test_cli_flags_turn_the_overlaps_on():
    """--overlap-param-gather (ZeRO-1) and --zero-prefetch (ZeRO-3) reach the Strategy; the JSON
    shows the hidden part and a shorter iteration."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    def run(*args):
        out = subprocess.run([sys.executable, "-m", "explorer", "evaluate", "--model", "gpt-1.7b",
                              "--cluster", "h200", "--tp", "1", "--pp", "1", "--dp", "8", "--micro-batch", "1",
                              "--global-batch", "32", "--json", *args], cwd=Path(__file__).resolve().parents[1],
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)
    off, on = run("--zero", "1"), run("--zero", "1", "--overlap-param-gather")
    assert on["strategy"]["overlap_param_gather"] and on["hidden_s"]["dp_comm"] > 0 == off["hidden_s"]["dp_comm"]
    assert on["iteration_time_s"] < off["iteration_time_s"]
    zero3 = run("--zero", "3")
    assert zero3["strategy"]["zero_prefetch"] and zero3["hidden_s"]["zero_comm"] > 0
    exposed = run("--zero", "3", "--no-zero-prefetch")
    assert not exposed["strategy"]["zero_prefetch"] and exposed["hidden_s"]["zero_comm"] == 0
    assert exposed["iteration_time_s"] > zero3["iteration_time_s"]
