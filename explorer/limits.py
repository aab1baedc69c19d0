"""Size limits and numeric bounds for everything a link, an upload, a widget or a flag can ask for.

Each limit is generous for real training runs of 2026 and keeps one evaluation,
one timeline and one figure within a few seconds on a laptop core (measured on
this repository's 2-core machine: evaluate() of a 2,048-layer model on 256 stages with
per-layer splits 0.6 s; a timeline of 225,000 events 0.4 s plus 3 s for its Gantt figure).
Anything beyond is refused up front, before work is done, with a message naming
the limit. `check_result` is the last guard: every number leaving the library
must be finite.

>>> check_count("layers", 126, "MAX_LAYERS")      # llama3.1-405b
>>> check_count("layers", 10 ** 6, "MAX_LAYERS")
Traceback (most recent call last):
...
explorer.errors.ExplorerError: layers = 1000000 is more than the 2,048 this explorer accepts (MAX_LAYERS: 2x DeepNet's 1,000-layer transformer; evaluation time grows with layers)
"""
from __future__ import annotations

import math
import threading
import time
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, fields, is_dataclass
from typing import Callable

from explorer.errors import ExplorerError
from explorer.hardware.units import GB, GIB, TERA, US_PER_S

# ---- model dimensions (why: the largest real value known, then headroom) -----------------
MAX_LAYERS = 2048          # DeepNet trained 1,000 layers, llama3.1-405b has 126; evaluation work grows with layers
MAX_HIDDEN = 1 << 20       # h: llama3.1-405b 16,384, PaLM 18,432; arithmetic only, bounded to keep floats finite
MAX_HEADS = 1 << 14        # a (and kv_heads): real models use <= 128
MAX_SEQ_LEN = 1 << 24      # s: Llama 4 Scout's 10M-token context fits; attention FLOPs grow with s^2
MAX_VOCAB = 1 << 22        # V: Gemma 3 has 262,144 entries
MAX_FFN = 1 << 22          # f: llama3.1-405b 53,248; 4x MAX_HIDDEN
MAX_IMAGE_SIZE = 1 << 14   # cnn input pixels per side: real classifiers use 224-1024
MAX_CHANNELS = 1 << 16     # cnn in_channels / base_width: ResNets use 3 and 64
MAX_CNN_STAGES = 64        # cnn stage_blocks entries: ResNets have 4
MAX_NAME_CHARS = 200       # model / cluster / device / level names: shown in titles and file names
MAX_TEXT_CHARS = 10_000    # 'source' notes: a citation paragraph

# ---- strategy and machine -------------------------------------------------------------------
MAX_DEVICES = 1 << 20      # GPUs d*t*p (and devices in a cluster): Megatron runs use ~16k, 2026 clusters 100k-200k
MAX_TP = 1024              # operator-parallel group t: real runs use 8-64; micro-step timelines repeat per device
MAX_MICRO_BATCHES = 1 << 16  # m = B/(b d) per iteration: GPT-3 B=1536 at b=d=1 is 1,536; BERT LAMB's 65,536
MAX_GLOBAL_BATCH = 1 << 24   # B sequences: GPT-3 1,536, BERT LAMB 65,536; the sidebar accepts up to 10^7
MAX_LEVELS = 8             # machine levels of a cluster: node, rack, pod, ... real systems have 2-4
MAX_TIMELINE_EVENTS = 600_000  # events of one super-step: SC'21 Table 1's 1T run (p=64, m=512, v=2) has ~500,000;
#                                ~1.5 s and ~100 MB to build (a chrome trace opens them in Perfetto)
MAX_GANTT_BARS = 150_000     # bars one Gantt figure draws: ~2 s and ~100 MB to build, more bars than a screen has pixels

# ---- magnitudes of cluster numbers (in the file's units; real values in the comment) -------------
CLUSTER_BOUNDS = {  # field -> (low, high, why)
    "peak_tflops": (1e-3, 1e6, "an H100 is 989 TFLOP/s dense bf16"),
    "memory_gib": (1e-3, 1e6, "an H200 has 141 GB"),
    "hbm_bandwidth_gbps": (1e-3, 1e7, "an H200 has 4,800 GB/s"),
    "bandwidth_gbps": (1e-6, 1e7, "NVLink 5 is 900 GB/s per direction"),
    "latency_us": (0.0, 1e6, "links are 1-10 microseconds"),
    "kernel_launch_s": (0.0, 1.0, "a kernel launch is a few microseconds"),
    "host_launch_s": (0.0, 1e-2, "a framework issues a kernel in 5-50 microseconds of host time"),
    "host_sync_s": (0.0, 1.0, "a device-to-host synchronisation stalls tens of microseconds"),
    "gemm_half_flops": (0.0, 1e18, "A100 reaches half its GEMM peak near 1e9-1e11 FLOPs"),
    "gemm_max": (1e-3, 1.0, "real GEMMs reach 0.5-0.9 of peak"),
    "hbm": (1e-3, 1.0, "real kernels reach 0.6-0.9 of the HBM bandwidth"),
    "sms": (0, 10_000, "an H100 SXM has 132 SMs, a B200 148; 0 = not given"),
}


def check_count(name: str, value, limit: str, why: str | None = None) -> None:
    """Refuse an integer above the limit named `limit` (e.g. "MAX_LAYERS"); types and lower
    bounds are checked by the callers."""
    top = globals()[limit]
    if isinstance(value, int) and not isinstance(value, bool) and value > top:
        shown = value if value.bit_length() < 64 else f"an integer of about {int(value.bit_length() * 0.30103)} digits"
        raise ExplorerError(f"{name} = {shown} is more than the {top:,} this explorer accepts "
                            f"({limit}: {why or _REASONS[limit]})")


_REASONS = {
    "MAX_LAYERS": "2x DeepNet's 1,000-layer transformer; evaluation time grows with layers",
    "MAX_HIDDEN": "64x the widest real transformer",
    "MAX_HEADS": "128x the most heads of a real model",
    "MAX_SEQ_LEN": "above the longest real context (10M tokens)",
    "MAX_VOCAB": "16x the largest real vocabulary",
    "MAX_FFN": "4x MAX_HIDDEN",
    "MAX_IMAGE_SIZE": "16x a 1024-pixel input",
    "MAX_CHANNELS": "1000x a ResNet's base width",
    "MAX_CNN_STAGES": "16x a ResNet's 4 stages",
    "MAX_DEVICES": "5x the largest 2026 training cluster",
    "MAX_TP": "16x the largest real operator-parallel group",
    "MAX_MICRO_BATCHES": "a timeline draws every micro-batch",
    "MAX_GLOBAL_BATCH": "256x the largest published batch",
    "MAX_LEVELS": "real machines have 2-4 levels",
    "MAX_TIMELINE_EVENTS": "about 1.5 s to build, covers the Megatron-LM 1T run of SC'21 Table 1",
    "MAX_GANTT_BARS": "about 2 s and 100 MB per figure",
}


def _text(name: str, value, limit: int) -> None:
    if isinstance(value, str) and len(value) > limit:
        raise ExplorerError(f"{name} has {len(value):,} characters, more than the {limit:,} allowed")


MODEL_LIMITS = {"layers": "MAX_LAYERS", "hidden": "MAX_HIDDEN", "heads": "MAX_HEADS", "kv_heads": "MAX_HEADS",
                "seq_len": "MAX_SEQ_LEN", "vocab": "MAX_VOCAB", "ffn_hidden": "MAX_FFN",
                "image_size": "MAX_IMAGE_SIZE", "in_channels": "MAX_CHANNELS", "base_width": "MAX_CHANNELS"}


def check_model(model) -> None:
    """Refuse model dimensions beyond the limits (called first thing by ModelSpec)."""
    _text("model name", getattr(model, "name", ""), MAX_NAME_CHARS)
    _text("model source", getattr(model, "source", ""), MAX_TEXT_CHARS)
    for name, limit in MODEL_LIMITS.items():
        check_count(f"model field '{name}'", getattr(model, name, 0), limit)
    blocks = getattr(model, "stage_blocks", ())
    if isinstance(blocks, (list, tuple)):
        if len(blocks) > MAX_CNN_STAGES:
            raise ExplorerError(f"stage_blocks has {len(blocks)} stages, more than the {MAX_CNN_STAGES} accepted "
                                f"(MAX_CNN_STAGES: {_REASONS['MAX_CNN_STAGES']})")
        for i, n in enumerate(blocks):
            check_count(f"model field 'stage_blocks[{i}]'", n, "MAX_LAYERS")
        if all(isinstance(n, int) for n in blocks):
            check_count("the cnn's blocks (sum of stage_blocks)", sum(blocks), "MAX_LAYERS")


def check_strategy(strategy) -> None:
    """Refuse strategy sizes beyond the limits."""
    check_count("GPUs dp x tp x cp x pp", strategy.devices, "MAX_DEVICES")
    check_count("tp", strategy.tp, "MAX_TP")
    check_count("pp", strategy.pp, "MAX_LAYERS", "a stage holds at least one layer")
    check_count("chunks", strategy.chunks, "MAX_LAYERS", "a chunk holds at least one layer")
    check_count("global batch", strategy.global_batch, "MAX_GLOBAL_BATCH")
    check_count("micro-batch", strategy.micro_batch, "MAX_GLOBAL_BATCH")
    check_count("micro-batches per iteration m", strategy.micro_batches, "MAX_MICRO_BATCHES")
    check_count("entries of layer_splits", len(strategy.layer_splits), "MAX_LAYERS")
    check_count("entries of stage_map", len(strategy.stage_map), "MAX_LAYERS")


def check_cluster_size(cluster) -> None:
    """Refuse clusters with more levels or devices than the limits, or over-long names."""
    _text("cluster name", cluster.name, MAX_NAME_CHARS)
    _text("device name", cluster.device.name, MAX_NAME_CHARS)
    for level in cluster.levels[:MAX_LEVELS + 1]:
        _text("level name", level.name, MAX_NAME_CHARS)
    check_count("machine levels", len(cluster.levels), "MAX_LEVELS")
    check_count(f"devices of cluster {cluster.name[:40]!r} (product of the fanouts)", cluster.max_devices,   # repr: 1 line
                "MAX_DEVICES")


def check_cluster(cluster) -> None:
    """check_cluster_size, and every number within CLUSTER_BOUNDS (in the file's units, named in the
    message). Called where a cluster is read from a file, an upload or a link; clusters built in code
    (e.g. an idealised infinitely fast network in a test) are only size-checked by evaluate()."""
    check_cluster_size(cluster)
    dev, eff = cluster.device, cluster.efficiency
    for dtype, flops in dev.peak_flops.items():
        _bound("device: peak_tflops: " + str(dtype), flops / TERA, "peak_tflops")
    _bound("device: memory_gib", dev.memory_bytes / GIB, "memory_gib")
    _bound("device: hbm_bandwidth_gbps", dev.hbm_bandwidth_bytes_per_s / GB, "hbm_bandwidth_gbps")
    for i, level in enumerate(cluster.levels):
        _bound(f"levels[{i}]: bandwidth_gbps", level.bandwidth_bytes_per_s * level.bandwidth_efficiency / GB,
               "bandwidth_gbps")
        _bound(f"levels[{i}]: latency_us", level.latency_s * US_PER_S, "latency_us")
    _bound("efficiency: kernel_launch_s", eff.kernel_launch_s, "kernel_launch_s")
    _bound("efficiency: host_launch_s", eff.host_launch_s, "host_launch_s")
    _bound("efficiency: host_sync_s", eff.host_sync_s, "host_sync_s")
    _bound("efficiency: gemm_half_flops", eff.gemm_half_flops, "gemm_half_flops")
    _bound("efficiency: gemm_max", eff.gemm_max, "gemm_max")
    if eff.gemm_max_fp8:
        _bound("efficiency: gemm_max_fp8", eff.gemm_max_fp8, "gemm_max")
    _bound("efficiency: hbm", eff.hbm, "hbm")
    _bound("device: sms", dev.sms, "sms")


def _bound(where: str, value: float, key: str) -> None:
    low, high, why = CLUSTER_BOUNDS[key]
    if not (isinstance(value, (int, float)) and math.isfinite(value) and low <= value <= high):
        raise ExplorerError(f"cluster field {where} = {value:.3g} is outside [{low:g}, {high:g}] "
                            f"(CLUSTER_BOUNDS: {why})")


def check_work(model, strategy, cluster=None) -> None:
    """Everything evaluate() is asked to do, within the limits (its first line)."""
    check_model(model)
    check_strategy(strategy)
    if cluster is not None:
        check_cluster_size(cluster)


def timeline_events_bound(seconds, micro_batches: int, chunks: int) -> int:
    """An upper bound on the events of a super-step timeline, from its pass costs (stages x passes x parts):
    every non-empty part of every pass, one idle gap before each pass, and 5 per stage after the barrier."""
    import numpy as np
    parts = int(np.count_nonzero(seconds))
    passes = int(np.count_nonzero(np.asarray(seconds).sum(axis=-1)))
    return micro_batches * chunks * (parts + passes) + 5 * int(np.shape(seconds)[0])


def check_timeline_passes(strategy) -> None:
    """Refuse, before any cost is built, a super-step timeline whose passes alone (a forward and a
    backward per micro-batch, chunk and stage: 2 m v p) exceed MAX_TIMELINE_EVENTS."""
    passes = 2 * strategy.micro_batches * strategy.chunks * strategy.pp
    if passes > MAX_TIMELINE_EVENTS:
        raise ExplorerError(
            f"the timeline would have at least {passes:,} events (2 m v p), more than the {MAX_TIMELINE_EVENTS:,} "
            f"one timeline draws (MAX_TIMELINE_EVENTS); use fewer micro-batches per iteration "
            f"(m = {strategy.micro_batches}), chunks or stages")


def check_timeline(seconds, micro_batches: int, chunks: int = 1) -> None:
    """Refuse a super-step timeline of more than MAX_TIMELINE_EVENTS events before building it."""
    n = timeline_events_bound(seconds, micro_batches, chunks)
    if n > MAX_TIMELINE_EVENTS:
        raise ExplorerError(
            f"the timeline would have up to {n:,} events, more than the {MAX_TIMELINE_EVENTS:,} one timeline "
            f"draws (MAX_TIMELINE_EVENTS); use fewer micro-batches per iteration (m = {micro_batches}) "
            "or fewer stages")


def check_gantt_bars(bars: int) -> None:
    """Refuse to draw a Gantt figure of more than MAX_GANTT_BARS bars (the events themselves may exist)."""
    check_count("bars of the Gantt chart (timeline events)", bars, "MAX_GANTT_BARS")


# ---- results: finite numbers only -----------------------------------------------------------

def _non_finite(value, path: str, depth: int = 0):
    """The path of the first non-finite number inside value (dicts, lists, arrays, dataclasses), or None."""
    if depth > 8:
        return None
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return None
    if isinstance(value, (int, float)):
        try:
            return None if math.isfinite(value) else path
        except OverflowError:
            return path
    if isinstance(value, dict):
        for k, v in value.items():
            found = _non_finite(v, f"{path}.{k}", depth + 1)
            if found:
                return found
        return None
    if isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            found = _non_finite(v, f"{path}[{i}]", depth + 1)
            if found:
                return found
        return None
    if hasattr(value, "dtype") and hasattr(value, "shape"):      # numpy arrays and scalars
        import numpy as np
        if np.issubdtype(value.dtype, np.number) and not np.all(np.isfinite(value)):
            return path
        return None
    return None


def check_result(result, model=None, cluster=None):
    """`result` if every number in it is finite; else ExplorerError naming the field and the likely inputs."""
    found = None
    if is_dataclass(result):
        for f in fields(result):
            found = _non_finite(getattr(result, f.name), f.name)
            if found:
                break
    else:
        found = _non_finite(result, "result")
    if found:
        what = f" of {model.name!r}" if model is not None else ""
        on = f" on cluster {cluster.name!r}" if cluster is not None else ""
        raise ExplorerError(f"the cost{what}{on} is not a finite number ({found}); an input is too extreme "
                            "(e.g. a tiny peak FLOP/s or bandwidth, or a huge latency or kernel launch time)")
    return result


def guarded(fn, *args, what: str = "the evaluation", **kwargs):
    """fn(*args, **kwargs) with arithmetic and recursion errors turned into ExplorerError (numpy's
    overflow warnings silenced: a non-finite number is caught by check_result, with a message)."""
    import numpy as np
    try:
        with np.errstate(over="ignore", divide="ignore", invalid="ignore", under="ignore"):
            return fn(*args, **kwargs)
    except ExplorerError:
        raise
    except (ArithmeticError, RecursionError, MemoryError) as err:
        raise ExplorerError(f"{what} failed ({type(err).__name__}: {' '.join(str(err).split())[:100]}); "
                            "an input is too extreme") from None


# ---- a work budget per action, and cancellation (issue 31) -------------------------------------
MAX_ACTION_CPU_S = 30.0
"""CPU seconds one action (a page's run, a CLI command) may spend in the library: no input holds a core
longer without the action stopping with a message that names what it was doing. 3x the longest legitimate
action measured: the README's search of GPT-3 175B on 1,024 GPUs takes 3 s of CPU on a quiet 2-core
machine and 8-10 s while seven other processes compete for it (CPU time grows under contention)."""


CASE_CPU_S = 0.5
"""CPU seconds `explorer validate` may take per published case when no --max-cpu-s is given: a batch's budget grows
with its cases (a cases file is size-capped, so the work stays bounded) instead of one action's MAX_ACTION_CPU_S for
all of them. A cold validate of the 158 bundled cases (every structure compiled) took 12.8 s of CPU on a quiet 2-core
machine (2026-12-06, load 1.8: 0.08 s a case) and 24 s at load average 12, close to the 30 s of one action; 0.5 s a
case gives the bundled set 79 s, six times the quiet figure."""
MAX_BATCH_CPU_S = 300.0
"""The most a batch's per-case budget grows to (about 4x the bundled set's 79 s): a user's --cases file of thousands of
entries stops with a message rather than holding a core for an hour."""


NOTICE_EVERY_CPU_S = 5.0
"""CPU seconds after which a long action with a `notify` says what it is doing, and again every as many seconds
after (issue 31: nothing holds a core > 10 s without saying so; a cold `explorer validate` compiles every
published run's structure, 10-24 s of CPU on the 2-core machine). Twice the 2-3 s of a cold `evaluate`, so
ordinary commands stay silent."""


class WorkCancelled(ExplorerError):
    """The action's caller asked it to stop (its session went away, or asked for a newer run)."""


@dataclass
class WorkBudget:
    what: str                                    # the action, for the message
    cpu_s: float                                 # CPU seconds it may spend
    should_stop: Callable[[], bool] | None       # True: the caller no longer wants the result
    clock: Callable[[], float]                   # CPU seconds of this thread (a fake one in tests)
    start_s: float
    checks: int = 0                              # spend() calls so far (tests count them)
    notify: Callable[[str], None] | None = None  # told what the action is doing, every NOTICE_EVERY_CPU_S
    next_notice_s: float = NOTICE_EVERY_CPU_S    # CPU seconds used at which it is told next


_BUDGET: ContextVar[WorkBudget | None] = ContextVar("explorer_work_budget", default=None)
_ACTIONS = [0]                  # outermost work budgets open now in this process (its threads together)
_ACTIONS_LOCK = threading.Lock()


def actions_running() -> int:
    """How many actions run under a work budget in this process now (the page runs of every session a Streamlit
    server is running at once; nested batch budgets count once): how busy the interpreter is."""
    return _ACTIONS[0]


@contextmanager
def work_budget(what: str, cpu_s: float = MAX_ACTION_CPU_S, should_stop: Callable[[], bool] | None = None,
                clock: Callable[[], float] = time.thread_time, notify: Callable[[str], None] | None = None):
    """Run the block's library work under a budget: `spend()` in the library's long loops raises
    ExplorerError past `cpu_s` seconds of this thread's CPU, and WorkCancelled once `should_stop()` says
    so; `notify(line)` (the CLI: a line on stderr) hears what the work is doing once it has run
    NOTICE_EVERY_CPU_S, and every NOTICE_EVERY_CPU_S after. A context variable carries it, so each
    Streamlit session's script thread has its own."""
    budget = WorkBudget(what, float(cpu_s), should_stop, clock, clock(), notify=notify,
                        next_notice_s=NOTICE_EVERY_CPU_S)
    outermost = _BUDGET.get() is None
    token = _BUDGET.set(budget)
    if outermost:
        with _ACTIONS_LOCK:
            _ACTIONS[0] += 1
    try:
        yield budget
    finally:
        try:
            _BUDGET.reset(token)
        finally:
            if outermost:
                with _ACTIONS_LOCK:
                    _ACTIONS[0] -= 1


@contextmanager
def batch_budget(what: str, cpu_s: float):
    """A budget of its own for a batch inside the current action (explorer validate: CASE_CPU_S per case), with
    the current budget's cancellation, clock and notices; the current one again after it."""
    outer = _BUDGET.get()
    with work_budget(what, cpu_s, should_stop=outer.should_stop if outer else None,
                     clock=outer.clock if outer else time.thread_time,
                     notify=outer.notify if outer else None) as budget:
        yield budget


def spend(doing: str) -> None:
    """A point where long library work may stop (explanation, compiles, search, figures): no-op without a
    budget; WorkCancelled if the caller asked to stop; ExplorerError naming `doing` past the budget."""
    budget = _BUDGET.get()
    if budget is None:
        return
    budget.checks += 1
    if budget.should_stop is not None and budget.should_stop():
        raise WorkCancelled(f"{budget.what} was cancelled while {doing}")
    used = budget.clock() - budget.start_s
    if used > budget.cpu_s:
        raise ExplorerError(f"{budget.what} needs more than the {budget.cpu_s:g} s of computation one action "
                            f"may take (stopped while {doing}); ask for less: fewer stages, layers or "
                            "candidates")
    if budget.notify is not None and used >= budget.next_notice_s:
        budget.next_notice_s = used + NOTICE_EVERY_CPU_S
        budget.notify(f"{budget.what}: {used:.0f} s of computation so far, now {doing} (it stops past "
                      f"{budget.cpu_s:g} s)")
