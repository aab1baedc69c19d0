# Megatron-LM arguments for gpt-529.6b: d=9 t=8 p=35 b=1 B=2520 interleaved v=3 ZeRO-0 recompute=full fp16
# world size: 2520 (= d 9 x t 8 x p 35; torchrun --nnodes x --nproc-per-node)
# environment: CUDA_DEVICE_MAX_CONNECTIONS=1 (validate_args asserts it with t > 1 or cp > 1 before Blackwell)
--tensor-model-parallel-size 8 \
--pipeline-model-parallel-size 35 \
--context-parallel-size 1 \
--expert-model-parallel-size 1 \
--num-layers-per-virtual-pipeline-stage 1 \
--recompute-granularity full \
--recompute-method uniform \
--recompute-num-layers 1 \
--no-overlap-p2p-communication \
--micro-batch-size 1 \
--global-batch-size 2520 \
--fp16 \
--num-layers 105 \
--hidden-size 20480 \
--num-attention-heads 128 \
--ffn-hidden-size 81920 \
--seq-length 2048 \
--max-position-embeddings 2048 \
--attention-backend unfused
