"""The fused attention kernel's efficiency curve (issue 26 item 2): explorer/hardware/attention.py (numbers),
explorer/cost/attention_kernel.py (the same curve in sympy), constants and published points in
assets/attention_kernels.json (FlashAttention-2 arXiv:2307.08691 Fig. 4 on A100; cuDNN in FlashAttention-3
arXiv:2407.08608 Fig. 5-6 on H100), fitted by benchmarks/fit_attention_kernels.py."""
import importlib.util
from pathlib import Path

import numpy as np
import pytest
import sympy as sp

from explorer import load_cluster, load_model
from explorer.cost import attention_kernel as ak
from explorer.cost import layouts as lay
from explorer.cost.block import block_cost
from explorer.cost.numbers import Numbers, hardware_numbers
from explorer.cost.tree import BLOCK_ARGS, block_function, block_exprs
from explorer.hardware import attention as att
from explorer.model.graph import build_blocks
from explorer.symbols import ATTENTION_KERNEL, a, h, s

ROOT = Path(__file__).resolve().parents[1]
KERNELS = att.kernels()["kernels"]
SEQ = att.kernels()["seq_lens"]


def _predicted(entry, direction, causal, head_dim, n):
    """The fitted curve at a published point; a forward + backward point is the two directions' time mix
    (backward 2.5 x the forward FLOPs, FlashAttention-2 Sec 4.1)."""
    p = att.params(entry["devices"][0], entry["precisions"][0], 0.5)
    if direction == "fwd+bwd":
        fwd, bwd = (att.efficiency(p, n, head_dim, causal, back) for back in (False, True))
        return 3.5 / (1 / fwd + 2.5 / bwd)
    return att.efficiency(p, n, head_dim, causal, direction == "bwd")


TOLERANCE = {"cudnn-gb200-bf16": (0.15, 0.055), "cudnn-b200-bf16": (0.15, 0.06)}
"""(max, mean) relative error of the Blackwell curves: their published points rise to 8-16k tokens and fall
8-11 % beyond (free clock), and GB200's backward is slower at head dim 160 (DeepSeek-V3's 192/128) than at
128 while its forward is faster; a saturating curve with one head-dimension constant cannot follow either."""


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_the_curve_reproduces_the_published_points(name):
    """Every published point within 7 %, their mean within 2.5 % (the fit's stored errors: A100 1.2 % / 3.5 %,
    H100 1.7 % / 6.1 %); the Blackwell curves within TOLERANCE (GB200 5.1 % / 14.3 %, B200 5.6 % / 14.7 %)."""
    entry = KERNELS[name]
    errors = [_predicted(entry, d, c, hd, n) / eta - 1 for d, c, hd, n, eta in att.published_points(entry, SEQ)]
    worst, mean = TOLERANCE.get(name, (0.07, 0.025))
    assert len(errors) >= 18
    assert max(map(abs, errors)) < worst and np.mean(np.abs(errors)) < mean
    assert np.mean(np.abs(errors)) == pytest.approx(entry["fit"]["error"]["mean"], abs=2e-3)


def test_the_fit_script_gives_the_stored_constants():
    spec = importlib.util.spec_from_file_location("fit_attention", ROOT / "benchmarks" / "fit_attention_kernels.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for entry in KERNELS.values():
        fitted = module.fit(entry, SEQ, KERNELS)
        for direction in ("fwd", "bwd"):
            for key, value in entry["fit"][direction].items():
                assert fitted[direction][key] == pytest.approx(value, rel=0.02)
        assert fitted["causal"] == pytest.approx(entry["fit"]["causal"], rel=0.02)


def test_a100_forward_saturates_near_the_papers_73_percent():
    """FlashAttention-2 Sec 4: 'up to 230 TFLOPs/s, 73% of the theoretical maximum' on A100; the split
    forward curve gives 0.696 at 16k tokens, head dim 128, no mask (6 % under)."""
    p = att.params("A100-SXM4-80GB", "bf16", 0.73)
    assert 0.65 < att.efficiency(p, 16384, 128, False) < 230 / 312


@pytest.mark.parametrize("device", ["A100-SXM4-80GB", "H100-SXM", "B200-SXM", "GB200-Blackwell"])
def test_efficiency_grows_with_tokens_and_the_backward_is_slower(device):
    p = att.params(device, "bf16", 0.5)
    n = np.geomspace(256, 262144, 50)
    for causal in (False, True):
        for backward in (False, True):
            eta = att.efficiency(p, n, 128, causal, backward)
            assert np.all(np.diff(eta) > 0) and np.all(eta < 1)
    # GB200's smallest published point is 2048 tokens; below about 400 the fitted backward passes the
    # forward (an extrapolation: its backward saturates at fewer tokens, n_half 292 against 511)
    n = n[n >= 2048] if device == "GB200-Blackwell" else n
    for causal in (False, True):
        # backward below forward at head dim 128 (cuDNN's published backward is faster at head dim 64:
        # 433 against 413 TFLOP/s at 16k, FlashAttention-3 Fig. 5a / 6a; the curve follows it)
        assert np.all(att.efficiency(p, n, 128, causal, True) < att.efficiency(p, n, 128, causal, False))
    assert att.efficiency(p, 4096, 128, True) < att.efficiency(p, 4096, 128, False)      # the mask costs


def test_a_device_without_a_published_kernel_keeps_the_gemm_efficiency():
    for cluster, dtype in (("mi300x", "bf16"), ("dgx-a100-80gb", "fp32")):
        c = load_cluster(cluster)
        hw = hardware_numbers(c, dtype)
        assert hw["attention"] == att.flat(hw["eta_a"])
        for n in (512, 131072):
            assert att.efficiency(hw["attention"], n, 128, True, True) == pytest.approx(hw["eta_a"], rel=1e-12)
    # FP8 training runs the attention core in bf16: the bf16 kernel's curve
    h100 = load_cluster("dgx-h100")
    assert hardware_numbers(h100, "fp8")["attention"] == hardware_numbers(h100, "bf16")["attention"]


def _flash(model, cp, cp_algo="ring"):
    block = next(x for x in build_blocks(model) if x.kind == "layer")
    cost = block_cost(block, "megatron", (), True, "none", lay.SEQ, cp, cp_algo)
    op = next(o for o in block.ops if o.name == "flash_attn")
    return cost, next(x for x in cost.steps if x.op == "flash_attn"), op


@pytest.mark.parametrize("cp,algo", [(1, "ring"), (8, "ring"), (8, "ulysses")])
def test_symbolic_equals_numeric(cp, algo):
    """The sympy curve of the block equals explorer/hardware/attention.py's numbers, and the compiled
    block function equals its own expression evaluated exactly."""
    model, cluster = load_model("llama3.1-405b").with_seq_len(131072), load_cluster("dgx-h100")
    _, step, op = _flash(model, cp, algo)
    p = hardware_numbers(cluster, "bf16")["attention"]
    vals = dict(zip(ATTENTION_KERNEL, (p[k] for k in att.PARAMS)))
    vals.update({s: model.seq_len, h: model.hidden, a: model.heads})
    n = att.call_tokens(model.seq_len, cp, algo)
    d = model.hidden / model.heads
    for backward in (False, True):
        sym = float(ak.efficiency(op, cp, algo, backward).subs(vals))
        if cp > 1 and algo == "ring":     # diagonal step causal, cp - 1 unmasked half-chunk steps, equal work
            chunk = att.efficiency(p, n / 2, d, False, backward)
            num = 1 / (1 / (cp * att.efficiency(p, n, d, True, backward)) + (cp - 1) / cp / chunk)
        else:
            num = att.efficiency(p, n, d, True, backward)
        assert sym == pytest.approx(num, rel=1e-12)
    cost, *_ = _flash(model, cp, algo)
    nums = Numbers.of(model, 1, cluster, "bf16")
    args = nums.block_args(8, (8,), (cp,) if cp > 1 else (), algo)
    compiled = block_function(cost)(*args)
    exact = [sp.sympify(e).subs(dict(zip(BLOCK_ARGS, args))) for e in block_exprs(cost)[:2]]
    assert [float(x) for x in compiled[:2]] == pytest.approx([float(x) for x in exact], rel=1e-9)


def test_ring_steps_are_priced_at_their_chunk_and_cost_more_per_token_than_a_constant():
    """Llama 3.1 405B at 131,072 tokens with cp = 8 (16,384-token chunks) on A100: the ring's steps run the
    kernel below the GEMM efficiency the old model used (gemm_max 0.73), so the attention costs more time
    per token; and a shorter chunk (cp = 32) costs more per token than a longer one."""
    model, cluster = load_model("llama3.1-405b").with_seq_len(131072), load_cluster("dgx-a100-80gb")
    hw = hardware_numbers(cluster, "bf16")
    nums = Numbers.of(model, 1, cluster, "bf16")

    def attention_seconds(cp, curve=True):
        args = list(nums.block_args(8, (8,), (cp,), "ring"))
        if not curve:   # the old pricing: the kernel at eta_a for every size
            first = BLOCK_ARGS.index(ATTENTION_KERNEL[0])       # the curve's arguments (the host's follow them)
            args[first:first + len(att.PARAMS)] = [att.flat(hw["eta_a"])[k] for k in att.PARAMS]
        _, step, _ = _flash(model, cp)
        f = sp.lambdify(BLOCK_ARGS, [step.fwd_s, step.bwd_s, step.recompute_s])
        return sum(f(*args))

    new, old = attention_seconds(8), attention_seconds(8, curve=False)
    assert new > 1.05 * old
    assert attention_seconds(32) * 32 > attention_seconds(8) * 8   # the whole sequence's: shorter chunks, slower
    tokens = model.seq_len / 8
    assert att.call_tokens(model.seq_len, 8) == tokens == 16384



@pytest.mark.parametrize("cluster,kernel", [("dgx-b200", "cudnn-b200-bf16"), ("gb200-nvl72", "cudnn-gb200-bf16")])
def test_blackwell_runs_its_published_cudnn_curve(cluster, kernel):
    """B200 and GB200 price the attention core on cuDNN's published Blackwell curve (NVIDIA/cudnn-frontend
    benchmark/sdpa_benchmark_training), not at the GEMM efficiency; FP8 training reads the bf16 curve; B200
    takes GB200's head-dimension constant and causal factor (its benchmark is causal at head dim 128 only)."""
    c = load_cluster(cluster)
    hw = hardware_numbers(c, "bf16")
    assert att.kernel_for(c.device.name, "bf16")[0] == kernel
    assert hw["attention"] != att.flat(hw["eta_a"])
    assert hardware_numbers(c, "fp8")["attention"] == hw["attention"]
    # published: GB200 forward 1408 of 2500 TFLOP/s causal at 4096 tokens, head dim 128 (llama3.1 CSV);
    # B200 1141.1 of 2250 (sdpa_fp8_benchmark_results_NVIDIA_B200.csv, bf16 row); the curve within 6 %
    published = {"dgx-b200": 1141.1 / 2250, "gb200-nvl72": 1408 / 2500}[cluster] * (4096 + 128) / 4096
    assert att.efficiency(hw["attention"], 4096, 128, True) == pytest.approx(published, rel=0.06)
    b200, gb200 = (KERNELS[k]["fit"] for k in ("cudnn-b200-bf16", "cudnn-gb200-bf16"))
    assert b200["causal"] == gb200["causal"] and b200["fwd"]["d_half"] == gb200["fwd"]["d_half"]
