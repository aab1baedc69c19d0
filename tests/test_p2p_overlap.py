"""The pipeline's point-to-point sends overlapped with computation (issue 10, "Overlaps, each shown as
exposed vs hidden": PP p2p overlap; Megatron-LM overlap_p2p_comm, which Megatron-Core
allows with a virtual pipeline only). A send leaves its sender's pass; the pass on the receiving stage
waits for its input's end plus the send. The exposed part is what the sends still add to the
iteration; hidden + exposed = the critical stage's sends."""
import json
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import example, given, settings, strategies as st

from explorer import ExplorerError, Strategy, evaluate, load_cluster, load_model
from explorer.codegen import export
from explorer.codegen.megatron import parse_megatron_args
from explorer.io.share import decode, encode
from explorer.schedules import get
from explorer.schedules.critical_path import stage_ends
from explorer.timeline import compare, superstep_events
from explorer.timeline.schedules import order_for
from explorer.timeline.simulate import simulate
from framework_matrix import run_by

A100 = load_cluster("dgx-a100-80gb")
GPT = load_model("gpt-1.7b")
INTERLEAVED = Strategy(dp=2, tp=1, pp=8, micro_batch=2, global_batch=64, schedule="interleaved", chunks=3,
                       overlap_p2p=True)


@st.composite
def pipelines(draw):
    schedule = draw(st.sampled_from(["interleaved", "1f1b", "zb-h1"]))
    p = draw(st.integers(2, 6))
    v = draw(st.integers(1, 3)) if schedule == "interleaved" else 1
    m = p * draw(st.integers(1, 4)) if schedule == "interleaved" else draw(st.integers(p if schedule == "zb-h1" else 1, 20))
    times = st.floats(0.05, 5.0)
    f, b = (np.array(draw(st.lists(times, min_size=p, max_size=p))) for _ in range(2))
    share = np.array(draw(st.lists(st.floats(0.0, 0.6), min_size=p, max_size=p)))
    sends = [np.array(draw(st.lists(st.floats(0.0, 1.0), min_size=p, max_size=p))) for _ in range(2)]
    return schedule, f, b, b * share if schedule == "zb-h1" else 0 * b, m, v, sends


@settings(max_examples=300, deadline=None)
@given(pipelines())
@example(("zb-h1", np.array([1., 2., 2., 1., 1., 1.]), np.array([1., 4., 3., 5., 1., 1.]), np.zeros(6), 9, 1,
          [np.array([0., 1., 0., 0., 0., 0.]), np.array([0., 0., 0., 1., 0., 0.])]))   # found by CI: ends moved by
# T_* = 6 twice (m = 6, 7, 8), then 7: the periodic extrapolation gave 72 where the walk gives 73
def test_stage_ends_with_sends_equal_the_simulation(case):
    """The critical path with a send on every edge between stages equals the timeline's event
    simulation, whose receiver waits for the input's end plus its send."""
    schedule, f, b, w, m, v, (send_f, send_b) = case
    split = get(schedule).splits_weight
    durations = np.stack([f / v, (b - w) / v if split else b / v, w / v if split else 0 * f], axis=1)
    sim = simulate(order_for(schedule, len(f), m, v), durations, v, m, np.stack([send_f / v, send_b / v, 0 * f], 1))
    expected = [sim["end_s"][sim["stage"] == i].max() for i in range(len(f))]
    assert stage_ends(schedule, f, b, w, m, v, sends=(send_f, send_b)) == pytest.approx(expected, rel=1e-12)
    assert np.all(stage_ends(schedule, f, b, w, m, v, sends=(0 * f, 0 * f)) <= np.array(expected) * (1 + 1e-12))


def test_a_long_interleaved_pipeline_with_sends_is_exact():
    """_ends_periodic's three short pipelines, or the full graph where they have not settled: the
    simulation's numbers for m = 400, p = 4, v = 2."""
    rng = np.random.default_rng(5)
    f, b, send_f, send_b = rng.uniform(0.5, 1.5, 4), rng.uniform(1, 3, 4), rng.uniform(0, 0.3, 4), rng.uniform(0, 0.3, 4)
    sim = simulate(order_for("interleaved", 4, 400, 2), np.stack([f / 2, b / 2, 0 * f], 1), 2, 400,
                   np.stack([send_f / 2, send_b / 2, 0 * f], 1))
    expected = [sim["end_s"][sim["stage"] == i].max() for i in range(4)]
    assert stage_ends("interleaved", f, b, 0 * f, 400, 2, sends=(send_f, send_b)) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("model_name,strategy", [
    ("gpt-1.7b", INTERLEAVED),
    ("gpt3-175b", Strategy(dp=16, tp=8, pp=8, micro_batch=1, global_batch=1536, schedule="interleaved", chunks=3,
                           recompute="selective", sequence_parallel=True, overlap_p2p=True)),
])
def test_overlapped_sends_are_split_into_exposed_and_hidden(model_name, strategy):
    """Never slower; the categories still sum to the iteration; pp_comm keeps the non-send part (the
    scatter/gather all-gathers) plus the sends' exposed part, and exposed + hidden = the critical
    stage's m micro-batches of sends; the bytes do not change; the comm rows carry the same split."""
    model = load_model(model_name)
    on, off = evaluate(model, strategy, A100), evaluate(model, strategy.with_(overlap_p2p=False), A100)
    assert on.iteration_time_s < off.iteration_time_s
    assert sum(on.breakdown_s.values()) == pytest.approx(on.iteration_time_s, rel=1e-12)
    k = on.critical_stage
    row = on.stage_times_s[k]
    sends = on.micro_batches * (row["fwd_p2p_s"] + row["bwd_p2p_s"])
    exposed, hidden = on.extra["pp_sends_exposed_s"], on.hidden_s["pp_comm"]
    assert sends > 0 and hidden > 0
    assert exposed + hidden == pytest.approx(sends, rel=1e-9)
    rest = on.micro_batches * (row["fwd_pp_comm_s"] + row["bwd_pp_comm_s"]) - sends
    assert on.breakdown_s["pp_comm"] == pytest.approx(rest + exposed, rel=1e-9, abs=1e-15)
    assert on.comm_bytes_per_device == off.comm_bytes_per_device
    p2p = [r for r in on.comm_by_kind if r["kind"] == "p2p"]
    assert sum(r["time_s"] for r in p2p) == pytest.approx(exposed, rel=1e-9)
    assert sum(r["hidden_s"] for r in p2p) == pytest.approx(hidden, rel=1e-9)
    assert off.hidden_s.get("pp_comm", 0.0) == 0.0


def test_the_timeline_waits_for_the_sends_and_agrees_with_the_model():
    """Each send drawn hidden on its stage's 'pp' row from the end of its pass; the receiver waits for
    it: makespan = the model's iteration, and the bubble as the model counts it (with the sends'
    exposed part, which the timeline cannot tell from idling)."""
    result = evaluate(GPT, INTERLEAVED, A100)
    events = superstep_events(GPT, INTERLEAVED, A100, result=result)
    cmp = compare(events, result, "interleaved")
    assert cmp["timeline_s"] == pytest.approx(result.iteration_time_s, rel=1e-12)
    assert cmp["bubble_timeline_s"] == pytest.approx(cmp["bubble_model_s"], rel=1e-9)
    sends = events[events["kind"] == "send"]
    assert len(sends) and sends["hidden"].all() and sends["row"].str.endswith(" · pp").all()
    # per stage: (v m forwards, less the last stage's last chunk) + (v m backwards, less the first's first)
    p, v, m = INTERLEAVED.pp, INTERLEAVED.chunks, INTERLEAVED.micro_batches
    assert len(sends) == 2 * p * v * m - 2 * m


def test_overlapped_sends_need_the_interleaved_schedule():
    with pytest.raises(ExplorerError, match="interleaved schedule.*Megatron-Core refuses"):
        INTERLEAVED.with_(schedule="1f1b", chunks=1)


def test_the_cli_flag_and_the_exporters():
    """--overlap-p2p on the command line; Megatron-LM overlaps a virtual pipeline's sends by default (it has only
    --no-overlap-p2p-communication, megatron/training/arguments.py), so nothing is written and the default is
    read back; MindSpore's exporter (no such switch) refuses it, torchtitan's writes the strategy as is."""
    out = subprocess.run([sys.executable, "-m", "explorer", "evaluate", "--model", "gpt-1.7b", "--cluster",
                          "dgx-a100-80gb", "--tp", "1", "--pp", "8", "--dp", "2", "--micro-batch", "2",
                          "--global-batch", "64", "--schedule", "interleaved", "--chunks", "3", "--overlap-p2p",
                          "--json"], capture_output=True, text=True, check=True).stdout
    data = json.loads(out)
    assert data["strategy"]["overlap_p2p"] is True
    assert data["iteration_time_s"] == pytest.approx(evaluate(GPT, INTERLEAVED, A100).iteration_time_s, rel=1e-12)
    text = export("megatron", GPT, INTERLEAVED, A100)
    assert "overlap-p2p-communication" not in text
    assert parse_megatron_args(text)[1] == run_by(INTERLEAVED, "megatron-lm")
    off = export("megatron", GPT, INTERLEAVED.with_(overlap_p2p=False), A100)
    assert "--no-overlap-p2p-communication" in off and not parse_megatron_args(off)[1].overlap_p2p
    _, plain = parse_megatron_args("--num-layers 24 --hidden-size 2304 --num-attention-heads 24 --seq-length 2048 "
                                   "--micro-batch-size 1 --global-batch-size 8 --pipeline-model-parallel-size 2",
                                   world_size=2)
    assert not plain.overlap_p2p          # no virtual pipeline: Megatron turns the overlap off
    with pytest.raises(ExplorerError, match="overlapped pipeline sends"):
        export("mindspore", GPT, INTERLEAVED, A100)
    llama = Strategy(pp=4, micro_batch=1, global_batch=8, schedule="interleaved", chunks=2, overlap_p2p=True,
                     dtype="fp32")
    export("torchtitan", load_model("llama2-7b"), llama, A100)   # torch.distributed.pipelining sends asynchronously


def test_a_share_link_keeps_the_overlap():
    """Written only when on ('op2p'), so links made before it read as they did."""
    params = encode(GPT, A100, INTERLEAVED)
    assert params["op2p"] == "1"
    assert decode(params).strategy == INTERLEAVED
    plain = encode(GPT, A100, INTERLEAVED.with_(overlap_p2p=False))
    assert "op2p" not in plain and decode(plain).strategy.overlap_p2p is False


def test_the_sidebar_toggle_overlaps_the_sends_of_an_interleaved_pipeline():
    """The Cost page: the toggle is off limits until the schedule is interleaved; on, the iteration
    drops and the page still shows no error; back to 1F1B it keeps its state but is not applied."""
    from app_util import errors, metric, open_page
    at = open_page("cost")
    assert at.sidebar.toggle(key="w_overlap_p2p").disabled
    at.sidebar.selectbox(key="w_schedule").set_value("interleaved").run()
    at.sidebar.number_input(key="w_chunks").set_value(2).run()
    assert not at.exception and not errors(at)
    before = metric(at, "Iteration time")
    assert not at.sidebar.toggle(key="w_overlap_p2p").disabled
    at.sidebar.toggle(key="w_overlap_p2p").set_value(True).run()
    assert not at.exception and not errors(at)
    seconds = lambda text: float(text.split()[0])
    assert seconds(metric(at, "Iteration time")) < seconds(before)
    at.sidebar.selectbox(key="w_schedule").set_value("1f1b").run()
    assert not at.exception and not errors(at)
    assert at.session_state["w_overlap_p2p"] is True


def test_the_search_overlaps_the_sends_of_interleaved_candidates():
    """Never slower, so not a choice: every interleaved strategy the search returns overlaps its sends,
    priced so by the sweep (evaluate() agrees)."""
    from explorer.search import search
    found = search(GPT, A100, 16, 128, max_memory_bytes=8 * 2**30, top=20)   # memory-bound: pipelines in the lists
    interleaved = [c for c in found.top + found.pareto if c.strategy.schedule == "interleaved"]
    assert interleaved
    for c in interleaved:
        assert c.strategy.overlap_p2p
        assert evaluate(GPT, c.strategy, A100, 16).iteration_time_s == pytest.approx(c.iteration_time_s, rel=1e-12)


@pytest.mark.parametrize("overlap", [True, False])
def test_the_sweep_prices_sends_as_evaluate_does(overlap):
    """With a framework filter whose exporter cannot write the overlap (MindSpore, DeepSpeed) the sweep
    keeps the sends inside the passes: its points' times are evaluate()'s either way."""
    from explorer.search.search import SENDS_OVERLAPPED_BY, point_strategy
    from explorer.search.space import enumerate_space
    from explorer.search.sweep import settle, sweep
    assert "mindspore" not in SENDS_OVERLAPPED_BY and "megatron" in SENDS_OVERLAPPED_BY
    space = enumerate_space(GPT, 16, 128)
    points = sweep(GPT, A100, space.families, 128, overlap_sends=overlap)
    ks = [k for k in range(points.time_s.size) if space.families[points.family[k]].schedule == "interleaved"][::97]
    settle(points, np.array(ks))
    for k in ks:
        strategy = point_strategy(space, points, k, 128, overlap_sends=overlap)
        assert strategy.overlap_p2p is overlap
        assert evaluate(GPT, strategy, A100, 16).iteration_time_s == pytest.approx(points.time_s[k], rel=1e-12)
