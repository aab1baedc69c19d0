"""JSON on stdout: always valid JSON (no NaN or Infinity), or one clean error."""
from __future__ import annotations

import json

from explorer.errors import ExplorerError


def dumps(data) -> str:
    """json.dumps(indent=1) refusing NaN and Infinity (which are not JSON) with an ExplorerError."""
    try:
        return json.dumps(data, indent=1, allow_nan=False)
    except ValueError:
        raise ExplorerError("the output holds a number that is not finite (NaN or infinity); "
                            "an input is too extreme") from None
