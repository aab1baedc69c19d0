"""Share links (explorer.share): round trips and refusal of malformed or tampered parameters."""
import base64
import json

import pytest

from explorer import LayerSplit, load_cluster, load_model
from explorer.io.presets import DEFAULT_STRATEGY
from explorer.io.share import decode, encode

GPT3, A100 = load_model("gpt3-175b"), load_cluster("dgx-a100-80gb")


def _b64(d) -> str:
    return base64.urlsafe_b64encode(json.dumps(d).encode()).decode().rstrip("=")


@pytest.mark.parametrize("changes", [
    {},
    {"zero": 1, "overlap_dp": True, "recompute": "full"},
    {"schedule": "interleaved", "chunks": 2},
    {"layer_splits": (LayerSplit(4),) * 48 + (LayerSplit(8, "column"),) * 48},
    {"stage_map": tuple([0] * 11 + [1] * 13 + [s for s in range(2, 8) for _ in range(12)])},
    {"layer_splits": (LayerSplit(8, overrides=(("fc1", "row"),)),) * 96},
])
def test_round_trip(changes):
    strategy = DEFAULT_STRATEGY.with_(**changes)
    shared = decode(encode(GPT3, A100, strategy))
    assert (shared.model, shared.cluster, shared.strategy, shared.messages) == (GPT3, A100, strategy, [])


def test_custom_model_and_cluster_travel_as_specs():
    model = GPT3.with_seq_len(4096)
    cluster = load_cluster("classroom")
    strategy = DEFAULT_STRATEGY.with_(dp=1, tp=8, pp=8, global_batch=64)
    params = encode(model, cluster, strategy)
    assert "model_spec" in params and params["cluster"] == "classroom"
    shared = decode(params)
    assert shared.model == model and shared.strategy == strategy and not shared.messages


@pytest.mark.parametrize("params, words", [
    ({"model": "../secrets"}, "names no preset"),
    ({"model": "gpt3-175b; import os"}, "names no preset"),
    ({"cluster": "nope"}, "names no preset"),
    ({"dp": "-1"}, "'dp' must be a whole number"),
    ({"dp": "1e9"}, "'dp' must be a whole number"),
    ({"tp": "__import__('os')"}, "'tp' must be a whole number"),
    ({"sched": "zb"}, "'sched' must be one of"),
    ({"sp": "true"}, "'sp' must be 0 or 1"),
    ({"splits": "8m48"}, "malformed item"),
    ({"stages": "12,-1"}, "positive layer counts"),
    ({"stages": "1,1"}, "the shared strategy cannot run"),
    ({"model_spec": "!!!"}, "not valid base64 JSON"),
    ({"model_spec": _b64([1, 2])}, "must hold a mapping"),
    ({"model_spec": _b64({"family": "gpt", "layers": 2})}, "missing field 'hidden'"),
    ({"model_spec": "A" * 9000}, "longer than"),
    ({"cluster_spec": _b64({"name": "x"})}, "link parameter 'cluster_spec'"),
    ({"strategy_spec": _b64({"version": 7})}, "version 7 is not supported"),
    ({"tp": "64", "dp": "16"}, "the shared strategy cannot run"),
])
def test_bad_parameters_give_defaults_and_a_message(params, words):
    shared = decode(params)
    assert any(words in m for m in shared.messages), shared.messages
    assert shared.strategy is not None and shared.model is not None


def test_defaults_when_nothing_is_given():
    shared = decode({})
    assert (shared.model.name, shared.cluster.name, shared.strategy, shared.messages) == \
        ("gpt3-175b", "dgx-a100-80gb", DEFAULT_STRATEGY, [])


@pytest.mark.parametrize("params, expected", [
    ({"tp": "1"}, {"tp": 1, "dp": DEFAULT_STRATEGY.dp, "sequence_parallel": False}),
    ({"model": "gpt3-175b", "dp": "128", "tp": "1", "pp": "8"}, {"dp": 128, "tp": 1, "pp": 8,
                                                                 "sequence_parallel": False}),
    ({"dp": "32", "pp": "4"}, {"dp": 32, "pp": 4, "sequence_parallel": True, "recompute": "selective"}),
])
def test_a_partial_link_fills_the_missing_keys_and_loads(params, expected):
    """Issue 30: a link with tp=1 and no sp fell back to the default strategy (the default sp = on needs tp > 1);
    the missing keys take the defaults, sp the one that fits tp = 1 (off), and the link's own values load."""
    shared = decode(params)
    assert shared.messages == []
    assert {name: getattr(shared.strategy, name) for name in expected} == expected


def test_a_partial_link_that_cannot_run_still_says_why():
    shared = decode({"tp": "1", "sp": "1"})           # sp given by the link itself: not overridden
    assert shared.strategy == DEFAULT_STRATEGY
    assert shared.messages == ["the shared strategy cannot run: sequence parallelism needs tp > 1; "
                               "using the default strategy"]


@pytest.mark.parametrize("name", ["qwen3-30b-a3b", "deepseek-v3"])
def test_an_moe_strategy_without_expert_parallelism_travels_as_it_is(name):
    """A link leaves ep out at its default (1). It used to take the model's default strategy's ep (128 for these
    MoE presets on 1,024 H100s), so the shared strategy came back as another one."""
    from explorer.io.presets import fallback_strategy
    model, cluster = load_model(name), load_cluster("dgx-h100")
    strategy = fallback_strategy(model, cluster).with_(ep=1)
    assert "ep" not in encode(model, cluster, strategy)
    shared = decode(encode(model, cluster, strategy))
    assert (shared.strategy, shared.messages) == (strategy, [])


def test_a_whole_link_decodes_without_the_models_default_strategy(monkeypatch):
    """A link encode made carries every always-written key: decoding it builds no default strategy of the model
    (its presets: a dozen evaluations, 40 % of a link's first page run); a partial link still does."""
    import explorer.io.share as share
    calls = []
    monkeypatch.setattr(share, "fallback_strategy", lambda *a: calls.append(a) or DEFAULT_STRATEGY)
    strategy = DEFAULT_STRATEGY.with_(dp=32, pp=4)
    assert decode(encode(GPT3, A100, strategy)).strategy == strategy and calls == []
    decode({"dp": "32", "pp": "4"})
    assert len(calls) == 1


def test_a_refused_key_of_a_whole_link_names_the_value_it_uses():
    params = {**encode(GPT3, A100, DEFAULT_STRATEGY), "otp": "yes"}
    shared = decode(params)
    assert shared.strategy == DEFAULT_STRATEGY
    assert shared.messages == ["link parameter 'otp' must be 0 or 1, got 'yes'; using 0"]
    model, cluster = load_model("deepseek-v3"), load_cluster("dgx-h100")    # the preset's default strategy: e 128
    strategy = DEFAULT_STRATEGY.with_(dp=128, tp=8, pp=1, zero=1)
    shared = decode({**encode(model, cluster, strategy), "zero": "x"})     # still a whole link: e stays 1
    assert shared.strategy == strategy.with_(zero=0) and shared.strategy.ep == 1
    assert shared.messages == ["link parameter 'zero' must be a whole number of digits only (no sign), got 'x'; using 0"]


def test_a_context_parallel_algorithm_travels_while_cp_is_1():
    """The sidebar keeps the CP algorithm when cp goes back to 1; a link keeps it too (written only when not ring)."""
    strategy = DEFAULT_STRATEGY.with_(cp_algo="ulysses")
    assert decode(encode(GPT3, A100, strategy)).strategy == strategy
    assert "cpa" not in encode(GPT3, A100, DEFAULT_STRATEGY)


def test_a_preset_is_read_once_and_again_when_its_file_changes(tmp_path):
    """encode runs on every page run: the preset it compares a model with is read from its file once, and read
    again when the file changes (a server whose presets are edited links the edited ones)."""
    import dataclasses
    import os
    from explorer.io import share
    base = load_model("gpt3-175b")
    (tmp_path / "gpt3-175b.json").write_text("{}")
    reads = []

    def load(name):
        reads.append(name)
        return base if len(reads) == 1 else dataclasses.replace(base, layers=base.layers + 1)
    assert share._matches_preset(base, tmp_path, load) and share._matches_preset(base, tmp_path, load)
    assert reads == ["gpt3-175b"]
    os.utime(tmp_path / "gpt3-175b.json", ns=(1, 1))                   # the file changed
    assert not share._matches_preset(base, tmp_path, load) and len(reads) == 2
    assert not share._matches_preset(dataclasses.replace(base, name="not-there"), tmp_path, load)
    assert not share._matches_preset(dataclasses.replace(base, name="../x"), tmp_path, load)
