"""A lesson's setting in its page's address: `?l_pp=8&l_micro_batches=4` on the pipeline lesson.

A lecturer sets a lesson's controls and sends the address; a student who opens it sees the same picture. Each
control is one query parameter, PREFIX + its name, whose value is one of the control's option tokens (`token`:
"on"/"off" for a switch, else the option as text). Reading matches the text against those tokens, never parses or
evaluates it; a value that is not one of them, or a parameter naming no control of the lesson, keeps the default
and is named in one line.

>>> from explorer.lessons import by_slug
>>> lesson = by_slug("pipeline")
>>> encode(lesson, {"schedule": "1f1b", "pp": 8, "micro_batches": 4})
{'l_schedule': '1f1b', 'l_pp': '8', 'l_micro_batches': '4'}
>>> decode(lesson, {"l_pp": "8", "l_micro_batches": "5", "classroom": "1"})
({'pp': 8}, ["link parameter 'l_micro_batches': '5' is not one of 4, 8, 16, 32; kept 8"])
"""
from __future__ import annotations

from urllib.parse import urlencode

PREFIX = "l_"
"""Query parameters of a lesson's controls: PREFIX + the control's name (none of the share link's own names,
explorer/io/share.py, starts with it)."""
SHOWN_CHARS = 40
"""At most this much of a tampered value is quoted back."""


def page_path(lesson) -> str:
    """The lesson page's path in the app (app.py's st.Page url_path): 'learn-pipeline'."""
    return f"learn-{lesson.slug}"


def address(lesson, values: dict) -> str:
    """The lesson at a setting, as a path and query on the app's server (what `explorer lesson` prints).

    >>> from explorer.lessons import by_slug
    >>> address(by_slug("zero"), {"zero": 3, "dp": 8, "model": "gpt-3.6b"})
    '/learn-zero?l_zero=3&l_dp=8&l_model=gpt-3.6b'
    """
    return f"/{page_path(lesson)}?{urlencode(encode(lesson, values))}"


def token(value) -> str:
    """The address's text for one option of a control."""
    return ("on" if value else "off") if isinstance(value, bool) else str(value)


def encode(lesson, values: dict) -> dict:
    """The query parameters of a setting (every control, in the lesson's order)."""
    return {PREFIX + c.name: token(values[c.name]) for c in lesson.controls if c.name in values}


MAX_NAMED = 3
"""Unknown parameters named in the one line that says they were ignored."""


def decode(lesson, params: dict) -> tuple:
    """({control name: option} for each valid parameter, [one line for each one that is not])."""
    values, messages, unknown = {}, [], []
    controls = {PREFIX + c.name: c for c in lesson.controls}
    for key, text in params.items():
        if not key.startswith(PREFIX):
            continue
        control = controls.get(key)
        if control is None:
            unknown.append(key)
            continue
        tokens = [token(option) for option in control.options]
        if text in tokens:
            values[control.name] = control.options[tokens.index(text)]
        else:
            messages.append(f"link parameter {key!r}: {str(text)[:SHOWN_CHARS]!r} is not one of {', '.join(tokens)}; "
                            f"kept {token(control.default)}")
    if unknown:     # one line for them all (a hostile link with 999 of them showed 999 boxes)
        named = ", ".join(repr(k[:SHOWN_CHARS]) for k in unknown[:MAX_NAMED])
        more = f" and {len(unknown) - MAX_NAMED} more" if len(unknown) > MAX_NAMED else ""
        messages.append(f"link parameter{'s' if len(unknown) > 1 else ''} {named}{more}: lesson {lesson.number} has no "
                        f"such control (it has {', '.join(controls)}); ignored")
    return values, messages


__all__ = ["PREFIX", "address", "decode", "encode", "page_path", "token"]
