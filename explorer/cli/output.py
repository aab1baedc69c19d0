"""JSON on stdout: always valid JSON (no NaN or Infinity), or one clean error."""
from __future__ import annotations

import json
from pathlib import Path

from explorer.errors import ExplorerError


def dumps(data) -> str:
    """json.dumps(indent=1) refusing NaN and Infinity (which are not JSON) with an ExplorerError."""
    try:
        return json.dumps(data, indent=1, allow_nan=False)
    except ValueError:
        raise ExplorerError("the output holds a number that is not finite (NaN or infinity); "
                            "an input is too extreme") from None


def write_or_print(text: str, out: str | None) -> None:
    """`text` into the file `out` (one clean error if it cannot be written), or onto stdout, ending in a newline."""
    if out:
        try:
            Path(out).write_text(text, encoding="utf-8")
        except OSError as err:
            raise ExplorerError(f"cannot write {out}: {err.strerror or err}") from None
    else:
        print(text, end="" if text.endswith("\n") else "\n")
