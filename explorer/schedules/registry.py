"""The registered schedules, by name. A new schedule: one module and one line here."""
from explorer.errors import ExplorerError
from explorer.schedules.gpipe import GPIPE
from explorer.schedules.interleaved import INTERLEAVED
from explorer.schedules.one_f_one_b import ONE_F_ONE_B
from explorer.schedules.zb_h1 import ZB_H1

SCHEDULES = {s.name: s for s in (ONE_F_ONE_B, GPIPE, INTERLEAVED, ZB_H1)}
NAMES = tuple(SCHEDULES)
"""Schedule names, the default (1f1b) first."""


def chunked(name: str) -> bool:
    """Does schedule `name` split each stage into v > 1 model chunks?"""
    return get(name).chunked


def get(name: str):
    """The schedule registered as `name`; ExplorerError listing the names otherwise."""
    try:
        return SCHEDULES[name]
    except (KeyError, TypeError):
        raise ExplorerError(f"schedule {name!r} is unknown; use one of {', '.join(NAMES)}") from None
