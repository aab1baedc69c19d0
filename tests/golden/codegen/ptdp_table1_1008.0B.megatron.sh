# Megatron-LM arguments for gpt-1008.0b: d=6 t=8 p=64 b=1 B=3072 1f1b ZeRO-0 recompute=full fp16
# world size: 3072 (= d 6 x t 8 x p 64; torchrun --nnodes x --nproc-per-node)
# environment: CUDA_DEVICE_MAX_CONNECTIONS=1 (validate_args asserts it with t > 1 or cp > 1 before Blackwell)
--tensor-model-parallel-size 8 \
--pipeline-model-parallel-size 64 \
--context-parallel-size 1 \
--expert-model-parallel-size 1 \
--recompute-granularity full \
--recompute-method uniform \
--recompute-num-layers 1 \
--micro-batch-size 1 \
--global-batch-size 3072 \
--fp16 \
--num-layers 128 \
--hidden-size 25600 \
--num-attention-heads 160 \
--ffn-hidden-size 102400 \
--seq-length 2048 \
--max-position-embeddings 2048 \
--attention-backend unfused
