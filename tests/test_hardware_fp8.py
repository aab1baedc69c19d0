"""Hardware presets with sources, FP8 training and fp32 gradients (issue 11; issue 10 E7).

Sources: assets/hardware_sources.json (vendor datasheets via stas00/ml-engineering, AMD ROCm docs,
MLPerf system descriptions); Megatron-LM megatron/training/arguments.py (bf16 -> fp32 gradient
accumulation and all-reduce) and docs/user-guide/features/dist_optimizer.md (18 B/param; 6 + 12/d).
"""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from explorer import ExplorerError
from explorer.cost.evaluate import evaluate
from explorer.io.clusters import cluster_from_dict, cluster_to_dict, load_cluster
from explorer.io.models import load_model
from explorer.strategy.mesh import group_level
from explorer.strategy.strategy import Strategy

ROOT = Path(__file__).resolve().parents[1]
NEW = ("dgx-h100", "h200", "dgx-b200", "gb200-nvl72", "mi300x")
SOURCES = json.loads((ROOT / "assets" / "hardware_sources.json").read_text())
DEVICE_OF = {"dgx-h100": "H100 SXM", "h200": "H200 SXM", "dgx-b200": "B200 SXM (HGX/DGX B200)",
             "gb200-nvl72": "GB200 (per Blackwell GPU in GB200 NVL72)", "mi300x": "AMD MI300X"}


def _source(device: str, field: str) -> float:
    return next(e["value"] for e in SOURCES if e["device"] == device and e["field"] == field)


@pytest.mark.parametrize("name", NEW)
def test_every_constant_has_a_source(name):
    c = load_cluster(name)
    assert c.source and c.device.source and c.efficiency.source and all(lv.source for lv in c.levels)
    for dtype, flops in c.device.peak_flops.items():         # each peak is named in the device's source
        assert f"{flops / 1e12:g}" in c.device.source, (name, dtype)
    for lv in c.levels:                                       # each link rate and its efficiency
        assert f"{lv.bandwidth_bytes_per_s / 1e9:g}" in lv.source and f"{lv.bandwidth_efficiency:g}"[1:] in lv.source
    for key in ("gemm_max", "hbm", "gemm_max_fp8"):
        value = getattr(c.efficiency, key)
        assert not value or f"{value:g}" in c.efficiency.source, (name, key)
    assert "NIC" in c.levels[-1].source, "network per GPU = NIC rate x NICs per GPU"



def test_hbm_fraction_is_the_measured_triad_over_the_peak():
    """efficiency.hbm is BabelStream's Triad over the HBM peak where one is published (Azure's ND H100 v5, ND H200 v5,
    ND MI300X v5 runs); Blackwell takes H200's HBM3e fraction, B200's against the peak its driver reports (7.672 of
    the datasheet's 8.0 TB/s). A preset carrying another device's fraction (A100's 0.846, as all did) fails."""
    triad = lambda dev: _source(dev, "measured_hbm_triad") / _source(dev, "hbm_bandwidth")
    for name in ("dgx-h100", "h200", "mi300x"):
        assert load_cluster(name).efficiency.hbm == round(triad(DEVICE_OF[name]), 3), name
    b200 = DEVICE_OF["dgx-b200"]
    expected = triad("H200 SXM") * _source(b200, "hbm_bandwidth_driver") / _source(b200, "hbm_bandwidth")
    assert load_cluster("dgx-b200").efficiency.hbm == pytest.approx(expected, abs=1e-3)
    assert load_cluster("gb200-nvl72").efficiency.hbm == round(triad("H200 SXM"), 3)
    assert load_cluster("dgx-a100-80gb").efficiency.hbm == 0.846     # its own BabelStream Triad, 1724.8 of 2039 GB/s

@pytest.mark.parametrize("name", NEW)
def test_fp8_peak_is_the_datasheets_dense_value(name):
    """Dense FP8 = 2 x dense BF16 on Hopper, Blackwell and MI300X (no 2:4 sparsity)."""
    c = load_cluster(name)
    fp8 = c.device.flops("fp8") / 1e12
    assert fp8 == pytest.approx(_source(DEVICE_OF[name], "peak_dense_fp8"), rel=1e-3)
    assert fp8 == pytest.approx(2 * c.device.flops("bf16") / 1e12, rel=1e-3)


def test_presets_round_trip_and_network_per_gpu():
    for name in NEW:
        c = load_cluster(name)
        assert cluster_from_dict(cluster_to_dict(c)) == c
        # one 400 Gb/s NIC per GPU on every node here: 400e9 / 8 = 50 GB/s per direction
        assert c.levels[-1].bandwidth_bytes_per_s == 400e9 / 8 * 1


def test_gb200_nvl72_is_one_nvlink_domain_of_72_of_which_a_job_gets_64():
    c = load_cluster("gb200-nvl72")
    assert c.levels[0].fanout == 72 and c.levels[0].bandwidth_bytes_per_s == 900e9
    assert c.devices_per_node == 64                                  # 16 of 18 trays (issue 26 item 6)
    s = Strategy(dp=1, tp=64, pp=1)
    assert group_level(c, s.mesh, "tp") == 0                         # a TP group of 64 stays on NVLink
    assert group_level(c, Strategy(dp=2, tp=64, pp=1, global_batch=2).mesh, "dp") == 1   # the next 64: another rack
    assert group_level(load_cluster("dgx-b200"), s.mesh, "tp") == 1  # on 8-GPU nodes it does not


def test_fp8_uses_the_fp8_peak_and_its_own_efficiency():
    model = load_model("llama3-8b").with_seq_len(2048)
    cluster = load_cluster("dgx-h100")
    base = Strategy(dp=8, tp=1, pp=1, micro_batch=1, global_batch=64, zero=1)
    bf16 = evaluate(model, base, cluster)
    fp8 = evaluate(model, base.with_(dtype="fp8"), cluster)
    assert fp8.breakdown_s["compute"] < bf16.breakdown_s["compute"]
    # gradients and the communicated bytes stay bf16 (TE keeps them so); the memory differs by the recipe's
    # cached FP8 weight copies and FP8-saved linear inputs (issue 26 item 3; the amounts in
    # tests/test_precision_memory.py)
    assert fp8.comm_bytes_per_device == bf16.comm_bytes_per_device
    assert fp8.memory_bytes_per_device["grads"] == bf16.memory_bytes_per_device["grads"]
    assert fp8.memory_bytes_per_device["params"] > bf16.memory_bytes_per_device["params"]
    assert fp8.memory_bytes_per_device["activations"] < bf16.memory_bytes_per_device["activations"]
    from explorer.cost.numbers import hardware_numbers
    hw = hardware_numbers(cluster, "fp8")
    assert hw["F"] == 1978.9e12 and hw["eta"] == cluster.efficiency.gemm_max_fp8 and hw["beta"] == 2
    assert hardware_numbers(cluster, "bf16")["eta"] == cluster.efficiency.gemm_max


def test_fp8_on_a_device_without_fp8_is_refused_in_one_line():
    with pytest.raises(ExplorerError, match="no peak FLOP/s for dtype 'fp8'"):
        evaluate(load_model("gpt-1.7b"), Strategy(dp=8, global_batch=8, dtype="fp8"), load_cluster("dgx-a100-80gb"))
    out = subprocess.run([sys.executable, "-m", "explorer", "evaluate", "--model", "gpt-1.7b", "--cluster",
                          "dgx-a100-80gb", "--tp", "1", "--pp", "1", "--dp", "8", "--micro-batch", "1",
                          "--global-batch", "8", "--dtype", "fp8"], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 2 and "fp8" in out.stderr and "Traceback" not in out.stderr


def test_cli_fp8_and_fp32_gradients():
    out = subprocess.run([sys.executable, "-m", "explorer", "evaluate", "--model", "llama3-8b", "--cluster",
                          "dgx-b200", "--tp", "1", "--pp", "1", "--dp", "8", "--micro-batch", "1",
                          "--global-batch", "64", "--seq-len", "2048", "--dtype", "fp8", "--zero", "1",
                          "--grad-dtype", "fp32", "--json"], cwd=ROOT, capture_output=True, text=True, check=True)
    data = json.loads(out.stdout)
    assert data["strategy"]["dtype"] == "fp8" and data["strategy"]["grad_dtype"] == "fp32"


# ---- E7: fp32 gradient accumulation and all-reduce (Megatron-LM) ---------------------------------
PSI = 1_652_230_656          # gpt-1.7b parameters (Result.params)


def _e7(zero: int, grad: str):
    return evaluate(load_model("gpt-1.7b"), Strategy(dp=8, tp=1, pp=1, micro_batch=1, global_batch=32, zero=zero,
                                                     grad_dtype=grad), load_cluster("dgx-a100-80gb"))


def test_e7_fp32_gradients_double_the_dp_bytes_and_add_2_bytes_per_param():
    """gpt-1.7b, t=1, d=8, ZeRO-0: ring all-reduce of the gradients sends 2(d-1)/d x bytes.
    bf16: 2 x 7/8 x 2 B x 1.652e9 = 5.783 GB; fp32: 2 x 7/8 x 4 B x 1.652e9 = 11.566 GB (twice).
    Memory: 2 (bf16 params) + 4 (fp32 grads) + 12 (Adam fp32 master, m, v) = 18 B/param,
    Megatron-LM docs/user-guide/features/dist_optimizer.md (bf16 params, fp32 grads: 18)."""
    bf16, fp32 = _e7(0, "model"), _e7(0, "fp32")
    assert bf16.params == PSI
    assert bf16.comm_bytes_per_device["dp_comm"] == pytest.approx(2 * 7 / 8 * 2 * PSI)
    assert fp32.comm_bytes_per_device["dp_comm"] == pytest.approx(2 * 7 / 8 * 4 * PSI)       # 11.566 GB
    assert fp32.breakdown_s["dp_comm"] == pytest.approx(2 * bf16.breakdown_s["dp_comm"], rel=1e-3)
    mem = lambda r: sum(r.memory_bytes_per_device[k] for k in ("params", "grads", "optimizer")) / PSI
    assert mem(bf16) == pytest.approx(16) and mem(fp32) == pytest.approx(18)


def test_e7_distributed_optimizer_is_6_plus_12_over_d():
    """Megatron's distributed optimizer = ZeRO-1 over dp with fp32 main grads: 6 + 12/d B/param
    (dist_optimizer.md), reduce-scatter of fp32 grads + all-gather of bf16 params: (d-1)/d (4 + 2) Psi."""
    r = _e7(1, "fp32")
    mem = sum(r.memory_bytes_per_device[k] for k in ("params", "grads", "optimizer")) / PSI
    assert mem == pytest.approx(6 + 12 / 8)
    assert r.comm_bytes_per_device["dp_comm"] == pytest.approx(7 / 8 * (4 + 2) * PSI)


def test_e7_is_off_by_default_and_refuses_unknown_values():
    assert Strategy().grad_dtype == "model"
    with pytest.raises(ExplorerError, match="grad_dtype"):
        Strategy(grad_dtype="fp16")


def test_share_link_keeps_fp8_and_fp32_gradients():
    from explorer.io.share import decode, encode
    model, cluster = load_model("llama3-8b"), load_cluster("dgx-h100")
    s = Strategy(dp=8, global_batch=8, dtype="fp8", grad_dtype="fp32")
    params = encode(model, cluster, s)
    assert params["gd"] == "fp32" and params["dtype"] == "fp8"
    assert decode(params).strategy == s
    assert "gd" not in encode(model, cluster, Strategy(dp=8, global_batch=8))   # old links unchanged


def test_search_in_fp8_returns_fp8_strategies():
    from explorer.search import search
    model = load_model("llama3-8b").with_seq_len(2048)
    result = search(model, load_cluster("dgx-h100"), 16, 64, top=3, refine_top=1, dtype="fp8")
    assert result.top and all(c.strategy.dtype == "fp8" for c in result.top)


def test_app_sidebar_precision_reaches_the_strategy():
    """AppTest: choosing fp8 in the sidebar on an H100 cluster changes the evaluated strategy."""
    from tests.app_util import open_page
    at = open_page("cost")
    at.session_state["cluster"] = load_cluster("dgx-h100")
    at.selectbox(key="w_dtype").select("fp8").run()
    at.selectbox(key="w_grad_dtype").select("fp32").run()
    assert not at.exception
    view = at.session_state["last_valid"]
    assert view.strategy.dtype == "fp8" and view.strategy.grad_dtype == "fp32"


def test_megatron_export_of_fp8_and_fp32_gradients_round_trips():
    """Megatron-LM spells FP8 as --bf16 --fp8-format hybrid and fp32 gradients as
    --accumulate-allreduce-grads-in-fp32 (megatron/training/arguments.py)."""
    from explorer.codegen import export
    from explorer.codegen.megatron import parse_megatron_args
    model = load_model("llama3-8b")
    s = Strategy(dp=8, global_batch=64, zero=1, dtype="fp8", grad_dtype="fp32")
    cluster = load_cluster("dgx-h100")
    text = export("megatron", model, s, cluster)
    assert "--fp8-format hybrid" in text and "--bf16" in text and "--accumulate-allreduce-grads-in-fp32" in text
    fields, back = parse_megatron_args(text)
    assert back.dtype == "fp8" and back.grad_dtype == "fp32"
    with pytest.raises(ExplorerError, match="fp8"):
        export("deepspeed", model, s, cluster)


def test_mxfp8_on_hopper_is_refused_in_one_line_everywhere(tmp_path):
    """MXFP8 (1x32 blocks, E8M0 scales) needs Blackwell tensor cores: Transformer Engine's support matrix lists
    MXFP8BlockScaling on compute capability 10.0 and 10.3 only (explorer.hardware.precision.RECIPE_HARDWARE). One
    rule of the table (rules.fp8_recipe_hardware) refuses it on H100 in evaluate, the CLI, a link, a strategy file and
    the search, in the same line naming the device and the recipes it runs; on B200 it runs."""
    from explorer.io.share import decode, encode
    from explorer.io.strategies import strategy_to_dict
    from explorer.search.search import search
    model, h100, b200 = load_model("gpt-1.7b"), load_cluster("dgx-h100"), load_cluster("dgx-b200")
    s = Strategy(dp=8, global_batch=8, dtype="fp8", fp8_recipe="mxfp8")
    line = "fp8_recipe 'mxfp8' does not run on H100-SXM"
    runs = "H100-SXM runs delayed, tensorwise, blockwise"
    with pytest.raises(ExplorerError) as err:
        evaluate(model, s, h100)
    assert line in str(err.value) and runs in str(err.value) and "\n" not in str(err.value)
    assert evaluate(model, s, b200).iteration_time_s > 0
    for recipe in ("delayed", "tensorwise", "blockwise"):           # what Hopper runs, runs
        assert evaluate(model, s.with_(fp8_recipe=recipe), h100).iteration_time_s > 0
    with pytest.raises(ExplorerError, match=line):
        search(model, h100, 8, 8, dtype="fp8", fp8_recipe="mxfp8")
    shared = decode(encode(model, h100, s))                         # the link: refused, the default strategy kept
    assert shared.strategy.fp8_recipe != "mxfp8" and any(line in m for m in shared.messages)
    path = tmp_path / "mxfp8.json"
    path.write_text(json.dumps(strategy_to_dict(s)))
    for args in (["--dtype", "fp8", "--fp8-recipe", "mxfp8", "--dp", "8", "--global-batch", "8"],
                 ["--strategy", str(path)]):
        out = subprocess.run([sys.executable, "-m", "explorer", "evaluate", "--model", "gpt-1.7b", "--cluster",
                              "dgx-h100", "--gpus", "8", *args], cwd=ROOT, capture_output=True, text=True,
                             timeout=120)
        assert out.returncode != 0 and line in out.stderr and "Traceback" not in out.stderr, out.stderr


def test_mxfp8_on_mi300x_is_refused_and_its_per_tensor_recipes_run():
    """ROCm's Transformer Engine runs MXFP8 on gfx95x only; MI300X (gfx942) states the recipes it runs in its cluster
    file, so MXFP8 is refused there as on Hopper (before, a device stating none took every recipe)."""
    model, mi300x = load_model("gpt-1.7b"), load_cluster("mi300x")
    s = Strategy(dp=8, global_batch=8, dtype="fp8", fp8_recipe="mxfp8")
    with pytest.raises(ExplorerError, match="fp8_recipe 'mxfp8' does not run on MI300X"):
        evaluate(model, s, mi300x)
    assert evaluate(model, s.with_(fp8_recipe="tensorwise"), mi300x).iteration_time_s > 0
