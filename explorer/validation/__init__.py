"""Predict published training runs and compare (python -m explorer validate)."""
from explorer.validation.bf16 import load_bf16_cases
from explorer.validation.cases import Case, load_cases
from explorer.validation.megatron_bridge import load_megatron_bridge
from explorer.validation.moe_ab import load_moe_ab_cases

_RUN_NAMES = ("TARGETS", "ValidationRow", "summarize", "validate")


def __getattr__(name: str):
    """PEP 562: the prediction side (explorer.validation.run, which builds cost trees with sympy) loads on
    first use, so that reading the bundled evidence (explorer.validation.evidence) imports no sympy."""
    if name in _RUN_NAMES:
        from explorer.validation import run
        return getattr(run, name)
    raise AttributeError(f"module 'explorer.validation' has no attribute {name!r}")

GROUPS = ("megatron_table1", "korthikanti_table4", "megatron_bridge", "bf16_h100", "moe_ab_h100")
"""Selectable validation groups: the A100 groups of published.json, the Megatron-Bridge
2025-26 group (one summary per system: megatron_bridge_h100, _b200, _gb200; its MoE rows in
megatron_bridge_moe_h100, _b200, _gb200), and the dense BF16 H100 runs the BF16 GEMM efficiency is
fitted on (bf16_h100, explorer/validation/bf16.py), and NVIDIA's matched MoE A/B runs on 16 H100 (moe_ab_h100,
explorer/validation/moe_ab.py: dispatcher, EP overlap and CUDA graphs changed one at a time)."""
DEFAULT_GROUPS = GROUPS[:3]
"""What load_all_cases() loads when asked for nothing (the A100 tables and Megatron-Bridge's summaries); the
Validation page and the command line ask for every group (app_pages/validation.py, explorer/cli/validate_cmd.py)."""


def load_all_cases(groups=None) -> list:
    """The cases of the named GROUPS (DEFAULT_GROUPS by default), each with its own cluster where it names one."""
    groups = tuple(groups or DEFAULT_GROUPS)
    unknown = [g for g in groups if g not in GROUPS]
    if unknown:
        from explorer.errors import ExplorerError
        raise ExplorerError(f"validation group {unknown[0]!r} is unknown; use one of {', '.join(GROUPS)}")
    cases = [c for c in load_cases() if c.group in groups] if set(groups) & set(GROUPS[:2]) else []
    if "megatron_bridge" in groups:
        cases += load_megatron_bridge()[0]
    if "bf16_h100" in groups:
        cases += load_bf16_cases()
    if "moe_ab_h100" in groups:
        cases += load_moe_ab_cases()
    return cases


__all__ = ["Case", "DEFAULT_GROUPS", "GROUPS", "TARGETS", "ValidationRow", "load_all_cases", "load_bf16_cases",
           "load_cases", "load_megatron_bridge", "load_moe_ab_cases", "summarize", "validate"]
