"""What a person reads of a validated run: its model, system, precision and where it was published, instead of its id.

The evidence (explorer.validation.evidence) names the validated runs nearest to a prediction; their ids
(`mb_2511_pretrain_gpt-oss-120b_h100_bf16`) are keys, not words. `run_label(id, features, error)` says the same
run as "gpt-oss-120b on 64 H100-SXM, bf16, Megatron-Bridge 25.11 container: +3 %", from the validation case of
that id (explorer.validation.load_all_cases: its model's name, strategy and source) and the residual row's
features (accelerator, GPU count). The id stays available beside it (a page's detail, the CLI's --json).

>>> short_source("Narayanan et al., 'Efficient ...', SC'21 (arXiv:2104.04473), Table 1 (weak scaling)")
"Narayanan et al. SC'21 Table 1"
>>> short_source("NVIDIA-NeMo/Megatron-Bridge, docs/performance-summary.md (...), section '## 26.08 NeMo Container' > ...")
'Megatron-Bridge 26.08 container'
>>> short_source("NVIDIA/Megatron-LM, README.md (software: Megatron-Core r0.8.0 (legend of images/weak_scaling.png))")
'NVIDIA/Megatron-LM (Megatron-Core r0.8.0)'
>>> short_source("NVIDIA-NeMo/Megatron-Bridge, skills/nemo-mbridge-perf-moe-comm-overlap/SKILL.md (last changed ...)")
'Megatron-Bridge moe-comm-overlap A/B'
"""
from __future__ import annotations

import re
from functools import lru_cache

CONTAINER = re.compile(r"## ([\d.]+) NeMo Container")
"""Megatron-Bridge's performance summaries head each table with the NeMo container it was measured in."""
PAPER = re.compile(r"^(.+? et al\.), '[^']*', ([^ ,(]+)[^,]*, (Table \w+)")
"""A paper's table: 'Author et al., 'Title', Venue (arXiv:...), Table N'."""
SOFTWARE = re.compile(r"software: ([^;()]+)")
SKILL = re.compile(r"skills/nemo-mbridge-perf-([a-z-]+)/SKILL\.md")
"""Megatron-Bridge's performance skills publish matched A/B runs (explorer/validation/moe_ab.py)."""
METRIC_WORDS = {"layer_fwd_s": "one layer's forward", "layer_bwd_s": "one layer's backward"}
"""Rows that time less than an iteration say so."""


def short_source(source: str) -> str:
    """The publication of a validated run in a few words: the container, the paper's table, or the repository."""
    found = CONTAINER.search(source)
    if found:
        return f"Megatron-Bridge {found.group(1)} container"
    found = SKILL.search(source)
    if found:
        return f"Megatron-Bridge {found.group(1)} A/B"
    found = PAPER.match(source)
    if found:
        return " ".join(found.groups())
    repository = source.split(",", 1)[0].strip()
    software = SOFTWARE.search(source)
    return f"{repository} ({software.group(1).strip()})" if software else repository


@lru_cache(maxsize=1)
def _cases() -> dict:
    """id -> (model name, precision words, metric words, short source) of every bundled validation case."""
    from explorer.validation import GROUPS, load_all_cases, moe_ab
    out = {}
    for case in load_all_cases(GROUPS):
        s = case.strategy
        precision = f"{s.dtype} ({s.fp8_recipe})" if s.dtype == "fp8" else s.dtype
        what = moe_ab.arm(s) if case.group == moe_ab.GROUP else METRIC_WORDS.get(case.metric, "")   # which arm of its A/B
        out[case.id] = (case.model.name, precision, what, short_source(case.source))
    return out


def run_name(run_id: str, accelerator: str, gpus: int) -> str:
    """One validated run as a person reads it (module docstring); the id itself for a run no case describes."""
    known = _cases().get(run_id)
    if known is None:
        return run_id
    model, precision, metric, source = known
    joined = (" " if metric.startswith("(") else ", ") + metric if metric else ""     # an A/B arm in brackets
    return f"{model}{joined} on {gpus:,} {accelerator}, {precision}, {source}"


def run_label(run_id: str, accelerator: str, gpus: int, error: float) -> str:
    """run_name with the model's error on that run."""
    return f"{run_name(run_id, accelerator, gpus)}: {100 * error:+.0f} %"


GROUP_NAMES = {"megatron_table1": "Megatron-LM SC'21 Table 1", "korthikanti_table4": "Korthikanti et al. Table 4",
               "moe_ab_h100": "Megatron-Bridge MoE A/B runs, DGX H100", "bf16_h100": "Dense BF16 runs, H100"}
"""The A100 papers' groups (explorer.validation.cases), as their sources name them (short_source), and NVIDIA's matched
MoE A/B runs (explorer.validation.moe_ab)."""
SYSTEM_NAMES = {"h100": "DGX H100", "b200": "DGX B200", "gb200": "GB200 NVL72"}
"""Megatron-Bridge's systems, as its performance summaries name them (the Validation page's headings)."""


def group_name(group: str) -> str:
    """A validation group as a person reads it (the Validation page's metrics and legends): the group's id
    (`megatron_bridge_moe_b200`) is a key.

    >>> group_name("megatron_bridge_moe_b200"), group_name("megatron_table1"), group_name("bf16_h100")
    ('Megatron-Bridge MoE, DGX B200', "Megatron-LM SC'21 Table 1", 'Dense BF16 runs, H100')
    """
    if group in GROUP_NAMES:
        return GROUP_NAMES[group]
    found = re.fullmatch(r"megatron_bridge(_moe)?_([a-z0-9]+)", group)
    if found and found.group(2) in SYSTEM_NAMES:
        return f"Megatron-Bridge{' MoE' if found.group(1) else ''}, {SYSTEM_NAMES[found.group(2)]}"
    return group
