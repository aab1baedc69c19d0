# -*- coding: utf-8 -*-
# MindSpore semi-auto-parallel configuration for gpt3-175b: d=8 t=8 p=16 b=1 B=1536 interleaved v=2 ZeRO-1 recompute=selective SP bf16
# Primitive.shard(in_strategy): one tuple per input, one cut per dimension; activations' first
# dimension also carries the data-parallel degree d=8.
import mindspore as ms

ms.set_auto_parallel_context(
    parallel_mode="semi_auto_parallel",
    device_num=1024,
    pipeline_stages=16,
    pipeline_config={"pipeline_interleave": True, "pipeline_scheduler": "1f1b"},
    enable_parallel_optimizer=True,
    parallel_optimizer_config={"optimizer_level": "level1"},  # ZeRO-1 over d
    gradient_fp32_sync=False,  # gradients reduced in bf16
)

COMPUTE_DTYPE = ms.bfloat16  # net = ms.amp.auto_mixed_precision(net, "O3", dtype=COMPUTE_DTYPE)

MICRO_BATCHES = 192  # net = nn.PipelineCell(net, micro_size=MICRO_BATCHES)
STAGE_OF_LAYER = (0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4, 5, 5, 5, 6, 6, 6, 7, 7, 7, 8, 8, 8, 9, 9, 9, 10, 10, 10, 11, 11, 11, 12, 12, 12, 13, 13, 13, 14, 14, 14, 15, 15, 15, 0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4, 5, 5, 5, 6, 6, 6, 7, 7, 7, 8, 8, 8, 9, 9, 9, 10, 10, 10, 11, 11, 11, 12, 12, 12, 13, 13, 13, 14, 14, 14, 15, 15, 15)  # layer i: cell.pipeline_stage
CHUNK_OF_LAYER = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1)  # layer i: its model chunk on the stage

# selective recomputation: .recompute() on the score, softmax, attn_dropout and context primitives

SHARD = {
    "embedding": {
        "embed": ((8, 1), (8, 1)),  # Gather, row
        "emb_dropout": ((8, 8, 1),),  # Dropout, seq
    },
    "layers 0-95": {
        "ln1": ((8, 8, 1), (1,), (1,)),  # LayerNorm, seq
        "qkv": ((8, 1), (1, 8)),  # MatMul, column
        "score": ((8, 8, 1, 1), (8, 8, 1, 1)),  # BatchMatMul, heads
        "softmax": ((8, 8, 1, 1),),  # Softmax, heads
        "attn_dropout": ((8, 8, 1, 1),),  # Dropout, heads
        "context": ((8, 8, 1, 1), (8, 8, 1, 1)),  # BatchMatMul, heads
        "proj": ((8, 8), (8, 1)),  # MatMul, row
        "add1": ((8, 8, 1), (8, 8, 1)),  # Add, seq
        "ln2": ((8, 8, 1), (1,), (1,)),  # LayerNorm, seq
        "fc1": ((8, 1), (1, 8)),  # MatMul, column
        "gelu": ((8, 1, 8),),  # GeLU, follow
        "fc2": ((8, 8), (8, 1)),  # MatMul, row
        "add2": ((8, 8, 1), (8, 8, 1)),  # Add, seq
    },
    "head": {
        "final_ln": ((8, 8, 1), (1,), (1,)),  # LayerNorm, seq
        "logits": ((8, 1), (1, 8)),  # MatMul, column
        "loss": ((8, 8), (8, 8)),  # SoftmaxCrossEntropyWithLogits, follow
    },
}
