"""The page actions of `bench_load.py --diverse`, replayed in AppTest, one session at a time: the work of each action
counted as Python calls in the script thread, a figure that does not move with the machine's load.

On the shared 2-core machine the serving interpreter's CPU seconds per action are not load-independent: the same
tree measured 130-248 ms of process CPU per action in this replay at load averages 11-16 (other work's contention
and the virtual machine's steal), so a change of a few percent cannot be seen in CPU time; the number of Python
function calls (and C calls from Python) the page runs make is the same from run to run within about 1 %.
Each session opens its own link (`bench_load.diverse_query`: an unseen model and its own strategy), then: Cost,
change d, Strategy, Timelines, change t, Timelines again (a rerun with nothing changed). One session first, unmeasured
(imports, first compiles). Pair a change with its base by running this in both trees with an empty disk cache each:

    BRIDGING_DL_CACHE=$(mktemp -d) python benchmarks/bench_actions.py --sessions 6
    BRIDGING_DL_CACHE=$(mktemp -d) python benchmarks/bench_actions.py --sessions 6 --cpu   # process CPU instead
"""
from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from pathlib import Path
from urllib.parse import parse_qsl

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

from streamlit.testing.v1 import AppTest   # noqa: E402

from app_pages import state as S            # noqa: E402
from bench_load import diverse_query        # noqa: E402

CALLS = [0]


def _count(frame, event, arg):
    if event in ("call", "c_call"):
        CALLS[0] += 1


def session(index: int, measure, results: dict) -> None:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300)
    for key, value in parse_qsl(diverse_query(index)):
        at.query_params[key] = value
    steps = [("load", at.run),
             ("open cost", lambda: at.switch_page("app_pages/cost.py").run()),
             ("change d", lambda: at.select_slider(key=S.W_DP).set_value(32).run()),
             ("open strategy", lambda: at.switch_page("app_pages/strategy.py").run()),
             ("open timelines", lambda: at.switch_page("app_pages/timeline.py").run()),
             ("change t", lambda: at.select_slider(key=S.W_TP).set_value(4).run()),
             ("rerun timelines", at.run)]
    for name, step in steps:
        before = measure()
        step()
        results.setdefault(name, []).append(measure() - before)
        if at.exception:
            raise RuntimeError(f"{name}: {at.exception}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sessions", type=int, default=6)
    parser.add_argument("--cpu", action="store_true", help="this process's CPU seconds instead of Python calls")
    args = parser.parse_args()
    session(1000, time.process_time, {})             # unmeasured: imports and first compiles
    if args.cpu:
        measure, unit, scale = time.process_time, "ms CPU", 1e3
    else:
        threading.setprofile(_count)                 # every script run is a new thread: counted from its start
        measure, unit, scale = (lambda: CALLS[0]), "k calls", 1e-3
    results: dict = {}
    for index in range(args.sessions):
        session(index, measure, results)
    everything = [x for xs in results.values() for x in xs]
    print(f"{args.sessions} sessions, {len(everything)} actions: {scale * statistics.mean(everything):.1f} {unit} "
          "per action (mean)")
    for name, xs in results.items():
        print(f"  {name:<16} median {scale * statistics.median(xs):8.1f}   mean {scale * statistics.mean(xs):8.1f}")


if __name__ == "__main__":
    main()
