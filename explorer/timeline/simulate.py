"""Start and end times of every pass from the per-stage orders and the dependencies.

A stage runs its passes one at a time in its order; a pass starts when the stage
is free and its input is there:
  forward  (stage i, chunk c, mb j) needs forward (i-1, c, j), or (p-1, c-1, j) when i = 0;
  backward (i, c, j) needs backward (i+1, c, j), or (0, c+1, j) when i = p-1, and
  the last chunk's backward on the last stage needs its own forward;
  W needs only its own backward, which the order puts earlier on the same stage
(explorer.schedules.base.input_of; a schedule may have its own, Schedule.input_of, which the cost
model's critical path uses too).
Point-to-point sends are blocking and part of the sender's pass, so a receiver
may start as soon as the sender's pass ends (the cost model's convention) -- unless
they are overlapped with computation (Megatron-LM overlap_p2p_comm):
then `sends[stage, pass]` seconds are not in the pass, and a pass whose input ran
on another stage waits for that input's end plus its send.
"""
from __future__ import annotations

import numpy as np

from explorer.errors import ExplorerError
from explorer.schedules.base import input_of


def simulate(orders: list, durations: np.ndarray, chunks: int, micro_batches: int, sends=None,
             rule=input_of) -> dict:
    """Run `orders` (schedules.py) with `durations[stage, pass]` seconds per pass; `rule` the schedule's
    dependency rule (Schedule.input_of: (kind, stage, chunk, micro_batch, p, v) -> the pass it waits
    for, or None), by default explorer.schedules.base.input_of.

    Returns numpy arrays stage, pass, chunk, micro_batch, start_s, end_s (one entry
    per pass, in execution order of each stage). Each pass is visited once: O(passes).

    >>> from explorer.timeline.schedules import one_f_one_b
    >>> out = simulate(one_f_one_b(2, 2), np.array([[1.0, 2.0, 0.0]] * 2), 1, 2)
    >>> float(out["end_s"].max())  # (m + p - 1)(F + B)
    9.0
    """
    p, v = len(orders), chunks
    dur = durations.tolist()
    sent = None if sends is None else np.asarray(sends, dtype=float).tolist()
    ends = {}                        # (stage, kind, chunk, micro_batch) -> end of that pass
    waiting = {}                     # a pass not yet run -> the stage blocked on it
    ptr, free = [0] * p, [0.0] * p
    rows = []
    work, queued = list(range(p - 1, -1, -1)), [True] * p
    while work:
        i = work.pop()
        queued[i] = False
        order, n = orders[i], len(orders[i])
        while ptr[i] < n:
            kind, c, j = order[ptr[i]]
            dep = rule(kind, i, c, j, p, v)
            if dep is None:
                ready = 0.0
            else:
                ready = ends.get(dep)
                if ready is None:
                    waiting[dep] = i
                    break
                if sent is not None and dep[0] != i:      # an input from another stage: its send
                    ready += sent[dep[0]][dep[1]]
            start = free[i] if free[i] > ready else ready
            end = start + dur[i][kind]
            free[i] = end
            rows.append((i, kind, c, j, start, end))
            ptr[i] += 1
            key = (i, kind, c, j)
            ends[key] = end
            nxt = waiting.pop(key, None)
            if nxt is not None and not queued[nxt]:
                work.append(nxt)
                queued[nxt] = True
    if any(ptr[i] < len(orders[i]) for i in range(p)):
        stuck = next(i for i in range(p) if ptr[i] < len(orders[i]))
        raise ExplorerError(f"the pipeline order deadlocks at stage {stuck}, pass {orders[stuck][ptr[stuck]]}")
    arr = np.array(rows, dtype=float).reshape(-1, 6)
    ints = arr[:, :4].astype(int)
    return {"stage": ints[:, 0], "pass": ints[:, 1], "chunk": ints[:, 2], "micro_batch": ints[:, 3],
            "start_s": arr[:, 4], "end_s": arr[:, 5]}
