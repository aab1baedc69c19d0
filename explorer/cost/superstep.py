"""The super-step: pipeline schedule, bubble, gradient synchronisation, optimizer.

Each formula is a small sympy expression, lambdified once (numeric.py).
"""
from __future__ import annotations

import sympy as sp

from explorer.cost import collectives as coll
from explorer.symbols import B_max, F_max, S_T, T_star, W_hbm, d, m, v

G = sp.Symbol("G", nonnegative=True)        # gradient bytes per device
Psi = sp.Symbol("Psi", nonnegative=True)    # parameters per device
g_dp = sp.Symbol("g_d", nonnegative=True)
L_dp = sp.Symbol("L_d", nonnegative=True)
B_last = sp.Symbol("B_{last}", nonnegative=True)
K_opt = sp.Symbol("K_{opt}", positive=True)
T_split = sp.Symbol("T_{split}", nonnegative=True)   # gradient sync of batch-split layers, s

# Pipeline makespan for m micro-batches over stages with per-micro-batch forward
# F_i and backward B_i (p2p sends included). For GPipe this is the flow-shop
# makespan sum_i(F_i+B_i) + (m-1)(max F + max B); with equal stages it is
# (m+p-1)(F+B), i.e. a bubble of (p-1)/m of the ideal time (Narayanan et al.
# SC'21 Sec 2.2.1, published.json ptdp_bubble_gpipe_1f1b). Interleaving v chunks
# divides the bubble by v: m(F+B) + (p-1)(F+B)/v (Sec 2.2.2, ptdp_bubble_interleaved).
PIPELINE = (S_T + (m * v - 1) * (F_max + B_max)) / v

# Idle time of the most loaded stage (T_* per micro-batch): the bubble.
BUBBLE = PIPELINE - m * T_star


def dp_sync(zero: int) -> sp.Expr:
    """Gradient synchronisation over d replicas, once per iteration, plus T_split:
    the all-reduce of batch-split layers' gradients inside their operator group.

    ZeRO-0: ring all-reduce of the gradients; ZeRO-1/2: reduce-scatter of
    gradients + all-gather of updated parameters, the same 2(d-1)/d volume;
    ZeRO-3: only the reduce-scatter here, the parameter gathers are zero_comm
    (Rajbhandari et al. SC'20 Sec 7, published.json zero_comm_volume).
    """
    if zero == 3:
        return coll.time("reduce_scatter", G, d, g_dp, L_dp) + T_split
    return coll.time("all_reduce", G, d, g_dp, L_dp) + T_split


def zero_gathers(zero: int) -> sp.Expr:
    """ZeRO-3 all-gathers the parameters before every forward and backward of each
    micro-batch (Rajbhandari et al. SC'20 Sec 7-B: 2 Psi per pass, 3 Psi with the
    gradient reduce-scatter for one micro-batch)."""
    if zero < 3:
        return sp.Integer(0)
    return 2 * m * coll.time("all_gather", G, d, g_dp, L_dp)


def exposed(sync: sp.Expr, overlap: bool) -> sp.Expr:
    """With overlap the synchronisation hides under the last micro-batch's backward."""
    return sp.Max(0, sync - B_last) if overlap else sync


def optimizer_bytes_per_param(dtype_bytes: int) -> float:
    """K_opt of optimizer(): 30 B with 16-bit training; fp32 training reads and
    writes weights, momentum and variance (24 B) and reads the gradient (4 B): 28 B."""
    return 30 if dtype_bytes == 2 else 28


def optimizer(zero: int) -> sp.Expr:
    """Adam step, memory-bound: K_opt bytes moved per parameter at HBM speed.

    Mixed-precision Adam reads and writes fp32 master weights, momentum and
    variance (3 x 4 B each way = 24 B, ZeRO Sec 3.1's K = 12 states), reads the
    fp32 gradient (4 B) and writes the 16-bit weights (2 B): K_opt = 30 B.
    ZeRO-1 and above update only the 1/d shard a device owns.
    """
    shard = d if zero >= 1 else 1
    return K_opt * Psi / (shard * W_hbm)
