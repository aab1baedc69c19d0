"""The registered schedules, by name. A new schedule: one module and one line here (or, for a schedule
that lives elsewhere -- a test's --, `register`)."""
from __future__ import annotations

from contextlib import contextmanager

from explorer.errors import ExplorerError
from explorer.schedules.dualpipev import DUALPIPE_V
from explorer.schedules.gpipe import GPIPE
from explorer.schedules.interleaved import INTERLEAVED
from explorer.schedules.one_f_one_b import ONE_F_ONE_B
from explorer.schedules.zb_h1 import ZB_H1

SCHEDULES = {s.name: s for s in (ONE_F_ONE_B, GPIPE, INTERLEAVED, ZB_H1, DUALPIPE_V)}
NAMES = tuple(SCHEDULES)
"""The built-in schedules' names, the default (1f1b) first; names() and SCHEDULES include those registered
later (`register`)."""
_HOOKS: list = []


def chunked(name: str) -> bool:
    """Does schedule `name` split each stage into v > 1 model chunks?"""
    return get(name).chunked


def get(name: str):
    """The schedule registered as `name`; ExplorerError listing the names otherwise."""
    try:
        return SCHEDULES[name]
    except (KeyError, TypeError):
        raise ExplorerError(f"schedule {name!r} is unknown; use one of {', '.join(SCHEDULES)}") from None


def names() -> tuple:
    """The registered schedules' names now (NAMES as imported elsewhere is the built-in ones)."""
    return tuple(SCHEDULES)


def names_for(pp: int) -> tuple:
    """The registered schedules that apply to `pp` stages (their own min_stages, the rule table's
    MIN_STAGES rule): what a picker offers. ZB-H1, interleaved and DualPipeV need a pipeline."""
    return tuple(name for name, schedule in SCHEDULES.items() if pp >= schedule.min_stages)


def on_register(hook) -> None:
    """Call hook(schedule) for every schedule registered from now on."""
    _HOOKS.append(hook)


@contextmanager
def register(schedule):
    """Register `schedule` while the block runs (a schedule defined outside this package: a test's)."""
    if schedule.name in SCHEDULES:
        raise ExplorerError(f"schedule {schedule.name!r} is already registered")
    SCHEDULES[schedule.name] = schedule
    for hook in _HOOKS:
        hook(schedule)
    try:
        yield schedule
    finally:
        SCHEDULES.pop(schedule.name, None)
