# -*- coding: utf-8 -*-
# MindSpore semi-auto-parallel configuration for tiny-gpt: d=2 t=2 p=2 b=2 B=8 1f1b ZeRO-0 recompute=none bf16
# Primitive.shard(in_strategy): one tuple per input, one cut per dimension; activations' first
# dimension also carries the data-parallel degree d=2.
import mindspore as ms

ms.set_auto_parallel_context(
    parallel_mode="semi_auto_parallel",
    device_num=8,
    pipeline_stages=2,
    enable_parallel_optimizer=False,
    gradient_fp32_sync=False,  # gradients reduced in bf16
)

COMPUTE_DTYPE = ms.bfloat16  # net = ms.amp.auto_mixed_precision(net, "O3", dtype=COMPUTE_DTYPE)

MICRO_BATCHES = 2  # net = nn.PipelineCell(net, micro_size=MICRO_BATCHES)
STAGE_OF_LAYER = (0, 0, 1, 1)  # layer i: cell.pipeline_stage

SHARD = {
    "embedding": {
        "embed": ((2, 1), (2, 1)),  # Gather, row
        "emb_dropout": ((2, 1, 1),),  # Dropout, replicated
    },
    "layer 0": {
        "ln1": ((2, 1, 1), (1,), (1,)),  # LayerNorm, replicated
        "qkv": ((2, 1), (1, 2)),  # MatMul, column
        "score": ((2, 2, 1, 1), (2, 2, 1, 1)),  # BatchMatMul, heads
        "softmax": ((2, 2, 1, 1),),  # Softmax, heads
        "attn_dropout": ((2, 2, 1, 1),),  # Dropout, heads
        "context": ((2, 2, 1, 1), (2, 2, 1, 1)),  # BatchMatMul, heads
        "proj": ((2, 2), (2, 1)),  # MatMul, row
        "add1": ((2, 1, 1), (2, 1, 1)),  # Add, replicated
        "ln2": ((2, 1, 1), (1,), (1,)),  # LayerNorm, replicated
        "fc1": ((2, 1), (1, 2)),  # MatMul, column
        "gelu": ((2, 1, 2),),  # GeLU, follow
        "fc2": ((2, 2), (2, 1)),  # MatMul, row
        "add2": ((2, 1, 1), (2, 1, 1)),  # Add, replicated
    },
    "layer 1": {
        "ln1": ((2, 1, 1), (1,), (1,)),  # LayerNorm, replicated
        "qkv": ((2, 1), (1, 2)),  # MatMul, column
        "score": ((2, 2, 1, 1), (2, 2, 1, 1)),  # BatchMatMul, heads
        "softmax": ((2, 2, 1, 1),),  # Softmax, heads
        "attn_dropout": ((2, 2, 1, 1),),  # Dropout, heads
        "context": ((2, 2, 1, 1), (2, 2, 1, 1)),  # BatchMatMul, heads
        "proj": ((2, 1), (1, 2)),  # MatMul, column
        "add1": ((2, 1, 1), (2, 1, 1)),  # Add, replicated
        "ln2": ((2, 1, 1), (1,), (1,)),  # LayerNorm, replicated
        "fc1": ((2, 1), (1, 2)),  # MatMul, column
        "gelu": ((2, 1, 2),),  # GeLU, follow
        "fc2": ((2, 1), (1, 2)),  # MatMul, column
        "add2": ((2, 1, 1), (2, 1, 1)),  # Add, replicated
    },
    "layer 2": {
        "ln1": ((2, 1, 1), (1,), (1,)),  # LayerNorm, replicated
        "qkv": ((2, 1), (1, 1)),  # MatMul, replicated
        "score": ((2, 1, 1, 1), (2, 1, 1, 1)),  # BatchMatMul, replicated
        "softmax": ((2, 1, 1, 1),),  # Softmax, replicated
        "attn_dropout": ((2, 1, 1, 1),),  # Dropout, replicated
        "context": ((2, 1, 1, 1), (2, 1, 1, 1)),  # BatchMatMul, replicated
        "proj": ((2, 1), (1, 1)),  # MatMul, replicated
        "add1": ((2, 1, 1), (2, 1, 1)),  # Add, replicated
        "ln2": ((2, 1, 1), (1,), (1,)),  # LayerNorm, replicated
        "fc1": ((2, 1), (1, 1)),  # MatMul, replicated
        "gelu": ((2, 1, 1),),  # GeLU, replicated
        "fc2": ((2, 1), (1, 1)),  # MatMul, replicated
        "add2": ((2, 1, 1), (2, 1, 1)),  # Add, replicated
    },
    "layer 3": {
        "ln1": ((4, 1, 1), (1,), (1,)),  # LayerNorm, batch
        "qkv": ((4, 1), (1, 1)),  # MatMul, batch
        "score": ((4, 1, 1, 1), (4, 1, 1, 1)),  # BatchMatMul, batch
        "softmax": ((4, 1, 1, 1),),  # Softmax, batch
        "attn_dropout": ((4, 1, 1, 1),),  # Dropout, batch
        "context": ((4, 1, 1, 1), (4, 1, 1, 1)),  # BatchMatMul, batch
        "proj": ((4, 1), (1, 1)),  # MatMul, batch
        "add1": ((4, 1, 1), (4, 1, 1)),  # Add, batch
        "ln2": ((4, 1, 1), (1,), (1,)),  # LayerNorm, batch
        "fc1": ((4, 1), (1, 1)),  # MatMul, batch
        "gelu": ((4, 1, 1),),  # GeLU, batch
        "fc2": ((4, 1), (1, 1)),  # MatMul, batch
        "add2": ((4, 1, 1), (4, 1, 1)),  # Add, batch
    },
    "head": {
        "final_ln": ((2, 1, 1), (1,), (1,)),  # LayerNorm, replicated
        "logits": ((2, 1), (1, 2)),  # MatMul, column
        "loss": ((2, 2), (2, 2)),  # SoftmaxCrossEntropyWithLogits, follow
    },
}
