"""Whether a prediction's own communication fits its own iteration on each link (a self-consistency check).

The cost model hides a collective under the compute it overlaps with one collective at a time: the tensor-parallel
all-gathers under their GEMMs, the data-parallel reduce-scatter under the backward, ZeRO-3's gathers under the
previous layer. Several of them on one machine level share its links, which the model does not price (no
contention between concurrent collectives). Its own numbers say when that matters: the seconds each level's
collectives take a device per iteration, exposed and hidden together (Result.comm_by_kind: the time the model prices
each of them at, on that level), more than the whole iteration's. Then the overlaps it assumed cannot all hold,
and the iteration takes at least that long. A lecturer's walk (2026-12-07): the search's second-fastest gpt3-175b
strategy on 1,024 A100s (d 64, t 16 over two nodes, ZeRO-3, TP overlap) moved 523 GB a GPU over the inter-node
network, 19 s of that level's time, in an iteration priced at 16.5 s.
"""
from __future__ import annotations

SLACK = 1e-6
"""Relative rounding allowed before a level counts as oversubscribed."""


def link_busy_s(result) -> dict:
    """Seconds each machine level's collectives take a device per iteration, exposed and hidden, by level name."""
    busy = {}
    for row in result.comm_by_kind:
        seconds = float(row.get("time_s", 0.0)) + float(row.get("hidden_s", 0.0))
        if row.get("level"):
            busy[row["level"]] = busy.get(row["level"], 0.0) + seconds
    return busy


def oversubscribed(result) -> dict:
    """The levels whose collectives take longer than the iteration (link_busy_s), level -> seconds."""
    limit = result.iteration_time_s * (1 + SLACK)
    return {level: s for level, s in link_busy_s(result).items() if s > limit}


def contention_warning(result) -> str:
    """One line where a level is oversubscribed (module docstring), '' otherwise."""
    over = oversubscribed(result)
    if not over:
        return ""
    level, seconds = max(over.items(), key=lambda kv: kv[1])
    return (f"Network oversubscribed: the collectives on the {level} level take {seconds:.3g} s a device each "
            f"iteration, exposed and hidden together, longer than the iteration's {result.iteration_time_s:.3g} s. "
            f"The model hides each under compute as if it had the link to itself; sharing it, they cannot all hide: "
            f"expect at least {seconds:.3g} s (the Cost page's communication table lists them).")
