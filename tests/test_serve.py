"""serve/serve.sh: N Streamlit processes behind nginx with sticky sessions (a larger class uses more cores).

Drives the served app over its websocket as browsers do (benchmarks/bench_load.py's sessions):
every session completes, both processes do work, and a browser's cookie keeps it on one process.
"""
import asyncio
import os
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import bench_load  # noqa: E402

pytestmark = pytest.mark.skipif(shutil.which("nginx") is None, reason="nginx is not installed (.ci/install adds it)")
PORT, BASE = 8690, 8691


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    run = tmp_path_factory.mktemp("serve")
    env = {"RUN": str(run), "BASE": str(BASE), "PATH": "/usr/sbin:/usr/bin:/bin:" + str(Path(sys.executable).parent),
           "BRIDGING_DL_CACHE": os.environ["BRIDGING_DL_CACHE"]}     # the session's cache (tests/conftest.py)
    subprocess.run(["bash", "serve/serve.sh", "2", str(PORT)], cwd=ROOT, env=env, check=True, timeout=180)
    yield run
    subprocess.run(["bash", "serve/serve.sh", "stop"], cwd=ROOT, env=env, timeout=60)


def pids(run: Path) -> list:
    return [int((run / f"streamlit-{BASE + i}.pid").read_text()) for i in range(2)]


def test_sessions_spread_over_both_processes_and_all_complete(served):
    before = [bench_load.cpu_rss([pid])[0] for pid in pids(served)]
    results, failures = {name: [] for name in bench_load.ACTIONS}, []

    async def many():
        await asyncio.gather(*(bench_load.student(f"ws://127.0.0.1:{PORT}", 0.2 * i, 0.1, results, failures)
                               for i in range(8)))
    asyncio.run(many())
    assert failures == []
    assert all(len(times) == 8 for times in results.values())
    after = [bench_load.cpu_rss([pid])[0] for pid in pids(served)]
    assert all(a > b for a, b in zip(after, before)), "each process served some sessions"


def test_a_browser_stays_on_its_process(served):
    first = urllib.request.urlopen(f"http://127.0.0.1:{PORT}/")
    cookie = first.headers["Set-Cookie"].split(";")[0]
    assert cookie.startswith("explorer_backend=")
    again = urllib.request.urlopen(urllib.request.Request(f"http://127.0.0.1:{PORT}/", headers={"Cookie": cookie}))
    assert again.headers["Set-Cookie"].split(";")[0] == cookie


def test_warm_start_imports_the_library_before_streamlit_runs():
    """serve/warm_start.py (issue 31: a session closed 1 s into a fresh server's first run must stop within 1 s,
    and imports cannot be interrupted): what every first run imports is imported before the server starts, and
    the rest is `streamlit run app.py` itself."""
    check = ("import runpy, sys; ns = runpy.run_path('serve/warm_start.py'); ns['preload'](); "
             "print(all(name in sys.modules for name in ns['PRELOAD']), 'explorer.facade' in ns['PRELOAD'])")
    out = subprocess.run([sys.executable, "-c", check], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.stdout.split() == ["True", "True"], out.stderr[-2000:]
    helped = subprocess.run([sys.executable, "serve/warm_start.py", "--help"], cwd=ROOT, capture_output=True,
                            text=True, timeout=300)
    assert helped.returncode == 0 and "--server.port" in helped.stdout + helped.stderr
    assert "python serve/warm_start.py --server.port" in (ROOT / "serve" / "serve.sh").read_text()


def test_a_failed_warm_up_still_starts_the_server():
    """A module of PRELOAD that fails to import (a broken install, a renamed page helper) must not leave a dead
    port: warm() says what failed in one line and returns False, and main() goes on to `streamlit run`."""
    check = ("import runpy; ns = runpy.run_path('serve/warm_start.py'); "
             "ns['preload'].__globals__['PRELOAD'] = ('explorer.no_such_module',); print(ns['warm']())")
    out = subprocess.run([sys.executable, "-c", check], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.stdout.split() == ["False"], out.stderr[-2000:]
    assert "not warmed (ModuleNotFoundError" in out.stderr and "Traceback" not in out.stderr
    assert "kill -0" in (ROOT / "serve" / "serve.sh").read_text()      # serve.sh stops waiting for a dead process


def test_a_port_among_the_streamlit_ports_is_refused_before_anything_starts(tmp_path):
    """nginx on one of the Streamlit processes' ports could not listen, and every client then reached one process
    directly (a load test measured one process for two): refused in one line, nothing started."""
    env = {"RUN": str(tmp_path), "BASE": "8695", "PATH": "/usr/sbin:/usr/bin:/bin:" + str(Path(sys.executable).parent)}
    out = subprocess.run(["bash", "serve/serve.sh", "2", "8696"], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 2 and "port 8696 is one of the Streamlit processes' ports 8695-8696" in out.stderr
    assert not list(tmp_path.glob("streamlit-*.pid"))


def test_a_port_that_is_not_a_number_is_refused_in_one_line(tmp_path):
    env = {"RUN": str(tmp_path), "BASE": "8695", "PATH": "/usr/sbin:/usr/bin:/bin:" + str(Path(sys.executable).parent)}
    out = subprocess.run(["bash", "serve/serve.sh", "2", "80a"], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 2 and out.stderr.strip() == "serve.sh: N, PORT and BASE are numbers, not '80a'"
