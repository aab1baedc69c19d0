"""Share links: model, cluster and strategy as URL query parameters, and back.

`encode` gives a flat dict of short, readable parameters; `decode` validates
every one of them (regular expressions, ranges, known names; JSON parsed with
json.loads only, never evaluated) and returns the built-in defaults plus one
message per problem for anything malformed, tampered or impossible. A link `encode` made carries every key of
ALWAYS_WRITTEN and leaves out the optional keys at Strategy's defaults: decoded, those take Strategy's defaults. A
partial link (typed by hand) loads too: the strategy keys it leaves out take the model's default strategy's values
(Strategy's own defaults where those contradict it).

Parameters: `model` (preset name) or `model_spec` (base64url JSON of our model
schema); `cluster` or `cluster_spec` likewise; dp, tp, pp, b (micro-batch),
B (global batch), sched, v (chunks), zero, rc (recompute), sp, ov, sg (0/1),
dtype, cp and cpa (context parallelism and its algorithm, only when cp > 1); `splits` (per-layer operator splits, run-length: "8mx48,4cx48" = 48
layers Megatron x8 then 48 column x4) and `stages` (layers per pipeline stage:
"12,12,..."), `layout` (a Megatron-LM pipeline layout string, e.g. "Et|(tt|)*30mL": parsed by hand,
explorer/strategy/pipeline_layout.py). A strategy with per-operator overrides travels as `strategy_spec`.

>>> from explorer import load_model, load_cluster
>>> from explorer.io.presets import DEFAULT_STRATEGY
>>> m, c = load_model("gpt3-175b"), load_cluster("dgx-a100-80gb")
>>> decode(encode(m, c, DEFAULT_STRATEGY)).strategy == DEFAULT_STRATEGY
True
>>> decode({"dp": "16; import os"}).messages[0]
"link parameter 'dp' must be a whole number of digits only (no sign), got '16; import os'; using 16"
"""
from __future__ import annotations

import base64
import binascii
import json
import re
import stat
from dataclasses import dataclass, field

from explorer.io.clusters import PRESET_DIR as CLUSTER_DIR, cluster_from_dict, cluster_to_dict, load_cluster
from explorer.errors import ExplorerError
from explorer.limits import MAX_LAYERS, WorkCancelled
from explorer.io.safe_load import json_depth_ok
from explorer.io.models import PRESET_DIR as MODEL_DIR, load_model, model_from_dict
from explorer.cost.checked import evaluate_checked
from explorer.io.presets import DEFAULT_CLUSTER, DEFAULT_MODEL, fallback_strategy
from explorer.strategy.strategy import CP_ALGOS, DTYPES, GRAD_DTYPES, RECOMPUTE, SCHEDULES, LayerSplit, Strategy
from explorer.strategy.pipeline_layout import parse as parse_layout
from explorer.strategy.options import OPTIONS
from explorer.strategy.frameworks import FRAMEWORKS, GRAD_FROM_FRAMEWORK, default_grad_dtype
from explorer.io.strategies import strategy_from_dict, strategy_to_dict

MAX_SPEC_CHARS = 8192            # a base64 spec longer than this is refused unread
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
WHOLE = re.compile(r"^[0-9]{1,7}$")
SPLIT_ITEM = re.compile(r"^([0-9]{1,4})([a-z])x([0-9]{1,5})$")
PRESET_LETTER = {"megatron": "m", "column": "c", "row": "r", "batch": "b", "replicated": "n"}
LETTER_PRESET = {v: k for k, v in PRESET_LETTER.items()}
INTS = {"dp": "dp", "tp": "tp", "pp": "pp", "b": "micro_batch", "B": "global_batch", "v": "chunks",
        "zero": "zero"}
CHOICES = {"sched": ("schedule", SCHEDULES), "rc": ("recompute", RECOMPUTE), "dtype": ("dtype", DTYPES)}
BOOLS = {"sp": "sequence_parallel", "ov": "overlap_dp", "sg": "scatter_gather"}
OPTIONAL_BOOLS = {"otp": "overlap_tp", "op2p": "overlap_p2p", "opg": "overlap_param_gather", "zpf": "zero_prefetch"}
"""Switches written only when not at Strategy's default (links made before them stay the same): 1 for the ones off by
default, 0 for ZeRO-3's prefetch, on by default."""
OPTIONAL_CHOICES = {"gd": ("grad_dtype", GRAD_DTYPES), "fw": ("framework", FRAMEWORKS)}
"""Choices written only when they differ from the Strategy default (links made before them stay the same);
the gradient dtype only when it differs from the framework's default (explorer/strategy/frameworks.py), so that
a link without `gd` takes the default of the framework it names (`fw`, generic when absent). The option table's
(explorer/strategy/options.py) are written the same way under their records' `link` keys (cg, disp, oep, f8r, mom,
rcm, ...): a choice when not the default, a switch as 1 when on, modules comma-separated when any."""
LONG_CONTEXT = {"cp": "cp", "cpa": "cp_algo"}    # context parallelism: in a link only when cp > 1
EXPERT_INTS = {"ep": "ep", "etp": "expert_tp"}   # written only when not the default: dense links stay as they were
MAX_INT = 10 ** 6
ALWAYS_WRITTEN = (*INTS, *CHOICES, *BOOLS)
"""The keys `encode` writes into every link it makes. A link with all of them is whole: the keys it leaves out
were at Strategy's defaults (an MoE strategy with ep 1 stays at ep 1, not its model's default strategy's ep), and
decoding it needs no default strategy of the model (a dozen evaluations: 40 % of a link's first page run, issue 31)."""


@dataclass(frozen=True)
class Shared:
    model: object
    cluster: object
    strategy: Strategy
    messages: list = field(default_factory=list)   # one line per refused parameter


def _b64(d: dict) -> str:
    raw = json.dumps(d, separators=(",", ":"), sort_keys=True).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _unb64(text: str, what: str) -> dict:
    if len(text) > MAX_SPEC_CHARS:
        raise ExplorerError(f"link parameter '{what}' is longer than {MAX_SPEC_CHARS} characters")
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        data = json.loads(raw.decode("utf-8"))
    except (binascii.Error, ValueError, UnicodeDecodeError, RecursionError):
        raise ExplorerError(f"link parameter '{what}' is not valid base64 JSON") from None
    if not isinstance(data, dict):
        raise ExplorerError(f"link parameter '{what}' must hold a mapping of fields")
    json_depth_ok(data, f"link parameter '{what}'")
    return data


def _spec(params: dict, key: str, build):
    """build(dict) from a base64 JSON parameter, errors prefixed with the parameter's name."""
    data = _unb64(params[key], key)
    try:
        return build(data, f"shared {key.split('_')[0]}")
    except ExplorerError as err:
        raise ExplorerError(f"link parameter '{key}': {err}") from None


def _spec_fields(strategy: Strategy) -> dict:
    """strategy_to_dict without the fields at the Strategy defaults (strategy_from_dict gives them back): a
    link's strategy_spec does not grow with every new field. The gradient dtype is always written: left out, it
    would take the framework's default (explorer/strategy/frameworks.py), which may not be the generic one."""
    full, default = strategy_to_dict(strategy), strategy_to_dict(Strategy())
    return {key: value for key, value in full.items()
            if key in ("version", "grad_dtype") or value != default.get(key)}


def _is_preset(name: str, folder) -> bool:
    return bool(NAME.match(name)) and (folder / f"{name}.json").is_file()


_PRESETS: dict = {}
"""(folder, name) -> ((the file's mtime_ns, size, inode), the loaded preset): the app writes a link on every page run, and
reading the two preset files each time was ~2 % of a cached run (py-spy, 2026-12-07). At most PRESETS_KEPT."""
PRESETS_KEPT = 256


def _matches_preset(obj, folder, load) -> bool:
    """`obj` is the preset of its name in `folder`, as the file holds it now."""
    if not NAME.match(obj.name):
        return False
    try:
        info = (folder / f"{obj.name}.json").stat()
    except OSError:
        return False
    if not stat.S_ISREG(info.st_mode):
        return False
    stamp = (info.st_mtime_ns, info.st_size, info.st_ino)     # a rewrite within one clock tick changes its size
    known = _PRESETS.get((folder, obj.name))
    if known is None or known[0] != stamp:
        if len(_PRESETS) >= PRESETS_KEPT:
            _PRESETS.clear()
        known = _PRESETS[(folder, obj.name)] = (stamp, load(obj.name))
    return known[1] == obj


def _run_length(items: list) -> list:
    runs = []
    for item in items:
        if runs and runs[-1][0] == item:
            runs[-1][1] += 1
        else:
            runs.append([item, 1])
    return runs


def encode(model, cluster, strategy: Strategy) -> dict:
    """Query parameters (str -> str) that `decode` turns back into the same three objects."""
    out = {}
    if _matches_preset(model, MODEL_DIR, load_model):
        out["model"] = model.name
    else:
        out["model_spec"] = _b64(model.to_dict())
    if _matches_preset(cluster, CLUSTER_DIR, load_cluster):
        out["cluster"] = cluster.name
    else:
        out["cluster_spec"] = _b64(cluster_to_dict(cluster))
    if any(split.overrides for split in strategy.layer_splits):
        out["strategy_spec"] = _b64(_spec_fields(strategy))
        return out
    for short, name in INTS.items():
        out[short] = str(getattr(strategy, name))
    for short, (name, _) in CHOICES.items():
        out[short] = getattr(strategy, name)
    for short, name in BOOLS.items():
        out[short] = "1" if getattr(strategy, name) else "0"
    for short, (name, _) in OPTIONAL_CHOICES.items():
        default = default_grad_dtype(strategy.framework, strategy.dtype, strategy.zero) if name == "grad_dtype" \
            else Strategy.__dataclass_fields__[name].default
        if getattr(strategy, name) != default:
            out[short] = getattr(strategy, name)
    for short, name in OPTIONAL_BOOLS.items():
        if getattr(strategy, name) != Strategy.__dataclass_fields__[name].default:
            out[short] = "1" if getattr(strategy, name) else "0"
    if strategy.cp > 1:
        out.update({short: str(getattr(strategy, name)) for short, name in LONG_CONTEXT.items()})
    elif strategy.cp_algo != Strategy.__dataclass_fields__["cp_algo"].default:   # kept for when cp grows again
        out["cpa"] = strategy.cp_algo
    for short, name in EXPERT_INTS.items():
        if getattr(strategy, name) != Strategy.__dataclass_fields__[name].default:
            out[short] = str(getattr(strategy, name))
    if strategy.layer_splits:
        runs = _run_length([(s.degree, PRESET_LETTER[s.preset]) for s in strategy.layer_splits])
        out["splits"] = ",".join(f"{deg}{letter}x{n}" for (deg, letter), n in runs)
    if strategy.stage_map:
        out["stages"] = ",".join(str(n) for _, n in _run_length(list(strategy.stage_map)))
    if strategy.pipeline_layout:     # Megatron-LM's layout string, canonical (explorer/strategy/pipeline_layout.py)
        out["layout"] = strategy.pipeline_layout
    for o in OPTIONS:                # the option table's, when not their defaults (older links stay the same)
        value = getattr(strategy, o.name)
        if value != o.default:
            out[o.link] = "1" if o.kind == "bool" else ",".join(value) if o.kind == "modules" else value
    return out


def _whole(params: dict, key: str) -> int:
    text = params[key]
    if text.isascii() and text.isdigit() and len(text) > 7:
        raise ExplorerError(f"link parameter '{key}' is too large: {text[:40]!r} is more than {MAX_INT:,}")
    if not WHOLE.match(text):
        raise ExplorerError(f"link parameter '{key}' must be a whole number of digits only (no sign), got {text[:40]!r}")
    if int(text) > MAX_INT:
        raise ExplorerError(f"link parameter '{key}' is too large: {int(text):,} is more than {MAX_INT:,}")
    return int(text)


def _splits(text: str) -> tuple:
    out, total = [], 0
    for item in text.split(","):
        match = SPLIT_ITEM.match(item)
        if not match or match.group(2) not in LETTER_PRESET:
            raise ExplorerError(f"link parameter 'splits' has a malformed item {item[:40]!r} "
                                f"(expected e.g. 8mx48: degree, {'/'.join(LETTER_PRESET)}, x, layers)")
        degree, letter, count = int(match.group(1)), match.group(2), int(match.group(3))
        total += count
        if total > MAX_LAYERS:           # before anything is expanded
            raise ExplorerError(f"link parameter 'splits' lists more than {MAX_LAYERS:,} layers (MAX_LAYERS)")
        out += [LayerSplit(degree=degree, preset=LETTER_PRESET[letter])] * count
    return tuple(out)


def _stages(text: str) -> tuple:
    sizes = [int(n) if WHOLE.match(n) else -1 for n in text.split(",")]
    if any(n < 1 for n in sizes):
        raise ExplorerError(f"link parameter 'stages' must list positive layer counts, got {text[:40]!r}")
    if sum(sizes) > MAX_LAYERS:          # before anything is expanded
        raise ExplorerError(f"link parameter 'stages' lists {sum(sizes):,} layers, more than {MAX_LAYERS:,} "
                            "(MAX_LAYERS)")
    return tuple(stage for stage, n in enumerate(sizes) for _ in range(n))


def _spec_or_preset(params: dict, messages: list, what: str, default: str, directory, load, from_dict):
    """The model or cluster a link names: an inline spec, a preset, or the default with a message."""
    try:
        if f"{what}_spec" in params:
            return _spec(params, f"{what}_spec", from_dict)
        name = params.get(what, default)
        if not _is_preset(name, directory):
            raise ExplorerError(f"link parameter '{what}' names no preset: {name[:40]!r}")
        return load(name)
    except ExplorerError as err:
        messages.append(f"{err}; using the default {what} {default}")
        return load(default)


def _model(params: dict, messages: list):
    return _spec_or_preset(params, messages, "model", DEFAULT_MODEL, MODEL_DIR, load_model, model_from_dict)


def _cluster(params: dict, messages: list):
    return _spec_or_preset(params, messages, "cluster", DEFAULT_CLUSTER, CLUSTER_DIR, load_cluster,
                           cluster_from_dict)


def _strategy_fields(params: dict) -> tuple:
    """The strategy fields a link gives, and (parameter, field, error) for each it gives but that is refused."""
    fields, refused = {}, []
    readers = [(short, name, lambda k: _whole(params, k)) for short, name in {**INTS, **EXPERT_INTS}.items()]
    readers += [(short, name, lambda k, ok=ok: _choice(params, k, ok))
                for short, (name, ok) in {**CHOICES, **OPTIONAL_CHOICES}.items()]
    readers += [(short, name, lambda k: _flag(params, k)) for short, name in {**BOOLS, **OPTIONAL_BOOLS}.items()]
    readers += [("cp", "cp", lambda k: _whole(params, k)), ("cpa", "cp_algo", lambda k: _choice(params, k, CP_ALGOS))]
    readers += [(o.link, o.name, lambda k, o=o: _option(params, k, o)) for o in OPTIONS]
    readers += [("splits", "layer_splits", lambda k: _splits(params[k])),
                ("stages", "stage_map", lambda k: _stages(params[k])),
                ("layout", "pipeline_layout", lambda k: parse_layout(params[k]).text())]
    for short, name, read in readers:
        if short in params:
            try:
                fields[name] = read(short)
            except ExplorerError as err:
                if not str(err).startswith("link parameter"):      # e.g. LayerSplit(degree=0): name the parameter
                    err = ExplorerError(f"link parameter '{short}': {err}")
                refused.append((short, name, err))
    return fields, refused


def _refusal(short: str, name: str, err, base: Strategy) -> str:
    return (f"{err}; using {_shown(getattr(base, name))}" if short not in ("splits", "stages", "layout")
            else f"{err}; using the default per-layer choices")


def _shown(value) -> str:
    return ("1" if value else "0") if isinstance(value, bool) else str(value)


def _choice(params: dict, key: str, allowed: tuple) -> str:
    if params[key] not in allowed:
        raise ExplorerError(f"link parameter '{key}' must be one of {', '.join(allowed)}, got {params[key][:40]!r}")
    return params[key]


def _option(params: dict, key: str, option):
    """An option's link value (explorer/strategy/options.py): 0/1, one of its choices, or comma-separated modules
    each one of its choices (checked before any is used)."""
    if option.kind == "bool":
        return _flag(params, key)
    if option.kind == "choice":
        return _choice(params, key, option.choices)
    text = params[key]
    names = text.split(",") if len(text) <= 200 else [text]
    bad = [name for name in names if name not in option.choices]
    if bad:
        raise ExplorerError(f"link parameter '{key}' must name modules among {', '.join(option.choices)}, "
                            f"got {bad[0][:40]!r}")
    return tuple(names)


def _flag(params: dict, key: str) -> bool:
    if params[key] not in ("0", "1"):
        raise ExplorerError(f"link parameter '{key}' must be 0 or 1, got {params[key][:40]!r}")
    return params[key] == "1"


def _strategy(params: dict, model, cluster, messages: list) -> Strategy:
    fallback = None                 # the model's default strategy, built at most once
    try:
        if "strategy_spec" in params:
            strategy = _spec(params, "strategy_spec", lambda d, _: strategy_from_dict(d))
        else:
            fields, refused = _strategy_fields(params)
            # a whole link (every key encode always writes) left its other keys out because they were at
            # Strategy's defaults; a partial one (typed by hand) takes the model's default strategy for them
            whole = all(short in params for short in ALWAYS_WRITTEN)
            base = Strategy() if whole else (fallback := fallback_strategy(model, cluster))
            fields.setdefault("grad_dtype", GRAD_FROM_FRAMEWORK)    # no `gd`: the framework's own default
            try:
                strategy = _completed(base, fields)
            except ExplorerError:
                messages.extend(_refusal(short, name, err, base) for short, name, err in refused)
                raise
            messages.extend(_refusal(short, name, err, strategy) for short, name, err in refused)  # what it uses
        evaluate_checked(model, strategy, cluster)
        return strategy
    except WorkCancelled:
        raise
    except ExplorerError as err:
        messages.append(f"the shared strategy cannot run: {err}; using the default strategy")
        return fallback if fallback is not None else fallback_strategy(model, cluster)


def _completed(base: Strategy, fields: dict) -> Strategy:
    """The link's fields, the keys it leaves out taken from the default strategy `base`. Where a default
    contradicts what the link gives (sequence parallelism on, with tp = 1 in the link), that key takes
    Strategy's own default instead (off): one key at a time, then all of them; the first error otherwise.
    At most 2 + (number of fields) Strategy constructions."""
    values = {**_plain(base), **fields}
    try:
        return Strategy(**values)
    except ExplorerError as err:
        first = err
    neutral = {name: Strategy.__dataclass_fields__[name].default for name in values if name not in fields}
    missing = [name for name, value in neutral.items() if values[name] != value]
    for trial in [{name: neutral[name]} for name in missing] + [{name: neutral[name] for name in missing}]:
        try:
            return Strategy(**{**values, **trial})
        except ExplorerError:
            continue
    raise first


def _plain(strategy: Strategy) -> dict:
    return {name: getattr(strategy, name) for name in Strategy.__dataclass_fields__
            if name not in ("layer_splits", "stage_map")}


def decode(params) -> Shared:
    """Model, cluster and strategy from query parameters; defaults and messages for bad ones."""
    params = {str(k): str(v) for k, v in dict(params).items()}
    messages = []
    model = _model(params, messages)
    cluster = _cluster(params, messages)
    strategy = _strategy(params, model, cluster, messages)
    return Shared(model, cluster, strategy, messages)
