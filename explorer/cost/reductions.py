"""numpy meanings of the stage reductions of explorer.symbols (StageSum, StageMax, StageArgMax,
AtStage, the suffix sums and maxima, each schedule's stage ends): what compiled super-step terms
call, with or without sympy loaded."""
from __future__ import annotations

import numpy as np

from explorer.schedules.critical_path import stage_ends
from explorer.schedules.registry import SCHEDULES, on_register


def _numpy_stage_functions() -> dict:
    def at_stage(x, k):
        x, k = np.asarray(x, dtype=float), np.asarray(k)
        if x.ndim == 0 or x.shape[0] == 1:          # the same on every stage
            return np.broadcast_to(x if x.ndim == 0 else x[0], np.broadcast_shapes(x.shape[1:], k.shape))
        if x.ndim == 2 and k.shape == x.shape[1:]:   # stages x candidates, one stage per candidate
            return x[k, np.arange(x.shape[1])]
        shape = np.broadcast_shapes(x.shape[1:], k.shape)
        x = np.broadcast_to(x, (x.shape[0],) + shape)
        return np.take_along_axis(x, np.broadcast_to(k, shape)[None].astype(int), axis=0)[0]

    def suffix(reduce):
        def run(x):
            x = np.asarray(x, dtype=float)
            return x if x.ndim == 0 else reduce(x[::-1], axis=0)[::-1]
        return run

    def stage_end(schedule):
        return lambda fwd, bwd, weight, m, v: stage_ends(schedule, fwd, bwd, weight, m, v)

    def stage_end_sends(schedule):
        return lambda fwd, bwd, weight, m, v, send_f, send_b: stage_ends(schedule, fwd, bwd, weight, m, v,
                                                                          sends=(send_f, send_b))

    return {"StageSum": lambda x: np.sum(x, axis=0), "StageMax": lambda x: np.max(x, axis=0),
            "StageArgMax": lambda x: np.argmax(x, axis=0), "AtStage": at_stage,
            "StageSuffixSum": suffix(np.cumsum), "StageSuffixMax": suffix(np.maximum.accumulate),
            "StageEndInterleavedSends": stage_end_sends("interleaved")}


def _add_schedule(schedule) -> None:
    """The numpy meaning of `schedule`'s stage-end function (Schedule.function_name): its critical path."""
    name = schedule.name
    STAGE_FUNCTIONS[schedule.function_name] = lambda fwd, bwd, weight, m, v: stage_ends(name, fwd, bwd, weight, m, v)


STAGE_FUNCTIONS = _numpy_stage_functions()
"""numpy meanings of the stage reductions (explorer.symbols StageSum, StageMax, StageArgMax, AtStage,
each registered schedule's stage ends), for lambdify(modules=[STAGE_FUNCTIONS, 'numpy'])."""


def _schedules() -> None:
    for schedule in SCHEDULES.values():
        _add_schedule(schedule)
    on_register(_add_schedule)          # and every schedule registered later (a test's)


_schedules()
