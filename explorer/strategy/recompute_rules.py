"""Which of selective recomputation's modules (Megatron-Core --recompute-modules, explorer/model/recompute.py)
a model has: the rule table refuses the others (explorer/strategy/rules.py _recompute_modules) and the sidebar
offers only these (explorer/strategy/options.py: the recompute_modules record's `absent`, Option.offered): one
definition for both."""
from __future__ import annotations


def _has_dense_mlp(model) -> bool:
    """A layer with a dense MLP: a dense model, or an MoE model's first dense layers / the layers between its MoE
    layers (ModelSpec.is_moe_layer). Megatron-Core's TransformerLayer recomputes 'mlp' only where the MLP is not a
    MoELayer (megatron/core/transformer/transformer_layer.py, recompute_mlp, NVIDIA/Megatron-LM at d98e8a64)."""
    if not getattr(model, "is_moe", False):
        return True
    return any(not model.is_moe_layer(i) for i in range(model.layers))


def recompute_module_absent(module: str, model):
    """Why `model` has no `module` to recompute (one line), None when it has one."""
    name = getattr(model, "name", "the model")
    if module == "mla_up_proj" and not getattr(model, "kv_lora_rank", 0):
        return f"recompute module mla_up_proj needs multi-latent attention; {name} has none"
    if module in ("moe_act", "shared_experts") and not getattr(model, "is_moe", False):
        return f"recompute modules moe_act and shared_experts need a model with experts; {name} is dense"
    if module == "shared_experts" and not (getattr(model, "shared_experts", 0) or
                                           getattr(model, "shared_ffn_hidden", 0)):
        return f"recompute module shared_experts needs shared experts; {name} has none"
    if module == "mlp" and not _has_dense_mlp(model):
        return (f"recompute module mlp recomputes a dense MLP; every layer of {name} has experts instead "
                "(recompute moe_act or shared_experts)")
    return None

