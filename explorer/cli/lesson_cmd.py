"""python -m explorer lesson [SLUG|N] [--set NAME=VALUE ...] [--json]: a lesson's question answered.

Without SLUG: the eight lessons (with --json, one JSON object {"lessons": [...]}). With it: the setting, the question, the model's answer and the
formula with its source, so a lecturer can prepare the numbers of a class ahead of time.
"""
from __future__ import annotations

from explorer.cli.output import dumps
from explorer.errors import ExplorerError


def register(sub) -> None:
    cmd = sub.add_parser("lesson", help="the lessons; one lesson's question answered for a setting")
    cmd.add_argument("lesson", nargs="?", help="slug or number (omit to list the lessons)")
    cmd.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                     help="a control's value, e.g. --set micro_batches=16 (repeatable)")
    cmd.add_argument("--json", action="store_true")
    cmd.set_defaults(run=run)


def _lesson(name: str):
    from explorer.lessons import LESSONS, by_slug   # pandas and plotly load only when run
    if name.isdigit() and 1 <= int(name) <= len(LESSONS):
        return LESSONS[int(name) - 1]
    return by_slug(name)


def _values(lesson, pairs: list) -> dict:
    """NAME=VALUE pairs matched against each control's options by their text (nothing is evaluated)."""
    values = {}
    for pair in pairs:
        name, sep, raw = pair.partition("=")
        control = next((c for c in lesson.controls if c.name == name), None)
        if not sep or control is None:
            raise ExplorerError(f"--set {pair!r}: use NAME=VALUE with NAME one of "
                                f"{', '.join(c.name for c in lesson.controls)}")
        match = [o for o in control.options if raw in (str(o), control.text(o))]
        if not match:
            raise ExplorerError(f"--set {name}: {raw!r} is not one of "
                                f"{', '.join(str(o) for o in control.options)}")
        values[name] = match[0]
    return lesson.values(values)


def _listing(as_json: bool) -> int:
    """The eight lessons with their controls: text, or (--json) one JSON object {"lessons": [...]}."""
    from explorer.lessons import LESSONS   # pandas and plotly load only when run
    if as_json:
        print(dumps({"lessons": [{"number": lesson.number, "slug": lesson.slug, "title": lesson.title,
                                  "controls": [{"name": c.name, "options": [_plain(o) for o in c.options],
                                                "default": _plain(c.default)} for c in lesson.controls]}
                                 for lesson in LESSONS]}))
        return 0
    for lesson in LESSONS:
        controls = ", ".join(f"{c.name} ∈ {{{', '.join(map(str, c.options))}}}" for c in lesson.controls)
        print(f"{lesson.number}. {lesson.slug:<16} {lesson.title}\n   controls: {controls}")
    return 0


def _plain(option):
    """A control's option as JSON has it (numbers, text, true/false, null kept; anything else as text)."""
    return option if option is None or isinstance(option, (bool, int, float, str)) else str(option)


def run(args) -> int:
    if args.set and not args.lesson:
        raise ExplorerError("--set needs a lesson (slug or number); without one the lessons are listed")
    if not args.lesson:
        return _listing(args.json)
    lesson = _lesson(args.lesson)
    values = _values(lesson, args.set)
    reveal = lesson.reveal(values)
    if args.json:
        print(dumps({"lesson": lesson.slug, "values": dict(values), "question": reveal.question,
                     "answer": reveal.answer, "unit": reveal.unit, "answer_text": reveal.answer_text,
                     "compared_with": reveal.now, "explanation": reveal.explanation,
                     "formula": lesson.formula_text, "source": lesson.source,
                     "address": lesson.address(values)}))
        return 0
    print(f"Lesson {lesson.number}: {lesson.title}")
    print("setting: " + ", ".join(f"{c.name} = {c.text(values[c.name])}" for c in lesson.controls))
    print(f"formula: {lesson.formula_text}\nsource: {lesson.source}\n")
    print(f"{reveal.question}\nanswer: {reveal.answer_text}"
          + (f"  ({reveal.now_label}: {reveal.now_text})" if reveal.now_text else ""))
    print(reveal.explanation)
    print(f"\nthis setting in the app: {lesson.address(values)} (after the server's address; the class opens the "
          "same picture)")
    return 0
