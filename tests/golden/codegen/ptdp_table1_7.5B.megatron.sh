# Megatron-LM arguments for gpt-7.5b: d=32 t=4 p=1 b=16 B=512 1f1b ZeRO-0 recompute=full fp16
# world size: 128 (= d 32 x t 4 x p 1; torchrun --nnodes x --nproc-per-node)
# environment: CUDA_DEVICE_MAX_CONNECTIONS=1 (validate_args asserts it with t > 1 or cp > 1 before Blackwell)
--tensor-model-parallel-size 4 \
--pipeline-model-parallel-size 1 \
--context-parallel-size 1 \
--expert-model-parallel-size 1 \
--recompute-granularity full \
--recompute-method uniform \
--recompute-num-layers 1 \
--micro-batch-size 16 \
--global-batch-size 512 \
--fp16 \
--num-layers 36 \
--hidden-size 4096 \
--num-attention-heads 32 \
--ffn-hidden-size 16384 \
--seq-length 2048 \
--max-position-embeddings 2048 \
--attention-backend unfused
