"""How sure a search's ranking is (issue 28 item 3, explorer.validation.robust): the analytic probability equals
a Monte Carlo over the same first-order model, grows with the gap and with shared elasticities, and the CLI
carries it."""
import json
import math

import numpy as np
import pytest

from explorer import load_cluster, load_model
from explorer.cli.main import main
from explorer.search import search
from explorer.search.figure import pareto_figure
from explorer.validation.evidence import evidence
from explorer.validation.robust import holds, holds_words, robustness, uncertain


def test_the_probability_is_the_first_order_model_sampled():
    a, b = {"efficiency.gemm_max": -0.9, "levels.node.bandwidth_efficiency": -0.05}, \
        {"efficiency.gemm_max": -0.6, "levels.node.bandwidth_efficiency": -0.35}
    ta, tb, s = 10.0, 10.3, 0.05
    rng = np.random.default_rng(0)
    delta = rng.normal(0.0, s, size=(200_000, 2))
    ln = lambda t, e: math.log(t) + delta @ np.array([e["efficiency.gemm_max"], e["levels.node.bandwidth_efficiency"]])
    sampled = float(np.mean(ln(ta, a) < ln(tb, b)))
    assert holds(ta, tb, a, b, s) == pytest.approx(sampled, abs=0.005)


def test_shared_elasticities_make_a_ranking_sure_and_a_gap_makes_it_surer():
    e = {"efficiency.gemm_max": -0.8}
    assert holds(1.0, 1.001, e, e, 0.1) == 1.0            # the same dependence: every constant moves both alike
    apart = {"levels.node.bandwidth_efficiency": -0.8}
    near, far = holds(1.0, 1.01, e, apart, 0.05), holds(1.0, 1.10, e, apart, 0.05)
    assert 0.5 < near < far < 1.0
    assert holds(1.0, 1.0, e, apart, 0.05) == 0.5 and "a tie" in holds_words(0.5)
    assert holds(1.1, 1.0, e, apart, 0.05) < 0.5          # a slower A rarely wins


def test_only_fitted_efficiencies_and_latencies_vary():
    assert uncertain("efficiency.gemm_max") and uncertain("levels.node.bandwidth_efficiency")
    assert uncertain("levels.cluster.latency_us")
    assert not uncertain("device.peak_tflops.bf16") and not uncertain("levels.node.bandwidth_gbps")


@pytest.fixture(scope="module")
def searched():
    model, cluster = load_model("gpt-1.7b"), load_cluster("dgx-a100-80gb")
    return model, cluster, search(model, cluster, 16, 128, top=4)


def test_the_fastest_time_varies_by_its_regimes_error(searched):
    model, cluster, result = searched
    rob = robustness(model, cluster, result.top)
    ev = evidence(model, result.top[0].strategy, cluster)
    assert not ev["extrapolating"] and rob["sigma"] == ev["mean_abs_error"]
    assert rob["bands"][0] == pytest.approx(rob["sigma"])
    assert all(uncertain(f) for f in rob["varied"])
    assert {(p["faster"], p["slower"]) for p in rob["pairs"]} >= {(1, 2), (2, 3), (3, 4), (1, 3), (1, 4)}
    assert all(0.0 <= p["holds"] <= 1.0 for p in rob["pairs"])


def test_an_extrapolating_regime_borrows_the_widest_band():
    model, cluster = load_model("mixtral-8x7b"), load_cluster("mi300x")
    result = search(model, cluster, 16, 64, top=2, refine_top=0)
    rob = robustness(model, cluster, result.top)
    assert rob["sigma_from"].startswith("extrapolating")


def test_the_pareto_plot_has_error_bars_of_the_band(searched):
    _, _, result = searched
    fig = pareto_figure(result, band=0.1)
    for trace in fig.data:
        assert list(trace.error_y.array) == pytest.approx([0.1 * y for y in trace.y])
    assert pareto_figure(result).data[0].error_y.array is None


def test_the_cli_carries_the_robustness(capsys):
    args = ["search", "--model", "tiny-gpt", "--cluster", "dgx-a100-80gb", "--gpus", "8", "--global-batch", "16",
            "--top", "3", "--robust"]
    assert main(args + ["--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["robustness"]["pairs"] and data["robustness"]["sigma"] > 0
    assert main(args) == 0
    assert "faster than #2" in capsys.readouterr().out
