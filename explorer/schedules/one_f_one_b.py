"""1F1B (PipeDream-Flush): one forward, one backward (Narayanan et al. SC'21 Sec 2.2.1, Fig. 4 top)."""
from explorer.schedules.base import B, F, Schedule
from explorer.schedules.gpipe import GPIPE


def order(p: int, m: int, v: int = 1) -> list:
    """Stage i runs min(p-i-1, m) warm-up forwards, then alternates one forward and one
    backward, then drains the backwards."""
    out = []
    for i in range(p):
        warm = min(p - i - 1, m)
        seq = [(F, 0, j) for j in range(warm)]
        for j in range(m - warm):
            seq += [(F, 0, warm + j), (B, 0, j)]
        out.append(seq + [(B, 0, j) for j in range(m - warm, m)])
    return out


def warmup(p: int, r: int, v: int = 1) -> int:
    """Forwards stage r runs before its first backward (m >= p): its p-r-1 warm-up forwards and the
    first forward of the steady state (order above)."""
    return p - r


def formulas() -> dict:
    import sympy as sp

    from explorer.symbols import B_r, F_r, StageEnd1F1B, W_r, m, p, r, v
    return dict(
        # GPipe's flow-shop value: exact for equal stages, (m+p-1)(F+B); with unequal stages an upper
        # bound of the critical path below (the search's partition DP works with it)
        makespan=GPIPE.makespan,
        bubble=GPIPE.bubble,
        in_flight=sp.Min(p - r, m),        # stage r keeps p - r micro-batches (at most m)
        overlap_window=B_r,
        stage_end=StageEnd1F1B(F_r, B_r, W_r, m, v),   # the exact critical path (critical_path.py)
    )


ONE_F_ONE_B = Schedule(
    name="1f1b", title="1F1B",
    source="Narayanan et al. SC'21 Sec 2.2.1 (same bubble as GPipe, at most p micro-batches in flight)",
    order=order, formulas=formulas, warmup=warmup,
)
