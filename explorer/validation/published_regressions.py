"""Rows their publisher marks as runs of a regressed software stack: not a case, a skipped row with the reason.

A validation row is a measurement of a recipe as it runs. Where the source itself footnotes a row as a known
regression (a kernel slower in that container than in the ones before and after it), the row measures the bug, not
the recipe, and no cost model of the recipe should be judged on it. Such rows stay in
assets/validation/megatron_bridge.json verbatim, with their footnote marker in `row_verbatim`, and are listed among
the skipped rows with the footnote's words and what the linked issue says (never removed, never fitted on).

Only the publisher's own footnote marks a row here: a row the model misses is not a regression because it is missed.
"""
from __future__ import annotations

REGRESSIONS = {
    "[^gpt-oss-note]": (
        "Performance regression in GPT-OSS 120B pre-training is a known issue "
        "(https://github.com/NVIDIA/cudnn-frontend/issues/256). It will be resolved with the next container release.",
        "its MoE grouped GEMM with dGeGLU on Blackwell became 10x slower in cudnn-frontend 1.24.0"),
}
"""Footnote marker (as it stands in a row's row_verbatim) -> (the footnote's words, its markdown link written out as
"(url)"; what the issue it links says, in short). `[^gpt-oss-note]`: NVIDIA-NeMo/Megatron-Bridge
docs/performance-summary-archive.md line 90 (file commit 4ab94dfad3, repo snapshot 067f987df0), on the 26.06.01 GPT-OSS
120B MXFP8 rows (DGX-GB300, DGX-GB200); the linked NVIDIA/cudnn-frontend issue 256: grouped_gemm_dglu_wrapper_sm100,
the MoE grouped GEMM with the dGeGLU of GPT-OSS and DeepSeek-V3 on Blackwell, became 10x slower between
cudnn-frontend 1.23.0 and 1.24.0. The same row publishes 28,947 tokens/s/GPU in 26.06 and 28,672 in 26.08 against
18,304 in 26.06.01. The performance summaries' only other footnotes are the MoE conditions (force-balanced, dropless:
every MoE row) and an NVFP4 mapping note (NVFP4 rows are skipped as not modelled)."""


def regression_reason(entry: dict) -> str:
    """Why `entry` (a megatron_bridge.json row) is not a case because its source footnotes it as a regression; ''
    when it carries no such footnote."""
    row = str(entry.get("provenance", {}).get("row_verbatim", ""))
    for marker, (footnote, where) in REGRESSIONS.items():
        if marker in row:
            return (f"published as a known regression (its footnote: '{footnote}'; {where}): it measures the regressed "
                    "kernel, not the recipe")
    return ""
