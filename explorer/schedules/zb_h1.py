"""ZB-H1, the zero-bubble schedule with 1F1B's memory (Qi et al., ICLR'24, Sec 3.1, Fig. 3).

The backward splits into B (input gradient, on the critical path) and W (weight
gradient, which fills the cool-down). Stage i runs p-i-1 warm-up forwards, then i
steps of F,B whose W it postpones, then F,B,W steps, then B,W steps, then the i
postponed W passes. (Order of the authors' ZeroBubbleH1Pipeline: B, its send, then W.)
"""
from explorer.schedules.base import B, F, W, Schedule


def warmup(p: int, r: int, v: int = 1) -> int:
    """Forwards stage r runs before its first backward (m >= p): p-r-1 warm-up forwards, then an F, B
    step (order below), as 1F1B."""
    return p - r


def order(p: int, m: int, v: int = 1) -> list:
    out = []
    for i in range(p):
        fwd = bwd = wgt = 0
        seq = []
        for _ in range(min(p - i - 1, m)):
            seq.append((F, 0, fwd))
            fwd += 1
        for _ in range(min(i, m - fwd)):
            seq += [(F, 0, fwd), (B, 0, bwd)]
            fwd, bwd = fwd + 1, bwd + 1
        for j in range(m - fwd):
            seq += [(F, 0, fwd + j), (B, 0, bwd + j), (W, 0, wgt + j)]
        bwd, wgt = bwd + m - fwd, wgt + m - fwd
        for j in range(m - bwd):
            seq += [(B, 0, bwd + j), (W, 0, wgt + j)]
        wgt += m - bwd
        out.append(seq + [(W, 0, j) for j in range(wgt, m)])
    return out


# Qi et al. Sec 3.1: with T_B the input-gradient pass, ZB-H1's bubble is (p-1)(T_F + T_B - T_W)
# when T_W is at most T_F and T_B. Its exact critical path for equal stages and m >= p, from
# the schedule's dependency graph (max-plus: the last pass ends at m(F+B) + (p-1) X with X the
# largest of F, B_in and F + B_in - W, B_in = B - W), covers the other cases too. With unequal
# stages each stage adds its own X_r, as 1F1B's Σ_T - F_max - B_max adds each other stage's
# F_r + B_r: the stages but the slowest contribute Σ_r X_r - max_r X_r (exact on GPT-3 175B at
# t = 8, p = 8, whose first and last stages differ; 3.7 % above the simulated timeline of tiny-gpt).
def formulas() -> dict:
    import sympy as sp

    from explorer.symbols import B_max, B_r, F_max, F_r, StageEndZBH1, T_star, W_r, X_max, X_sum, m, p, r, v
    warmup = X_sum - X_max
    return dict(
        makespan=m * (F_max + B_max) + warmup,
        bubble=warmup + m * (F_max + B_max - T_star),
        in_flight=sp.Min(p - r, m),        # the same peak activation memory as 1F1B (Qi et al. Sec 3.1)
        overlap_window=B_r,                # the last micro-batch's B and W
        stage_end=StageEndZBH1(F_r, B_r, W_r, m, v),   # the exact critical path (critical_path.py)
    )


ZB_H1 = Schedule(
    name="zb-h1", title="ZB-H1 (zero bubble)",
    source="Qi et al., 'Zero Bubble Pipeline Parallelism', ICLR'24, Sec 3.1",
    order=order, formulas=formulas, warmup=warmup,
    # min_stages 2: with one stage there is no bubble for the W passes to fill; it is 1F1B under another name,
    # and the search and the pickers offered it at p = 1 (issue 30)
    splits_weight=True, micro_batches_per_stage=1, stage_end_name="StageEndZBH1", min_stages=2,
    micro_batches_reason="its warm-up fills p-1 slots (Qi et al. ICLR'24 Sec 3.1)",
)
