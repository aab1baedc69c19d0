# Megatron-LM arguments for gpt-18.4b: d=32 t=8 p=1 b=8 B=1024 1f1b ZeRO-0 recompute=full fp16
# world size: 256 (= d 32 x t 8 x p 1; torchrun --nnodes x --nproc-per-node)
# environment: CUDA_DEVICE_MAX_CONNECTIONS=1 (validate_args asserts it with t > 1 or cp > 1 before Blackwell)
--tensor-model-parallel-size 8 \
--pipeline-model-parallel-size 1 \
--context-parallel-size 1 \
--expert-model-parallel-size 1 \
--recompute-granularity full \
--recompute-method uniform \
--recompute-num-layers 1 \
--micro-batch-size 8 \
--global-batch-size 1024 \
--fp16 \
--num-layers 40 \
--hidden-size 6144 \
--num-attention-heads 48 \
--ffn-hidden-size 24576 \
--seq-length 2048 \
--max-position-embeddings 2048 \
--attention-backend unfused
