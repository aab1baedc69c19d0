# -*- coding: utf-8 -*-
# MindSpore semi-auto-parallel configuration for gpt-145.6b: d=24 t=8 p=8 b=2 B=2304 interleaved v=2 ZeRO-0 recompute=full fp16
# Primitive.shard(in_strategy): one tuple per input, one cut per dimension; activations' first
# dimension also carries the data-parallel degree d=24.
import mindspore as ms

ms.set_auto_parallel_context(
    parallel_mode="semi_auto_parallel",
    device_num=1536,
    pipeline_stages=8,
    pipeline_config={"pipeline_interleave": True, "pipeline_scheduler": "1f1b"},
    enable_parallel_optimizer=False,
    gradient_fp32_sync=False,  # gradients reduced in fp16
)

COMPUTE_DTYPE = ms.float16  # net = ms.amp.auto_mixed_precision(net, "O3", dtype=COMPUTE_DTYPE)

MICRO_BATCHES = 48  # net = nn.PipelineCell(net, micro_size=MICRO_BATCHES)
STAGE_OF_LAYER = (0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 4, 4, 4, 4, 4, 5, 5, 5, 5, 5, 6, 6, 6, 6, 6, 7, 7, 7, 7, 7, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 4, 4, 4, 4, 4, 5, 5, 5, 5, 5, 6, 6, 6, 6, 6, 7, 7, 7, 7, 7)  # layer i: cell.pipeline_stage
CHUNK_OF_LAYER = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1)  # layer i: its model chunk on the stage

# full recomputation: layer_cell.recompute() on every transformer layer

SHARD = {
    "embedding": {
        "embed": ((8, 1), (24, 1)),  # Gather, row
        "emb_dropout": ((24, 1, 1),),  # Dropout, replicated
    },
    "layers 0-79": {
        "ln1": ((24, 1, 1), (1,), (1,)),  # LayerNorm, replicated
        "qkv": ((24, 1), (1, 8)),  # MatMul, column
        "score": ((24, 8, 1, 1), (24, 8, 1, 1)),  # BatchMatMul, heads
        "softmax": ((24, 8, 1, 1),),  # Softmax, heads
        "attn_dropout": ((24, 8, 1, 1),),  # Dropout, heads
        "context": ((24, 8, 1, 1), (24, 8, 1, 1)),  # BatchMatMul, heads
        "proj": ((24, 8), (8, 1)),  # MatMul, row
        "add1": ((24, 1, 1), (24, 1, 1)),  # Add, replicated
        "ln2": ((24, 1, 1), (1,), (1,)),  # LayerNorm, replicated
        "fc1": ((24, 1), (1, 8)),  # MatMul, column
        "gelu": ((24, 1, 8),),  # GeLU, follow
        "fc2": ((24, 8), (8, 1)),  # MatMul, row
        "add2": ((24, 1, 1), (24, 1, 1)),  # Add, replicated
    },
    "head": {
        "final_ln": ((24, 1, 1), (1,), (1,)),  # LayerNorm, replicated
        "logits": ((24, 1), (1, 8)),  # MatMul, column
        "loss": ((24, 8), (24, 8)),  # SoftmaxCrossEntropyWithLogits, follow
    },
}
