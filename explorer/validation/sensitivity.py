"""What a predicted iteration time depends on: its elasticity to every constant of the cluster file.

sensitivity(model, strategy, cluster) gives, for each numeric field of the cluster file (keyed by its
path, levels by name: "efficiency.gemm_max", "levels.node.bandwidth_gbps", "device.peak_tflops.bf16"),
the elasticity d ln T / d ln c of the iteration time T: the relative change of T per relative change of
the constant (-0.8: one per cent more makes the iteration 0.8 % faster), in all and per cost category
(the categories' contributions add up to the total). Issue 28, item 2; docs/modelling.md, "Sensitivity".

How: the derivative of the cost tree's own expressions with respect to each hardware symbol, exact
(sympy diff of the terms explain() prints: explorer.cost.elasticity, lambdified once per structure and
cached on disk like the other compiled functions), chained with each stage end's longest path
(explorer.schedules.critical_path.path_weights) -- the derivative of the branch the evaluation takes at
each maximum. Then each hardware symbol (explorer.cost.numbers.hardware_numbers: F, eta, W_hbm, g_level,
...) is mapped onto the file's fields: each is a product of powers of some of them (W_hbm =
hbm_bandwidth_gbps x efficiency.hbm, g_level = 1 / (bandwidth_gbps x bandwidth_efficiency)), whose
exponents are read by loading the file with one field changed (`field_exponents`; exact for such
products, checked at two changes), so that a field added to the schema is covered without a table here.
Computed only when asked: evaluate() does not (benchmarks/bench_sensitivity.py measures both).
"""
from __future__ import annotations

import math

import numpy as np

from explorer.cost import cache
from explorer.cost.cold import numeric_tree
from explorer.cost.generated import function_of, source_of
from explorer.cost.numbers import Numbers, hardware_numbers
from explorer.cost.numeric import BLOCK_ARG_NAMES, CATEGORIES, structure_key
from explorer.cost.evaluate import evaluate
from explorer.errors import ExplorerError
from explorer.limits import WorkCancelled
from explorer.io.clusters import cluster_from_dict, cluster_to_dict
from explorer.schedules.critical_path import path_weights
from explorer.strategy.strategy import options_of

ROUTE_ARGS = ("g_t", "L_t", "g_c", "L_c")
"""Block arguments that are a group's seconds per byte and latency: the formulas write them with each
machine level's own g_{level}, L_{level}."""
STRUCTURAL = ("fanout", "sms")
"""Numeric fields that shape the machine (how many units a level joins; a device's whole number of SMs, which
the fused dispatchers' SM share reads: explorer/cost/fused_dispatch.py), not constants of its speed."""
PROBE = (0.99, 0.99 ** 2)
"""Factors a field is multiplied by to read its exponents (then their inverses, where the loader refuses)."""
TOP = 5

_COMPILED = cache.BoundedCache(64)
_EXPONENTS = cache.BoundedCache(64)


def hardware_values(cluster, dtype: str, softmax: str = "vanilla") -> dict:
    """Symbol name -> value of every hardware number the formulas read: the compiled blocks' hardware
    arguments (explorer.cost.numeric.BLOCK_ARG_NAMES after the model's dimensions and the degree, as
    explorer.cost.numbers.Numbers.block_args gives them) and each machine level's g_{level}, L_{level}."""
    hw = hardware_numbers(cluster, dtype, softmax)     # the kernel evaluate picks for the model's softmax
    first = BLOCK_ARG_NAMES.index("t") + 1
    args = Numbers((0.0,) * (first - 1), hw, ()).block_args(1, (1,) * len(cluster.levels))
    values = {name: x for name, x in list(zip(BLOCK_ARG_NAMES, args))[first:] if name not in ROUTE_ARGS}
    for lv, g, L in zip(cluster.levels, hw["g"], hw["L"]):
        values[f"g_{{{lv.name}}}"], values[f"L_{{{lv.name}}}"] = g, L
    return values


def symbol_values(model, strategy, cluster) -> dict:
    """Name -> number of every symbol the compiled derivatives read (explorer.cost.explain.symbol_values
    by name, without sympy)."""
    values = {"b": strategy.micro_batch, "s": model.seq_len, "h": model.hidden, "a": model.heads,
              "a_{kv}": model.kv_heads, "f": model.ffn_hidden, "V": model.vocab, "l": model.layers,
              "t": strategy.tp, "d": strategy.dp * strategy.cp, "p": strategy.pp, "v": strategy.chunks,
              "m": strategy.micro_batches, "e": strategy.ep * strategy.etp / strategy.tp}
    values.update(hardware_values(cluster, strategy.dtype, model.softmax_type))
    return {k: float(x) for k, x in values.items()}


def _fields(tree, path=()):
    """(path, value) of every numeric leaf of a cluster file's dict; levels by name."""
    if isinstance(tree, dict):
        for key, value in tree.items():
            yield from _fields(value, path + (key,))
    elif isinstance(tree, list):        # the levels (by name); a list of names (fp8_recipes) holds no number
        for item in tree:
            if isinstance(item, dict):
                yield from _fields({k: v for k, v in item.items() if k != "name"}, path + (item["name"],))
    elif isinstance(tree, (int, float)) and not isinstance(tree, bool) and path[-1] not in STRUCTURAL:
        yield path, float(tree)


def _set(tree, path, value):
    """A copy of the file dict with the field at `path` set to value."""
    if not path:
        return value
    if isinstance(tree, list):
        return [_set(item, path[1:], value) if item["name"] == path[0] else item for item in tree]
    return {**tree, path[0]: _set(tree[path[0]], path[1:], value)}


def field_exponents(cluster, dtype: str, softmax: str = "vanilla") -> dict:
    """Field path -> {symbol name: exponent}: each hardware number is a product of powers of the file's
    fields (a field it does not read: exponent 0, left out). Read by loading the file with one field
    multiplied by PROBE's factors (exact for such products; two factors that disagree mean a hardware
    number that is not one, refused)."""
    return _EXPONENTS.get((cluster, dtype, softmax), lambda: _exponents(cluster, dtype, softmax))


def _exponents(cluster, dtype: str, softmax: str) -> dict:
    text = cluster_to_dict(cluster)
    base = hardware_values(cluster_from_dict(text), dtype, softmax)
    out = {}
    for path, value in _fields(text):
        name = ".".join(path)
        if value == 0:
            out[name] = {}          # a constant at 0 (no launch overhead): elasticity 0
            continue
        seen = []
        for factors in (PROBE, tuple(1 / x for x in PROBE)):
            try:
                seen = [(f, hardware_values(cluster_from_dict(_set(text, path, value * f)), dtype, softmax))
                        for f in factors]
                break
            except WorkCancelled:
                raise
            except ExplorerError:
                continue
        if not seen:
            raise ExplorerError(f"cluster field {name} cannot be changed by 1 % and stay valid")
        powers = {}
        for sym, x in base.items():
            if x == 0:
                continue
            ks = [math.log(probe[sym] / x) / math.log(f) for f, probe in seen]
            if abs(ks[0] - ks[1]) > 1e-6 * max(1.0, abs(ks[0])):
                raise ExplorerError(f"hardware number {sym} is not a product of powers of {name}")
            k = round(ks[0]) if abs(ks[0] - round(ks[0])) < 1e-6 else ks[0]
            if k:
                powers[sym] = k
        out[name] = powers
    return out


def _key(model, strategy, cluster, critical: int, sync: int) -> tuple:
    return (structure_key(model, strategy, cluster), strategy.dp, strategy.zero, strategy.overlap_dp,
            strategy.grad_dtype, tuple(sorted(options_of(strategy).items())), critical, sync)


def compiled(model, strategy, cluster, critical: int, sync: int) -> dict:
    """The compiled derivatives of this structure (explorer.cost.elasticity.build), from memory, from the
    disk cache, or built with sympy (then stored)."""
    key = _key(model, strategy, cluster, critical, sync)
    return _COMPILED.get(key, lambda: _load_or_build(repr(key), model, strategy, cluster, critical, sync))


def _load_or_build(text: str, model, strategy, cluster, critical: int, sync: int) -> dict:
    stored = cache.load("sensitivity", text)
    if isinstance(stored, dict):
        try:
            entry = dict(stored, stage_fn=function_of(stored["stage_fn"]), total_fn=function_of(stored["total_fn"]))
            if entry["stage_fn"] is not None and entry["total_fn"] is not None:
                return entry
        except (KeyError, TypeError, ValueError):
            pass
    from explorer.cost.elasticity import build
    hardware = {x for powers in field_exponents(cluster, strategy.dtype, model.softmax_type).values() for x in powers}
    entry = build(model, strategy, cluster, critical, sync, hardware)
    sources = {name: source_of(entry[name]) for name in ("stage_fn", "total_fn")}
    if all(sources.values()):
        cache.store("sensitivity", text, dict(entry, **sources))
    return entry


def symbol_derivatives(model, strategy, cluster, result=None) -> dict:
    """{iteration_time_s, hw: [symbol names], values: {name: number}, outputs: [names],
    derivative: outputs x hw array of d output / d symbol} for one evaluation: the partial derivatives
    of the terms chained with each stage end's longest path."""
    result = result or evaluate(model, strategy, cluster)
    numeric_tree(model, strategy, cluster)          # (the tree, as evaluate built it)
    entry = compiled(model, strategy, cluster, result.critical_stage, result.extra["sync_stage"])
    values = symbol_values(model, strategy, cluster)
    base = [values[name] for name in entry["base"]]
    p, nhw, napps = entry["stages"], len(entry["hw"]), len(entry["apps"])
    first = np.asarray(np.broadcast_arrays(*entry["stage_fn"](*base)), dtype=float).reshape(-1) if napps \
        else np.zeros(0)
    n_args = napps * 5 * p
    args = first[:n_args].reshape(napps, 5, p)
    d_args = first[n_args:].reshape(napps, 5, p, nhw)
    ends, d_ends = [], []
    for (schedule, sends), a, da in zip(entry["apps"], args, d_args):
        e, w = path_weights(schedule, a[0], a[1], a[2], strategy.micro_batches, strategy.chunks,
                            (a[3], a[4]) if sends else None)
        ends.append(e)
        d_ends.append(np.einsum("irj,jrx->ix", w, da))
    second = np.asarray(np.broadcast_arrays(*entry["total_fn"](*base, *[x for e in ends for x in e])),
                        dtype=float).reshape(-1)
    nout = len(entry["outputs"])
    terms, rest = second[:nout], second[nout:].reshape(nout, nhw + napps * p)
    derivative = rest[:, :nhw]
    if napps:
        derivative = derivative + np.einsum("oni,nix->ox", rest[:, nhw:].reshape(nout, napps, p),
                                            np.asarray(d_ends))
    total = float(terms[0])
    if not math.isclose(total, result.iteration_time_s, rel_tol=1e-7):
        raise ExplorerError(f"the derivative's cost tree gives {total!r} s, the evaluation "
                            f"{result.iteration_time_s!r} s")
    return {"iteration_time_s": total, "hw": list(entry["hw"]), "values": values,
            "outputs": list(entry["outputs"]), "derivative": derivative}


def sensitivity(model, strategy, cluster, result=None) -> dict:
    """{iteration_time_s, elasticities: {field: d ln T / d ln c}, by_category: {category: {field:
    contribution}}, top: [[field, elasticity], ...]} for every numeric field of the cluster file
    (fanouts aside), largest in size first; a category's contributions add up to the total's."""
    d = symbol_derivatives(model, strategy, cluster, result)
    T, hw, values = d["iteration_time_s"], d["hw"], d["values"]
    scaled = d["derivative"] * np.array([values[x] for x in hw]) / T      # outputs x hw: elasticities
    by_output = dict(zip(d["outputs"], scaled))
    per_symbol = {c: by_output.get(c, np.zeros(len(hw))) for c in CATEGORIES if c != "bubble"}
    per_symbol["bubble"] = by_output["iteration"] - sum(per_symbol.values())
    exponents = field_exponents(cluster, strategy.dtype, model.softmax_type)
    index = {x: i for i, x in enumerate(hw)}

    def on_fields(row) -> dict:
        return {name: float(sum(k * row[index[x]] for x, k in powers.items() if x in index))
                for name, powers in exponents.items()}
    total = on_fields(by_output["iteration"])
    order = sorted(total, key=lambda name: -abs(total[name]))
    total = {name: total[name] for name in order}
    by_category = {c: on_fields(per_symbol[c]) for c in CATEGORIES}
    return {"iteration_time_s": T, "elasticities": total,
            "by_category": {c: {name: x for name, x in row.items() if x} for c, row in by_category.items()
                            if any(row.values())},
            "top": [[name, total[name]] for name in order[:TOP] if total[name]]}


def sensitivity_or_reason(model, strategy, cluster, result=None) -> dict:
    """sensitivity(), or {"unavailable": why} where it cannot be had (a pipeline beyond the exact path
    weights): the CLI and the Cost page then say why instead of failing the whole answer."""
    try:
        return sensitivity(model, strategy, cluster, result)
    except WorkCancelled:
        raise                       # a stopped run: nothing to say (nor to cache, app_pages/compute.py)
    except ExplorerError as err:
        return {"unavailable": str(err)}


def sensitivity_text(sens: dict, n: int = TOP) -> str:
    """The n largest elasticities on one line each (the CLI's text output)."""
    if "unavailable" in sens:
        return f"sensitivity: {sens['unavailable']}"
    rows = [f"  {name:<40} {x:+.3f}" for name, x in list(sens["elasticities"].items())[:n] if x]
    return "sensitivity, d ln T / d ln c (+1 % of c changes T by this many %):\n" + "\n".join(rows)


__all__ = ["compiled", "field_exponents", "hardware_values", "sensitivity", "sensitivity_or_reason", "sensitivity_text",
           "symbol_derivatives", "symbol_values"]
