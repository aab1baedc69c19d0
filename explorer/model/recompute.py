"""Selective recomputation of chosen modules, as Megatron-Core's --recompute-modules.

Megatron-Core (NVIDIA/Megatron-LM megatron/core/transformer/transformer_config.py @ d98e8a64,
TransformerConfig.recompute_modules, used with --recompute-granularity selective; default ["core_attn"])
recomputes, per module, either the whole submodule ("normal checkpointing": its activations are not
kept, its forward runs again in the backward) or only an output it would keep ("output-discarding
checkpointing": the module's output, which the next module saves as its input, is dropped and the
module's forward runs again). Per module, on the operators of explorer/model/graph:

* core_attn (normal): the unfused attention core -- score, softmax, dropout, context, the operators
  marked attention_core (Korthikanti et al. 2022 Sec 5); FlashAttention keeps nothing of it anyway.
* layernorm (output-discarding): the input_layernorm and pre_mlp_layernorm outputs -- the saved input
  of the operator after each layer norm (LAYER_NORMS); the norm's forward again.
* moe_act (output-discarding): the experts' activation function's output (and the clamped copy a gpt-oss
  clamp hands it) -- the saved input of the experts' second GEMM; the clamp and the activation again.
* mla_up_proj (output-discarding): the MLA up-projection and RoPE output -- the saved input of the
  attention core after it; the up-projection GEMM again.
* mlp (normal): the dense MLP submodule (fc1, its activation, fc2); its input stays (the residual
  stream the norm before it keeps).
* shared_experts (normal): the shared experts' GEMMs and activation.

'moe' (the whole MoE layer, whose recomputation replays the token dispatch's all-to-alls) and the
hybrid-model modules are not modelled: explorer.strategy.strategy refuses them.
"""
from __future__ import annotations

from explorer.strategy.strategy import RECOMPUTE_MODULES

LAYER_NORMS = ("ln1", "ln2", "rms1", "rms2")
"""A transformer layer's input_layernorm and pre_mlp_layernorm (explorer/model/graph: GPT/BERT ln1 and
ln2, Llama and the MoE layers rms1 and rms2; not MLA's latent norm nor the head's final norm)."""
DENSE_MLP = ("fc1", "gelu", "swiglu", "fc2")
MOE_ACT = ("expert_clamp", "expert_act")
"""What Megatron-Core's moe_act checkpoint holds (TEGroupedMLP.forward: CheckpointWithoutOutput around
bias_act_func -- the clamp and the activation; megatron/core/transformer/moe/experts.py at d7288711): not the
experts' second bias (gpt-oss), added by _apply_bias after linear_fc2, outside it (recomputed there until
2026-12-07: 0.44 ms per layer and micro-batch too many on B200)."""
DEFAULT = ("core_attn",)


def _discards_output(op, modules: tuple) -> bool:
    """Is `op`'s output, kept by the next operator as its input, discarded and made again (output-
    discarding checkpointing)?"""
    return ("layernorm" in modules and op.kind == "norm" and op.name in LAYER_NORMS) or \
        ("moe_act" in modules and op.expert and op.name in MOE_ACT) or \
        ("mla_up_proj" in modules and op.name == "mla_up")


def _whole(op, modules: tuple) -> bool:
    """Is `op` inside a module whose activations are all dropped (normal checkpointing: mlp, shared_experts)?"""
    return ("mlp" in modules and op.name in DENSE_MLP) or \
        ("shared_experts" in modules and op.name.startswith("shared_"))


def recomputed(op, modules: tuple) -> bool:
    """Does the backward run `op`'s forward again?"""
    return ("core_attn" in modules and op.attention_core) or _whole(op, modules) or _discards_output(op, modules)


def recomputed_names(ops, modules: tuple) -> set:
    """The names of the operators of `ops` (a block's) whose forward the backward runs again: what the cost's
    recomputation time, the host's replay and the micro-step timeline all read."""
    return {op.name for op in ops if recomputed(op, modules)}


def kept(op, prev, term, modules: tuple) -> bool:
    """Is activation `term` of `op` (after operator `prev`, None for a block's first) kept for the backward?
    core_attn drops the attention core's own tensors (the scores, softmax and dropout: ActTerm.attention_core)
    and keeps its inputs Q, K, V (Korthikanti et al. Sec 5)."""
    if ("core_attn" in modules and term.attention_core) or _whole(op, modules):
        return False
    return not (term.of == "in" and prev is not None and _discards_output(prev, modules))
