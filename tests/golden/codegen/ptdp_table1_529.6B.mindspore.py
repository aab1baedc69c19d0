# -*- coding: utf-8 -*-
# MindSpore semi-auto-parallel configuration for gpt-529.6b: d=9 t=8 p=35 b=1 B=2520 interleaved v=3 ZeRO-0 recompute=full fp16
# Primitive.shard(in_strategy): one tuple per input, one cut per dimension; activations' first
# dimension also carries the data-parallel degree d=9.
import mindspore as ms

ms.set_auto_parallel_context(
    parallel_mode="semi_auto_parallel",
    device_num=2520,
    pipeline_stages=35,
    pipeline_config={"pipeline_interleave": True, "pipeline_scheduler": "1f1b"},
    enable_parallel_optimizer=False,
    gradient_fp32_sync=False,  # gradients reduced in fp16
)

COMPUTE_DTYPE = ms.float16  # net = ms.amp.auto_mixed_precision(net, "O3", dtype=COMPUTE_DTYPE)

MICRO_BATCHES = 280  # net = nn.PipelineCell(net, micro_size=MICRO_BATCHES)
STAGE_OF_LAYER = (0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34)  # layer i: cell.pipeline_stage
CHUNK_OF_LAYER = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2)  # layer i: its model chunk on the stage

# full recomputation: layer_cell.recompute() on every transformer layer

SHARD = {
    "embedding": {
        "embed": ((8, 1), (9, 1)),  # Gather, row
        "emb_dropout": ((9, 1, 1),),  # Dropout, replicated
    },
    "layers 0-104": {
        "ln1": ((9, 1, 1), (1,), (1,)),  # LayerNorm, replicated
        "qkv": ((9, 1), (1, 8)),  # MatMul, column
        "score": ((9, 8, 1, 1), (9, 8, 1, 1)),  # BatchMatMul, heads
        "softmax": ((9, 8, 1, 1),),  # Softmax, heads
        "attn_dropout": ((9, 8, 1, 1),),  # Dropout, heads
        "context": ((9, 8, 1, 1), (9, 8, 1, 1)),  # BatchMatMul, heads
        "proj": ((9, 8), (8, 1)),  # MatMul, row
        "add1": ((9, 1, 1), (9, 1, 1)),  # Add, replicated
        "ln2": ((9, 1, 1), (1,), (1,)),  # LayerNorm, replicated
        "fc1": ((9, 1), (1, 8)),  # MatMul, column
        "gelu": ((9, 1, 8),),  # GeLU, follow
        "fc2": ((9, 8), (8, 1)),  # MatMul, row
        "add2": ((9, 1, 1), (9, 1, 1)),  # Add, replicated
    },
    "head": {
        "final_ln": ((9, 1, 1), (1,), (1,)),  # LayerNorm, replicated
        "logits": ((9, 1), (1, 8)),  # MatMul, column
        "loss": ((9, 8), (9, 8)),  # SoftmaxCrossEntropyWithLogits, follow
    },
}
