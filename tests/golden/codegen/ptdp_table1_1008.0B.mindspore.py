# -*- coding: utf-8 -*-
# MindSpore semi-auto-parallel configuration for gpt-1008.0b: d=6 t=8 p=64 b=1 B=3072 1f1b ZeRO-0 recompute=full fp16
# Primitive.shard(in_strategy): one tuple per input, one cut per dimension; activations' first
# dimension also carries the data-parallel degree d=6.
import mindspore as ms

ms.set_auto_parallel_context(
    parallel_mode="semi_auto_parallel",
    device_num=3072,
    pipeline_stages=64,
    enable_parallel_optimizer=False,
    gradient_fp32_sync=False,  # gradients reduced in fp16
)

COMPUTE_DTYPE = ms.float16  # net = ms.amp.auto_mixed_precision(net, "O3", dtype=COMPUTE_DTYPE)

MICRO_BATCHES = 512  # net = nn.PipelineCell(net, micro_size=MICRO_BATCHES)
STAGE_OF_LAYER = (0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15, 16, 16, 17, 17, 18, 18, 19, 19, 20, 20, 21, 21, 22, 22, 23, 23, 24, 24, 25, 25, 26, 26, 27, 27, 28, 28, 29, 29, 30, 30, 31, 31, 32, 32, 33, 33, 34, 34, 35, 35, 36, 36, 37, 37, 38, 38, 39, 39, 40, 40, 41, 41, 42, 42, 43, 43, 44, 44, 45, 45, 46, 46, 47, 47, 48, 48, 49, 49, 50, 50, 51, 51, 52, 52, 53, 53, 54, 54, 55, 55, 56, 56, 57, 57, 58, 58, 59, 59, 60, 60, 61, 61, 62, 62, 63, 63)  # layer i: cell.pipeline_stage

# full recomputation: layer_cell.recompute() on every transformer layer

SHARD = {
    "embedding": {
        "embed": ((8, 1), (6, 1)),  # Gather, row
        "emb_dropout": ((6, 1, 1),),  # Dropout, replicated
    },
    "layers 0-127": {
        "ln1": ((6, 1, 1), (1,), (1,)),  # LayerNorm, replicated
        "qkv": ((6, 1), (1, 8)),  # MatMul, column
        "score": ((6, 8, 1, 1), (6, 8, 1, 1)),  # BatchMatMul, heads
        "softmax": ((6, 8, 1, 1),),  # Softmax, heads
        "attn_dropout": ((6, 8, 1, 1),),  # Dropout, heads
        "context": ((6, 8, 1, 1), (6, 8, 1, 1)),  # BatchMatMul, heads
        "proj": ((6, 8), (8, 1)),  # MatMul, row
        "add1": ((6, 1, 1), (6, 1, 1)),  # Add, replicated
        "ln2": ((6, 1, 1), (1,), (1,)),  # LayerNorm, replicated
        "fc1": ((6, 1), (1, 8)),  # MatMul, column
        "gelu": ((6, 1, 8),),  # GeLU, follow
        "fc2": ((6, 8), (8, 1)),  # MatMul, row
        "add2": ((6, 1, 1), (6, 1, 1)),  # Add, replicated
    },
    "head": {
        "final_ln": ((6, 1, 1), (1,), (1,)),  # LayerNorm, replicated
        "logits": ((6, 1), (1, 8)),  # MatMul, column
        "loss": ((6, 8), (6, 8)),  # SoftmaxCrossEntropyWithLogits, follow
    },
}
