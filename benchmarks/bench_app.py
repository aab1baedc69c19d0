"""Streamlit app speed (issue: app). Prints figures; asserts nothing.

Server-side times measured with AppTest (the script run, without the browser):
* first page load: a fresh Python process runs app.py once (cold imports, cold
  cost-model compile, every chart of the default page) -- target <= 3 s;
* rerun after changing one control, for gpt3-175b with every chart of each page:
  d (a new strategy of the same structure) and t (a new structure: new plan and
  compile), each value seen for the first time, so no figure cache helps --
  target <= 300 ms.
"""
from __future__ import annotations

import logging
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGES = ("cost", "strategy", "model", "timeline", "compare", "export")
FIRST_LOAD = """
import time
t0 = time.perf_counter()
from streamlit.testing.v1 import AppTest
t1 = time.perf_counter()
at = AppTest.from_file("app.py", default_timeout=120)
at.run()
t2 = time.perf_counter()
assert not at.exception, at.exception
print(t1 - t0, t2 - t1)
"""
D_VALUES = (8, 32, 4, 64, 2, 16)       # m = B/(b d) from 768 (d=2) to 24 (d=64) micro-batches
T_VALUES = (4, 2, 8)


def first_load() -> tuple:
    out = subprocess.run([sys.executable, "-c", FIRST_LOAD], cwd=ROOT, capture_output=True, text=True, check=True)
    import_s, run_s = (float(x) for x in out.stdout.split()[-2:])
    return import_s, run_s


def reruns(page: str, key: str, values: tuple) -> list:
    import streamlit as st
    from streamlit.testing.v1 import AppTest
    from explorer.cost.cold import RESULTS
    st.cache_resource.clear()           # no figure left over from another page's measurement
    st.cache_data.clear()
    RESULTS.clear()                     # nor an evaluation (explorer/cost/checked.py remembers them)
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.run()
    at.switch_page(f"app_pages/{page}.py").run()
    times = []
    for value in values:
        widget = at.sidebar.select_slider(key=key).set_value(value)
        start = time.perf_counter()
        widget.run()
        times.append(time.perf_counter() - start)
        assert not at.exception, at.exception
    return times


def main():
    for name in ("streamlit", "streamlit.runtime.caching.cache_data_api",
                 "streamlit.runtime.caching.cache_resource_api"):
        logging.getLogger(name).setLevel(logging.ERROR)
    import_s, run_s = first_load()
    print(f"{'first page load (cost page), script run':<58}{run_s * 1e3:9.0f} ms  (target <= 3000 ms)"
          f"{'  ok' if run_s <= 3 else '  OVER TARGET'}")
    print(f"{'  + importing streamlit in a fresh process':<58}{import_s * 1e3:9.0f} ms")
    worst = 0.0
    for page in PAGES:
        for key, values, what in (("w_dp", D_VALUES, "d"), ("w_tp", T_VALUES, "t")):
            times = reruns(page, key, values)
            med, top = statistics.median(times), max(times)
            worst = max(worst, med)
            verdict = "  ok" if med <= 0.3 else "  OVER TARGET"
            print(f"{f'rerun after changing {what}, {page} page (median / max)':<58}"
                  f"{med * 1e3:9.0f} ms / {top * 1e3:5.0f} ms  (target <= 300 ms){verdict}")
    print(f"{'worst median rerun':<58}{worst * 1e3:9.0f} ms")


if __name__ == "__main__":
    main()
