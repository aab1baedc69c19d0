"""The option table (explorer/strategy/options.py, issue 25): every option round-trips through the command line, a
share link and a strategy file; an option defined only inside a test reaches the parser, the link and the sidebar
with no other change; and the proof, fp8_param_gather (Megatron-LM --fp8-param-gather): its bytes and memory, its
refusal, its export and import."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from app_util import open_page

from app_pages import state as S
from explorer import load_cluster, load_model
from explorer.cli.args import Parser, add_strategy_flags, resolve
from explorer.codegen import export
from explorer.codegen.imports import import_config
from explorer.cost.checked import evaluate_checked
from explorer.errors import ExplorerError
from explorer.io.presets import fallback_strategy
from explorer.io.share import _strategy_fields, decode, encode
from explorer.io.strategies import strategy_from_dict, strategy_to_dict
from explorer.strategy.options import OPTIONS
from explorer.strategy.strategy import Strategy

ROOT = Path(__file__).resolve().parents[1]
BASE = dict(dp=8, tp=8, pp=1, global_batch=64, dtype="fp8", zero=1, recompute="selective", framework="generic")
"""A strategy every option's other value fits (FP8, the distributed optimizer, selective recomputation)."""


def _other(option):
    """A value of `option` other than its default."""
    if option.kind == "bool":
        return not option.default
    if option.kind == "modules":
        return (option.choices[-1],)
    return next(c for c in reversed(option.choices) if c != option.default)


def _argv(option, value) -> list:
    if option.kind == "bool":
        return [option.flag]
    return [option.flag, *value] if option.kind == "modules" else [option.flag, value]


@pytest.mark.parametrize("option", OPTIONS, ids=lambda o: o.name)
def test_every_option_round_trips_through_the_cli_the_link_and_the_file(option):
    value = _other(option)
    parser = Parser(prog="explorer")
    add_strategy_flags(parser)
    args = parser.parse_args(["--model", "gpt3-175b", "--cluster", "dgx-h100", "--gpus", "64", "--tp", "8",
                              "--global-batch", "64", "--dtype", "fp8", "--zero", "1", "--recompute", "selective",
                              *_argv(option, value)])
    strategy = resolve(args)[2]
    assert getattr(strategy, option.name) == value
    assert getattr(Strategy(**BASE), option.name) == option.default      # the flag made the difference
    params = encode(load_model("gpt3-175b"), load_cluster("dgx-h100"), strategy)
    assert option.link in params and option.link not in encode(load_model("gpt3-175b"), load_cluster("dgx-h100"),
                                                                Strategy(**BASE))
    fields, refused = _strategy_fields(params)
    assert fields[option.name] == value and not refused
    assert strategy_from_dict(json.loads(json.dumps(strategy_to_dict(strategy)))) == strategy


def test_a_bad_option_value_is_one_line_in_a_link_and_on_the_command_line():
    assert decode({"f8pg": "yes"}).messages == ["link parameter 'f8pg' must be 0 or 1, got 'yes'; using 0"]
    with pytest.raises(ExplorerError, match="fp8_param_gather must be true or false|must be true or false"):
        Strategy(**BASE, fp8_param_gather="yes")


TOY = textwrap.dedent('''
    import json, sys, types
    from pathlib import Path
    sys.path.insert(0, "tests")
    # explorer/__init__.py imports Strategy, which declares its fields from the table: load the table first (the
    # two packages as bare namespaces until the record is in), then run the packages' own __init__ files
    for name in ("explorer", "explorer.strategy"):
        package = types.ModuleType(name)
        package.__path__, package.__file__ = [name.replace(".", "/")], name.replace(".", "/") + "/__init__.py"
        sys.modules[name] = package
    from explorer.strategy import options as O
    O.OPTIONS.append(O.Option("toy_switch", "bool", False, "a toy option defined only in a test", "--toy-switch",
                              "toy help: a switch no consumer names", "toy", "Toy switch", widget_help="toy widget"))
    for name in ("explorer", "explorer.strategy"):
        exec(compile(Path(sys.modules[name].__file__).read_text(), sys.modules[name].__file__, "exec"),
             sys.modules[name].__dict__)
    from explorer.cli.args import Parser, add_strategy_flags, resolve
    from explorer.io.share import decode, encode
    from explorer.io.strategies import strategy_from_dict, strategy_to_dict
    from app_util import open_page
    from app_pages import state as S
    out = {}
    parser = Parser(prog="explorer")
    add_strategy_flags(parser)
    out["help"] = "--toy-switch" in parser.format_help() and "toy help" in parser.format_help()
    model, cluster, s, _ = resolve(parser.parse_args(["--model", "gpt3-175b", "--cluster", "dgx-a100-80gb",
                                                      "--gpus", "1024", "--tp", "8", "--pp", "8",
                                                      "--global-batch", "1536", "--toy-switch"]))
    out["cli"] = s.toy_switch
    params = encode(model, cluster, s)
    out["link"] = params.get("toy")
    shared = decode(params)
    out["decoded"] = shared.strategy.toy_switch
    out["messages"] = shared.messages
    out["file"] = strategy_from_dict(strategy_to_dict(s)) == s
    at = open_page("cost")
    keys = [w.key for w in at.sidebar.toggle]
    out["drawn"] = "w_toy_switch" in keys
    next(w for w in at.sidebar.toggle if w.key == "w_toy_switch").set_value(True).run()
    out["app_errors"] = [e.value for e in at.error] + [str(e) for e in at.exception]
    out["costed"] = at.session_state[S.LAST_VALID].strategy.toy_switch
    print(json.dumps(out))
''')


def test_an_option_defined_only_in_a_test_reaches_the_parser_the_link_the_file_and_the_sidebar():
    """The record is appended before Strategy is imported (Strategy declares its fields from the table once, on
    import), in a process of its own: nothing but the record names the option."""
    done = subprocess.run([sys.executable, "-c", TOY], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out == {"help": True, "cli": True, "link": "1", "decoded": True, "messages": [], "file": True,
                   "drawn": True, "app_errors": [], "costed": True}


# ---- the proof: fp8_param_gather -----------------------------------------------------------------------------
GPT3 = dict(dp=16, tp=8, pp=8, global_batch=1536, dtype="fp8", zero=1, grad_dtype="model")


def _pair(**extra):
    """Without and with FP8 parameters, on H100 (an MXFP8 pair on B200: MXFP8 needs Blackwell, RECIPE_HARDWARE)."""
    cluster = load_cluster("dgx-b200" if extra.get("fp8_recipe") == "mxfp8" else "dgx-h100")
    model = load_model("gpt3-175b")
    off = evaluate_checked(model, Strategy(**GPT3, **extra), cluster)
    on = evaluate_checked(model, Strategy(**GPT3, fp8_param_gather=True, **extra), cluster)
    return off, on


def test_fp8_parameters_halve_the_gather_bytes_and_drop_the_bf16_weights():
    """Megatron's distributed optimizer (ZeRO-1) reduce-scatters 2-byte gradients and all-gathers the parameters:
    BF16 at 2 B each without --fp8-param-gather, the uint8 FP8 data at 1 B with it (PARAM_GATHER_BYTES,
    param_and_grad_buffer.py). Per device, a ring all-gather sends (d-1)/d x bytes x Psi (nccl_busbw), so the
    data-parallel bytes fall by exactly 1 B x Psi x 15/16 at d = 16 (the reduce-scatter and the tied embedding's
    all-reduce stay). The parameters kept go from the BF16 weight (2 B) + Transformer Engine's FP8 copy (2 B,
    delayed scaling) to the FP8 tensor alone (2 B): 1/2."""
    off, on = _pair()
    dp_off, dp_on = off.comm_bytes_per_device["dp_comm"], on.comm_bytes_per_device["dp_comm"]
    assert on.memory_bytes_per_device["params"] == pytest.approx(off.memory_bytes_per_device["params"] / 2, rel=1e-12)
    psi = off.memory_bytes_per_device["params"] / 4             # 4 B/param without: the device's parameters
    assert on.memory_bytes_per_device["params"] == pytest.approx(2 * psi, rel=1e-12)
    assert dp_off - dp_on == pytest.approx(1 * psi * 15 / 16, rel=1e-12)   # 1 B/param less, (d-1)/d, d = 16
    assert on.iteration_time_s < off.iteration_time_s
    assert on.memory_bytes_per_device["optimizer"] == off.memory_bytes_per_device["optimizer"]   # fp32 mains kept


def test_fp8_parameters_under_mxfp8_gather_in_bf16_and_under_fsdp_gather_every_pass_in_fp8():
    off, on = _pair(fp8_recipe="mxfp8")
    assert on.comm_bytes_per_device["dp_comm"] == pytest.approx(off.comm_bytes_per_device["dp_comm"], rel=1e-12)  # 2 B: BF16
    assert on.memory_bytes_per_device["params"] < off.memory_bytes_per_device["params"]
    model, cluster = load_model("gpt3-175b"), load_cluster("dgx-h100")
    fsdp = dict(dp=128, tp=8, pp=1, global_batch=1024, dtype="fp8", zero=3, grad_dtype="model",
                recompute="full")
    a = evaluate_checked(model, Strategy(**fsdp), cluster)
    b = evaluate_checked(model, Strategy(**fsdp, fp8_param_gather=True), cluster)
    assert b.comm_bytes_per_device["zero_comm"] == pytest.approx(a.comm_bytes_per_device["zero_comm"] / 2, rel=1e-12)


@pytest.mark.parametrize("fields, named", [(dict(dtype="bf16", zero=1), "not dtype bf16 at ZeRO 1"),
                                           (dict(dtype="fp8", zero=0), "not dtype fp8 at ZeRO 0")])
def test_fp8_parameters_without_fp8_or_the_distributed_optimizer_are_refused_in_one_line(fields, named):
    with pytest.raises(ExplorerError) as err:
        Strategy(fp8_param_gather=True, **fields)
    assert named in str(err.value) and "\n" not in str(err.value)


def test_the_megatron_exporters_write_fp8_parameters_and_their_readers_read_them_back():
    model = load_model("llama2-7b")
    for recipe in ("tensorwise", "mxfp8"):
        cluster = load_cluster("dgx-b200" if recipe == "mxfp8" else "dgx-h100")     # MXFP8 needs Blackwell
        s = Strategy(dp=8, tp=1, pp=1, global_batch=64, dtype="fp8", zero=1, fp8_recipe=recipe, fp8_param_gather=True,
                     framework="megatron-lm", grad_dtype="fp32")
        text = export("megatron", model, s, cluster)
        assert "--fp8-param-gather" in text
        assert ("--reuse-grad-buf-for-mxfp8-param-ag" in text) == (recipe == "mxfp8")
        assert import_config(text, "megatron").strategy.fp8_param_gather is True
        bridge = export("megatron-bridge", model, s.with_(framework="megatron-bridge"), cluster)
        assert "cfg.mixed_precision.fp8_param_gather = True" in bridge
        assert import_config(bridge, "megatron-bridge", world_size=8).strategy.fp8_param_gather is True
        plain = export("megatron", model, s.with_(fp8_param_gather=False), cluster)
        assert "--fp8-param-gather" not in plain
        assert import_config(plain, "megatron").strategy.fp8_param_gather is False


def test_the_search_carries_fp8_parameters_and_prunes_zero_0():
    from explorer.search.space import enumerate_space
    space = enumerate_space(load_model("tiny-gpt"), 8, 32, fp8_param_gather=True)
    assert space.families and all(f.fp8_param_gather and 0 not in f.zeros for f in space.families)
    assert space.pruned["FP8 parameters without the distributed optimizer"] > 0


def test_the_sidebar_switches_fp8_parameters_on_for_fp8_only():
    at = open_page("cost")
    at.session_state[S.CLUSTER] = load_cluster("dgx-h100")
    at.run()
    toggle = lambda: next(w for w in at.sidebar.toggle if w.key == "w_fp8_param_gather")
    assert toggle().disabled                       # bf16: greyed out
    next(w for w in at.sidebar.selectbox if w.key == S.W_DTYPE).set_value("fp8").run()
    next(w for w in at.sidebar.selectbox if w.key == S.W_ZERO).set_value(1).run()
    toggle().set_value(True).run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert at.session_state[S.LAST_VALID].strategy.fp8_param_gather is True
    next(w for w in at.sidebar.selectbox if w.key == S.W_DTYPE).set_value("bf16").run()
    assert not at.error and at.session_state[S.LAST_VALID].strategy.fp8_param_gather is False
