"""The symbol glossary (assets/glossary.json): every symbol of the cost formulas with its meaning,
unit and source, for the Cost page and the LaTeX export.

>>> next(g for g in glossary() if g["symbol"] == "m")["unit"]
'count'
"""
from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

GLOSSARY = Path(__file__).resolve().parents[2] / "assets" / "glossary.json"
FIELDS = ("symbol", "latex", "meaning", "unit", "source")


@lru_cache(maxsize=1)
def _load() -> tuple:
    entries = json.loads(GLOSSARY.read_text(encoding="utf-8"))
    return tuple({key: str(entry[key]) for key in FIELDS} for entry in entries)


def glossary() -> list:
    """Entries (symbol, latex, meaning, unit, source), in the order of the file."""
    return [dict(entry) for entry in _load()]
