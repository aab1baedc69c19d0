"""1F1B (PipeDream-Flush): one forward, one backward (Narayanan et al. SC'21 Sec 2.2.1, Fig. 4 top)."""
import numpy as np

from explorer.schedules.base import B, F, PERIODIC_RTOL, Schedule
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


def ends_1f1b(fwd: np.ndarray, bwd: np.ndarray, m: int) -> np.ndarray:
    """Stages x candidates: end of each stage's last backward under 1F1B with m >= p micro-batches
    (the step recursion of explorer.schedules.critical_path's docstring)."""
    if fwd.shape[1] == 1:           # one candidate (evaluate()): the same recursion on Python floats
        return np.array(_ends_1f1b_one(fwd[:, 0].tolist(), bwd[:, 0].tolist(), m))[:, None]
    p = fwd.shape[0]
    suffix = np.cumsum(bwd[::-1], axis=0)[::-1]                 # Σ_{l >= i} B_l
    after = np.concatenate([suffix[1:], np.zeros_like(suffix[:1])])   # Σ_{l > i} B_l

    def up(z):
        """Y_i = B_i + max(z_i, Y_{i+1}): the longest climb from any stage j >= i to i."""
        return suffix + np.maximum.accumulate((z - after)[::-1], axis=0)[::-1]

    def down(x):
        """X_{s-1} one stage down: stage i's forward input is stage i-1's forward of the step before."""
        return np.concatenate([np.zeros_like(x[:1]), x[:-1]])

    stage = np.arange(p)[:, None]
    x = np.full_like(fwd, -np.inf)
    for s in range(-(p - 1), 1):                                # warm-up forwards, then step 0's
        new = fwd + np.maximum(np.where(np.isfinite(x), x, 0.0), down(x))
        x = np.where(stage <= p - 1 + s, new, -np.inf)
    y = up(x)
    s, steady_end = 1, m - p                                    # steps 0 .. m-p: every stage steady
    while s <= steady_end:
        x_new = fwd + np.maximum(y, down(x))
        y_new = up(x_new)
        dx, dy = x_new - x, y_new - y
        step = dy[:1]
        tol = PERIODIC_RTOL * np.maximum(np.abs(y_new).max(axis=0, keepdims=True), 1e-300)
        x, y = x_new, y_new
        if s >= 2 and np.all(np.abs(dx - step) <= tol) and np.all(np.abs(dy - step) <= tol):
            x, y = x + (steady_end - s) * step, y + (steady_end - s) * step
            s = steady_end
        s += 1
    for q in range(1, p):                                       # drain: stages i < q have no forward left
        steady = stage >= q
        x_new = np.where(steady, fwd + np.maximum(y, down(x)), -np.inf)
        y = up(np.where(steady, x_new, y))
        x = x_new
    return y


def _ends_1f1b_one(f: list, b: list, m: int) -> list:
    """ends_1f1b for one candidate: numpy's per-call overhead dominates arrays of p numbers."""
    p = len(f)
    inf = float("-inf")

    def up(z):
        y, nxt = [0.0] * p, inf
        for i in range(p - 1, -1, -1):
            nxt = b[i] + (z[i] if z[i] > nxt else nxt)
            y[i] = nxt
        return y

    x = [inf] * p
    for s in range(-(p - 1), 1):                                # warm-up forwards, then step 0's
        x = [f[i] + max(x[i] if x[i] != inf else 0.0, x[i - 1] if i else 0.0) if i <= p - 1 + s else inf
             for i in range(p)]
    y = up(x)
    s, steady_end = 1, m - p
    while s <= steady_end:
        x_new = [f[i] + max(y[i], x[i - 1] if i else 0.0) for i in range(p)]
        y_new = up(x_new)
        step = y_new[0] - y[0]
        tol = PERIODIC_RTOL * max(max(abs(e) for e in y_new), 1e-300)
        periodic = s >= 2 and all(abs(a - c - step) <= tol for a, c in zip(x_new, x)) and \
            all(abs(a - c - step) <= tol for a, c in zip(y_new, y))
        x, y = x_new, y_new
        if periodic:
            x, y = [e + (steady_end - s) * step for e in x], [e + (steady_end - s) * step for e in y]
            s = steady_end
        s += 1
    for q in range(1, p):                                       # drain: stages i < q have no forward left
        x_new = [f[i] + max(y[i], x[i - 1] if i else 0.0) if i >= q else inf for i in range(p)]
        y = up([x_new[i] if i >= q else y[i] for i in range(p)])
        x = x_new
    return y



ONE_F_ONE_B = Schedule(
    name="1f1b", title="1F1B",
    source="Narayanan et al. SC'21 Sec 2.2.1 (same bubble as GPipe, at most p micro-batches in flight)",
    order=order, formulas=formulas, warmup=warmup, drawn_as=("zb-h1",), fast_ends=ends_1f1b,
    stage_end_name="StageEnd1F1B",
)
