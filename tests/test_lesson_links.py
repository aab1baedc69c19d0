"""A lesson's setting in its address (explorer/lessons/links.py): every setting round-trips; any text is matched
against the options, never parsed, and a value that is no option is named in one line."""
from hypothesis import given, settings, strategies as st

from explorer.lessons import LESSONS
from explorer.lessons.links import PREFIX, decode, encode


def test_every_option_of_every_lesson_round_trips():
    for lesson in LESSONS:
        for control in lesson.controls:
            for option in control.options:
                values = {c.name: c.default for c in lesson.controls} | {control.name: option}
                assert decode(lesson, encode(lesson, values)) == (values, []), (lesson.slug, control.name, option)


@settings(max_examples=200, deadline=None)
@given(lesson=st.sampled_from(LESSONS),
       params=st.dictionaries(st.one_of(st.text(max_size=30), st.text(max_size=12).map(lambda x: PREFIX + x)),
                              st.text(max_size=300), max_size=6))
def test_any_address_gives_options_or_one_line_messages(lesson, params):
    for control in lesson.controls:          # a tampered value of a real control too
        params.setdefault(PREFIX + control.name, "1; rm -rf /\n<img src=x>")
    values, messages = decode(lesson, params)
    options = {c.name: c.options for c in lesson.controls}
    assert all(name in options and value in options[name] for name, value in values.items())
    assert all("\n" not in m and len(m) < 400 for m in messages)
    bad_value = [k for k in params if k.startswith(PREFIX) and k[len(PREFIX):] in options
                 and k[len(PREFIX):] not in values]
    unknown = [k for k in params if k.startswith(PREFIX) and k[len(PREFIX):] not in options]
    assert len(messages) == len(bad_value) + bool(unknown)     # the unknown ones in one line


def test_a_thousand_unknown_parameters_are_one_line():
    """A hostile review: each unknown l_ parameter got a notice of its own, 999 boxes for a crafted link."""
    lesson = LESSONS[3]
    values, messages = decode(lesson, {f"{PREFIX}x{i}": "1" for i in range(999)})
    assert not values and len(messages) == 1
    assert "'l_x0', 'l_x1', 'l_x2' and 996 more" in messages[0] and len(messages[0]) < 400


def test_the_cli_prints_the_address_the_app_reads_back():
    """`explorer lesson pipeline --set pp=8 --json` gives the lesson page's address (app.py's url_path, the
    same function) with the setting; decoding its query gives the setting."""
    import json
    import subprocess
    import sys
    from urllib.parse import parse_qsl, urlsplit

    from explorer.lessons import by_slug
    from explorer.lessons.links import page_path
    out = subprocess.run([sys.executable, "-m", "explorer", "lesson", "pipeline", "--set", "pp=8", "--json"],
                         capture_output=True, text=True, check=True).stdout
    parts = urlsplit(json.loads(out)["address"])
    lesson = by_slug("pipeline")
    assert parts.path == "/" + page_path(lesson) == "/learn-pipeline"
    assert decode(lesson, dict(parse_qsl(parts.query))) == (lesson.values({"pp": 8}), [])
