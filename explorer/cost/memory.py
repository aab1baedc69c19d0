"""Memory per device: model states (ZeRO) and activations in flight (schedules)."""
from __future__ import annotations

import sympy as sp

from explorer.symbols import beta, d, m, p, v

Psi = sp.Symbol("Psi", nonnegative=True)    # parameters held per device before ZeRO
A = sp.Symbol("A", nonnegative=True)        # activation bytes of one micro-batch on the stage
r = sp.Symbol("r", nonnegative=True)        # the stage's rank, 0 = first


def optimizer_bytes_per_param(dtype_bytes: int) -> int:
    """K of ZeRO Sec 3.1: fp32 master weights + momentum + variance = 12 B with
    16-bit training; fp32 training keeps no master copy: 8 B."""
    return 12 if dtype_bytes == 2 else 8


def model_states(zero: int, k_opt: int) -> dict:
    """Bytes of parameters, gradients, optimizer states per device.

    Rajbhandari et al. SC'20 Sec 5 (published.json zero_model_state_formulas):
    baseline (2+2+K)Psi; P_os: 4Psi + K Psi/Nd; P_os+g: 2Psi + (2+K)Psi/Nd;
    P_os+g+p: (2+2+K)Psi/Nd (with beta = 2 bytes per element).
    """
    return {
        "params": beta * Psi / (d if zero >= 3 else 1),
        "grads": beta * Psi / (d if zero >= 2 else 1),
        "optimizer": k_opt * Psi / (d if zero >= 1 else 1),
    }


def in_flight(schedule: str) -> sp.Expr:
    """Micro-batches whose activations stage r holds at its peak.

    GPipe: all m (Huang et al. 2019). 1F1B: p - r, at most m (Narayanan et al.
    SC'21 Sec 2.2.1). Interleaved: Megatron-LM's warm-up of 2(p-r-1) + (v-1)p
    chunk-micro-batches plus the one in flight, in units of whole micro-batches
    (each chunk holds 1/v of the stage); for r = 0 this is p(1 + (p-1)/(pv)),
    Korthikanti et al. Sec 4.2.3's interleaving factor.
    """
    if schedule == "gpipe":
        return m
    if schedule == "1f1b":
        return sp.Min(p - r, m)
    return sp.Min(m * v, 2 * (p - r - 1) + (v - 1) * p + 1) / v


def activations(schedule: str) -> sp.Expr:
    return in_flight(schedule) * A
