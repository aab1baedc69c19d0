"""GPipe: all forwards, then all backwards (Huang et al., NeurIPS'19, Fig. 2c)."""
from explorer.schedules.base import B, F, Schedule


def order(p: int, m: int, v: int = 1) -> list:
    """All forwards, then all backwards, micro-batches in order (drawn as in Narayanan et al.
    SC'21 Fig. 3)."""
    return [[(F, 0, j) for j in range(m)] + [(B, 0, j) for j in range(m)] for _ in range(p)]


def warmup(p: int, r: int, v: int = 1) -> float:
    """Every forward runs before the first backward."""
    return float("inf")


def formulas() -> dict:
    from explorer.symbols import B_max, B_r, F_max, F_r, S_T, StageSum, StageSuffixMax, StageSuffixSum, T_star, m
    return dict(
        # Flow shop over stages: Σ_r (F_r+B_r) + (m-1)(max F + max B); with equal stages
        # (m+p-1)(F+B), a bubble of (p-1)/m of the ideal time (published.json ptdp_bubble_gpipe_1f1b).
        makespan=S_T + (m - 1) * (F_max + B_max),
        # Idle time of the most loaded stage: the warm-up and cool-down of the other stages'
        # passes, plus m times what that stage waits for the slowest forward and backward.
        bubble=(S_T - F_max - B_max) + m * (F_max + B_max - T_star),
        in_flight=m,                       # every micro-batch's activations are kept (Huang et al.)
        overlap_window=B_r,                # the last micro-batch's backward
        # Stage r's last backward: the forwards end on the last stage at Σ F + (m-1) max F (a flow
        # shop with the same times for every micro-batch), then the backwards climb from the last
        # stage to r, held up by the slowest backward on the way; its stage is free by then (its own
        # forwards ended earlier). Exact for any stages; its max over r, at r = 0, is the makespan.
        stage_end=StageSum(F_r) + (m - 1) * F_max + StageSuffixSum(B_r) + (m - 1) * StageSuffixMax(B_r),
    )


GPIPE = Schedule(
    name="gpipe", title="GPipe",
    source="Huang et al. NeurIPS'19; makespan as the flow-shop bound, Narayanan et al. SC'21 Sec 2.2.1",
    order=order, formulas=formulas, warmup=warmup, closed_form_exact=True,
)

