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
