# -*- coding: utf-8 -*-
# MindSpore semi-auto-parallel configuration for llama2-7b: d=8 t=2 p=1 b=1 B=64 1f1b ZeRO-3 recompute=full SP bf16
# Primitive.shard(in_strategy): one tuple per input, one cut per dimension; activations' first
# dimension also carries the data-parallel degree d=8.
import mindspore as ms

ms.set_auto_parallel_context(
    parallel_mode="semi_auto_parallel",
    device_num=16,
    pipeline_stages=1,
    enable_parallel_optimizer=True,
    parallel_optimizer_config={"optimizer_level": "level3"},  # ZeRO-3 over d
    gradient_fp32_sync=True,  # gradients reduced in fp32
)

COMPUTE_DTYPE = ms.bfloat16  # net = ms.amp.auto_mixed_precision(net, "O3", dtype=COMPUTE_DTYPE)

# full recomputation: layer_cell.recompute() on every transformer layer

SHARD = {
    "embedding": {
        "embed": ((2, 1), (8, 1)),  # Gather, row
    },
    "layers 0-31": {
        "rms1": ((8, 2, 1), (1,)),  # RmsNorm, seq
        "qkv": ((8, 1), (1, 2)),  # MatMul, column
        "flash_attn": ((8, 2, 1, 1), (8, 2, 1, 1), (8, 2, 1, 1)),  # FlashAttentionScore, heads
        "proj": ((8, 2), (2, 1)),  # MatMul, row
        "add1": ((8, 2, 1), (8, 2, 1)),  # Add, seq
        "rms2": ((8, 2, 1), (1,)),  # RmsNorm, seq
        "fc1": ((8, 1), (1, 2)),  # MatMul, column
        "swiglu.silu": ((8, 1, 2),),  # SiLU, follow
        "swiglu.mul": ((8, 1, 2), (8, 1, 2)),  # Mul, follow
        "fc2": ((8, 2), (2, 1)),  # MatMul, row
        "add2": ((8, 2, 1), (8, 2, 1)),  # Add, seq
    },
    "head": {
        "final_norm": ((8, 2, 1), (1,)),  # RmsNorm, seq
        "logits": ((8, 1), (1, 2)),  # MatMul, column
        "loss": ((8, 2), (8, 2)),  # SoftmaxCrossEntropyWithLogits, follow
    },
}
