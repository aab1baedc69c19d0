"""Many students at once: N concurrent sessions driving the running app over its websocket.

Each session does what a browser does (Streamlit's own protocol: BackMsg rerun
requests with widget states, ForwardMsg deltas until script_finished): load the
default page (Start here), open the Cost page, change d in the sidebar, open the Strategy page, drag the last layer
of stage 0 into stage 1 (the sortables component's value), open Timelines, change t.
Sessions start staggered over `--ramp` seconds and think `--think` seconds between
actions. Prints p50/p95/max per action, failed sessions, and the server's CPU and
RSS: the processes of the server this script started (and their children), or with --url the
`streamlit run app.py` processes running from this checkout (or --server-pids). An action ends at
the first script_finished that is not FINISHED_EARLY_FOR_RERUN. Asserts nothing.

--diverse: each session opens its own link: its own model (a preset with a hidden size no other session
has, sent as an uploaded model travels, base64 JSON in `model_spec`: a structure nobody compiled yet) and
its own strategy; after the seven actions it opens Search and runs a search of that model.

    python benchmarks/bench_load.py --sessions 30                # starts `streamlit run app.py` itself
    python benchmarks/bench_load.py --sessions 30 --diverse      # every session its own model and a search
    python benchmarks/bench_load.py --sessions 100 --url ws://127.0.0.1:8080   # a running server (serve/)
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

import websockets
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

ROOT = Path(__file__).resolve().parents[1]
ACTIONS = ("load", "open cost", "change d", "open strategy", "drag", "open timelines", "change t")
DIVERSE_ACTIONS = ACTIONS + ("open search", "search")
DIVERSE_MODELS = ("gpt-1.7b", "llama2-7b", "gpt-7.5b", "llama3-8b", "classroom-gpt", "megatron-22b", "tiny-gpt",
                  "gpt-3.6b")
EARLY = "FINISHED_EARLY_FOR_RERUN"


class Session:
    """One browser tab: its widgets (id by key), the pages, and the widget states it sends."""

    def __init__(self, ws):
        self.ws, self.widgets, self.pages, self.page = ws, {}, {}, ""

    async def rerun(self, changed=None, page: str | None = None, timeout: float = 120.0, query: str = "") -> float:
        msg = BackMsg()
        msg.rerun_script.query_string = query
        if page is not None:
            self.page = self.pages[page]
        msg.rerun_script.page_script_hash = self.page
        for state in changed or []:
            msg.rerun_script.widget_states.widgets.append(state)
        start = time.perf_counter()
        await self.ws.send(msg.SerializeToString())
        while True:
            raw = await asyncio.wait_for(self.ws.recv(), timeout)
            fm = ForwardMsg()
            fm.ParseFromString(raw)
            kind = fm.WhichOneof("type")
            if kind == "delta" and fm.delta.WhichOneof("type") == "new_element":
                el = fm.delta.new_element
                which = el.WhichOneof("type")
                inner = getattr(el, which)
                ident = getattr(inner, "id", "")
                if ident:
                    self.widgets[ident.rsplit("-", 1)[-1] if "-w_" in ident else ident] = (ident, inner)
                if which == "exception":
                    raise RuntimeError(f"exception element: {inner.message}")
            elif kind == "navigation":
                self.pages = {p.url_pathname or "default": p.page_script_hash for p in fm.navigation.app_pages}
            elif kind == "script_finished" and ForwardMsg.ScriptFinishedStatus.Name(fm.script_finished) != EARLY:
                return time.perf_counter() - start           # a run that completed, not one cut for a rerun

    def widget(self, part: str):
        for key, (ident, inner) in self.widgets.items():
            if part in key:
                return ident, inner
        raise KeyError(part)


def slider_state(session: Session, key: str, pick):
    ident, inner = session.widget(key)
    options = list(inner.options)
    state = BackMsg().rerun_script.widget_states.widgets.add()
    state.id = ident
    state.string_array_value.data.append(options[pick(options)])   # select_slider: the formatted option
    return state


def drag_state(session: Session):
    ident, inner = next((i, x) for k, (i, x) in session.widgets.items() if "stage_drag" in i)
    args = json.loads(inner.json_args)
    columns = args["items"]
    columns[1]["items"].insert(0, columns[0]["items"].pop())
    state = BackMsg().rerun_script.widget_states.widgets.add()
    state.id = ident
    state.json_value = json.dumps(columns)
    return state


def button_state(session: Session, label: str):
    ident, _ = next((i, x) for k, (i, x) in session.widgets.items() if getattr(x, "label", "") == label
                    and "button" in type(x).__name__.lower())
    state = BackMsg().rerun_script.widget_states.widgets.add()
    state.id = ident
    state.trigger_value = True
    return state


def diverse_query(index: int) -> str:
    """Session `index`'s own link: a preset model made unseen (each head 8 (index + 1) wider), sent as an
    uploaded model travels (model_spec), and a strategy of its own (d, t)."""
    import dataclasses
    from urllib.parse import urlencode
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from explorer.io.clusters import load_cluster
    from explorer.io.models import load_model
    from explorer.io.share import encode
    from explorer.strategy.strategy import Strategy
    base = load_model(DIVERSE_MODELS[index % len(DIVERSE_MODELS)])
    model = dataclasses.replace(base, name=f"student-{index}", hidden=base.hidden + 8 * base.heads * (index + 1))
    tp = (1, 2, 4, 8)[index % 4]
    strategy = Strategy(dp=max(1, 16 // tp), tp=tp, pp=1, micro_batch=1, global_batch=64)
    params = encode(model, load_cluster("dgx-a100-80gb"), strategy)
    return urlencode({k: v for k, v in params.items() if v})


async def student(url: str, delay: float, think: float, results: dict, failures: list, query: str = "",
                  diverse: bool = False):
    await asyncio.sleep(delay)
    try:
        async with websockets.connect(f"{url}/_stcore/stream", max_size=None, open_timeout=120) as ws:
            s = Session(ws)
            steps = [("load", lambda: s.rerun(query=query)),
                     ("open cost", lambda: s.rerun(page="cost")),
                     ("change d", lambda: s.rerun([slider_state(s, "w_dp", lambda o: o.index("32"))])),
                     ("open strategy", lambda: s.rerun(page="strategy")),
                     ("drag", lambda: s.rerun([drag_state(s)])),
                     ("open timelines", lambda: s.rerun(page="timeline")),
                     ("change t", lambda: s.rerun([slider_state(s, "w_tp", lambda o: o.index("4"))]))]
            if diverse:
                steps += [("open search", lambda: s.rerun(page="search")),
                          ("search", lambda: s.rerun([button_state(s, "Search")], timeout=600))]
            for name, step in steps:
                results[name].append(await step())
                await asyncio.sleep(think * random.uniform(0.5, 1.5))
    except Exception as err:                       # a failed session is counted, not fatal
        failures.append(f"{type(err).__name__}: {err}"[:200])


def cpu_rss(pids) -> tuple:
    ticks, rss = 0, 0
    for pid in pids:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text().split()
            ticks += int(stat[13]) + int(stat[14])
            rss += int(stat[23]) * os.sysconf("SC_PAGE_SIZE")
        except OSError:
            pass
    return ticks / os.sysconf("SC_CLK_TCK"), rss


def _children(pid: int) -> list:
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            child = int(stat.parent.name)
            out += [child] + _children(child)
    return out


def server_pids(started=None) -> list:
    """The server's own processes: the one this script started and its children, else the `streamlit run
    app.py` processes whose working directory is this checkout (not a test's or another checkout's)."""
    if started is not None:
        return [started] + _children(started)
    out = subprocess.run(["pgrep", "-f", "streamlit run app.py"], capture_output=True, text=True).stdout.split()
    mine = []
    for pid in map(int, out):
        try:
            if pid != os.getpid() and Path(f"/proc/{pid}/cwd").resolve() == ROOT:
                mine.append(pid)
        except OSError:
            pass
    return mine


async def main_async(args):
    actions = DIVERSE_ACTIONS if args.diverse else ACTIONS
    results = {name: [] for name in actions}
    failures = []
    pids = args.server_pids or server_pids(args.started)
    cpu0, _ = cpu_rss(pids)
    wall0 = time.perf_counter()
    rss_peak = 0

    async def watch():
        nonlocal rss_peak
        while True:
            rss_peak = max(rss_peak, cpu_rss(pids)[1])
            await asyncio.sleep(0.5)
    watcher = asyncio.create_task(watch())
    await asyncio.gather(*(student(args.url, args.ramp * i / max(1, args.sessions - 1), args.think, results,
                                   failures, diverse_query(i) if args.diverse else "", args.diverse)
                           for i in range(args.sessions)))
    watcher.cancel()
    wall = time.perf_counter() - wall0
    cpu1, _ = cpu_rss(pids)
    print(f"{args.sessions} {'diverse ' if args.diverse else ''}sessions against {args.url} "
          f"({len(pids)} server processes): {len(failures)} failed, {wall:.1f} s wall, "
          f"server CPU {100 * (cpu1 - cpu0) / wall:.0f} % of one core, peak RSS {rss_peak / 2**20:.0f} MiB")
    everything = []
    for name in actions:
        xs = sorted(results[name])
        everything += xs
        if xs:
            p95 = xs[min(len(xs) - 1, int(0.95 * len(xs)))]
            print(f"  {name:<16} n={len(xs):<4} p50 {statistics.median(xs):6.2f} s   p95 {p95:6.2f} s   "
                  f"max {xs[-1]:6.2f} s")
    if everything:
        everything.sort()
        print(f"  {'every action':<16} n={len(everything):<4} p50 {statistics.median(everything):6.2f} s   "
              f"p95 {everything[int(0.95 * (len(everything) - 1))]:6.2f} s")
    for f in failures[:5]:
        print("  failure:", f)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sessions", type=int, default=30)
    parser.add_argument("--url", help="ws://host:port of a running server (default: start one)")
    parser.add_argument("--ramp", type=float, default=10.0, help="seconds over which sessions start")
    parser.add_argument("--think", type=float, default=2.0, help="seconds between a session's actions")
    parser.add_argument("--warm", type=int, default=4,
                        help="sessions run one by one before measuring (each server process's first run is cold)")
    parser.add_argument("--diverse", action="store_true",
                        help="each session its own (unseen) model and strategy, then a search")
    parser.add_argument("--server-pids", type=lambda text: [int(x) for x in text.split(",")],
                        help="comma-separated pids to count as the server (default: see the module docstring)")
    args = parser.parse_args()
    server, args.started = None, None
    if not args.url:
        port = 8650
        server = subprocess.Popen([sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port),
                                   "--server.headless", "true"], cwd=ROOT, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)
        args.url, args.started = f"ws://127.0.0.1:{port}", server.pid
        time.sleep(8)
    for _ in range(args.warm):
        asyncio.run(warm(args.url))
    try:
        asyncio.run(main_async(args))
    finally:
        if server:
            server.terminate()


async def warm(url: str):
    """One session first, as a lecturer opening the app before class (cold imports and compiles)."""
    await student(url, 0, 0, {name: [] for name in ACTIONS}, [])


if __name__ == "__main__":
    main()
