"""Issue 28 item 2: the iteration time's elasticity to every constant of the cluster file, exact derivatives of
the cost tree (explorer.validation.sensitivity, explorer.cost.elasticity). Finite differences appear here
only to check them."""
import contextlib
import dataclasses
import io
import json
import math

import numpy as np
import pytest

from app_util import chart_specs, open_page
from explorer import Strategy, evaluate, load_cluster, load_model
from explorer.cli.main import main
from explorer.cost import elasticity
from explorer.io.clusters import cluster_to_dict
from explorer.schedules.critical_path import path_weights, stage_ends
from explorer.validation import sensitivity as sens_module
from explorer.validation.sensitivity import field_exponents, sensitivity

A100 = "dgx-a100-80gb"
GPT3 = Strategy(dp=16, tp=8, pp=8, micro_batch=1, global_batch=1536, sequence_parallel=True, recompute="selective")
"""GPT-3 175B on 1,024 A100s, t8 p8 with sequence parallelism and selective recomputation (Korthikanti et al.'s
setting, at the data-parallel size of Narayanan et al. SC'21 Table 1's 1,024-GPU row)."""
RATES = ("peak_tflops", "hbm_bandwidth_gbps", "bandwidth_gbps")
"""Fields that are rates, one per product of the hardware numbers (F = peak x gemm_max, W_hbm = bandwidth x hbm,
1/g = bandwidth x bandwidth_efficiency: scaling the efficiencies too would scale those twice)."""
TIMES = ("latency_us", "kernel_launch_s", "host_launch_s", "host_sync_s")   # host_*: issue 27 (model/kernels.py)
CASES = {
    "gpt3 1f1b": ("gpt3-175b", A100, GPT3),
    "gpt3 interleaved, overlaps, zero-1": ("gpt3-175b", A100, GPT3.with_(
        schedule="interleaved", chunks=3, zero=1, overlap_dp=True, overlap_p2p=True)),
    "gpipe, uneven stages": ("gpt3-175b", A100, Strategy(
        dp=16, tp=8, pp=4, micro_batch=1, global_batch=256, schedule="gpipe", sequence_parallel=True,
        recompute="full", stage_map=(0,) * 30 + (1,) * 22 + (2,) * 22 + (3,) * 22)),
    "zb-h1": ("llama3-8b", "dgx-h100", Strategy(dp=4, tp=2, pp=4, micro_batch=1, global_batch=64,
                                                 schedule="zb-h1")),
    "moe with ep": ("mixtral-8x7b", "dgx-h100", Strategy(dp=8, tp=2, pp=4, ep=8, micro_batch=1, global_batch=256,
                                                        sequence_parallel=True)),
    "long context, cp": ("llama2-70b", A100, Strategy(dp=2, tp=8, cp=4, pp=4, micro_batch=1, global_batch=16,
                                                      sequence_parallel=True, zero=1)),
}


def case(name):
    model_name, cluster_name, strategy = CASES[name]
    model = load_model(model_name)
    if model_name == "llama2-70b":
        model = dataclasses.replace(model, seq_len=32768)
    return model, load_cluster(cluster_name), strategy


def get(tree, path):
    if not path:
        return tree
    if isinstance(tree, list):
        return get(next(item for item in tree if item["name"] == path[0]), path[1:])
    return get(tree[path[0]], path[1:])


def changed_cluster(cluster, field: str, factor: float, tmp_path):
    """The cluster file with one field multiplied by factor, written to disk and loaded as a user's is."""
    text = cluster_to_dict(cluster)
    path = tuple(field.split("."))
    changed = sens_module._set(text, path, get(text, path) * factor)
    out = tmp_path / f"{cluster.name}-{field}.json"
    out.write_text(json.dumps(changed))
    return load_cluster(out)


@pytest.fixture(scope="module")
def gpt3():
    model, cluster = load_model("gpt3-175b"), load_cluster(A100)
    result = evaluate(model, GPT3, cluster)
    return model, cluster, result, sensitivity(model, GPT3, cluster, result)


def test_the_three_largest_move_the_time_as_reported(gpt3, tmp_path):
    """Done when (issue 28): each of the three largest-elasticity constants raised by 1 % in a copied cluster
    file moves the iteration time by the reported elasticity, within 5 % relative."""
    model, cluster, result, sens = gpt3
    top = sens["top"][:3]
    assert len(top) == 3 and {name for name, _ in top} >= {"device.peak_tflops.bf16", "efficiency.gemm_max"}
    for name, elasticity_ in top:
        moved = evaluate(model, GPT3, changed_cluster(cluster, name, 1.01, tmp_path)).iteration_time_s
        measured = (moved / result.iteration_time_s - 1) / 0.01
        assert measured == pytest.approx(elasticity_, rel=0.05), name
    # and to first order exactly: the derivative, not a slope over 1 %
    name, elasticity_ = top[0]
    moved = evaluate(model, GPT3, changed_cluster(cluster, name, 1 + 1e-6, tmp_path)).iteration_time_s
    assert math.log(moved / result.iteration_time_s) / math.log1p(1e-6) == pytest.approx(elasticity_, rel=1e-4)


def test_every_field_is_keyed_by_its_path_with_levels_by_name(gpt3):
    sens = gpt3[3]
    for name in ("efficiency.gemm_max", "efficiency.hbm", "efficiency.kernel_launch_s", "efficiency.gemm_half_flops",
                 "device.hbm_bandwidth_gbps", "device.peak_tflops.bf16", "levels.node.bandwidth_gbps",
                 "levels.node.latency_us", "levels.node.bandwidth_efficiency", "levels.cluster.bandwidth_gbps",
                 "levels.cluster.latency_us"):
        assert name in sens["elasticities"], name
    assert not any("fanout" in name for name in sens["elasticities"])
    assert sens["elasticities"]["device.memory_gib"] == 0          # memory decides fitting, not time
    assert sens["elasticities"]["device.peak_tflops.fp32"] == 0    # a bf16 run
    assert sens["elasticities"]["efficiency.gemm_max"] < -0.5 < sens["elasticities"]["levels.node.latency_us"]
    assert list(sens["elasticities"]) == sorted(sens["elasticities"], key=lambda k: -abs(sens["elasticities"][k]))


def test_field_exponents_follow_the_units_table():
    exps = field_exponents(load_cluster(A100), "bf16")
    assert exps["efficiency.hbm"] == exps["device.hbm_bandwidth_gbps"] == {"W_{hbm}": 1}
    assert exps["levels.node.bandwidth_gbps"] == exps["levels.node.bandwidth_efficiency"] == {"g_{node}": -1}
    assert exps["levels.cluster.latency_us"] == {"L_{cluster}": 1}
    assert exps["efficiency.kernel_launch_s"] == {"tau_k": 1}
    assert exps["device.peak_tflops.bf16"]["F"] == 1 and exps["efficiency.gemm_max"]["eta"] == 1
    assert exps["device.memory_gib"] == {}


@pytest.mark.parametrize("name", list(CASES))
def test_euler_rates_minus_latencies_sum_to_minus_one(name):
    """Every time of the model is work over a rate or a latency: scaling every rate by lambda and every
    latency by 1/lambda scales the time by 1/lambda, so the elasticities obey sum(rates) - sum(latencies) = -1
    (Euler's theorem for a function homogeneous of degree -1); and the categories add up to the total."""
    model, cluster, strategy = case(name)
    sens = sensitivity(model, strategy, cluster)
    el = sens["elasticities"]
    rates = sum(x for k, x in el.items() if k.split(".")[-1] in RATES or k.split(".")[-2] in RATES)
    times = sum(x for k, x in el.items() if k.split(".")[-1] in TIMES)
    assert rates - times == pytest.approx(-1, abs=1e-9)
    for field, total in el.items():
        assert sum(row.get(field, 0.0) for row in sens["by_category"].values()) == pytest.approx(total, abs=1e-9)


def test_euler_holds_for_the_model_itself(tmp_path):
    """The identity the test above checks on the derivatives, checked on the model (lambda = 1.5)."""
    model, cluster, strategy = case("moe with ep")
    text = cluster_to_dict(cluster)
    text["device"]["peak_tflops"] = {k: 1.5 * x for k, x in text["device"]["peak_tflops"].items()}
    text["device"]["hbm_bandwidth_gbps"] *= 1.5
    for level in text["levels"]:
        level["bandwidth_gbps"] *= 1.5
        level["latency_us"] /= 1.5
    text["efficiency"]["kernel_launch_s"] /= 1.5
    for name in ("host_launch_s", "host_sync_s"):        # the host side's seconds (issue 27), where the file has them
        if name in text["efficiency"]:
            text["efficiency"][name] /= 1.5
    (tmp_path / "fast.json").write_text(json.dumps(text))
    fast = evaluate(model, strategy, load_cluster(tmp_path / "fast.json")).iteration_time_s
    assert 1.5 * fast == pytest.approx(evaluate(model, strategy, cluster).iteration_time_s, rel=1e-12)


@pytest.mark.parametrize("name", ["gpipe, uneven stages", "gpt3 interleaved, overlaps, zero-1", "moe with ep",
                                  "long context, cp"])
def test_per_category_and_total_agree_with_finite_differences(name, tmp_path):
    """The active branch's derivative, checked against a 1e-6 relative change of the file (where no maximum
    switches branch, the two agree) -- for the total and each category."""
    model, cluster, strategy = case(name)
    base = evaluate(model, strategy, cluster)
    sens = sensitivity(model, strategy, cluster, base)
    for field, el in list(sens["elasticities"].items())[:4]:
        moved = evaluate(model, strategy, changed_cluster(cluster, field, 1 + 1e-6, tmp_path))
        assert math.log(moved.iteration_time_s / base.iteration_time_s) / math.log1p(1e-6) == \
            pytest.approx(el, rel=1e-3, abs=1e-6), field
        for category, row in sens["by_category"].items():
            fd = (moved.breakdown_s[category] - base.breakdown_s[category]) / base.iteration_time_s / 1e-6
            assert fd == pytest.approx(row.get(field, 0.0), rel=1e-3, abs=1e-5), (field, category)


@pytest.mark.parametrize("schedule,v", [("1f1b", 1), ("gpipe", 1), ("interleaved", 2), ("zb-h1", 1)])
def test_path_weights_give_the_stage_ends(schedule, v):
    rng = np.random.default_rng(7)
    fwd = rng.random(4) + 1
    bwd = 2 * fwd + rng.random(4)
    weight = 0.4 * bwd
    ends, w = path_weights(schedule, fwd, bwd, weight, 8, v)
    args = np.stack([fwd, bwd, weight, 0 * fwd, 0 * fwd], axis=1)
    assert np.allclose(ends, stage_ends(schedule, fwd, bwd, weight, 8, v))
    assert np.allclose((w * args[None]).sum(axis=(1, 2)), ends)       # the path's length is the end


def test_path_weights_with_overlapped_sends():
    rng = np.random.default_rng(3)
    fwd = rng.random(4) + 1
    bwd, weight, sends = 2 * fwd, 0 * fwd, (0.5 * fwd, 0.3 * fwd)
    ends, w = path_weights("interleaved", fwd, bwd, weight, 8, 2, sends)
    assert np.allclose(ends, stage_ends("interleaved", fwd, bwd, weight, 8, 2, sends=sends))
    args = np.stack([fwd, bwd, weight, *sends], axis=1)
    assert np.allclose((w * args[None]).sum(axis=(1, 2)), ends)
    assert w[..., 3:].sum() > 0


def test_compiled_once_per_structure_and_never_inside_evaluate(gpt3, monkeypatch):
    model, cluster, result, sens = gpt3

    def fail(*args, **kwargs):
        raise AssertionError("rebuilt")
    monkeypatch.setattr(elasticity, "build", fail)
    assert sensitivity(model, GPT3, cluster, result) == sens                       # from memory
    sens_module._COMPILED.clear()
    assert sensitivity(model, GPT3, cluster, result)["elasticities"] == sens["elasticities"]   # from disk
    other = GPT3.with_(global_batch=3072)                                           # same structure, other numbers
    assert sensitivity(model, other, cluster)["top"]
    monkeypatch.setattr(sens_module, "compiled", fail)
    assert evaluate(model, other, cluster).iteration_time_s > 0                     # evaluate() never asks


def test_cli_prints_the_top_five_and_json_carries_all():
    args = ["evaluate", "--model", "gpt3-175b", "--cluster", A100, "--gpus", "1024", "--tp", "8", "--pp", "8",
            "--micro-batch", "1", "--global-batch", "1536", "--sequence-parallel", "--recompute", "selective"]
    for json_flag in (False, True):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            assert main(args + (["--json"] if json_flag else [])) == 0
        if json_flag:
            sens = json.loads(out.getvalue())["sensitivity"]
            assert len(sens["elasticities"]) >= 12 and len(sens["top"]) == 5
            assert set(sens["by_category"]) <= {"compute", "recompute", "op_comm", "ep_comm", "redistribution",
                                                "pp_comm", "bubble", "dp_comm", "zero_comm", "optimizer", "cp_comm"}
        else:
            text = out.getvalue().split("sensitivity, d ln T / d ln c")[1].strip().splitlines()[1:6]
            assert len(text) == 5 and "device.peak_tflops.bf16" in text[0] + text[1]


def test_cost_page_shows_the_tornado_chart():
    at = open_page("cost")
    assert not at.exception
    tornado = lambda: [s for s in chart_specs(at) if s["layout"]["title"]["text"] == "What this number depends on"]
    assert not tornado(), "on demand: a page view does not compile the derivatives unasked"
    at.toggle(key="w_cost_sensitivity").set_value(True).run()
    assert not at.exception
    specs = tornado()
    assert specs and specs[0]["data"][0]["orientation"] == "h"
    assert len(specs[0]["data"]) == 1, "one bar a constant: raised by 1 % (mirrored bars hid the direction)"
    axis = specs[0]["layout"]["xaxis"]["title"]["text"]       # two short lines (one long one was cut off)
    assert all(len(line) <= 48 for line in axis.split("<br>")) and "%, %" not in axis
    names = specs[0]["data"][0]["y"]
    assert "bf16 peak (device.peak_tflops.bf16)" in names and any(n.startswith("node latency (") for n in names)
    caption = next(c.value for c in at.caption if c.value.startswith("Elasticity d ln T")).replace("\\", "")
    assert "raising the bf16 peak" in caption and "device.peak_tflops.bf16" in caption and "the opposite" in caption
    assert any(sub.value == "What this number depends on" for sub in at.subheader)


def test_a_sink_model_reads_the_kernel_evaluate_picks():
    """GPT-OSS's learnable sinks rule FlashAttention out (Transformer Engine), so on A100 its attention runs on the
    flat curve; the derivatives read the same kernel as evaluate (before, they read FlashAttention-2's curve and the
    panel said the two disagreed: 'unavailable')."""
    from dataclasses import replace as _replace
    from explorer.validation.sensitivity import sensitivity_or_reason
    model = _replace(load_model("gpt-oss-120b"), layers=2)
    out = sensitivity_or_reason(model, Strategy(dp=8, ep=8, global_batch=8, micro_batch=1), load_cluster(A100))
    assert "unavailable" not in out, out
    assert out["elasticities"]


def test_a_stopped_sensitivity_is_not_an_answer_to_cache():
    """sensitivity_or_reason turns a refusal into {"unavailable": why}, which the Cost page caches for every session;
    a stopped run (WorkCancelled, an ExplorerError) is raised instead."""
    from explorer.limits import WorkCancelled, work_budget
    from explorer.validation import sensitivity as sens
    model = dataclasses.replace(load_model("tiny-gpt"), name="sensitivity-stopped", hidden=8 * 130, heads=8)
    strategy, cluster = Strategy(dp=2, tp=2, pp=2, micro_batch=1, global_batch=8), load_cluster("classroom")
    result = evaluate(model, strategy, cluster)
    sens._COMPILED.clear()
    sens._EXPONENTS.clear()
    with pytest.raises(WorkCancelled):
        with work_budget("the Cost page", should_stop=lambda: True):
            sens.sensitivity_or_reason(model, strategy, cluster, result)
    assert "unavailable" not in sens.sensitivity_or_reason(model, strategy, cluster, result)


def test_constants_are_named_in_words_with_their_path():
    from explorer.charts.sensitivity import constant_name
    assert constant_name("levels.cluster.bandwidth_gbps") == "cluster bandwidth (levels.cluster.bandwidth_gbps)"
    assert constant_name("device.peak_tflops.fp8") == "fp8 peak (device.peak_tflops.fp8)"
    assert constant_name("efficiency.host_launch_s") == "host issue per kernel (efficiency.host_launch_s)"
    assert constant_name("efficiency.something_new") == "efficiency.something_new"
