"""Llama 3 presets (MoE/hardware issue: the dense models of the Megatron-Bridge tables).

Architectures from Meta's reference (meta-llama/llama-models sku_list.py; the cited record is in
assets/models_moe_sources/). Their parameter counts land within 1 % of the size in the model's name
(Meta's model cards give 8.03B, 70.6B and 406B).
"""
import pytest

from explorer import Strategy, evaluate, load_cluster, load_model


@pytest.mark.parametrize("name,billions,tp,pp", [("llama3-8b", 8, 1, 1), ("llama3-70b", 70, 8, 1),
                                                  ("llama3.1-405b", 405, 8, 16)])
def test_parameter_counts(name, billions, tp, pp):
    model = load_model(name)
    assert model.family == "llama" and model.kv_heads == 8 and model.vocab == 128256
    r = evaluate(model, Strategy(dp=1, tp=tp, pp=pp, micro_batch=1, global_batch=pp), load_cluster("dgx-h100"))
    assert r.params / 1e9 == pytest.approx(billions, rel=0.01)
