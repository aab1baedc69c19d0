"""Timeline speed (issue 3). Prints figures; asserts nothing.

Targets on a 2-core machine: events <= 200 ms for a 10,000-event iteration;
Gantt figure build <= 500 ms for it. Megatron-1T (t=8, p=64, d=6, B=3072, b=1:
m=512 micro-batches, 3072 GPUs) with 1F1B and interleaved (v=2) is reported too:
it has tens of times more events than the target case.
"""
from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def timed(fn, repeat=1):
    times, value = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        value = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), value


def case(name, model, strategy, cluster, gpus, repeat, schedule=None, targets=(None, None)):
    from explorer.cost import evaluate
    from explorer.charts import superstep_figure
    from explorer.timeline import compare, export, superstep_events
    result = evaluate(model, strategy, cluster, gpus)
    build = lambda: superstep_events(model, strategy, cluster, gpus, schedule=schedule, result=result)
    cold, events = timed(build)
    warm, events = timed(build, repeat)
    figure, _ = timed(lambda: superstep_figure(events), repeat)
    trace, _ = timed(lambda: export(events, "chrome-trace"))
    cmp = compare(events, result, schedule or strategy.schedule)
    print(f"{name}: {len(events):,} events, timeline {cmp['timeline_s']:.4f} s vs model {cmp['model_s']:.4f} s "
          f"(difference {cmp['relative_difference']:+.2e})")
    rows = [("events (first call, compiles block numbers)", cold, None), ("events (warm)", warm, targets[0]),
            ("Gantt figure build", figure, targets[1]), ("chrome-trace export", trace, None)]
    for label, secs, target in rows:
        verdict = "" if target is None else ("  ok" if secs <= target else "  OVER TARGET")
        goal = "" if target is None else f"  (target <= {target * 1e3:.0f} ms)"
        print(f"  {label:<46}{secs * 1e3:10.1f} ms{goal}{verdict}")


def main():
    from explorer import Strategy, load_cluster, load_model
    a100 = load_cluster("dgx-a100-80gb")
    gpt3, mt = load_model("gpt3-175b"), load_model("megatron-1t")
    # gpt3-175b, t=8 p=8, m=182 micro-batches: about 10,000 events with 1F1B
    s10k = Strategy(dp=1, tp=8, pp=8, micro_batch=1, global_batch=182, schedule="1f1b")
    case("10k case: gpt3-175b t=8 p=8 m=182 1f1b", gpt3, s10k, a100, 64, 5, targets=(0.2, 0.5))
    case("10k case drawn as zb-h1", gpt3, s10k, a100, 64, 5, schedule="zb-h1")
    base = dict(dp=6, tp=8, pp=64, micro_batch=1, global_batch=3072)
    case("megatron-1t t=8 p=64 d=6 B=3072 1f1b", mt, Strategy(**base, schedule="1f1b"), a100, 3072, 1)
    case("megatron-1t t=8 p=64 d=6 B=3072 interleaved v=2", mt,
         Strategy(**base, schedule="interleaved", chunks=2), a100, 3072, 1)


if __name__ == "__main__":
    main()
