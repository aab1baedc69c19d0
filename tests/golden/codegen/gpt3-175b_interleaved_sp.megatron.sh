# Megatron-LM arguments for gpt3-175b: d=8 t=8 p=16 b=1 B=1536 interleaved v=2 ZeRO-1 recompute=selective SP bf16
# world size: 1024 (= d 8 x t 8 x p 16; torchrun --nnodes x --nproc-per-node)
# environment: CUDA_DEVICE_MAX_CONNECTIONS=1 (validate_args asserts it with t > 1 or cp > 1 before Blackwell)
--tensor-model-parallel-size 8 \
--pipeline-model-parallel-size 16 \
--context-parallel-size 1 \
--expert-model-parallel-size 1 \
--sequence-parallel \
--num-layers-per-virtual-pipeline-stage 3 \
--recompute-granularity selective \
--use-distributed-optimizer \
--overlap-grad-reduce \
--no-overlap-p2p-communication \
--micro-batch-size 1 \
--global-batch-size 1536 \
--bf16 \
--grad-reduce-in-bf16 \
--num-layers 96 \
--hidden-size 12288 \
--num-attention-heads 96 \
--ffn-hidden-size 49152 \
--seq-length 2048 \
--max-position-embeddings 2048 \
--attention-backend unfused
