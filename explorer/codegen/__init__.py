"""Framework configurations from a strategy: Megatron-LM, Megatron-Bridge, DeepSpeed, torchtitan, MindSpore.

Each exporter is a pure function of (model, strategy[, cluster]) returning text (DeepSpeed: a dict, written
as JSON by `export`); each refuses, with one ExplorerError line naming the reason, what its framework cannot
express. `export(framework, model, strategy, cluster)` checks the strategy against the model first
(explorer.strategy.rules) and returns the text to write; `framework_notes(framework, model, strategy)` says
what the file expresses and what the framework would do differently on its own (each exporter's `notes`).
Import back: explorer.codegen.imports.
"""
from __future__ import annotations

import json

from explorer.codegen.deepspeed import deepspeed_config
from explorer.codegen import deepspeed as _deepspeed, megatron as _megatron, megatron_bridge as _bridge
from explorer.codegen import mindspore as _mindspore, torchtitan as _torchtitan
from explorer.codegen.megatron import megatron_args, parse_megatron_args
from explorer.codegen.megatron_bridge import megatron_bridge_recipe
from explorer.codegen.mindspore import mindspore_script
from explorer.codegen.torchtitan import torchtitan_toml
from explorer.codegen.common import refuse
from explorer.errors import ExplorerError
from explorer.strategy import rules

EXPORTERS = {
    "megatron": lambda model, strategy, cluster: megatron_args(model, strategy),
    "megatron-bridge": lambda model, strategy, cluster: megatron_bridge_recipe(model, strategy),
    "deepspeed": lambda model, strategy, cluster: deepspeed_config(model, strategy),
    "torchtitan": lambda model, strategy, cluster: torchtitan_toml(model, strategy),
    "mindspore": mindspore_script,
}
FRAMEWORKS = tuple(EXPORTERS)
TITLES = {"megatron": "Megatron-LM (command-line arguments)",
          "megatron-bridge": "Megatron-Bridge (Python recipe overrides)", "deepspeed": "DeepSpeed (config JSON)",
          "torchtitan": "torchtitan (TOML job config)", "mindspore": "MindSpore (semi-auto-parallel shard strategies)"}
FILE_SUFFIX = {"megatron": ".sh", "megatron-bridge": ".py", "deepspeed": ".json", "torchtitan": ".toml",
               "mindspore": ".py"}
LANGUAGE = {"megatron": "bash", "megatron-bridge": "python", "deepspeed": "json", "torchtitan": "toml",
            "mindspore": "python"}
"""The language each file is written in (for highlighting)."""
WRITES_ALL = ("megatron", "megatron-bridge")
"""The exporters that write context parallelism, experts, head sizes and latent attention."""
EXPRESSES = {
    "megatron": "parallel sizes (t, p, cp, ep; d from the world size), virtual pipeline and uneven first/last "
                "stages, recomputation, distributed optimizer or Megatron-FSDP, overlaps, batch sizes, precision "
                "and gradient dtype, the model shape, experts and attention variants",
    "megatron-bridge": "the same Megatron-Core settings as Megatron-LM, as ConfigContainer overrides: model "
                       "provider (shape, parallel sizes, recomputation), train batch sizes, mixed-precision "
                       "recipe, DDP/optimizer sharding and overlaps, CommOverlapConfig",
    "deepspeed": "batch sizes and gradient accumulation, ZeRO stage and overlap, precision and gradient dtype, "
                 "whole-layer activation checkpointing, pipeline stages (no tensor parallelism)",
    "torchtitan": "llama3 flavor, replicate/shard (FSDP) degrees, tensor and pipeline degrees, pipeline schedule "
                  "and layers per stage, batch sizes, mixed precision, full activation checkpointing",
    "mindspore": "semi-auto-parallel context (devices, stages, parallel optimizer level, gradient fp32 sync), "
                 "compute dtype, and every operator's shard() strategy per distinct layer split",
}
NOTES = {"megatron": _megatron.notes, "megatron-bridge": _bridge.notes, "deepspeed": _deepspeed.notes,
         "torchtitan": _torchtitan.notes, "mindspore": _mindspore.notes}


def export(framework: str, model, strategy, cluster) -> str:
    """The configuration text of `framework` for (model, strategy); ExplorerError if it cannot say it."""
    if framework not in EXPORTERS:
        raise ExplorerError(f"framework {str(framework)[:40]!r} is unknown; use one of {', '.join(FRAMEWORKS)}")
    rules.check(model, strategy, None, cluster)
    if strategy.cp > 1 and framework not in WRITES_ALL:   # context parallelism: Megatron-LM and -Bridge only
        raise ExplorerError(f"{TITLES.get(framework, framework)} export does not write context parallelism "
                            f"(cp={strategy.cp}) yet; export to Megatron-LM (--context-parallel-size)")
    if getattr(model, "uses_moe_graph", False) and framework not in WRITES_ALL:   # issue 11
        what = "experts" if model.is_moe else \
            "attention variants (a head size of its own, latent attention, biases, q/k norms, a window or YaRN)"
        raise refuse(TITLES.get(framework, framework).split(" (")[0],    # 'DeepSpeed', as its exporter's own refusals
                     f"{model.name} has {what}; only the Megatron-LM exporter (and Megatron-Bridge's) writes them")
    out = EXPORTERS[framework](model, strategy, cluster)
    return json.dumps(out, indent=2) + "\n" if isinstance(out, dict) else out


def framework_notes(framework: str, model, strategy) -> dict:
    """{"expresses": what the file sets, "differences": [what the framework would do on its own, and how the
    file pins it to what was costed]} -- from the exporter's own `notes`."""
    if framework not in EXPORTERS:
        raise ExplorerError(f"framework {str(framework)[:40]!r} is unknown; use one of {', '.join(FRAMEWORKS)}")
    return {"expresses": EXPRESSES[framework], "differences": list(NOTES[framework](model, strategy))}


__all__ = ["EXPORTERS", "FRAMEWORKS", "TITLES", "FILE_SUFFIX", "LANGUAGE", "EXPRESSES", "export", "framework_notes",
           "megatron_args", "parse_megatron_args", "megatron_bridge_recipe", "deepspeed_config", "torchtitan_toml",
           "mindspore_script"]
