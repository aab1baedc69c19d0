"""Many students at once: N concurrent sessions driving the running app over its websocket.

Each session does what a browser does (Streamlit's own protocol: BackMsg rerun
requests with the value of every widget on the page, as a browser holds them (`browser_value`), ForwardMsg deltas
until script_finished): load the
default page (Start here), open the Cost page, change d in the sidebar, open the Strategy page, drag the last layer
of stage 0 into stage 1 (the sortables component's value), open Timelines, change t.
Sessions start staggered over `--ramp` seconds and think `--think` seconds between
actions. Prints p50/p95/max per action, failed sessions, and the server's CPU and
RSS: the processes of the server this script started (and their children), or with --url the
`streamlit run app.py` processes running from this checkout (or --server-pids), with their children; and apart, the
serving interpreter's own CPU seconds per page run (polls included), the figure that does not depend on how busy
the machine is: on two cores p95 <= 1 s for 30 sessions acting at once needs <= ~67 ms of it per action; and this
script's own CPU (the browsers' share of the work: on one machine it takes cores from the server). An action
ends at the first script_finished that is not FINISHED_EARLY_FOR_RERUN. Asserts nothing. --port: the port of the
server it starts (default 8650), so that two checkouts can measure at once.

--diverse: each session opens its own link: its own model (a preset with a hidden size no other session
has, sent as an uploaded model travels, base64 JSON in `model_spec`: a structure nobody compiled yet) and
its own strategy; after the seven actions it opens Search and runs a search of that model. The search runs in
the server's worker pool (issue 31 item 4): "search" is the time from the click until the page shows the
result, "search click" the click's own page run, "poll" each rerun of the progress fragment that the session
sends every 0.5 s meanwhile (as a browser does for st.fragment(run_every=...)); --no-search leaves it out. With
BRIDGING_DL_WORKERS=0 in the server's environment the search runs in the page's own run (as before the pool).

--busy: three sessions only, as the issue's check: one uploads a big model (llama3.1-405b, as a link's
model_spec), one runs a large search (gpt3-175b on 1,024 GPUs), and the third reruns pages meanwhile (every
--busy-think seconds, until both have finished: enough reruns for a p95); they are reported as "rerun (busy)".

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
from streamlit.proto.WidgetStates_pb2 import WidgetState

ROOT = Path(__file__).resolve().parents[1]
ACTIONS = ("load", "open cost", "change d", "open strategy", "drag", "open timelines", "change t")
DIVERSE_ACTIONS = ACTIONS + ("open search", "search click", "poll", "search")
BUSY_ACTIONS = ("rerun (busy)", "big upload", "large search")
RESULT_MARKS = ("raw choices", "cancelled", "No strategy fits", "error: ")   # the Search page's outcomes
DIVERSE_MODELS = ("gpt-1.7b", "llama2-7b", "gpt-7.5b", "llama3-8b", "classroom-gpt", "megatron-22b", "tiny-gpt",
                  "gpt-3.6b")
EARLY = "FINISHED_EARLY_FOR_RERUN"
TRACE, T0 = [], [0.0]       # --trace: each page action's start (seconds from the first session's) and duration


class Session:
    """One browser tab: its widgets (id by key), the pages, and the widget states it sends."""

    def __init__(self, ws):
        self.ws, self.widgets, self.pages, self.page = ws, {}, {}, ""
        self.fragment, self.alerts = "", []      # the running job's polling fragment; alert texts seen
        self.values, self.shown = {}, set()      # widget id -> its value as the browser holds it; ids on the page

    async def poll(self, timeout: float = 120.0) -> float:
        """One auto-rerun of the progress fragment, as the browser sends it every run_every seconds."""
        msg = BackMsg()
        msg.rerun_script.page_script_hash = self.page
        msg.rerun_script.fragment_id = self.fragment
        msg.rerun_script.is_auto_rerun = True
        return await self._send(msg, timeout, page_run=False)

    async def rerun(self, changed=None, page: str | None = None, timeout: float = 120.0, query: str = "") -> float:
        msg = BackMsg()
        msg.rerun_script.query_string = query
        if page is not None:
            self.page = self.pages[page]
        msg.rerun_script.page_script_hash = self.page
        changed = list(changed or [])
        for state in changed:
            if state.WhichOneof("value") != "trigger_value":    # a click is sent once; a value stays
                self.values[state.id] = state
        ids = {state.id for state in changed}
        msg.rerun_script.widget_states.widgets.extend(
            changed + [state for ident, state in self.values.items() if ident in self.shown and ident not in ids])
        return await self._send(msg, timeout)

    async def _send(self, msg, timeout: float, page_run: bool = True) -> float:
        start = time.perf_counter()
        await self.ws.send(msg.SerializeToString())
        shown = set()
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
                    held = browser_value(ident, inner, ident in self.values)
                    if held is not None:
                        self.values[ident] = held
                    shown.add(ident)
                if which == "exception":
                    raise RuntimeError(f"exception element: {inner.message}")
                if which == "alert":
                    error = inner.format == type(inner).ERROR
                    self.alerts.append(("error: " if error else "") + inner.body)
            elif kind == "auto_rerun":
                self.fragment = fm.auto_rerun.fragment_id
            elif kind == "navigation":
                self.pages = {p.url_pathname or "default": p.page_script_hash for p in fm.navigation.app_pages}
            elif kind == "script_finished" and ForwardMsg.ScriptFinishedStatus.Name(fm.script_finished) != EARLY:
                if page_run:
                    self.shown = shown      # the browser forgets the widgets a page run no longer shows
                return time.perf_counter() - start           # a run that completed, not one cut for a rerun

    def widget(self, part: str):
        for key, (ident, inner) in self.widgets.items():
            if part in key:
                return ident, inner
        raise KeyError(part)


def browser_value(ident: str, inner, known: bool):
    """The value a browser holds for widget `inner` as a page run draws it: the value the script set (`set_value`,
    sent once, when session state changed it: a link's t, p and B), else, for a widget it has not seen, the
    widget's default; None: keep what it holds (the user's own choice). Widgets of other kinds (buttons, the
    drag component) send only when used. A browser sends every value it holds with each rerun; sending only the
    widget an action changed (before 2026-12-07) let the values a script set fall back to their defaults at the next
    run: the diverse sessions' own strategies (p 1, B 64) became the default widgets' (p 8, B 1,536)."""
    kind, state = type(inner).__name__, WidgetState()
    state.id = ident
    fresh = bool(getattr(inner, "set_value", False))
    if not fresh and known:
        return None
    if kind == "Selectbox":
        if fresh and inner.HasField("raw_value"):
            state.string_value = inner.raw_value
        elif inner.HasField("default") and 0 <= inner.default < len(inner.options):
            state.string_value = inner.options[inner.default]
        else:
            return None
    elif kind == "Slider" and inner.options:                # select_slider: the formatted options
        chosen = list(inner.raw_value) if fresh and len(inner.raw_value) else \
            [inner.options[int(i)] for i in (inner.value if fresh else inner.default)]
        state.string_array_value.data.extend(chosen)
    elif kind == "Slider":
        state.double_array_value.data.extend(inner.value if fresh else inner.default)
    elif kind == "NumberInput":
        number = inner.value if fresh and inner.HasField("value") else inner.default if inner.HasField("default") \
            else None
        if number is None:
            return None
        state.double_value = number
    elif kind == "Checkbox":
        state.bool_value = inner.value if fresh else inner.default
    elif kind == "MultiSelect":
        state.string_array_value.data.extend(list(inner.raw_values) if fresh else
                                             [inner.options[i] for i in inner.default])
    elif kind == "TextInput":
        state.string_value = inner.value if fresh else inner.default
    else:
        return None
    return state


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
    uploaded model travels (model_spec), and a strategy of its own (d, t; two stages, for the drag)."""
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
    strategy = Strategy(dp=max(1, 16 // tp), tp=tp, pp=2, micro_batch=1, global_batch=64)
    params = encode(model, load_cluster("dgx-a100-80gb"), strategy)
    return urlencode({k: v for k, v in params.items() if v})


async def student(url: str, delay: float, think: float, results: dict, failures: list, query: str = "",
                  diverse: bool = False, searches: bool = True):
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
            if diverse and searches:
                steps += [("open search", lambda: s.rerun(page="search")),
                          ("search", lambda: search(s, results))]
            for name, step in steps:
                began = time.perf_counter()
                took = await step()
                if took is not None:
                    results[name].append(took)
                    TRACE.append({"action": name, "start_s": began - T0[0], "took_s": took})
                await asyncio.sleep(think * random.uniform(0.5, 1.5))
    except Exception as err:                       # a failed session is counted, not fatal
        failures.append(f"{type(err).__name__}: {err}"[:200])


async def search(s: Session, results: dict, timeout: float = 900.0):
    """Click Search, then poll the progress fragment every 0.5 s until the page shows the outcome; records
    "search click" and each "poll", returns the whole wait."""
    start = time.perf_counter()
    s.alerts, s.fragment = [], ""
    results["search click"].append(await s.rerun([button_state(s, "Search")], timeout=600))
    while not any(mark in alert for alert in s.alerts for mark in RESULT_MARKS):
        if time.perf_counter() - start > timeout:
            raise TimeoutError("the search never finished")
        await asyncio.sleep(0.5)
        if s.fragment:
            results["poll"].append(await s.poll())
        else:                               # no fragment: rerun the page as a browser would on a rerun
            await s.rerun()
    return time.perf_counter() - start


def busy_query(model: str, tp: int, pp: int, gpus: int, global_batch: int) -> str:
    """A link to `model` (made unseen: renamed, each head 8 wider) on dgx-a100-80gb with its own strategy."""
    import dataclasses
    from urllib.parse import urlencode
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from explorer.io.clusters import load_cluster
    from explorer.io.models import load_model
    from explorer.io.share import encode
    from explorer.strategy.strategy import Strategy
    base = load_model(model)
    spec = dataclasses.replace(base, name=f"busy-{model}", hidden=base.hidden + 8 * base.heads)
    strategy = Strategy(dp=gpus // (tp * pp), tp=tp, pp=pp, micro_batch=1, global_batch=global_batch)
    return urlencode({k: v for k, v in encode(spec, load_cluster("dgx-a100-80gb"), strategy).items() if v})


async def busy(url: str, results: dict, failures: list, think: float):
    """One session uploads a big model and opens its cost, one searches gpt3-175b on 1,024 GPUs, and a third
    reruns pages (changing d, every `think` seconds) from the moment the search starts until both the search
    and the upload have finished (its reruns: "rerun (busy)")."""
    searching, search_done, upload_done = asyncio.Event(), asyncio.Event(), asyncio.Event()

    async def upload():
        try:
            async with websockets.connect(f"{url}/_stcore/stream", max_size=None, open_timeout=120) as ws:
                s = Session(ws)
                await asyncio.wait_for(searching.wait(), 300)
                results["big upload"].append(await s.rerun(query=busy_query("llama3.1-405b", 8, 16, 1024, 1024),
                                                            timeout=600))
                results["big upload"].append(await s.rerun(page="cost", timeout=600))
        finally:
            upload_done.set()

    async def large_search():
        try:
            async with websockets.connect(f"{url}/_stcore/stream", max_size=None, open_timeout=120) as ws:
                s = Session(ws)
                await s.rerun(query=busy_query("gpt3-175b", 8, 8, 1024, 1536))
                await s.rerun(page="search")
                searching.set()
                results["large search"].append(await search(s, results, timeout=300))
                print("  large search:", next((a for a in s.alerts if any(m in a for m in RESULT_MARKS)), "")[:160])
        finally:
            searching.set()            # never leave the others waiting
            search_done.set()

    async def third():
        async with websockets.connect(f"{url}/_stcore/stream", max_size=None, open_timeout=120) as ws:
            s = Session(ws)
            await s.rerun()
            await s.rerun(page="cost")
            await asyncio.wait_for(searching.wait(), 300)
            d = 0
            while not (search_done.is_set() and upload_done.is_set()):
                d = 1 - d
                results["rerun (busy)"].append(await s.rerun([slider_state(s, "w_dp", lambda o, d=d: o.index(
                    ("8", "16")[d]))]))
                await asyncio.sleep(think * random.uniform(0.5, 1.5))

    for outcome in await asyncio.gather(upload(), large_search(), third(), return_exceptions=True):
        if isinstance(outcome, Exception):
            failures.append(f"{type(outcome).__name__}: {outcome}"[:200])


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


def serving_pids() -> list:
    """The `streamlit run app.py` (or serve/warm_start.py) interpreters whose working directory is this checkout (not a test's or another
    checkout's, nor a profiler wrapping one): the processes that run the page scripts."""
    out = subprocess.run(["pgrep", "-f", "streamlit run app.py|serve/warm_start.py"], capture_output=True,
                         text=True).stdout.split()
    mine = []
    for pid in map(int, out):
        try:
            program = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].rsplit(b"/", 1)[-1]
            if pid != os.getpid() and program.startswith(b"python") and Path(f"/proc/{pid}/cwd").resolve() == ROOT:
                mine.append(pid)
        except OSError:
            pass
    return mine


def server_pids(started=None, given=None) -> list:
    """The server's own processes: `given` (--server-pids), else the one this script started, else serving_pids();
    and their children (the worker processes: given pids' too, which an earlier version left out)."""
    mine = list(given) if given else [started] if started is not None else serving_pids()
    return list(dict.fromkeys(mine + [child for pid in mine for child in _children(pid)]))   # a worker given too: once


async def main_async(args):
    actions = BUSY_ACTIONS + ("search click", "poll") if args.busy else DIVERSE_ACTIONS if args.diverse else ACTIONS
    results = {name: [] for name in set(actions) | set(DIVERSE_ACTIONS)}
    failures = []
    pids = server_pids(args.started, args.server_pids)
    cpu0, _ = cpu_rss(pids)
    serving = set(args.server_pids or ([args.started] if args.started else serving_pids()))
    serving0, _ = cpu_rss(serving)      # the interpreters that run the page scripts (not their workers)
    queries = [diverse_query(i) if args.diverse else "" for i in range(args.sessions)]   # before the clocks start
    client0 = time.process_time()   # this script's own CPU: on one machine it competes with the server
    wall0 = T0[0] = time.perf_counter()
    rss_peak, seen = 0, {}           # pid -> its CPU seconds when last seen (worker processes come and go)

    def sample():
        current = server_pids(args.started, args.server_pids)
        rss = 0
        for pid in current:
            cpu, mem = cpu_rss([pid])
            seen[pid] = max(seen.get(pid, 0.0), cpu)
            rss += mem
        return rss

    async def watch():
        nonlocal rss_peak
        while True:
            rss_peak = max(rss_peak, sample())
            await asyncio.sleep(0.5)
    watcher = asyncio.create_task(watch())
    if args.busy:
        await busy(args.url, results, failures, args.busy_think)
    else:
        await asyncio.gather(*(student(args.url, args.ramp * i / max(1, args.sessions - 1), args.think, results,
                                       failures, queries[i], args.diverse,
                                       not args.no_search)
                               for i in range(args.sessions)))
    watcher.cancel()
    wall = time.perf_counter() - wall0
    client = time.process_time() - client0
    sample()
    cpu1 = sum(seen.values())       # the server and every worker it started (a new one from 0 s)
    pids = sorted(seen)
    mode = "busy " if args.busy else "diverse " if args.diverse else ""
    print(f"{3 if args.busy else args.sessions} {mode}sessions against {args.url} "
          f"({len(pids)} server processes): {len(failures)} failed, {wall:.1f} s wall, "
          f"server CPU {100 * (cpu1 - cpu0) / wall:.0f} % of one core, peak RSS {rss_peak / 2**20:.0f} MiB")
    everything = []
    runs = sum(len(results[name]) for name in results if name not in ("search", "large search"))
    serving_cpu = sum(cpu for pid, cpu in seen.items() if pid in serving) - serving0
    print(f"  serving interpreter{'s' if len(serving) > 1 else ''}: {serving_cpu:.1f} CPU-s for {runs} page runs "
          f"(polls included), {1000 * serving_cpu / max(1, runs):.0f} ms each; worker processes "
          f"{cpu1 - cpu0 - serving_cpu:.1f} CPU-s")
    print(f"  this client (the browsers' part, parsing every message): {client:.1f} CPU-s, "
          f"{100 * client / wall:.0f} % of one core of the {os.cpu_count()} this machine shares with the server")
    for name in actions:
        xs = sorted(results[name])
        if name not in ("search", "large search", "big upload", "poll"):  # page actions: no whole search, no poll
            everything += xs
        if xs:
            p95 = xs[min(len(xs) - 1, int(0.95 * len(xs)))]
            print(f"  {name:<16} n={len(xs):<4} p50 {statistics.median(xs):6.2f} s   p95 {p95:6.2f} s   "
                  f"max {xs[-1]:6.2f} s")
    if everything:
        everything.sort()
        print(f"  {'page actions':<16} n={len(everything):<4} p50 {statistics.median(everything):6.2f} s   "
              f"p95 {everything[int(0.95 * (len(everything) - 1))]:6.2f} s")
    for f in failures[:5]:
        print("  failure:", f)
    if args.trace:
        Path(args.trace).write_text(json.dumps(TRACE))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sessions", type=int, default=30)
    parser.add_argument("--url", help="ws://host:port of a running server (default: start one)")
    parser.add_argument("--port", type=int, default=8650, help="the port of the server this script starts")
    parser.add_argument("--ramp", type=float, default=10.0, help="seconds over which sessions start")
    parser.add_argument("--think", type=float, default=2.0, help="seconds between a session's actions")
    parser.add_argument("--warm", type=int, default=4,
                        help="sessions run one by one before measuring (each server process's first run is cold)")
    parser.add_argument("--diverse", action="store_true",
                        help="each session its own (unseen) model and strategy, then a search")
    parser.add_argument("--no-search", action="store_true",
                        help="--diverse without the search at the end (the seven page actions only)")
    parser.add_argument("--busy", action="store_true",
                        help="three sessions: a big upload, a large search, and a third one's reruns meanwhile")
    parser.add_argument("--busy-think", type=float, default=0.25,
                        help="--busy: seconds between the third session's reruns (enough reruns for a p95)")
    parser.add_argument("--trace", help="write each page action's start and duration (JSON) to this file")
    parser.add_argument("--server-pids", type=lambda text: [int(x) for x in text.split(",")],
                        help="comma-separated pids to count as the server (default: see the module docstring)")
    args = parser.parse_args()
    server, args.started = None, None
    if not args.url:
        port = args.port
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
