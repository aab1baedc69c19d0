"""Writes tests/golden/codegen/: each exporter's output (or refusal) for the golden strategies.

Run once, and again only when an exporter is changed on purpose (review the diff):
    python tests/golden/make_codegen_golden.py
Strategies: the ten rows of Narayanan et al. SC'21 Table 1 (explorer.validation.cases, group
megatron_table1), GPT-3 175B under a Megatron-style strategy with SP, selective recomputation, ZeRO-1 and
interleaving, tiny-gpt with mixed per-layer splits (Megatron refuses it, MindSpore expresses it), and
Llama 2 7B under a torchtitan-style (FSDP + TP/SP), a DeepSpeed-style (pipeline + ZeRO-1) and an
interleaved TP+SP strategy.
File names: <case>.<framework><suffix>, or <case>.<framework>.refused holding the refusal line.
tests/test_codegen.py compares every file exactly.
"""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from explorer.codegen import FILE_SUFFIX, FRAMEWORKS, export  # noqa: E402
from explorer.errors import ExplorerError  # noqa: E402
from explorer.io.clusters import load_cluster  # noqa: E402
from explorer.io.models import load_model  # noqa: E402
from explorer.strategy.strategy import LayerSplit, Strategy  # noqa: E402
from explorer.validation.cases import load_cases  # noqa: E402

OUT = Path(__file__).with_name("codegen")
CLUSTER = "dgx-a100-80gb"

GPT3_175B = Strategy(dp=8, tp=8, pp=16, micro_batch=1, global_batch=1536, schedule="interleaved", chunks=2,
                     zero=1, recompute="selective", sequence_parallel=True, overlap_dp=True, dtype="bf16")
"""GPT-3 175B on 1024 GPUs; B = 1536 sequences of 2048 tokens = 3.2M tokens (Brown et al. 2020, Table 2.1)."""
PER_LAYER = Strategy(dp=2, tp=2, pp=2, micro_batch=2, global_batch=8, layer_splits=(
    LayerSplit(2, "megatron"), LayerSplit(2, "column"), LayerSplit(1, "replicated"), LayerSplit(2, "batch")))
"""tiny-gpt's four layers split four ways: Megatron's pairing, all-column, replicated, batch (degrees 2, 2, 1, 2)."""
LLAMA_FSDP_TP = Strategy(dp=8, tp=2, pp=1, micro_batch=1, global_batch=64, zero=3, recompute="full",
                         sequence_parallel=True, dtype="bf16", grad_dtype="fp32", overlap_dp=True)
"""Llama 2 7B, torchtitan-style: FSDP (ZeRO-3) over d=8, TP+SP 2, no pipeline (the rules refuse ZeRO-3 with pp),
gradients reduced in fp32 (torchtitan's FSDP reduces in float32) and under the backward (as FSDP does)."""
LLAMA_PP_ZERO1 = Strategy(dp=8, tp=1, pp=4, micro_batch=1, global_batch=64, zero=1, recompute="full", dtype="bf16")
"""Llama 2 7B, DeepSpeed-style: four pipeline stages, ZeRO-1 over d=8, no tensor parallelism."""

LLAMA_INTERLEAVED = Strategy(dp=4, tp=2, pp=4, micro_batch=1, global_batch=64, schedule="interleaved", chunks=2,
                             recompute="selective", sequence_parallel=True, dtype="bf16")
"""Llama 2 7B (32 layers) on 32 devices: TP+SP 2, four interleaved stages of two 4-layer chunks each."""


def cases() -> list:
    """(name, model, strategy) of every golden case."""
    out = [(c.id, c.model, c.strategy) for c in load_cases() if c.group == "megatron_table1"]
    out.append(("gpt3-175b_interleaved_sp", load_model("gpt3-175b"), GPT3_175B))
    out.append(("tiny-gpt_per_layer", load_model("tiny-gpt"), PER_LAYER))
    out.append(("llama2-7b_fsdp_tp_sp", load_model("llama2-7b"), LLAMA_FSDP_TP))
    out.append(("llama2-7b_pp_zero1", load_model("llama2-7b"), LLAMA_PP_ZERO1))
    out.append(("llama2-7b_interleaved_tp_sp", load_model("llama2-7b"), LLAMA_INTERLEAVED))
    return out


def render(framework: str, model, strategy) -> tuple:
    """(file name suffix, text): the exporter's text, or '.refused' and the refusal line."""
    try:
        return FILE_SUFFIX[framework], export(framework, model, strategy, load_cluster(CLUSTER))
    except ExplorerError as err:
        return ".refused", f"{err}\n"


def main() -> None:
    OUT.mkdir(exist_ok=True)
    for old in OUT.iterdir():
        old.unlink()
    for name, model, strategy in cases():
        for framework in FRAMEWORKS:
            suffix, text = render(framework, model, strategy)
            (OUT / f"{name}.{framework}{suffix}").write_text(text, encoding="utf-8")
    print(f"wrote {len(list(OUT.iterdir()))} files to {OUT}")


if __name__ == "__main__":
    main()
