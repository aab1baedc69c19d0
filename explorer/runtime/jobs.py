"""The jobs a worker process may run (issue 31 item 4): an allowlist of names, plain data in and out.

A pool (explorer/runtime/workers.py) sends a worker a job's name and its arguments as plain data (dicts with
text keys, lists, strings, numbers, bytes; `plain` checks them); the worker looks the name up in the allowlist
(`JOBS`; `SELFTEST_JOBS` only where a pool was built with them: tests of the pool itself) and sends back plain
data (a search's dict, PNG bytes). No function or object is ever pickled to a worker. `run_job` runs one job
and turns every failure into one line. The `*_request` functions build a job's arguments from the library's
objects; `search_result_from_dict` turns a search job's result back into a SearchResult.
"""
from __future__ import annotations

import json
import os
import re
import time
from dataclasses import asdict
from typing import Callable

import plotly.io as pio

from explorer.charts.timeline_views import microstep_view, superstep_view, view_to_plain
from explorer.cost import cache
from explorer.cost.evaluate import Result, evaluate
from explorer.cost.numeric import structure_key
from explorer.errors import ExplorerError
from explorer.io.clusters import cluster_from_dict, cluster_to_dict
from explorer.io.export import figure_image
from explorer.io.models import model_from_dict
from explorer.io.presets import Preset, strategy_presets
from explorer.io.slides import slide_image
from explorer.io.strategies import strategy_from_dict, strategy_to_dict
from explorer.limits import WorkCancelled, spend
from explorer.runtime.calibrate import calibrate
from explorer.runtime.explanation import explanation, explanation_key
from explorer.runtime.explanation import store as store_explanation, stored as stored_explanation
from explorer.runtime.measure import run_strategy
from explorer.search.search import MEMORY_HEADROOM, Candidate, SearchResult, search

MAX_MESSAGE_CHARS = 400     # a job's message (progress, failure) is cut to this many characters


# ---- plain data --------------------------------------------------------------------------------------
PLAIN_SCALARS = (str, int, float, bool, bytes, type(None))


def plain(value, depth: int = 0):
    """`value` as plain data (dicts with string keys, lists, tuples, str, int, float, bool, bytes, None):
    numpy scalars become Python numbers. ExplorerError for anything else (a function, an object)."""
    if depth > 64:
        raise ExplorerError("a job's data is nested more than 64 levels deep")
    if isinstance(value, PLAIN_SCALARS):
        return value
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):
            raise ExplorerError("a job's data may only have text keys")
        return {k: plain(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v, depth + 1) for v in value]
    if isinstance(value, tuple):
        return tuple(plain(v, depth + 1) for v in value)
    item = getattr(value, "item", None)            # numpy scalar
    if callable(item) and getattr(value, "shape", None) == ():
        return plain(item(), depth + 1)
    raise ExplorerError(f"a job takes and returns plain data only, not {type(value).__name__}")


# ---- the jobs (the allowlist): plain data in, plain data out -----------------------------------------
def _candidate_dict(c: Candidate) -> dict:
    return {"strategy": strategy_to_dict(c.strategy), "iteration_time_s": c.iteration_time_s,
            "peak_memory_bytes": c.peak_memory_bytes, "breakdown_s": c.breakdown_s, "mfu": c.mfu,
            "result": asdict(c.result), "equivalent": [strategy_to_dict(s) for s in c.equivalent],
            "searched_s": c.searched_s, "searched_bytes": c.searched_bytes}


def search_result_to_dict(result: SearchResult) -> dict:
    """A SearchResult as plain data (what a worker sends back); search_result_from_dict inverts it."""
    return plain({"top": [_candidate_dict(c) for c in result.top],
                  "pareto": [_candidate_dict(c) for c in result.pareto],
                  "pruned": dict(result.pruned), "total": result.total, "kept": result.kept,
                  "evaluated": result.evaluated, "refined": result.refined,
                  "memory_cap_bytes": result.memory_cap_bytes, "elapsed_s": result.elapsed_s})


def _candidate(d: dict) -> Candidate:
    return Candidate(strategy_from_dict(d["strategy"]), d["iteration_time_s"], d["peak_memory_bytes"],
                     d["breakdown_s"], d["mfu"], Result(**d["result"]),
                     tuple(strategy_from_dict(s) for s in d["equivalent"]), d["searched_s"], d["searched_bytes"])


def search_result_from_dict(d: dict) -> SearchResult:
    return SearchResult([_candidate(c) for c in d["top"]], [_candidate(c) for c in d["pareto"]], d["pruned"],
                        d["total"], d["kept"], d["evaluated"], d["refined"], d["memory_cap_bytes"], d["elapsed_s"])


def search_job(model: dict, cluster: dict, gpus: int, global_batch: int, max_memory_bytes=None, top: int = 10,
               framework=None, dtype: str = "bf16", progress=None, memory_headroom: float = MEMORY_HEADROOM,
               options: dict | None = None) -> dict:
    """explorer.search.search of a model and cluster given as dicts (ModelSpec.to_dict, cluster_to_dict); every
    candidate carries `options` (the search's strategy options, explorer/strategy/options.py: the host side, what
    the precision recipe keeps; a modules option as a list)."""
    carried = {name: tuple(value) if isinstance(value, list) else value for name, value in (options or {}).items()}
    found = search(model_from_dict(model), cluster_from_dict(cluster), gpus, global_batch, max_memory_bytes, top,
                   progress=progress, framework=framework, dtype=dtype, memory_headroom=memory_headroom, **carried)
    return search_result_to_dict(found)


def image_job(figure: str, fmt: str = "png", scale: float = 2.0) -> bytes:
    """A plotly figure (its JSON text) as PNG or SVG bytes (explorer.io.export.figure_image)."""
    return figure_image(pio.from_json(figure, skip_invalid=True), fmt, scale)


def slide_job(figure: str, caption: str = "", fmt: str = "png") -> bytes:
    """A figure (its JSON text) as a 1920x1080 slide (explorer.io.slides.slide_image)."""
    return slide_image(pio.from_json(figure, skip_invalid=True), caption, fmt)


def reference_run_job(model: dict, strategy: dict, procs: int, cluster: dict | None = None,
                      iterations: int = 3) -> dict:
    """The reference run on torch.distributed (explorer.runtime.measure.run_strategy); cluster None:
    calibrate this machine first."""
    spec = cluster_from_dict(cluster) if cluster is not None else \
        cluster_from_dict(calibrate(procs=min(procs, os.cpu_count() or 1)))
    return plain(run_strategy(model_from_dict(model), strategy_from_dict(strategy), procs, spec, iterations))


_WHOLE_FLOAT = re.compile(r"(?<![\w.])(\d+)\.0(?![\w.])")


def same_key(a: str, b: str) -> bool:
    """Two key texts that differ at most in how equal numbers are written (250000000.0 and 250000000: a
    cluster read back from its dict gives an int where the file gave a float; the objects compare equal)."""
    return a == b or _WHOLE_FLOAT.sub(r"\1", a) == _WHOLE_FLOAT.sub(r"\1", b)


def compile_job(model: dict, strategy: dict, cluster: dict, key: str = "") -> dict:
    """The first compile of a model structure (explorer/runtime/offload.py): evaluate once here, so that the cost
    tree's compiled functions and arrays (explorer.cost.cold) and its super-step variant reach the disk cache,
    where the server then loads them: under the server's own key text `key` when it names this tree
    (same_key). Returns the key text it stored under and whether it stored it (a tree too large for the disk
    cache is not: the server then builds it itself)."""
    spec, plan, machine = model_from_dict(model), strategy_from_dict(strategy), cluster_from_dict(cluster)
    evaluate(spec, plan, machine)
    text = repr(structure_key(spec, plan, machine))
    stored = cache.load("tree", text)
    if stored is not None and key and key != text and same_key(key, text) and cache.store("tree", key, stored):
        text = key
    return {"key": text, "stored": stored is not None}


def explain_job(model: dict, strategy: dict, cluster: dict, key: str = "") -> dict:
    """The symbolic explanation of a strategy (explorer/runtime/explanation.py), built here and stored in the disk
    cache under the server's own key text `key` when it names the same strategy (same_key), where the server
    then reads it. Returns the key text it stored under and whether it stored it."""
    spec, plan, machine = model_from_dict(model), strategy_from_dict(strategy), cluster_from_dict(cluster)
    text = explanation_key(spec, plan, machine)
    made = explanation(spec, plan, machine)
    if key and key != text and same_key(key, text) and store_explanation(key, made):
        text = key
    return {"key": text, "stored": stored_explanation(text) is not None}


def presets_job(model: dict, cluster: dict, gpus: int, global_batch: int, micro_batch: int = 1) -> list:
    """The Strategy page's presets of a model on `gpus` devices (explorer.io.presets.strategy_presets), each as
    [name, description, strategy dict or None, reason]: a dozen or more evaluations, and the first compiles of the
    structures they try (t and p of each recipe), here rather than in the interpreter that serves the class."""
    found = strategy_presets(model_from_dict(model), cluster_from_dict(cluster), int(gpus), int(global_batch),
                             int(micro_batch))
    return as_json([[p.name, p.description, None if p.strategy is None else strategy_to_dict(p.strategy), p.reason]
                    for p in found.values()])


def presets_request(model, cluster, gpus: int, global_batch: int, micro_batch: int = 1) -> dict:
    """The plain-data arguments of a "presets" job."""
    return as_json({"model": model.to_dict(), "cluster": cluster_to_dict(cluster), "gpus": int(gpus),
                    "global_batch": int(global_batch), "micro_batch": int(micro_batch)})


def presets_from_plain(rows: list) -> dict:
    """A "presets" job's result as strategy_presets returns it (name -> Preset); ExplorerError if it is not one."""
    if not isinstance(rows, list) or not all(isinstance(r, list) and len(r) == 4 for r in rows):
        raise ExplorerError("the presets came back malformed")
    return {str(name): Preset(str(name), str(description), None if strategy is None else strategy_from_dict(strategy),
                              str(reason))
            for name, description, strategy, reason in rows}


def superstep_job(model: dict, strategy: dict, cluster: dict, schedule: str) -> dict:
    """The Timelines page's super-step view of a strategy (explorer/charts/timeline_views.py superstep_view) as plain
    data. A timeline beyond the limits fails the job (explorer/runtime/offload.py timeline_in then builds it in the
    page, which says why)."""
    return _view(superstep_view, model, strategy, cluster, schedule=str(schedule))


def microstep_job(model: dict, strategy: dict, cluster: dict, layer: int, op: str | None = None) -> dict:
    """The Timelines page's micro-step view of one layer (or operator) as plain data (timeline_views.microstep_view)."""
    return _view(microstep_view, model, strategy, cluster, layer=int(layer), op=None if op is None else str(op))


def _view(build, model: dict, strategy: dict, cluster: dict, **kwargs) -> dict:
    return view_to_plain(build(model_from_dict(model), strategy_from_dict(strategy), cluster_from_dict(cluster),
                               **kwargs))


def timeline_request(model, strategy, cluster, **kwargs) -> dict:
    """The plain-data arguments of a "superstep" (kwargs: schedule) or "microstep" (layer, op) job."""
    return as_json({"model": model.to_dict(), "strategy": strategy_to_dict(strategy),
                    "cluster": cluster_to_dict(cluster), **kwargs})


def as_json(value):
    """`value` as JSON would carry it (tuples become lists): what the *_from_dict readers of files accept."""
    return json.loads(json.dumps(value))


def compile_request(model, strategy, cluster, key: str = "") -> dict:
    """The plain-data arguments of a "compile" job (`key`: the caller's key text of the tree)."""
    return as_json({"model": model.to_dict(), "strategy": strategy_to_dict(strategy),
                    "cluster": cluster_to_dict(cluster), "key": str(key)})


def pid_job() -> int:
    """The worker's process id (tests: a job runs in another process)."""
    return os.getpid()


def spin_job(seconds: float = 60.0, progress=None) -> int:
    """Busy work for `seconds` (at most 600), checking spend() as a search does (tests: cancellation)."""
    end = time.monotonic() + min(float(seconds), 600.0)
    done = 0
    while time.monotonic() < end:
        spend("spinning")
        done += sum(range(1000))
        if progress:
            progress(0.5, "spinning")
    return os.getpid()


def crash_job(code: int = 70) -> None:
    """The worker process dies at once (tests: a crashed worker gives a message)."""
    os._exit(int(code))


JOBS = {"search": (search_job, "the search"), "image": (image_job, "the image"),
        "compile": (compile_job, "the first compile of this model structure"),
        "explain": (explain_job, "the formulas of this strategy"),
        "presets": (presets_job, "the presets of this model"),
        "superstep": (superstep_job, "the super-step timeline"),
        "microstep": (microstep_job, "the micro-step timeline"),
        "slide": (slide_job, "the slide"), "reference_run": (reference_run_job, "the reference run")}
"""The allowlist: job name -> (function, what it is called in messages). Only these run in a worker."""
SELFTEST_JOBS = {"pid": (pid_job, "the pid job"), "spin": (spin_job, "the spin job"),
                 "crash": (crash_job, "the crash job")}
"""Jobs a pool runs only when asked (WorkerPool(jobs=...)): tests of the pool itself."""
ALL_JOBS = {**JOBS, **SELFTEST_JOBS}
"""Every job a pool may be asked to run (a pool runs only those it was built with)."""
PROGRESS_JOBS = {"search", "spin"}


def search_request(model, cluster, gpus: int, global_batch: int, max_memory_bytes=None, top: int = 10,
                   framework=None, dtype: str = "bf16", memory_headroom: float = MEMORY_HEADROOM, **options) -> dict:
    """The plain-data arguments of a "search" job (a ModelSpec and a Cluster as their dicts; `options`: the
    strategy options the search carries, each as plain data: a str, a bool or a list of str)."""
    return {"model": model.to_dict(), "cluster": cluster_to_dict(cluster), "gpus": int(gpus),
            "global_batch": int(global_batch), "max_memory_bytes": max_memory_bytes, "top": int(top),
            "framework": framework, "dtype": dtype, "memory_headroom": float(memory_headroom),
            "options": {str(name): [str(m) for m in value] if isinstance(value, (tuple, list)) else value
                        for name, value in options.items()}}


def image_request(fig, fmt: str = "png", scale: float = 2.0) -> dict:
    """The plain-data arguments of an "image" job: the figure as its JSON text."""
    return {"figure": fig.to_json(), "fmt": fmt, "scale": float(scale)}


def slide_request(fig, caption: str = "", fmt: str = "png") -> dict:
    return {"figure": fig.to_json(), "caption": str(caption), "fmt": fmt}


def reference_run_request(model, strategy, procs: int, cluster=None, iterations: int = 3) -> dict:
    return as_json({"model": model.to_dict(), "strategy": strategy_to_dict(strategy), "procs": int(procs),
                    "cluster": None if cluster is None else cluster_to_dict(cluster), "iterations": int(iterations)})


def short(text: str) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= MAX_MESSAGE_CHARS else text[:MAX_MESSAGE_CHARS - 1] + "…"


def run_job(name: str, kwargs: dict, progress: Callable[[float, str], None] | None = None) -> tuple:
    """Run allowlisted job `name` here: ("done", result) | ("failed", message) | ("cancelled", message).
    Never raises for the job's own errors (ExplorerError or any other exception)."""
    fn, what = ALL_JOBS[name]
    try:
        args = dict(kwargs)
        if name in PROGRESS_JOBS:
            args["progress"] = progress
        return "done", plain(fn(**args))
    except WorkCancelled as err:
        return "cancelled", short(err)
    except ExplorerError as err:
        return "failed", short(err)
    except Exception as err:       # noqa: BLE001 -- a job's failure is a message, not a traceback
        return "failed", short(f"{what} failed ({type(err).__name__}: {err})")
