"""Size limits (explorer/limits.py): generous for real runs, refused up front with the limit named.

"Up front" and "bounded" are asserted as work (tests/work.py: calls, functions compiled, peak
memory), the same on every machine; the seconds are measured in benchmarks/bench_limits.py."""

import pytest

from explorer import limits as L
from explorer import timeline
from explorer.io.clusters import list_clusters, load_cluster
from explorer.errors import ExplorerError
from explorer.cost.evaluate import evaluate
from explorer.io.models import list_models, load_model, model_from_dict
from explorer.model.spec import ModelSpec
from explorer.io.share import decode
from explorer.strategy import LayerSplit, Strategy
from explorer.io.strategies import strategy_from_dict
from tests.work import measure

LLAMA31_405B = dict(name="llama3.1-405b", family="llama", layers=126, hidden=16384, heads=128, kv_heads=8,
                    ffn_hidden=53248, seq_len=131072, vocab=128256)   # Meta, The Llama 3 Herd of Models, Table 3


def test_every_preset_is_within_the_limits():
    for model in list_models():
        L.check_model(model)
    for cluster in list_clusters():
        L.check_cluster(cluster)


def test_real_2026_runs_fit():
    model = ModelSpec(**LLAMA31_405B)
    cluster = load_cluster("h200")
    gpus = min(cluster.max_devices, 16384)
    strategy = Strategy(dp=gpus // (8 * 16), tp=8, pp=16, global_batch=2048 if gpus // 128 <= 2048 else gpus // 128)
    L.check_work(model, strategy, cluster)
    L.check_strategy(Strategy(dp=1024, tp=8, pp=16, global_batch=1024 * 16))      # 131,072 GPUs
    L.check_model(ModelSpec("ctx", "llama", 32, 4096, 32, seq_len=10_485_760, vocab=202048))  # Llama 4 Scout 10M


@pytest.mark.parametrize("field,limit", [("layers", "MAX_LAYERS"), ("hidden", "MAX_HIDDEN"), ("seq_len", "MAX_SEQ_LEN"),
                                         ("vocab", "MAX_VOCAB"), ("heads", "MAX_HEADS"), ("ffn_hidden", "MAX_FFN")])
def test_model_beyond_a_limit_names_it(field, limit):
    values = dict(name="m", family="gpt", layers=2, hidden=64, heads=4, seq_len=32, vocab=100)
    values[field] = getattr(L, limit) + 1
    with pytest.raises(ExplorerError, match=limit):
        ModelSpec(**values)


def test_huge_integer_in_a_file_is_refused_before_any_work():
    """Refusing hidden = 10^400 costs less than reading a valid model (no arithmetic on it, no model)."""
    fields = dict(name="m", family="gpt", layers=2, heads=4, seq_len=32, vocab=100)
    valid = measure(model_from_dict, dict(fields, hidden=1024))
    huge = measure(model_from_dict, dict(fields, hidden=10 ** 400), memory=True)
    assert valid.error is None and isinstance(huge.error, ExplorerError) and "MAX_HIDDEN" in str(huge.error)
    assert huge.calls <= valid.calls and huge.peak_bytes < 100_000, huge


def test_strategy_limits_are_checked_by_evaluate():
    model, cluster = load_model("tiny-gpt"), load_cluster("classroom")
    with pytest.raises(ExplorerError, match="MAX_MICRO_BATCHES"):
        evaluate(model, Strategy(global_batch=L.MAX_MICRO_BATCHES + 1), cluster)
    with pytest.raises(ExplorerError, match="MAX_DEVICES"):
        evaluate(model, Strategy(dp=L.MAX_DEVICES + 1, global_batch=L.MAX_DEVICES + 1), cluster)
    with pytest.raises(ExplorerError, match="MAX_TP"):
        evaluate(model, Strategy(tp=2048), cluster)


def test_strategy_file_lists_are_bounded():
    with pytest.raises(ExplorerError, match="MAX_LAYERS"):
        strategy_from_dict({"version": 1, "stage_map": [0] * (L.MAX_LAYERS + 1)})


def _deep(layers: int):
    """A model of `layers` layers on 256 stages with per-layer splits (two layer kinds)."""
    splits = tuple(LayerSplit(8 if i % 3 else 4) for i in range(layers))
    return (ModelSpec("deep", "gpt", layers, 1024, 8, 2048, 50000),
            Strategy(tp=8, pp=256, global_batch=256, layer_splits=splits), load_cluster("dgx-a100-80gb"))


def test_evaluation_at_the_layer_limit_does_bounded_work(tmp_path, monkeypatch):
    """Cold (empty disk cache, nothing in memory): a few compiled functions, not one per layer; warm:
    each layer beyond 256 adds a few calls (measured ~7), so the work stays linear in layers."""
    from explorer.cost import cold
    monkeypatch.setenv("BRIDGING_DL_CACHE", str(tmp_path / "cache"))
    cold.clear_memory()
    first = measure(evaluate, *_deep(L.MAX_LAYERS))
    again = measure(evaluate, *_deep(L.MAX_LAYERS))
    measure(evaluate, *_deep(256))
    fewer = measure(evaluate, *_deep(256))
    assert first.error is again.error is fewer.error is None
    assert 1 <= first.compiled <= 8 and first.calls <= first.allowance(500_000), first   # 5 compiled, 0.96 M calls
    assert again.compiled == fewer.compiled == 0
    assert again.calls <= fewer.calls + 40 * (L.MAX_LAYERS - 256), (again, fewer)            # 85,000 and 72,500


@pytest.mark.parametrize("query,limit", [
    ({"stages": ",".join(["9999999"] * 20)}, "MAX_LAYERS"),
    ({"splits": ",".join(["8mx99999"] * 20)}, "MAX_LAYERS"),
    ({"B": "99999999999999999999"}, "too large"),
    ({"dp": "2000000"}, "too large")])
def test_share_links_are_bounded_before_expansion(query, limit):
    """A link asking for 2*10^8 layers or a million GPUs costs what a plain link costs (no expansion)."""
    plain = {"model": "tiny-gpt", "cluster": "classroom"}
    decode(plain)                                   # compiled and cached: both measured warm
    base = measure(decode, plain, memory=True)
    work = measure(decode, {**plain, **query}, memory=True)
    assert work.error is None and any(limit in message for message in work.value.messages), work.value.messages
    assert work.calls <= 2 * base.calls and work.peak_bytes <= base.peak_bytes + 1_000_000, (work, base)


def test_large_link_value_names_the_maximum():
    message = decode({"B": "99999999999999999999"}).messages[0]
    assert "is too large" in message and "1,000,000" in message and "whole number" not in message


def test_timeline_beyond_the_event_limit_is_refused_before_it_is_built():
    model, cluster = load_model("gpt3-175b"), load_cluster("dgx-a100-80gb")
    strategy = Strategy(dp=1, tp=8, pp=8, global_batch=60_000)
    result = evaluate(model, strategy, cluster)
    work = measure(timeline.superstep_events, model, strategy, cluster, result=result, memory=True)
    assert isinstance(work.error, ExplorerError) and "MAX_TIMELINE_EVENTS" in str(work.error)
    assert work.calls <= 100 and work.peak_bytes < 100_000, work     # 5 calls; building it: ~10^6


def test_timeline_bound_is_an_upper_bound():
    model, cluster = load_model("gpt3-175b"), load_cluster("dgx-a100-80gb")
    for strategy, schedule in ((Strategy(dp=2, tp=8, pp=8, global_batch=256), None),
                               (Strategy(dp=2, tp=8, pp=8, global_batch=256, schedule="interleaved", chunks=2), None),
                               (Strategy(dp=2, tp=8, pp=8, global_batch=256, overlap_dp=True), "zb-h1")):
        events = timeline.superstep_events(model, strategy, cluster, schedule=schedule)
        from explorer.timeline.costs import from_result
        from explorer.timeline.layout import pass_layout
        from explorer.cost.evaluation import evaluation
        ev = evaluation(model, strategy, cluster)
        costs = from_result(evaluate(model, strategy, cluster), strategy, pass_layout(model, strategy, ev),
                            ev.nums.level_names, schedule == "zb-h1")
        bound = L.timeline_events_bound(costs.seconds, strategy.micro_batches, costs.chunks)
        assert len(events) <= bound < 3 * len(events)


def test_model_page_inputs_stop_at_the_limits():
    from tests.app_util import open_page
    at = open_page("model")
    from app_pages.state import W_DIM_PREFIX
    layers, hidden = (at.number_input(key=W_DIM_PREFIX + name) for name in ("layers", "hidden"))
    assert layers.max == L.MAX_LAYERS and hidden.max == L.MAX_HIDDEN


def test_the_megatron_1t_run_of_table_1_has_a_timeline():
    """Narayanan et al. SC'21 Table 1, 1T row: t=8, p=64, d=6, B=3072 (m=512), interleaved."""
    model, cluster = load_model("megatron-1t"), load_cluster("dgx-a100-80gb")
    strategy = Strategy(dp=6, tp=8, pp=64, global_batch=3072, schedule="interleaved", chunks=2)
    work = measure(timeline.superstep_events, model, strategy, cluster)
    events = work.value
    assert L.MAX_GANTT_BARS < len(events) <= L.MAX_TIMELINE_EVENTS
    passes = 2 * strategy.micro_batches * strategy.chunks * strategy.pp       # 131,072 for 464,759 events
    assert work.calls <= work.allowance(12 * passes), work                      # ~7.5 calls a pass, warm
    from explorer.charts import superstep_figure
    with pytest.raises(ExplorerError, match="MAX_GANTT_BARS"):
        superstep_figure(events)


def test_a_timeline_beyond_the_gantt_limit_keeps_its_numbers_on_the_pages():
    from tests.app_util import open_page
    at = open_page("timeline", query={"model": "gpt3-175b", "dp": "1", "tp": "8", "pp": "8", "b": "1", "B": "5000"})
    assert any("Gantt is not drawn" in w.value and "MAX" in w.value for w in at.warning)
    assert any(m.label == "Timeline makespan" for m in at.metric)
    at.switch_page("app_pages/export.py").run()
    assert not at.exception
    events = next(b for b in at.get("download_button") if b.proto.label == "superstep_events.csv")
    assert events.proto.deferred_file_id and events.proto.ignore_rerun     # written when clicked
    at.switch_page("app_pages/compare.py").run()
    assert not at.exception and any("more bars than one chart draws" in w.value for w in at.warning)


def test_pages_say_why_a_timeline_is_not_drawn_and_keep_working():
    from tests.app_util import open_page
    query = {"model": "gpt3-175b", "dp": "1", "tp": "8", "pp": "8", "b": "1", "B": "60000"}
    at = open_page("timeline", query=query)
    assert any("No super-step timeline" in w.value and "MAX" in w.value for w in at.warning)
    assert at.get("plotly_chart"), "the micro-step Gantt is still drawn"
    at.switch_page("app_pages/export.py").run()
    assert not at.exception
    assert any("No super-step Gantt" in c.value for c in at.caption)
    at.switch_page("app_pages/compare.py").run()
    assert not at.exception and any("no timeline" in w.value for w in at.warning)


def test_actions_running_counts_the_outermost_budgets_of_every_thread():
    """How busy the interpreter is (explorer/runtime/offload.py BUSY_ACTIONS): one per open outermost work budget,
    across threads; a batch budget inside an action does not count again; a failed action leaves the count."""
    import threading
    before = L.actions_running()
    inside, release = threading.Event(), threading.Event()

    def another_session():
        with L.work_budget("another page run"):
            inside.set()
            release.wait(30)
    thread = threading.Thread(target=another_session)
    thread.start()
    try:
        assert inside.wait(30)
        with L.work_budget("this page run"):
            with L.batch_budget("a batch", 1.0):
                assert L.actions_running() == before + 2
        with pytest.raises(ExplorerError):
            with L.work_budget("a failing run"):
                raise ExplorerError("no")
        assert L.actions_running() == before + 1
    finally:
        release.set()
        thread.join(30)
    assert L.actions_running() == before


def test_a_too_large_cluster_with_a_control_character_name_is_refused_in_one_line():
    """Hypothesis found it (tests/test_fuzz_inputs.py, a cluster named '\\n' with 1,048,592 devices): the name went
    raw into the refusal, which then ran over two lines."""
    from dataclasses import replace
    cluster = load_cluster("dgx-a100-80gb")
    big = replace(cluster, name="\n", levels=(replace(cluster.levels[0], fanout=16),
                                              replace(cluster.levels[1], fanout=L.MAX_DEVICES)))
    with pytest.raises(ExplorerError) as err:
        L.check_cluster_size(big)
    assert "\n" not in str(err.value) and "'\\n'" in str(err.value) and "MAX_DEVICES" in str(err.value)
