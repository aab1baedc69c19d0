"""Brute force for the search tests: every per-layer split combination (x every stage map),
each priced by explorer.evaluate()."""
import itertools

import numpy as np

from explorer import ModelSpec, evaluate, load_cluster, load_model
from explorer.search.layer_dp import usable
from explorer.search.space import layer_options

CLUSTER = load_cluster("classroom")
TINY = load_model("tiny-gpt")                       # 4 layers
TINY3 = ModelSpec(name="tiny-gpt-3", family="gpt", layers=3, hidden=256, heads=4, seq_len=128, vocab=1000)
TINY6 = ModelSpec(name="tiny-gpt-6", family="gpt", layers=6, hidden=256, heads=4, seq_len=128, vocab=1000)


def stage_maps(layers: int, pp: int):
    for cuts in itertools.combinations(range(1, layers), pp - 1):
        bounds = (0,) + cuts + (layers,)
        yield tuple(s for s in range(pp) for _ in range(bounds[s], bounds[s + 1]))


def brute(model, strategy, maps=((),)):
    """(time, memory, strategy) of every split combination x stage map."""
    out = []
    for combo in itertools.product(usable(layer_options(strategy.tp), strategy, model), repeat=model.layers):
        for stage_map in maps:
            s = strategy.with_(layer_splits=combo, stage_map=stage_map)
            r = evaluate(model, s, CLUSTER, strategy.devices)
            out.append((r.iteration_time_s, r.memory_bytes_per_device["total"], s))
    return out


def best_under(table, cap):
    fits = [t for t, m, _ in table if m <= cap]
    return min(fits) if fits else None


def caps(table):
    """No cap, and caps that cut the field: the memory of the fastest, and two quantiles."""
    mems = np.array([m for _, m, _ in table])
    fastest = min(table, key=lambda row: row[0])[1]
    return [np.inf, fastest * (1 - 1e-9), float(np.quantile(mems, 0.5)), float(np.quantile(mems, 0.1))]
