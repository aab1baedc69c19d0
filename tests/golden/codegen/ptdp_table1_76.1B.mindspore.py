# -*- coding: utf-8 -*-
# MindSpore semi-auto-parallel configuration for gpt-76.1b: d=32 t=8 p=4 b=2 B=1792 interleaved v=3 ZeRO-0 recompute=full fp16
# Primitive.shard(in_strategy): one tuple per input, one cut per dimension; activations' first
# dimension also carries the data-parallel degree d=32.
import mindspore as ms

ms.set_auto_parallel_context(
    parallel_mode="semi_auto_parallel",
    device_num=1024,
    pipeline_stages=4,
    pipeline_config={"pipeline_interleave": True, "pipeline_scheduler": "1f1b"},
    enable_parallel_optimizer=False,
    gradient_fp32_sync=False,  # gradients reduced in fp16
)

COMPUTE_DTYPE = ms.float16  # net = ms.amp.auto_mixed_precision(net, "O3", dtype=COMPUTE_DTYPE)

MICRO_BATCHES = 28  # net = nn.PipelineCell(net, micro_size=MICRO_BATCHES)
STAGE_OF_LAYER = (0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3)  # layer i: cell.pipeline_stage
CHUNK_OF_LAYER = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2)  # layer i: its model chunk on the stage

# full recomputation: layer_cell.recompute() on every transformer layer

SHARD = {
    "embedding": {
        "embed": ((8, 1), (32, 1)),  # Gather, row
        "emb_dropout": ((32, 1, 1),),  # Dropout, replicated
    },
    "layers 0-59": {
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
