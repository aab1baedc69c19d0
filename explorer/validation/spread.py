"""The spread of one MoE configuration published in several Megatron-Bridge containers (moved out of
explorer/validation/megatron_bridge.py, which notes it on each case)."""
from __future__ import annotations

MOE = {"deepseek-v3", "qwen3-30b-a3b", "qwen3-235b-a22b", "gpt-oss-120b"}
"""The MoE models with presets (assets/models); the other MoE rows (kimi-k2, nemotron-3, deepseek-v4)
have none."""


SAME_RUN_FIELDS = ("model", "system", "task", "num_gpus", "dtype", "fp8_recipe", "global_batch_size",
                   "micro_batch_size", "seq_len", "tensor_parallel", "pipeline_parallel", "context_parallel",
                   "virtual_pipeline", "expert_parallel", "fsdp")
"""Inputs that make two rows the same configuration run in different containers."""


def container_spread(entries) -> dict:
    """id -> note on the rows of the same configuration (SAME_RUN_FIELDS) published in other containers,
    for MoE rows with tokens/s. Such rows are kept, each a case against its own published figure (a
    container is a different software stack, and the spread is not monotonic in the container: GPT-OSS
    120B GB200 MXFP8 26.06 28.95k, 26.06.01 18.30k, 26.08 28.67k tokens/s/GPU, so neither the latest nor
    the best container is a safe single target); the note says how far apart they are."""
    groups = {}
    for e in entries:
        x, tok = e.get("inputs", {}), e.get("expected", {}).get("tokens_per_sec_per_gpu")
        if x.get("model") in MOE and tok:
            groups.setdefault(tuple(str(x.get(f)) for f in SAME_RUN_FIELDS), []).append((x["container"], float(tok), e["id"]))
    notes = {}
    for rows in groups.values():
        if len(rows) < 2:
            continue
        lo, hi = min(r[1] for r in rows), max(r[1] for r in rows)
        listed = ", ".join(f"{c.replace('NeMo ', '')} {v:.0f}" for c, v, _ in sorted(rows))
        for _, _, rid in rows:
            notes[rid] = (f"; same configuration published in {len(rows)} containers ({listed} tokens/s/GPU, "
                          f"max/min {hi / lo:.2f}): each its own case, or a skipped row with its reason")
    return notes
