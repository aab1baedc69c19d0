"""Fuzzing what a stranger can send: share links, uploads and CLI arguments (issue 15).

10,000 generated share links and uploads (YAML alias bombs, deep nesting, extreme and
tiny floats, huge integers, markdown/HTML in names, random text and bytes) go through the
parsers and the library path the app and the CLI take (decode -> evaluate, upload -> model
/ cluster / strategy -> evaluate). For every case: no exception other than ExplorerError, a
refusal names its cause, a successful Result holds only finite numbers, and the case does
bounded work (tests/work.py; counted, not timed, so the bound is the same on a slow or shared
machine and with an empty disk cache -- issue 25): at most CASE_COMPILED compiled functions and
COLD_CASE_CALLS function calls plus CALLS_PER_COMPILED for each function it compiled, and, run
again (its structures now in memory), at most CASE_CALLS calls. A sample goes
through the app's first run (AppTest, its script thread counted), and ~200 argument vectors through
the CLI's main() in-process (not `search`: a search that is accepted legitimately does far more work
than one case, e.g. ~7 s of CPU for tiny-gpt on 4 GPUs cold). The seconds these take are measured by
benchmarks/bench_limits.py.
"""
from __future__ import annotations

import base64
import contextlib
import io
import json
import math
import re

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from explorer.cli.main import main as cli_main
from explorer.io.clusters import cluster_to_dict, load_cluster
from explorer.errors import ExplorerError
from explorer.cost.checked import evaluate_checked
from explorer.limits import check_result
from explorer.io.models import load_model
from explorer.model.spec import FAMILIES
from explorer.io.share import decode
from explorer.strategy import Strategy
from explorer.io.strategies import strategy_to_dict
from explorer.io.uploads import cluster_from_upload, model_from_upload, strategy_from_upload
from tests.work import measure

CASE_CALLS = 2_000_000
"""Function calls of a case run again, when what it builds is in memory (measured 2026-12 over 10,200
cases: median 4,500, 99.9th percentile 540,000 -- `validate` --, the most 810,000: a 2,048-layer
upload). ~2 s of CPU on a 2-core VM, the seconds limit this replaces."""
COLD_CASE_CALLS = 6_000_000
"""Function calls of a case's first run besides compiling: trees and outlines new to the process are
built (a 2,048-layer llama2-7b link with its own stage map: 2.3 M calls, none compiled), and modules
it is the first to need are imported (sympy 0.44 M calls, pandas 0.41 M)."""
CASE_COMPILED = 250
"""Functions one case may compile: a cold `validate` (every published run) compiles 186 since the uneven
pipeline layouts made 54 more Megatron-Bridge rows cases (issue 26 item 7: DeepSeek-V3 with its MTP
module, Llama 3.1 405B) and the rows carry their FP8 recipe, memory options and overlaps (issues 26-27);
88 before, when the rows first carried what each container ran (CUDA graph scope, dispatcher: issue 27
item 5), 22 before that; a cold tiny-gpt link 16; one per layer or per micro-batch would be thousands."""
APP_RUN_CALLS = 4_000_000
"""Calls of the app's first run (its script thread) besides compiling: 1.2-1.5 M warm, 5.0 M for the
first run of a session (16 functions compiled, pandas and plotly imported)."""

FUZZ = dict(deadline=None, suppress_health_check=list(HealthCheck), database=None)

TINY, CLASSROOM = load_model("tiny-gpt"), load_cluster("classroom")
CLASSROOM_DICT = cluster_to_dict(CLASSROOM)
STRATEGY_DICT = strategy_to_dict(Strategy(dp=2, global_batch=8))

# ---- generators ------------------------------------------------------------------------------

MARKUP = st.sampled_from([
    "[Log in](http://evil/)", "![t](http://evil/x.png)", "<script>alert(1)</script>", "<img src=x onerror=a()>",
    "**bold**", ":red[x]", "$x^2$", "`code`", "# head", "javascript:alert(1)", "www.evil.com", "a@b.cd", "\\", "\n"])
TEXT = st.text(max_size=40)
NAME = st.one_of(MARKUP, TEXT, st.sampled_from(["tiny-gpt", "tiny-mlp", "gpt3-175b", "classroom", "../../x"]))
HUGE_INT = st.one_of(st.integers(-10, 10 ** 7), st.integers(-(10 ** 400), 10 ** 400),
                     st.sampled_from([10 ** 20, 2 ** 63, 10 ** 400, -1, 0]))
EXTREME = st.one_of(HUGE_INT, st.floats(allow_nan=True, allow_infinity=True),
                    st.sampled_from([1e-300, 5e-324, 1e308, 1e-12, 0.0, -0.0, 1.5]), TEXT, st.booleans(), st.none())
SMALL_OR_EXTREME = st.one_of(st.integers(1, 64), st.integers(1, 64), EXTREME)
INT_TEXT = st.one_of(st.integers(0, 16).map(str), st.integers(0, 10 ** 30).map(str), TEXT,
                     st.sampled_from(["99999999999999999999", "-1", "1e3", "0x10", " 4", "٣", "4\n", "8; rm -rf /"]))
SPLITS = st.one_of(
    st.lists(st.tuples(st.integers(0, 9999), st.sampled_from("mcrbnz"), st.integers(0, 99999)), max_size=25)
    .map(lambda items: ",".join(f"{d}{letter}x{n}" for d, letter, n in items)),
    st.lists(st.tuples(st.sampled_from([1, 2]), st.sampled_from("mcn"), st.integers(1, 3)), max_size=4)
    .map(lambda items: ",".join(f"{d}{letter}x{n}" for d, letter, n in items)), TEXT)
STAGES = st.one_of(st.lists(st.integers(0, 9999999), max_size=25).map(lambda xs: ",".join(map(str, xs))),
                   st.lists(st.integers(1, 3), max_size=4).map(lambda xs: ",".join(map(str, xs))), TEXT)

MODEL_DICT = st.fixed_dictionaries(
    {"family": st.one_of(st.sampled_from(FAMILIES), TEXT)},
    optional={"name": NAME, "source": st.one_of(MARKUP, TEXT), "layers": SMALL_OR_EXTREME,
              "hidden": st.one_of(st.sampled_from([64, 256, 4096]), EXTREME), "heads": st.sampled_from([1, 2, 4]),
              "seq_len": SMALL_OR_EXTREME, "vocab": SMALL_OR_EXTREME, "ffn_hidden": SMALL_OR_EXTREME,
              "kv_heads": st.sampled_from([0, 1, 2]), "stage_blocks": st.lists(SMALL_OR_EXTREME, max_size=5),
              "image_size": SMALL_OR_EXTREME, "base_width": SMALL_OR_EXTREME, "extra": EXTREME})
MODEL_FIELDS = ["name", "source", "layers", "hidden", "heads", "kv_heads", "ffn_hidden", "seq_len", "vocab"]
MODEL_CHANGE = st.one_of(st.tuples(st.sampled_from(MODEL_FIELDS), SMALL_OR_EXTREME),
                         st.tuples(st.sampled_from(["name", "source"]), NAME),
                         st.tuples(st.sampled_from(["layers", "seq_len", "vocab", "hidden"]),
                                   st.sampled_from([1, 2, 8, 64, 2048, 2049, 1 << 20, 1 << 24, 10 ** 9])))
MUTATED_MODEL = st.tuples(st.sampled_from(["tiny-gpt", "tiny-mlp", "llama2-7b"]),
                          st.lists(MODEL_CHANGE, max_size=3)).map(
    lambda x: _apply({k: v for k, v in load_model(x[0]).to_dict().items() if v != [] or k != "stage_blocks"},
                     [((k,), v) for k, v in x[1]]))
CLUSTER_PATHS = [("device", "peak_tflops", "bf16"), ("device", "memory_gib"), ("device", "hbm_bandwidth_gbps"),
                 ("device", "name"), ("name",), ("levels", 0, "fanout"), ("levels", 0, "bandwidth_gbps"),
                 ("levels", 0, "latency_us"), ("levels", 1, "bandwidth_efficiency"), ("levels", 1, "name"),
                 ("efficiency", "kernel_launch_s"), ("efficiency", "gemm_max"), ("efficiency", "gemm_half_flops"),
                 ("efficiency", "hbm")]
STRATEGY_FIELDS = ["dp", "tp", "pp", "micro_batch", "global_batch", "chunks", "zero", "schedule", "recompute",
                   "layer_splits", "stage_map", "dtype", "sequence_parallel", "version"]


def _set(d: dict, path: tuple, value) -> dict:
    d = json.loads(json.dumps(d))
    target = d
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return d


PLAUSIBLE = st.sampled_from([1, 2, 4, 8, 0.5, 0.9, 10, 100, 1000])
CLUSTER_DICT = st.lists(st.tuples(st.sampled_from(CLUSTER_PATHS), st.one_of(PLAUSIBLE, PLAUSIBLE, EXTREME, NAME)),
                        max_size=3).map(
    lambda changes: _apply(CLASSROOM_DICT, changes))
STRATEGY_VALUE = st.one_of(st.sampled_from([1, 2, 4, 8, 16]), st.sampled_from([True, False, 0, 1]), EXTREME, st.sampled_from(["interleaved", "gpipe", "1f1b", "full", "fp32"]),
                           st.lists(st.integers(-1, 3), max_size=6),
                           st.lists(st.fixed_dictionaries({"degree": st.integers(0, 4)}), max_size=3))
STRATEGY_UPLOAD_DICT = st.lists(st.tuples(st.sampled_from(STRATEGY_FIELDS), STRATEGY_VALUE), max_size=2).map(
    lambda changes: _apply(STRATEGY_DICT, [((k,), v) for k, v in changes]))


def _apply(base: dict, changes) -> dict:
    out = base
    for path, value in changes:
        try:
            out = _set(out, path, value)
        except (IndexError, KeyError, TypeError, ValueError, OverflowError):
            pass
    return out


def alias_bomb(levels: int, width: int) -> str:
    lines = ["a0: &a0 [lol, lol, lol]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * width) + "]" for i in range(1, levels)]
    return "\n".join(lines) + "\nfamily: gpt\n"


def nested(depth: int, kind: str) -> str:
    return "[" * depth + "]" * depth if kind == "list" else '{"a":' * depth + "1" + "}" * depth


def dumps(d) -> str:
    try:
        return json.dumps(d)
    except (ValueError, TypeError):       # integers beyond Python's str limit: write them as text
        return json.dumps(d, default=str)


def yaml_text(d) -> str:
    def scalar(v):
        if isinstance(v, (dict, list)):
            return dumps(v)
        if isinstance(v, float) and not math.isfinite(v):
            return ".nan" if v != v else (".inf" if v > 0 else "-.inf")
        return dumps(v)
    return "".join(f"{dumps(str(k))}: {scalar(v)}\n" for k, v in d.items())


def contents(mapping_strategy):
    return st.one_of(
        mapping_strategy.map(lambda d: (".json", dumps(d).encode())),
        mapping_strategy.map(lambda d: (".yaml", yaml_text(d).encode())),
        mapping_strategy.map(lambda d: (".json", dumps(d).encode())),
        mapping_strategy.map(lambda d: (".yml", yaml_text(d).encode())),
        st.tuples(st.integers(2, 12), st.integers(2, 12)).map(lambda lw: (".yml", alias_bomb(*lw).encode())),
        st.tuples(st.integers(1, 300), st.sampled_from(["list", "dict"]), st.sampled_from([".json", ".yaml"]))
        .map(lambda x: (x[2], nested(x[0], x[1]).encode())),
        st.tuples(st.sampled_from([".json", ".yaml", ".txt", ""]), st.binary(max_size=200)),
        st.tuples(st.sampled_from([".json", ".yaml"]), TEXT.map(str.encode)))


def b64(data) -> str:
    raw = data if isinstance(data, bytes) else dumps(data).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


LINK = st.fixed_dictionaries(
    {"model": st.one_of(st.just("tiny-gpt"), st.just("tiny-mlp"), NAME),
     "cluster": st.one_of(st.just("classroom"), NAME)},
    optional={"dp": INT_TEXT, "tp": INT_TEXT, "pp": INT_TEXT, "b": INT_TEXT, "B": INT_TEXT, "v": INT_TEXT,
              "zero": INT_TEXT, "sched": st.one_of(st.sampled_from(["1f1b", "gpipe", "interleaved"]), TEXT),
              "rc": TEXT, "sp": st.sampled_from(["0", "1", "2", ""]), "dtype": TEXT, "splits": SPLITS,
              "stages": STAGES, "model_spec": st.one_of(MUTATED_MODEL.map(b64), MODEL_DICT.map(b64), TEXT, st.binary(max_size=80).map(b64)),
              "cluster_spec": st.one_of(CLUSTER_DICT.map(b64), TEXT),
              "strategy_spec": st.one_of(STRATEGY_UPLOAD_DICT.map(b64), TEXT), "junk": TEXT})

# ---- checks ---------------------------------------------------------------------------------

LINK_MESSAGE = re.compile(r"^(link parameter '[a-zA-Z_]+'|the shared strategy cannot run: ).{8,}", re.S)


def bounded(fn, *args):
    """fn(*args) -> (value or ExplorerError); any other exception fails; the case's work is bounded:
    its first run within COLD_CASE_CALLS (plus what it compiles), and, when that run did more than
    CASE_CALLS (it built something new), the same case run again within CASE_CALLS."""
    work = measure(fn, *args, errors=(ExplorerError,))
    assert work.compiled <= CASE_COMPILED and work.calls <= work.allowance(COLD_CASE_CALLS), \
        f"{work} for {args!r:.300}"
    if work.calls > CASE_CALLS:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            again = measure(fn, *args, errors=(ExplorerError,))
        assert again.compiled == 0 and again.calls <= CASE_CALLS, f"run again: {again} for {args!r:.300}"
    return work.error if work.error is not None else work.value


def assert_finite(result) -> None:
    assert check_result(result) is result
    assert math.isfinite(result.iteration_time_s) and result.iteration_time_s > 0
    assert all(math.isfinite(x) for x in result.breakdown_s.values())
    assert all(math.isfinite(x) for x in result.memory_bytes_per_device.values())


def link_to_result(params: dict):
    shared = decode(params)
    for message in shared.messages:
        assert LINK_MESSAGE.match(message), message
    return evaluate_checked(shared.model, shared.strategy, shared.cluster)


PARSERS = {"model": model_from_upload, "cluster": cluster_from_upload, "strategy": strategy_from_upload}


def upload_to_result(kind: str, name: str, data: bytes):
    """Parse (a refusal names the file) then evaluate (a refusal names the value), as the app does."""
    try:
        parsed = PARSERS[kind](name, data)
    except ExplorerError as err:
        check_refusal(err, name)
        raise
    if kind == "model":
        return evaluate_checked(parsed, Strategy(), CLASSROOM)
    if kind == "cluster":
        return evaluate_checked(TINY, Strategy(dp=2, global_batch=8), parsed)
    return evaluate_checked(TINY, parsed, CLASSROOM)


def check_refusal(err: ExplorerError, name: str | None = None) -> None:
    text = str(err)
    assert text.strip() and "\n" not in text and len(text) < 2000, text
    if name is not None:
        assert text.startswith(f"{name}: ") and len(text) > len(name) + 8, text


# ---- share links: 3,600 -------------------------------------------------------------------

@settings(max_examples=3600, **FUZZ)
@given(LINK)
def test_fuzzed_share_links_decode_and_evaluate_cleanly(params):
    out = bounded(link_to_result, params)
    if isinstance(out, ExplorerError):
        check_refusal(out)
    else:
        assert_finite(out)


# ---- uploads: 2,400 models, 2,000 clusters, 2,000 strategies ---------------------------------------

@pytest.mark.parametrize("kind,examples,mapping", [("model", 2400, st.one_of(MUTATED_MODEL, MODEL_DICT)),
                                                    ("cluster", 2000, CLUSTER_DICT),
                                                    ("strategy", 2000, STRATEGY_UPLOAD_DICT)])
def test_fuzzed_uploads_parse_and_evaluate_cleanly(kind, examples, mapping):
    @settings(max_examples=examples, **FUZZ)
    @given(contents(mapping))
    def run(upload):
        suffix, data = upload
        name = f"up{suffix}"
        out = bounded(upload_to_result, kind, name, data)
        if isinstance(out, ExplorerError):
            check_refusal(out)
        else:
            assert_finite(out)
    run()


def test_bombs_are_refused_naming_the_cause():
    for levels, width in ((9, 9), (12, 12), (5, 30)):
        out = bounded(upload_to_result, "model", "b.yaml", alias_bomb(levels, width).encode())
        assert isinstance(out, ExplorerError) and "alias" in str(out)
    out = bounded(upload_to_result, "model", "d.json", nested(5000, "list").encode())
    assert isinstance(out, ExplorerError) and "nested more than" in str(out)


# ---- the app's first run: a sample of 20 links ----------------------------------------------

@settings(max_examples=20, **FUZZ)
@given(LINK)
def test_fuzzed_links_through_the_apps_first_run(params):
    from streamlit.testing.v1 import AppTest
    from tests.app_util import APP
    at = AppTest.from_file(APP, default_timeout=60)
    for key, value in params.items():
        at.query_params[key] = value
    work = measure(at.run, threads=True)
    assert work.error is None and not at.exception, (work.error, at.exception)
    assert work.compiled <= CASE_COMPILED and work.calls <= work.allowance(APP_RUN_CALLS), f"{work} for {params}"
    shown = " ".join(str(e.value) for kind in ("error", "info", "warning", "markdown", "caption")
                     for e in at.get(kind))
    assert "Traceback" not in shown and "http://" not in shown
    for metric in at.metric:
        assert not re.search(r"\b(nan|inf)\b", str(metric.value), re.I), metric


# ---- the CLI: 200 argument vectors ---------------------------------------------------------

FLAG_VALUES = st.one_of(st.integers(-3, 64).map(str), INT_TEXT, st.sampled_from(["1f1b", "interleaved", "zb-h1",
                                                                                   "bf16", "full", "json"]))


@pytest.fixture(scope="module")
def cli_files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("cli")
    files = {"bomb.yaml": alias_bomb(9, 9), "deep.json": nested(3000, "list"), "deep.yaml": nested(3000, "dict"),
             "huge.yaml": "family: gpt\nlayers: 2\nhidden: " + "9" * 5000 + "\nheads: 2\nseq_len: 8\nvocab: 10\n",
             "tiny.json": dumps(_set(CLASSROOM_DICT, ("device", "peak_tflops", "bf16"), 1e-300)),
             "launch.json": dumps(_set(CLASSROOM_DICT, ("efficiency", "kernel_launch_s"), 1e308)),
             "cases.json": dumps([{"id": "ptdp_table1_x", "inputs": {}, "expected": {"teraflops_per_gpu": 0}}]),
             "md.json": dumps({"family": "gpt", "name": "[x](http://e/)", "layers": 2, "hidden": 64, "heads": 2,
                               "seq_len": 8, "vocab": 10}),
             "strategy.json": dumps(_set(STRATEGY_DICT, ("stage_map",), [0] * 5000))}
    for name, text in files.items():
        (folder / name).write_text(text)
    return [str(folder / name) for name in files] + ["/dev/zero", "/nonexistent.json", str(folder)]


def test_fuzzed_cli_never_prints_a_traceback(cli_files):
    files = st.sampled_from(cli_files)
    argv = st.tuples(
        st.sampled_from(["evaluate", "timeline", "validate", "models", "clusters", "bogus"]),
        st.one_of(st.just("tiny-gpt"), st.just("tiny-mlp"), files, NAME),
        st.one_of(st.just("classroom"), files, NAME),
        st.lists(st.tuples(st.sampled_from(["--gpus", "--tp", "--pp", "--dp", "--micro-batch", "--global-batch",
                                            "--chunks", "--schedule", "--zero", "--seq-len", "--strategy", "--cases",
                                            "--top", "--format", "--level", "--layer", "--recompute"]),
                           st.one_of(FLAG_VALUES, files)), max_size=5),
        st.booleans()).map(_argv)

    @settings(max_examples=200, **FUZZ)
    @given(argv)
    def run(args):
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = bounded(cli_main, args)
        assert code in (0, 2), (args, code, err.getvalue()[-500:])
        text = err.getvalue()
        assert "Traceback" not in text and "Traceback" not in out.getvalue(), args
        if code == 2:          # exactly one line, "error: ...", after what a long command said it was doing
            *notices, last = text.split("\n")[:-1] or [""]
            assert text.endswith("\n") and last.startswith("error: ") and len(last) > 10, (args, text[-500:])
            assert all(" s of computation so far, now " in line for line in notices), (args, text[-500:])
        if code == 0 and "--json" in args:
            json.loads(out.getvalue(), parse_constant=lambda c: pytest.fail(f"{c} in --json of {args}"))
    run()


def _argv(parts) -> list:
    command, model, cluster, flags, as_json = parts
    args = [command]
    if command not in ("models", "clusters", "validate"):
        args += ["--model", model, "--cluster", cluster]
    for flag, value in flags:
        args += [flag, value]
    return args + (["--json"] if as_json else [])


def test_a_level_named_with_a_newline_is_refused_in_one_line():
    """Found by the fuzzed uploads: a level (or device) name with a line break was quoted as it stood,
    so the refusal spanned two lines; names are now quoted with their escapes (repr)."""
    spec = json.loads(json.dumps(CLASSROOM_DICT))
    spec["levels"][1]["name"], spec["levels"][1]["bandwidth_efficiency"] = "\n", 2
    with pytest.raises(ExplorerError) as err:
        cluster_from_upload("up.json", json.dumps(spec).encode())
    check_refusal(err.value, "up.json")
    assert "level '\\n'" in str(err.value)
