"""Writes tests/golden/evaluate_golden.json: evaluate() outputs for >= 200 varied strategies.

Run once before a refactor that must not move numbers (issue "One composition"):
    python tests/golden/make_golden.py
The file holds, per case, the model and cluster preset, the strategy (strategy_io JSON)
and every number of `evaluate --json` except the LaTeX strings. tests/test_golden.py
re-evaluates each case and compares to 1e-9 relative.
"""
from __future__ import annotations

import json
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from explorer import ExplorerError, LayerSplit, Strategy, evaluate, load_cluster, load_model  # noqa: E402
from explorer.io.report import result_dict  # noqa: E402
from explorer.io.strategies import strategy_to_dict  # noqa: E402

OUT = Path(__file__).with_name("evaluate_golden.json")
MODELS = ("tiny-gpt", "tiny-mlp", "bert-large", "gpt-1.7b", "gpt-7.5b", "gpt-39.1b", "gpt3-175b",
          "llama2-7b", "llama2-70b", "megatron-22b", "resnet-50", "gpt-18.4b", "turing-530b")
CLUSTERS = ("classroom", "dgx-a100-80gb", "dgx-h100", "h200")
PRESETS = ("megatron", "column", "row", "batch")


def divisors(n):
    return [k for k in range(1, n + 1) if n % k == 0]


def random_strategy(rng, model):
    heads = [model.heads, model.kv_heads] if model.is_transformer else []
    tps = [t for t in (1, 2, 4, 8) if all(h % t == 0 for h in heads)]
    tp = rng.choice(tps)
    pp = rng.choice([p for p in (1, 2, 3, 4, 8) if p <= model.layers])
    dp = rng.choice((1, 2, 4))
    micro = rng.choice((1, 2, 4))
    m = rng.choice((1, 2, 4, 8, 12, 16))
    schedule = rng.choice(("gpipe", "1f1b", "1f1b", "interleaved")) if pp > 1 else rng.choice(("gpipe", "1f1b"))
    chunks = 1
    if schedule == "interleaved":
        options = [v for v in (2, 3, 4) if pp * v <= model.layers and model.layers % (pp * v) == 0]
        if not options:
            schedule = "1f1b"
        else:
            chunks = rng.choice(options)
            m = pp * rng.choice((1, 2, 3))
    zero = rng.choice((0, 1)) if pp > 1 else rng.choice((0, 1, 2, 3))
    recompute = rng.choice(("none", "selective", "full"))
    sp = tp > 1 and rng.random() < 0.5
    layer_splits, stage_map = (), ()
    if tp > 1 and rng.random() < 0.3:
        opts = [LayerSplit(1, "replicated")] + [LayerSplit(k, p) for k in divisors(tp) if k > 1 for p in PRESETS
                                                 if p != "batch" or micro % k == 0]
        opts = [o for o in opts if o.effective_preset == "batch" or all(h % o.degree == 0 for h in heads)]
        layer_splits = tuple(rng.choice(opts) for _ in range(model.layers))
    if pp > 1 and schedule != "interleaved" and rng.random() < 0.3:
        cuts = sorted(rng.sample(range(1, model.layers), pp - 1))
        bounds = [0] + cuts + [model.layers]
        stage_map = tuple(s for s in range(pp) for _ in range(bounds[s + 1] - bounds[s]))
    return Strategy(dp=dp, tp=tp, pp=pp, micro_batch=micro, global_batch=micro * dp * m, schedule=schedule,
                    chunks=chunks, zero=zero, recompute=recompute, sequence_parallel=sp,
                    overlap_dp=rng.random() < 0.4, scatter_gather=rng.random() < 0.8,
                    dtype=rng.choice(("bf16", "bf16", "fp16", "fp32")), layer_splits=layer_splits,
                    stage_map=stage_map)


def numbers(result) -> dict:
    out = result_dict(result)
    for key in ("formula_latex", "terms_latex", "definitions_latex"):
        out.pop(key)
    return out


def main(count: int = 240, seed: int = 20261201):
    rng = random.Random(seed)
    cases, tries = [], 0
    while len(cases) < count and tries < 20 * count:
        tries += 1
        model = load_model(MODELS[tries % len(MODELS)])
        cluster_name = rng.choice(CLUSTERS)
        cluster = load_cluster(cluster_name)
        try:
            strategy = random_strategy(rng, model)
            result = evaluate(model, strategy, cluster)
        except ExplorerError:
            continue
        cases.append({"model": model.name, "cluster": cluster_name, "strategy": strategy_to_dict(strategy),
                      "result": numbers(result)})
    OUT.write_text(json.dumps(cases, separators=(",", ":")))
    schedules = sorted({c["strategy"]["schedule"] for c in cases})
    print(f"{len(cases)} cases ({tries} tries), schedules {schedules}, {OUT.stat().st_size / 1e6:.2f} MB")


if __name__ == "__main__":
    main()
