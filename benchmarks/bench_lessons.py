"""Lesson pages' speed (issue 12, target <= 1 s). Prints figures; asserts nothing.

Server-side times measured with AppTest: each lesson page opened once, then every option of
every control chosen in turn, each for the first time in the process (no figure cache helps,
except where a value returns to one already seen). Printed: median and max of those reruns.
Lesson 8 runs a strategy search for each new setting (its first search also compiles).
"""
from __future__ import annotations

import logging
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from explorer.lessons import LESSONS  # noqa: E402


def reruns(lesson) -> list:
    from streamlit.testing.v1 import AppTest
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.run()
    at.switch_page(f"app_pages/learn_{lesson.number}_{lesson.slug.replace('-', '_')}.py").run()
    times = []
    for control in lesson.controls:
        for option in [o for o in control.options if o != control.default] + [control.default]:
            widget = at.radio(key=f"w_lesson_{lesson.slug}_{control.name}").set_value(option)
            start = time.perf_counter()
            widget.run()
            times.append(time.perf_counter() - start)
            assert not at.exception, at.exception
    return times


def main() -> None:
    logging.getLogger("streamlit").setLevel(logging.ERROR)
    print(f"{'lesson':<28} {'reruns':>6} {'median s':>9} {'max s':>7}")
    for lesson in LESSONS:
        times = reruns(lesson)
        print(f"{lesson.number}. {lesson.slug:<25} {len(times):>6} {statistics.median(times):>9.3f} "
              f"{max(times):>7.3f}")


if __name__ == "__main__":
    main()
