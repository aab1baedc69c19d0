# Megatron-LM arguments for gpt-310.1b: d=15 t=8 p=16 b=1 B=2160 interleaved v=2 ZeRO-0 recompute=full fp16
# world size: 1920 (= d 15 x t 8 x p 16; torchrun --nnodes x --nproc-per-node)
# environment: CUDA_DEVICE_MAX_CONNECTIONS=1 (validate_args asserts it with t > 1 or cp > 1 before Blackwell)
--tensor-model-parallel-size 8 \
--pipeline-model-parallel-size 16 \
--context-parallel-size 1 \
--expert-model-parallel-size 1 \
--num-layers-per-virtual-pipeline-stage 3 \
--recompute-granularity full \
--recompute-method uniform \
--recompute-num-layers 1 \
--no-overlap-p2p-communication \
--micro-batch-size 1 \
--global-batch-size 2160 \
--fp16 \
--num-layers 96 \
--hidden-size 16384 \
--num-attention-heads 128 \
--ffn-hidden-size 65536 \
--seq-length 2048 \
--max-position-embeddings 2048 \
--attention-backend unfused
