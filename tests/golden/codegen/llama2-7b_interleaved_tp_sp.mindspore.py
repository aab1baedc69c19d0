# -*- coding: utf-8 -*-
# MindSpore semi-auto-parallel configuration for llama2-7b: d=4 t=2 p=4 b=1 B=64 interleaved v=2 ZeRO-0 recompute=selective SP bf16
# Primitive.shard(in_strategy): one tuple per input, one cut per dimension; activations' first
# dimension also carries the data-parallel degree d=4.
import mindspore as ms

ms.set_auto_parallel_context(
    parallel_mode="semi_auto_parallel",
    device_num=32,
    pipeline_stages=4,
    pipeline_config={"pipeline_interleave": True, "pipeline_scheduler": "1f1b"},
    enable_parallel_optimizer=False,
    gradient_fp32_sync=False,  # gradients reduced in bf16
)

COMPUTE_DTYPE = ms.bfloat16  # net = ms.amp.auto_mixed_precision(net, "O3", dtype=COMPUTE_DTYPE)

MICRO_BATCHES = 16  # net = nn.PipelineCell(net, micro_size=MICRO_BATCHES)
STAGE_OF_LAYER = (0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3)  # layer i: cell.pipeline_stage
CHUNK_OF_LAYER = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1)  # layer i: its model chunk on the stage

# selective recomputation: .recompute() on the score, softmax, attn_dropout and context primitives

SHARD = {
    "embedding": {
        "embed": ((2, 1), (4, 1)),  # Gather, row
    },
    "layers 0-31": {
        "rms1": ((4, 2, 1), (1,)),  # RmsNorm, seq
        "qkv": ((4, 1), (1, 2)),  # MatMul, column
        "flash_attn": ((4, 2, 1, 1), (4, 2, 1, 1), (4, 2, 1, 1)),  # FlashAttentionScore, heads
        "proj": ((4, 2), (2, 1)),  # MatMul, row
        "add1": ((4, 2, 1), (4, 2, 1)),  # Add, seq
        "rms2": ((4, 2, 1), (1,)),  # RmsNorm, seq
        "fc1": ((4, 1), (1, 2)),  # MatMul, column
        "swiglu.silu": ((4, 1, 2),),  # SiLU, follow
        "swiglu.mul": ((4, 1, 2), (4, 1, 2)),  # Mul, follow
        "fc2": ((4, 2), (2, 1)),  # MatMul, row
        "add2": ((4, 2, 1), (4, 2, 1)),  # Add, seq
    },
    "head": {
        "final_norm": ((4, 2, 1), (1,)),  # RmsNorm, seq
        "logits": ((4, 1), (1, 2)),  # MatMul, column
        "loss": ((4, 2), (4, 2)),  # SoftmaxCrossEntropyWithLogits, follow
    },
}
