# -*- coding: utf-8 -*-
# MindSpore semi-auto-parallel configuration for gpt-1.7b: d=32 t=1 p=1 b=16 B=512 1f1b ZeRO-0 recompute=full fp16
# Primitive.shard(in_strategy): one tuple per input, one cut per dimension; activations' first
# dimension also carries the data-parallel degree d=32.
import mindspore as ms

ms.set_auto_parallel_context(
    parallel_mode="semi_auto_parallel",
    device_num=32,
    pipeline_stages=1,
    enable_parallel_optimizer=False,
    gradient_fp32_sync=False,  # gradients reduced in fp16
)

COMPUTE_DTYPE = ms.float16  # net = ms.amp.auto_mixed_precision(net, "O3", dtype=COMPUTE_DTYPE)

# full recomputation: layer_cell.recompute() on every transformer layer

SHARD = {
    "embedding": {
        "embed": ((1, 1), (32, 1)),  # Gather, replicated
        "emb_dropout": ((32, 1, 1),),  # Dropout, replicated
    },
    "layers 0-23": {
        "ln1": ((32, 1, 1), (1,), (1,)),  # LayerNorm, replicated
        "qkv": ((32, 1), (1, 1)),  # MatMul, replicated
        "score": ((32, 1, 1, 1), (32, 1, 1, 1)),  # BatchMatMul, replicated
        "softmax": ((32, 1, 1, 1),),  # Softmax, replicated
        "attn_dropout": ((32, 1, 1, 1),),  # Dropout, replicated
        "context": ((32, 1, 1, 1), (32, 1, 1, 1)),  # BatchMatMul, replicated
        "proj": ((32, 1), (1, 1)),  # MatMul, replicated
        "add1": ((32, 1, 1), (32, 1, 1)),  # Add, replicated
        "ln2": ((32, 1, 1), (1,), (1,)),  # LayerNorm, replicated
        "fc1": ((32, 1), (1, 1)),  # MatMul, replicated
        "gelu": ((32, 1, 1),),  # GeLU, replicated
        "fc2": ((32, 1), (1, 1)),  # MatMul, replicated
        "add2": ((32, 1, 1), (32, 1, 1)),  # Add, replicated
    },
    "head": {
        "final_ln": ((32, 1, 1), (1,), (1,)),  # LayerNorm, replicated
        "logits": ((32, 1), (1, 1)),  # MatMul, replicated
        "loss": ((32, 1), (32, 1)),  # SoftmaxCrossEntropyWithLogits, replicated
    },
}
