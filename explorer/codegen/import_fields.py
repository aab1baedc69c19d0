"""The checked reads every config importer shares (explorer.codegen.imports): each problem is one ExplorerError
line naming the field."""
from __future__ import annotations

from explorer.errors import ExplorerError
from explorer.io.models import KINDS


def whole(value, what: str, low: int = 1) -> int:
    """`value` if it is an int (not a bool) >= low."""
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ExplorerError(f"{what} must be a whole number >= {low}, got {str(value)[:40]!r}")
    return value


def number(value, what: str) -> float:
    """`value` as a float if it is a finite number (not a bool) > 0 (the model files' 'positive' kind)."""
    if not KINDS["positive"][0](value):
        raise ExplorerError(f"{what} must be a number > 0, got {str(value)[:40]!r}")
    return float(value)


def flag(value, what: str) -> bool:
    """`value` if it is a bool."""
    if not isinstance(value, bool):
        raise ExplorerError(f"{what} must be true or false, got {str(value)[:40]!r}")
    return value


def choice(value, what: str, choices):
    """`value` if it is one of `choices`; for a dict, what it maps to."""
    if value not in choices:
        raise ExplorerError(f"{what} = {str(value)[:40]!r}: the explorer reads {', '.join(map(str, choices))}")
    return choices[value] if isinstance(choices, dict) else value


def divide(total: int, part: int, what: str) -> int:
    """total / part when part divides total."""
    if part <= 0 or total % part:
        raise ExplorerError(f"{what}: {total} is not divisible by {part}")
    return total // part
