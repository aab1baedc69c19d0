"""Framework configurations from a strategy: Megatron-LM, DeepSpeed, torchtitan, MindSpore.

Each exporter is a pure function of (model, strategy[, cluster]) returning text (DeepSpeed: a dict, written
as JSON by `export`); each refuses, with one ExplorerError line naming the reason, what its framework cannot
express. `export(framework, model, strategy, cluster)` checks the strategy against the model first
(explorer.strategy.rules) and returns the text to write.
"""
from __future__ import annotations

import json

from explorer.codegen.deepspeed import deepspeed_config
from explorer.codegen.megatron import megatron_args, parse_megatron_args
from explorer.codegen.mindspore import mindspore_script
from explorer.codegen.torchtitan import torchtitan_toml
from explorer.errors import ExplorerError
from explorer.strategy import rules

EXPORTERS = {
    "megatron": lambda model, strategy, cluster: megatron_args(model, strategy),
    "deepspeed": lambda model, strategy, cluster: deepspeed_config(model, strategy),
    "torchtitan": lambda model, strategy, cluster: torchtitan_toml(model, strategy),
    "mindspore": mindspore_script,
}
FRAMEWORKS = tuple(EXPORTERS)
TITLES = {"megatron": "Megatron-LM (command-line arguments)", "deepspeed": "DeepSpeed (config JSON)",
          "torchtitan": "torchtitan (TOML job config)", "mindspore": "MindSpore (semi-auto-parallel shard strategies)"}
FILE_SUFFIX = {"megatron": ".sh", "deepspeed": ".json", "torchtitan": ".toml", "mindspore": ".py"}


def export(framework: str, model, strategy, cluster) -> str:
    """The configuration text of `framework` for (model, strategy); ExplorerError if it cannot say it."""
    if framework not in EXPORTERS:
        raise ExplorerError(f"framework {str(framework)[:40]!r} is unknown; use one of {', '.join(FRAMEWORKS)}")
    rules.check(model, strategy, None, cluster)
    if strategy.cp > 1 and framework != "megatron":   # context parallelism: written for Megatron-LM only
        raise ExplorerError(f"{TITLES.get(framework, framework)} export does not write context parallelism "
                            f"(cp={strategy.cp}) yet; export to Megatron-LM (--context-parallel-size)")
    if getattr(model, "uses_moe_graph", False) and framework != "megatron":   # issue 11
        what = "experts" if model.is_moe else "a head size of its own or latent attention"
        raise ExplorerError(f"{framework} cannot express this strategy: {model.name} has {what}; only the "
                            "Megatron-LM exporter writes them")
    out = EXPORTERS[framework](model, strategy, cluster)
    return json.dumps(out, indent=2) + "\n" if isinstance(out, dict) else out


__all__ = ["EXPORTERS", "FRAMEWORKS", "TITLES", "FILE_SUFFIX", "export", "megatron_args", "parse_megatron_args",
           "deepspeed_config", "torchtitan_toml", "mindspore_script"]
