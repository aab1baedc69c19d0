"""The order in which each pipeline stage runs its passes (one iteration).

An order is, per stage, a list of (pass, chunk, micro_batch) with pass F
(forward), B (backward; input gradient only under ZB-H1) or W (ZB-H1's weight
gradient). Start times come from simulate.py; here is only the order, built in
O(passes).
"""
from __future__ import annotations

from explorer.errors import ExplorerError

F, B, W = 0, 1, 2
PASS_NAMES = ("forward", "backward", "weight")
SCHEDULES = ("gpipe", "1f1b", "interleaved", "zb-h1")


def gpipe(p: int, m: int) -> list:
    """All forwards, then all backwards, micro-batches in order (Huang et al. NeurIPS'19,
    "GPipe", Fig. 2c; drawn as in Narayanan et al. SC'21 Fig. 3)."""
    return [[(F, 0, j) for j in range(m)] + [(B, 0, j) for j in range(m)] for _ in range(p)]


def one_f_one_b(p: int, m: int) -> list:
    """PipeDream-Flush: stage i runs min(p-i-1, m) warm-up forwards, then alternates one
    forward and one backward, then drains the backwards (Narayanan et al. SC'21 Sec 2.2.1, Fig. 4 top)."""
    out = []
    for i in range(p):
        warm = min(p - i - 1, m)
        order = [(F, 0, j) for j in range(warm)]
        for j in range(m - warm):
            order += [(F, 0, warm + j), (B, 0, j)]
        out.append(order + [(B, 0, j) for j in range(m - warm, m)])
    return out


def interleaved(p: int, m: int, v: int) -> list:
    """Interleaved 1F1B over v model chunks per stage (Narayanan et al. SC'21 Sec 2.2.2, Fig. 4
    bottom; the order of Megatron-LM's forward_backward_pipelining_with_interleaving).

    Virtual micro-batch k runs chunk (k mod pv) // p forward (reversed for backward) on
    micro-batch (k // pv) p + k mod p; stage i warms up with 2(p-i-1) + (v-1)p forwards.
    Needs m to be a multiple of p.
    """
    if m % p:
        raise ExplorerError(f"the interleaved schedule needs the micro-batches ({m}) to be a multiple of pp={p}")
    total = m * v

    def virtual(k: int, kind: int) -> tuple:
        chunk = (k % (p * v)) // p
        return kind, (chunk if kind == F else v - 1 - chunk), (k // (p * v)) * p + k % p

    out = []
    for i in range(p):
        warm = min(2 * (p - i - 1) + (v - 1) * p, total)
        order = [virtual(k, F) for k in range(warm)]
        for k in range(total - warm):
            order += [virtual(warm + k, F), virtual(k, B)]
        out.append(order + [virtual(k, B) for k in range(total - warm, total)])
    return out


def zb_h1(p: int, m: int) -> list:
    """ZB-H1 (Qi et al. ICLR'24, "Zero Bubble Pipeline Parallelism", Sec 3.1, Fig. 3).

    The backward splits into B (input gradient, on the critical path) and W (weight
    gradient). Stage i runs p-i-1 warm-up forwards, then i steps of F,B whose W it
    postpones, then F,B,W steps, then B,W steps, then the i postponed W passes, which
    fill the cool-down bubble. At most as many micro-batches are in flight as in
    1F1B, so the activation memory is the same; the bubble shrinks from (p-1)(F+B+W)
    to (p-1)(F+B-W) when W <= F, B. (Order of the authors' ZeroBubbleH1Pipeline schedule
    with its exact semantics: B, its send, then W.)
    """
    out = []
    for i in range(p):
        fwd = bwd = wgt = 0
        order = []
        for _ in range(min(p - i - 1, m)):
            order.append((F, 0, fwd))
            fwd += 1
        for _ in range(min(i, m - fwd)):
            order += [(F, 0, fwd), (B, 0, bwd)]
            fwd, bwd = fwd + 1, bwd + 1
        for j in range(m - fwd):
            order += [(F, 0, fwd + j), (B, 0, bwd + j), (W, 0, wgt + j)]
        bwd, wgt = bwd + m - fwd, wgt + m - fwd
        for j in range(m - bwd):
            order += [(B, 0, bwd + j), (W, 0, wgt + j)]
        wgt += m - bwd
        out.append(order + [(W, 0, j) for j in range(wgt, m)])
    return out


def order_for(schedule: str, p: int, m: int, v: int = 1) -> list:
    """The per-stage order of `schedule` (one of SCHEDULES)."""
    if schedule == "gpipe":
        return gpipe(p, m)
    if schedule == "1f1b":
        return one_f_one_b(p, m)
    if schedule == "interleaved":
        return interleaved(p, m, v)
    if schedule == "zb-h1":
        return zb_h1(p, m)
    raise ExplorerError(f"schedule {schedule!r} is unknown; use one of {', '.join(SCHEDULES)}")
