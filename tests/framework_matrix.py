"""The matrix of strategies every framework's export is checked on (issue 29): dense Llama and GPT and MoE,
context parallelism, FP8, interleaved, ZeRO-1/2/3 and FSDP, fp32 gradients, uneven stages, overlaps.

MATRIX (22) is the round-trip matrix of tests/test_codegen_imports.py; FRAMEWORK_MATRIX adds strategies that the
narrower exporters (DeepSpeed: no tensor parallelism; torchtitan: FSDP or replication, fp32 gradient reduction;
MindSpore) write, so that each framework's own code sees several of its files (tests/test_framework_loads.py).
"""
from explorer.io.models import load_model
from explorer.strategy.strategy import Strategy

LLAMA, GPT, MOE = load_model("llama3-8b"), load_model("gpt3-175b"), load_model("mixtral-8x7b")
LLAMA2 = load_model("llama2-7b")


def costed_reduce_dtype(strategy) -> str:
    """The dtype the explorer costs the gradient reduction in (Strategy.grad_dtype: "model" = the parameters')."""
    if strategy.grad_dtype == "fp32" or strategy.dtype == "fp32":
        return "fp32"
    return {"fp8": "bf16"}.get(strategy.dtype, strategy.dtype)

MATRIX = [   # (model, strategy): >= 20 strategies, every kind the issue names
    (LLAMA, Strategy(dp=8, micro_batch=1, global_batch=64, zero=3, overlap_dp=True, dtype="bf16", grad_dtype="fp32")),
    (LLAMA, Strategy(dp=8, tp=2, micro_batch=1, global_batch=64, zero=3, recompute="full", sequence_parallel=True,
                     overlap_dp=True, dtype="bf16", grad_dtype="fp32")),
    (LLAMA, Strategy(dp=4, tp=2, micro_batch=2, global_batch=64, zero=3, sequence_parallel=True, overlap_dp=True,
                     overlap_tp=True, dtype="bf16", grad_dtype="fp32")),
    (LLAMA, Strategy(dp=8, pp=4, micro_batch=1, global_batch=64, zero=1, recompute="full", dtype="bf16")),
    (LLAMA, Strategy(dp=8, pp=4, micro_batch=1, global_batch=64, zero=1, overlap_dp=True, dtype="bf16",
                     grad_dtype="fp32")),
    (LLAMA, Strategy(dp=16, micro_batch=2, global_batch=128, zero=2, overlap_dp=True, dtype="fp16")),
    (LLAMA, Strategy(dp=16, micro_batch=2, global_batch=128, zero=0, overlap_dp=True, dtype="fp32")),
    (LLAMA, Strategy(dp=8, micro_batch=1, global_batch=64, zero=3, overlap_dp=True, zero_prefetch=False,
                     dtype="fp16")),
    (LLAMA, Strategy(dp=4, tp=2, pp=4, micro_batch=1, global_batch=64, schedule="interleaved", chunks=2,
                     recompute="selective", sequence_parallel=True, dtype="bf16")),
    (LLAMA, Strategy(dp=4, tp=2, pp=4, micro_batch=1, global_batch=64, schedule="interleaved", chunks=2, zero=1,
                     sequence_parallel=True, overlap_dp=True, overlap_param_gather=True, overlap_p2p=True,
                     dtype="fp8")),
    (LLAMA, Strategy(dp=2, tp=4, pp=2, micro_batch=1, global_batch=32, schedule="interleaved", chunks=4, zero=1,
                     sequence_parallel=True, overlap_dp=True, overlap_p2p=True, dtype="bf16", grad_dtype="fp32")),
    (LLAMA, Strategy(dp=4, tp=2, micro_batch=1, global_batch=32, zero=3, sequence_parallel=True, overlap_dp=True,
                     dtype="fp8")),
    (LLAMA, Strategy(dp=2, tp=2, cp=2, micro_batch=1, global_batch=16, sequence_parallel=True, zero=1,
                     overlap_dp=True, dtype="bf16")),
    (LLAMA, Strategy(dp=2, tp=2, cp=4, cp_algo="ulysses", micro_batch=1, global_batch=16, sequence_parallel=True,
                     dtype="fp8")),
    (LLAMA, Strategy(dp=2, pp=3, micro_batch=1, global_batch=12, stage_map=(0,) * 10 + (1,) * 11 + (2,) * 11,
                     dtype="bf16")),
    (LLAMA, Strategy(dp=1, tp=8, pp=2, micro_batch=1, global_batch=8, sequence_parallel=True, recompute="full",
                     dtype="bf16", grad_dtype="fp32")),
    (GPT, Strategy(dp=8, tp=8, pp=16, micro_batch=1, global_batch=1536, schedule="interleaved", chunks=2, zero=1,
                   recompute="selective", sequence_parallel=True, overlap_dp=True, dtype="bf16")),
    (GPT, Strategy(dp=16, tp=8, pp=8, micro_batch=1, global_batch=1536, recompute="full", dtype="fp16")),
    (GPT, Strategy(dp=64, pp=16, micro_batch=1, global_batch=1024, zero=1, overlap_dp=True, dtype="bf16")),
    (MOE, Strategy(dp=4, tp=2, pp=2, ep=4, micro_batch=1, global_batch=64, zero=1, sequence_parallel=True,
                   dtype="bf16")),
    (MOE, Strategy(dp=8, tp=2, ep=8, expert_tp=1, micro_batch=1, global_batch=64, zero=1, sequence_parallel=True,
                   overlap_dp=True, dtype="fp8")),
    (MOE, Strategy(dp=8, pp=4, ep=8, micro_batch=1, global_batch=64, recompute="full", dtype="bf16")),
]


FRAMEWORK_MATRIX = MATRIX + [
    (LLAMA, Strategy(dp=8, micro_batch=1, global_batch=64, zero=0, overlap_dp=True, dtype="fp32")),
    (LLAMA, Strategy(dp=16, micro_batch=2, global_batch=128, zero=2, overlap_dp=True, dtype="bf16",
                     grad_dtype="fp32")),
    (LLAMA, Strategy(dp=8, micro_batch=1, global_batch=64, zero=1, overlap_dp=True, dtype="bf16")),
    (LLAMA, Strategy(dp=4, pp=2, micro_batch=1, global_batch=64, zero=1, dtype="bf16", recompute="full")),
    (LLAMA, Strategy(dp=1, tp=2, pp=4, micro_batch=1, global_batch=32, schedule="interleaved", chunks=2,
                     sequence_parallel=True, overlap_p2p=True, recompute="full", dtype="fp32")),
    (LLAMA2, Strategy(dp=8, micro_batch=1, global_batch=64, zero=3, overlap_dp=True, dtype="bf16",
                      grad_dtype="fp32")),
    (GPT, Strategy(dp=8, pp=8, micro_batch=1, global_batch=512, zero=1, recompute="full", dtype="fp16")),
]


def run_by(strategy, framework: str):
    """`strategy` as a config of `framework` (an exporter's name or a Strategy.framework) brings it back: a Megatron-LM
    or Megatron-Bridge config names its framework, priced as Megatron-Core runs it (explorer/strategy/frameworks.py
    SENDS_WHOLE, ASYNC_DGRAD); the others keep the strategy's."""
    from dataclasses import replace
    from explorer.strategy.frameworks import SENDS_WHOLE, TARGET
    target = TARGET.get(framework, framework)
    return replace(strategy, framework=target) if target in SENDS_WHOLE else strategy
