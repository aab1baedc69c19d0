"""Seconds of the bounded-work cases (issue 25). Prints figures; asserts nothing.

The tests assert how much work these do (tests/work.py: calls, compiled functions, peak memory),
which is the same on every machine; the seconds they take are measured here, against the limits the
tests once asserted (their "target" column), on an empty disk cache of its own:

    python benchmarks/bench_limits.py            # about a minute on 2 cores

Cases: refusals of oversized inputs (huge integers, share links, alias bombs, deep nesting, a
megabyte of values, /dev/zero, short reprs, an over-long timeline), evaluation at the layer limit
(cold and warm), the Megatron-1T timeline (benchmarks/bench_timeline.py has its figure), a
10,000-event Gantt figure, and the fuzzed cases' heaviest kinds (a cold `validate`, the app's first run).
"""
from __future__ import annotations

import contextlib
import io
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def timed(fn, repeat=1):
    """Median wall and process-CPU seconds (every thread: an AppTest runs its script in one) of fn() (an ExplorerError counts as done) over `repeat` calls."""
    from explorer.errors import ExplorerError
    walls, cpus = [], []
    for _ in range(repeat):
        wall, cpu = time.perf_counter(), time.process_time()
        try:
            fn()
        except ExplorerError:
            pass
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return statistics.median(walls), statistics.median(cpus)


def report(label, seconds, target):
    wall, cpu = seconds
    verdict = "  ok" if wall <= target else "  OVER TARGET"
    print(f"  {label:<58}{wall * 1e3:10.1f} ms wall {cpu * 1e3:10.1f} ms CPU  (was asserted < {target * 1e3:.0f} ms){verdict}")


def refusals():
    from explorer import limits as L, timeline
    from explorer.cost.evaluate import evaluate
    from explorer.io.clusters import load_cluster
    from explorer.io.models import load_model, model_from_dict, short_repr
    from explorer.io.safe_load import parse_text, read_capped
    from explorer.io.share import decode
    from explorer.io.uploads import model_from_upload
    from explorer.strategy import Strategy
    print("refusals (tests/test_limits.py, tests/test_safe_load.py)")
    report("model file with hidden = 10^400", timed(lambda: model_from_dict(
        dict(family="gpt", layers=2, hidden=10 ** 400, heads=4, seq_len=32, vocab=100)), 20), 0.1)
    plain = {"model": "tiny-gpt", "cluster": "classroom"}
    decode(plain)
    for key, value in (("stages", ",".join(["9999999"] * 20)), ("splits", ",".join(["8mx99999"] * 20)),
                       ("B", "99999999999999999999"), ("dp", "2000000")):
        report(f"share link {key}={value[:16]}", timed(lambda: decode({**plain, key: value}), 20), 1.0)
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    lines += [f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 9)]
    bomb = ("\n".join(lines) + "\nfamily: gpt\n").encode()
    report("alias bomb upload (427 bytes)", timed(lambda: model_from_upload("b.yaml", bomb), 5), 0.5)
    report("YAML nested 200,000 deep", timed(lambda: parse_text("[" * 200_000, ".yaml", "f.yaml"), 3), 1.0)
    report("JSON nested 200,000 deep", timed(lambda: parse_text("[" * 200_000, ".json", "f.json"), 3), 1.0)
    for suffix in (".yaml", ".json"):
        for name, text in (("flat", "[" + "1," * 499_000 + "1]"), ("lists", "[" + "[]," * 330_000 + "1]")):
            report(f"a megabyte of values ({suffix[1:]}, {name})", timed(lambda: parse_text(text, suffix, "f"), 3), 1.5)
    report("/dev/zero", timed(lambda: read_capped("/dev/zero"), 20), 1.0)
    graph = ["lol"]
    for _ in range(30):
        graph = [graph, graph]
    for name, value in (("list of 10^6", list(range(10 ** 6))), ("10^5000", 10 ** 5000), ("shared graph", graph)):
        report(f"short_repr of {name}", timed(lambda: short_repr(value), 20), 0.01)
    model, cluster = load_model("gpt3-175b"), load_cluster("dgx-a100-80gb")
    strategy = Strategy(dp=1, tp=8, pp=8, global_batch=60_000)
    result = evaluate(model, strategy, cluster)
    report("timeline over MAX_TIMELINE_EVENTS", timed(
        lambda: timeline.superstep_events(model, strategy, cluster, result=result), 5), 1.0)
    return L


def layers_and_timelines(L):
    from explorer.charts import gantt_figure
    from explorer.cost import cold
    from explorer.cost.evaluate import evaluate
    from explorer.io.clusters import load_cluster
    from explorer.io.models import load_model
    from explorer.model.spec import ModelSpec
    from explorer.strategy import LayerSplit, Strategy
    from explorer.timeline import PassCosts, pipeline_events, superstep_events
    print("work at the limits (tests/test_limits.py, tests/test_timeline_gantt.py)")
    splits = tuple(LayerSplit(8 if i % 3 else 4) for i in range(L.MAX_LAYERS))
    deep = (ModelSpec("deep", "gpt", L.MAX_LAYERS, 1024, 8, 2048, 50000),
            Strategy(tp=8, pp=256, global_batch=256, layer_splits=splits), load_cluster("dgx-a100-80gb"))
    cold.clear_memory()
    report(f"evaluate at {L.MAX_LAYERS} layers, 256 stages (cold)", timed(lambda: evaluate(*deep)), 5.0)
    report(f"evaluate at {L.MAX_LAYERS} layers, 256 stages (warm)", timed(lambda: evaluate(*deep), 5), 5.0)
    mt, a100 = load_model("megatron-1t"), load_cluster("dgx-a100-80gb")
    strategy = Strategy(dp=6, tp=8, pp=64, global_batch=3072, schedule="interleaved", chunks=2)
    report("Megatron-1T interleaved timeline (464,759 events)", timed(lambda: superstep_events(mt, strategy, a100)), 10.0)
    events = pipeline_events(PassCosts.simple([1.0] * 16, [2.0] * 16), 320, "1f1b")
    report(f"Gantt figure of {len(events):,} events", timed(lambda: gantt_figure(events), 3), 5.0)


def fuzzed_kinds():
    from explorer.cli.main import main as cli_main
    from explorer.cost import cold
    print("the heaviest fuzzed cases (tests/test_fuzz_inputs.py: 2 s CPU a case, 30 s for the app's first run)")
    out = io.StringIO()
    cold.clear_memory()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        first = timed(lambda: cli_main(["validate"]))
        again = timed(lambda: cli_main(["validate"]), 3)
    report("validate (cold: empty disk cache)", first, 2.0)
    report("validate (warm)", again, 2.0)
    from streamlit.testing.v1 import AppTest
    app = str(ROOT / "app.py")

    def first_run():
        at = AppTest.from_file(app, default_timeout=120)
        at.query_params["model"], at.query_params["cluster"] = "tiny-gpt", "classroom"
        at.run()
    report("the app's first run (the first AppTest of the process)", timed(first_run), 30.0)
    report("the app's first run (again)", timed(first_run, 3), 30.0)


def main():
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["BRIDGING_DL_CACHE"] = str(Path(tmp) / "cache")
        limits = refusals()
        layers_and_timelines(limits)
        fuzzed_kinds()


if __name__ == "__main__":
    main()
