"""The attention kernel's efficiency: a curve per kernel, hardware and precision, from published benchmarks.

A fused attention kernel (FlashAttention-2 on A100, cuDNN's fused attention on H100, B200, GB200) reaches a
fraction of the device's 16-bit peak that grows with the tokens of one kernel call and the head
dimension, is lower under the causal mask and lower backward than forward. The curve, per direction:

    eta(n, d) = eta_max * n_e / (n_e + n_half) * (d / 128) * (128 + d_half) / (d + d_half)   (x kappa, causal)

n_e = n without the mask and n / 2 with it (each query block loops over half the keys on average);
eta_max is the saturated fraction at head dim 128. The published points, their figures and the
fitted constants are in assets/attention_kernels.json (benchmarks/fit_attention_kernels.py fits
them); a device with no published kernel keeps the flat curve (eta_max = the cluster's GEMM
efficiency, n_half = d_half = 0, kappa = 1): the attention core priced like a GEMM, as before.
The symbolic form of the same curve, with the tokens per call under context parallelism, is
explorer/cost/attention_kernel.py. No sympy here: evaluate() reads these numbers cold.
"""
from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

PATH = Path(__file__).resolve().parents[2] / "assets" / "attention_kernels.json"
PARAMS = ("eta_f", "eta_b", "n_f", "n_b", "d_f", "d_b", "kappa")
"""The curve's constants as hardware_numbers() carries them: saturated efficiency, tokens per call
at half of it and the head dimension's constant, forward (f) and backward (b), and the causal factor."""
REF_HEAD_DIM = 128


@lru_cache(maxsize=1)
def kernels() -> dict:
    """assets/attention_kernels.json, read once."""
    return json.loads(PATH.read_text())


SOFTMAX_TYPES = ("vanilla", "off-by-one", "learnable")
"""Transformer Engine's DotProductAttention softmax_type: the plain softmax, and the two with a sink logit per
row (a zero one, or a learnable one per head: gpt-oss' attention sinks, ModelSpec.attention_sinks)."""


def kernel_for(device_name: str, dtype: str, softmax: str = "vanilla"):
    """(name, entry) of the published kernel for this device, the attention's dtype and softmax type, or None.

    Which kernel runs a softmax with sinks is Transformer Engine's backend selection
    (transformer_engine/pytorch/attention/dot_product_attention/utils.py get_attention_backend, "Filter: Softmax
    type", TE 2.8-2.18): softmax_type != "vanilla" disables FlashAttention and leaves FusedAttention (cuDNN's
    arbitrary-sequence-length kernel: transformer_engine/common/fused_attn/fused_attn.cpp
    nvte_get_fused_attn_backend, "9.13.1+: vanilla, off-by-one, learnable", with sliding windows and at head
    dimension 64, sm80 to sm100) and the unfused core. Each kernel entry lists the softmax types it runs
    (assets/attention_kernels.json softmax_types; vanilla when absent)."""
    for name, entry in kernels()["kernels"].items():
        if device_name in entry["devices"] and dtype in entry["precisions"] and \
                softmax in entry.get("softmax_types", ("vanilla",)):
            return name, entry
    return None


def flat(eta_max: float) -> dict:
    """The curve of a device without a published kernel: eta_max at every size (a GEMM's efficiency)."""
    return dict(eta_f=eta_max, eta_b=eta_max, n_f=0.0, n_b=0.0, d_f=0.0, d_b=0.0, kappa=1.0)


def params(device_name: str, dtype: str, gemm_max: float, softmax: str = "vanilla") -> dict:
    """The PARAMS of the attention kernel for a device, the attention core's dtype and its softmax type."""
    found = kernel_for(device_name, dtype, softmax)
    if found is None:
        return flat(gemm_max)
    fit = found[1]["fit"]
    fwd, bwd = fit["fwd"], fit["bwd"]
    return dict(eta_f=fwd["eta_max"], eta_b=bwd["eta_max"], n_f=fwd["n_half"], n_b=bwd["n_half"],
                d_f=fwd["d_half"], d_b=bwd["d_half"], kappa=fit["causal"])


def curve(direction: dict, kappa: float, n, head_dim, causal: bool):
    """eta of one direction ({eta_max, n_half, d_half}) at n tokens per call (numbers or numpy arrays)."""
    n_e = n / 2 if causal else n
    d, dh = head_dim, direction["d_half"]
    value = direction["eta_max"] * n_e / (n_e + direction["n_half"]) * (d / REF_HEAD_DIM) * (REF_HEAD_DIM + dh) / (d + dh)
    return value * (kappa if causal else 1)


def efficiency(p: dict, n, head_dim, causal: bool, backward: bool = False):
    """eta of the kernel with constants `p` (params()) at n tokens per call."""
    key = "b" if backward else "f"
    return curve({"eta_max": p[f"eta_{key}"], "n_half": p[f"n_{key}"], "d_half": p[f"d_{key}"]}, p["kappa"],
                 n, head_dim, causal)


def published_points(entry: dict, seq_lens):
    """(direction, causal, head dim, tokens per call, eta) of every published point of a kernel entry, eta
    on the FLOPs the explorer counts as executed: a causal point's published TFLOP/s counts half the
    full FLOPs, the kernel runs 1/2 + 64/n of them (FlashAttention-2 Sec 3.1.1), so x (n + 128)/n.
    The sequence lengths are the entry's own (seq_lens) where it lists them, else `seq_lens`; a key is
    direction|mask|head dim, optionally |the benchmark it comes from."""
    peak = entry["peak_tflops"]
    for key, values in entry["points"].items():
        direction, mask, head_dim = key.split("|")[:3]
        for n, tflops in zip(entry.get("seq_lens", seq_lens), values):
            if tflops is None:
                continue
            eta = tflops / peak * ((n + 128) / n if mask == "causal" else 1)
            yield direction, mask == "causal", int(head_dim), n, eta


def call_tokens(seq_len: int, cp: int = 1, cp_algo: str = "ring") -> float:
    """Tokens of one kernel call: the sequence, or under ring context parallelism the device's chunk
    s/cp (each ring step runs the kernel on it); Ulysses runs whole sequences on a/cp heads."""
    return seq_len / cp if cp > 1 and cp_algo == "ring" else float(seq_len)
