"""RoPE's base (ModelSpec.rotary_base): not a cost, but what an exported run trains. Until 2026-12-07 the exports
wrote no --rotary-base, so Megatron's default 10000 replaced Llama 3's 500000, Qwen3's and Mixtral's 1,000,000 and
gpt-oss' 150000 (each preset's value: its record in assets/models_moe_sources)."""
from __future__ import annotations

from dataclasses import replace

import pytest

from explorer.codegen import export
from explorer.codegen.imports import import_config
from explorer.cost.evaluate import evaluate
from explorer.errors import ExplorerError
from explorer.io.clusters import load_cluster
from explorer.io.models import load_model, model_from_dict
from explorer.strategy.strategy import Strategy

PUBLISHED = {"llama3-8b": 500000, "llama3-70b": 500000, "llama3.1-405b": 500000, "mixtral-8x7b": 1000000,
             "qwen3-30b-a3b": 1000000, "qwen3-235b-a22b": 1000000, "gpt-oss-120b": 150000, "llama2-7b": 0}
STRATEGY = Strategy(dp=8, micro_batch=1, global_batch=64)


@pytest.mark.parametrize("name, base", PUBLISHED.items())
def test_the_presets_carry_their_published_base(name, base):
    assert load_model(name).rotary_base == base


def test_the_base_is_not_a_cost():
    model, cluster = load_model("llama3-8b"), load_cluster("dgx-h100")
    assert evaluate(model, STRATEGY, cluster).iteration_time_s == \
        evaluate(replace(model, rotary_base=0), STRATEGY, cluster).iteration_time_s


def test_huggingface_rope_theta_is_read():
    cfg = {"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4,
           "vocab_size": 100, "max_position_embeddings": 128, "rope_theta": 500000.0}
    assert model_from_dict(cfg, "h", seq_len=64).rotary_base == 500000
    v5 = {k: v for k, v in cfg.items() if k != "rope_theta"}
    v5["rope_parameters"] = {"rope_type": "default", "rope_theta": 1e6}
    assert model_from_dict(v5, "h", seq_len=64).rotary_base == 1000000
    assert model_from_dict({k: v for k, v in cfg.items() if k != "rope_theta"}, "h", seq_len=64).rotary_base == 0
    with pytest.raises(ExplorerError, match="field 'rope_theta' must be a positive number"):
        model_from_dict({**cfg, "rope_theta": "x"}, "h", seq_len=64)


@pytest.mark.parametrize("framework, written", [("megatron", "--rotary-base 500000"),
                                                ("megatron-bridge", "cfg.model.rotary_base = 500000")])
def test_both_exporters_write_it_and_read_it_back(framework, written):
    model, cluster = load_model("llama3-8b"), load_cluster("dgx-h100")
    text = export(framework, model, STRATEGY, cluster)
    assert written in text
    assert import_config(text, framework).model["rotary_base"] == 500000
    plain = export(framework, load_model("llama2-7b"), STRATEGY, cluster)
    assert "rotary" not in plain.replace("rotary positions", "")


@pytest.mark.parametrize("bad", ["1.5", "-3", "abc", "1e12", "nan", "inf"])
def test_a_bad_base_in_a_script_is_one_line(bad):
    text = export("megatron", load_model("llama3-8b"), STRATEGY, load_cluster("dgx-h100"))
    with pytest.raises(ExplorerError, match="--rotary-base must be RoPE's base, a whole number"):
        import_config(text.replace("--rotary-base 500000", f"--rotary-base {bad}"), "megatron")


@pytest.mark.parametrize("value", [-1, 1.5, True, 10 ** 10, "500000"])
def test_bad_model_values_say_one_line(value):
    with pytest.raises(ExplorerError, match="'rotary_base' must be a whole number from 0"):
        replace(load_model("llama3-8b"), rotary_base=value)


def test_the_base_is_for_the_rotary_family():
    with pytest.raises(ExplorerError, match="'rotary_base' is for the llama family"):
        model_from_dict({"name": "g", "family": "gpt", "layers": 2, "hidden": 64, "heads": 4, "seq_len": 32,
                         "vocab": 100, "rotary_base": 500000})
