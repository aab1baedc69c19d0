# -*- coding: utf-8 -*-
# MindSpore semi-auto-parallel configuration for llama2-7b: d=8 t=1 p=4 b=1 B=64 1f1b ZeRO-1 recompute=full bf16
# Primitive.shard(in_strategy): one tuple per input, one cut per dimension; activations' first
# dimension also carries the data-parallel degree d=8.
import mindspore as ms

ms.set_auto_parallel_context(
    parallel_mode="semi_auto_parallel",
    device_num=32,
    pipeline_stages=4,
    enable_parallel_optimizer=True,
    parallel_optimizer_config={"optimizer_level": "level1"},  # ZeRO-1 over d
    gradient_fp32_sync=False,  # gradients reduced in bf16
)

COMPUTE_DTYPE = ms.bfloat16  # net = ms.amp.auto_mixed_precision(net, "O3", dtype=COMPUTE_DTYPE)

MICRO_BATCHES = 8  # net = nn.PipelineCell(net, micro_size=MICRO_BATCHES)
STAGE_OF_LAYER = (0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3)  # layer i: cell.pipeline_stage

# full recomputation: layer_cell.recompute() on every transformer layer

SHARD = {
    "embedding": {
        "embed": ((1, 1), (8, 1)),  # Gather, replicated
    },
    "layers 0-31": {
        "rms1": ((8, 1, 1), (1,)),  # RmsNorm, replicated
        "qkv": ((8, 1), (1, 1)),  # MatMul, replicated
        "flash_attn": ((8, 1, 1, 1), (8, 1, 1, 1), (8, 1, 1, 1)),  # FlashAttentionScore, replicated
        "proj": ((8, 1), (1, 1)),  # MatMul, replicated
        "add1": ((8, 1, 1), (8, 1, 1)),  # Add, replicated
        "rms2": ((8, 1, 1), (1,)),  # RmsNorm, replicated
        "fc1": ((8, 1), (1, 1)),  # MatMul, replicated
        "swiglu.silu": ((8, 1, 1),),  # SiLU, replicated
        "swiglu.mul": ((8, 1, 1), (8, 1, 1)),  # Mul, replicated
        "fc2": ((8, 1), (1, 1)),  # MatMul, replicated
        "add2": ((8, 1, 1), (8, 1, 1)),  # Add, replicated
    },
    "head": {
        "final_norm": ((8, 1, 1), (1,)),  # RmsNorm, replicated
        "logits": ((8, 1), (1, 1)),  # MatMul, replicated
        "loss": ((8, 1), (8, 1)),  # SoftmaxCrossEntropyWithLogits, replicated
    },
}
