"""The validated residuals by regime (explorer.validation.regimes) agree with the evidence a prediction carries
(explorer.validation.evidence), and the parity plot's band is its rows' held-out mean |error|."""
import pytest

from explorer import Strategy, load_cluster, load_model
from explorer.charts.parity import band_of, parity_figure
from explorer.charts.residual_heatmap import residual_heatmap
from explorer.validation.evidence import Features, evidence
from explorer.validation.regimes import regimes


def test_each_regime_is_the_band_evidence_gives_a_prediction_in_it():
    by_name = {r.name: r for r in regimes()}
    ev = evidence(load_model("gpt3-175b"), Strategy(dp=16, tp=8, pp=8, micro_batch=1, global_batch=1536,
                                                    sequence_parallel=True, recompute="selective"),
                  load_cluster("dgx-a100-80gb"))
    r = by_name[ev["regime"]]
    assert (r.rows, r.mean_abs_error, r.max_abs_error) == (ev["validated_rows"], ev["mean_abs_error"],
                                                           ev["max_abs_error"])


def test_fitted_rows_are_left_out_unless_every_row_was_fitted():
    f = lambda accelerator, precision="bf16": Features(accelerator, precision, False, 64, 4096, False, False)
    rows = [("a", "g", "s", f("X"), 0.10, "fitted"), ("b", "g", "s", f("X"), -0.30, "held out"),
            ("c", "g", "s", f("X"), 0.20, ""), ("d", "g", "s", f("Y", "fp8"), 0.05, "fitted")]
    x, y = regimes(rows)
    assert (x.name, x.rows, x.fitted) == ("X · 16-bit · dense", 2, 1)
    assert x.mean_abs_error == pytest.approx(0.25) and x.max_abs_error == pytest.approx(0.30)
    assert x.mean_error == pytest.approx(-0.05)
    assert (y.name, y.rows, y.fitted, y.mean_abs_error) == ("Y · fp8 · dense", 1, 1, 0.05)


def test_the_heatmap_writes_each_regime_in_its_cell():
    fig = residual_heatmap(regimes())
    heat = fig.data[0]
    for r in regimes():
        i, j = list(heat.y).index(r.accelerator), list(heat.x).index(f"{r.precision} · {r.kind}")
        assert heat.z[i][j] == 100 * r.mean_abs_error
        assert f"{r.rows} runs" in heat.text[i][j]


class Row:
    def __init__(self, error, subset):
        self.relative_error, self.subset = error, subset
        self.expected, self.predicted = 100.0, 100.0 * (1 + error)
        self.group, self.id, self.metric = "g", "r", "model_tflops_per_gpu"


def test_the_parity_band_is_the_held_out_rows_mean_error():
    rows = [Row(0.5, "fitted"), Row(0.1, "held out"), Row(-0.3, "")]
    assert band_of(rows) == pytest.approx(0.2)
    fig = parity_figure(rows, band_of(rows))
    upper = next(t for t in fig.data if "mean |error|" in (t.name or ""))
    assert upper.name.startswith("±20 %") and upper.y[0] == pytest.approx(upper.x[0] * 1.2)
    assert not [t for t in parity_figure(rows).data if "mean |error|" in (t.name or "")]


def test_lesson_8_explains_the_error_bar_with_the_validated_bands():
    from explorer.lessons.base import cluster
    from explorer.lessons.search_lesson import LESSON
    known = sorted(regimes(), key=lambda r: r.mean_abs_error)
    best, worst = known[0], known[-1]
    assert (f"from {best.name} ±{100 * best.mean_abs_error:.0f} % to {worst.name} ±{100 * worst.mean_abs_error:.0f} %"
            in LESSON.text)
    assert "Every number has an error bar" in LESSON.text
    assert cluster().name == "classroom" and "made up" in LESSON.text    # no published run on the classroom preset
    assert evidence(load_model("classroom-gpt"), Strategy(dp=8, global_batch=8), cluster())["extrapolating"]


# ---- the MFU warning (issue 30 item 6) ---------------------------------------------------------------------

def test_published_utilisation_scales_the_prediction_by_published_over_predicted_speed():
    from explorer.validation.evidence import published_utilisation
    assert published_utilisation(0.5, "model_tflops_per_gpu", 0.25) == pytest.approx(0.4)   # 25 % too fast
    assert published_utilisation(0.5, "tokens_per_sec_per_gpu", -0.5) == pytest.approx(1.0)
    assert published_utilisation(0.5, "iteration_time_s", -0.2) == pytest.approx(0.4)        # time 20 % short
    assert published_utilisation(0.5, "layer_fwd_s", 0.1) is None


def test_the_warning_fires_only_above_every_published_run_of_the_regime():
    from explorer.cost.evaluate import evaluate
    from explorer.validation.evidence import hfu_of, mfu_warning, published_hfus
    model, cluster = load_model("gpt3-175b"), load_cluster("dgx-a100-80gb")
    s = Strategy(dp=16, tp=8, pp=8, micro_batch=1, global_batch=1536, sequence_parallel=True, recompute="selective")
    r, ev = evaluate(model, s, cluster), evidence(model, s, cluster)
    # Narayanan et al.'s best A100 run kept the GPUs 52 % busy, recomputation counted (their 52 % of peak)
    assert ev["published_hfu_max"] == max(published_hfus()[row] for row in published_hfus() if row.startswith("ptdp"))
    assert 0.50 < ev["published_hfu_max"] < 0.54 and ev["published_hfu_row"].startswith("ptdp_table1")
    assert hfu_of(r) < ev["published_hfu_max"] and mfu_warning(ev, r) == ""
    lower = {**ev, "published_hfu_max": 0.4}
    text = mfu_warning(lower, r)
    assert f"{100 * hfu_of(r):.0f} %" in text and "40 %" in text
    # the run named as a person reads it (the browser walk read 'mb_260201_pretrain_...'), not by its id
    assert ev["published_hfu_label"] in text and ev["published_hfu_row"] not in text
    assert "A100" in ev["published_hfu_label"], ev
    assert mfu_warning({**ev, "published_hfu_max": None}, r) == ""


def test_the_warning_says_how_busy_the_gpus_are_in_the_flops_they_execute_at_long_sequences():
    """A lecturer's walk: an uploaded model at its 131,072-token context read 'keeps the GPUs 108 % busy with FLOPs':
    Eq. 3 counts the causal attention whole, and at that length it is nearly all of the FLOPs. The warning now says
    the executed share (the attention at half, Megatron-LM's count) and keeps Eq. 3's, in which the published runs it
    compares with are counted."""
    import dataclasses
    from explorer.cost.evaluate import evaluate
    from explorer.validation.evidence import executed_hfu_of, hfu_of, mfu_warning
    model = dataclasses.replace(load_model("llama2-7b"), seq_len=131072)
    cluster = load_cluster("dgx-a100-80gb")
    s = Strategy(dp=128, tp=8, micro_batch=1, global_batch=256, sequence_parallel=True, recompute="selective", zero=1)
    r = evaluate(model, s, cluster)
    assert hfu_of(r) > 1 > executed_hfu_of(r) > 0.3                    # Eq. 3 past the peak, the executed not
    text = mfu_warning(evidence(model, s, cluster), r)
    assert f"keeps the GPUs {100 * hfu_of(r):.0f} % busy with FLOPs" in text and "in Eq. 3's count" in text
    assert f"({100 * executed_hfu_of(r):.0f} % of the FLOPs the GPUs execute, the attention at half)" in text
    short = evaluate(load_model("gpt3-175b"), Strategy(dp=16, tp=8, pp=8, global_batch=1536, sequence_parallel=True,
                                                       recompute="selective"), cluster)
    assert abs(executed_hfu_of(short) - hfu_of(short)) < 0.05 * hfu_of(short)   # s = 2,048: the counts nearly agree
