# -*- coding: utf-8 -*-
# MindSpore semi-auto-parallel configuration for gpt-18.4b: d=32 t=8 p=1 b=8 B=1024 1f1b ZeRO-0 recompute=full fp16
# Primitive.shard(in_strategy): one tuple per input, one cut per dimension; activations' first
# dimension also carries the data-parallel degree d=32.
import mindspore as ms

ms.set_auto_parallel_context(
    parallel_mode="semi_auto_parallel",
    device_num=256,
    pipeline_stages=1,
    enable_parallel_optimizer=False,
    gradient_fp32_sync=False,  # gradients reduced in fp16
)

COMPUTE_DTYPE = ms.float16  # net = ms.amp.auto_mixed_precision(net, "O3", dtype=COMPUTE_DTYPE)

# full recomputation: layer_cell.recompute() on every transformer layer

SHARD = {
    "embedding": {
        "embed": ((8, 1), (32, 1)),  # Gather, row
        "emb_dropout": ((32, 1, 1),),  # Dropout, replicated
    },
    "layers 0-39": {
        "ln1": ((32, 1, 1), (1,), (1,)),  # LayerNorm, replicated
        "qkv": ((32, 1), (1, 8)),  # MatMul, column
        "score": ((32, 8, 1, 1), (32, 8, 1, 1)),  # BatchMatMul, heads
        "softmax": ((32, 8, 1, 1),),  # Softmax, heads
        "attn_dropout": ((32, 8, 1, 1),),  # Dropout, heads
        "context": ((32, 8, 1, 1), (32, 8, 1, 1)),  # BatchMatMul, heads
        "proj": ((32, 8), (8, 1)),  # MatMul, row
        "add1": ((32, 1, 1), (32, 1, 1)),  # Add, replicated
        "ln2": ((32, 1, 1), (1,), (1,)),  # LayerNorm, replicated
        "fc1": ((32, 1), (1, 8)),  # MatMul, column
        "gelu": ((32, 1, 8),),  # GeLU, follow
        "fc2": ((32, 8), (8, 1)),  # MatMul, row
        "add2": ((32, 1, 1), (32, 1, 1)),  # Add, replicated
    },
    "head": {
        "final_ln": ((32, 1, 1), (1,), (1,)),  # LayerNorm, replicated
        "logits": ((32, 1), (1, 8)),  # MatMul, column
        "loss": ((32, 8), (32, 8)),  # SoftmaxCrossEntropyWithLogits, follow
    },
}
