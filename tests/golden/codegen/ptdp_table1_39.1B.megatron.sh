# Megatron-LM arguments for gpt-39.1b: d=32 t=8 p=2 b=4 B=1536 1f1b ZeRO-0 recompute=full fp16
# world size: 512 (= d 32 x t 8 x p 2; torchrun --nnodes x --nproc-per-node)
# environment: CUDA_DEVICE_MAX_CONNECTIONS=1 (validate_args asserts it with t > 1 or cp > 1 before Blackwell)
--tensor-model-parallel-size 8 \
--pipeline-model-parallel-size 2 \
--context-parallel-size 1 \
--expert-model-parallel-size 1 \
--recompute-granularity full \
--recompute-method uniform \
--recompute-num-layers 1 \
--micro-batch-size 4 \
--global-batch-size 1536 \
--fp16 \
--num-layers 48 \
--hidden-size 8192 \
--num-attention-heads 64 \
--ffn-hidden-size 32768 \
--seq-length 2048 \
--max-position-embeddings 2048 \
--attention-backend unfused
