# Megatron-LM arguments for gpt-76.1b: d=32 t=8 p=4 b=2 B=1792 interleaved v=3 ZeRO-0 recompute=full fp16
# world size: 1024 (= d 32 x t 8 x p 4; torchrun --nnodes x --nproc-per-node)
# environment: CUDA_DEVICE_MAX_CONNECTIONS=1 (validate_args asserts it with t > 1 or cp > 1 before Blackwell)
--tensor-model-parallel-size 8 \
--pipeline-model-parallel-size 4 \
--context-parallel-size 1 \
--expert-model-parallel-size 1 \
--num-layers-per-virtual-pipeline-stage 5 \
--recompute-granularity full \
--recompute-method uniform \
--recompute-num-layers 1 \
--no-overlap-p2p-communication \
--micro-batch-size 2 \
--global-batch-size 1792 \
--fp16 \
--num-layers 60 \
--hidden-size 10240 \
--num-attention-heads 80 \
--ffn-hidden-size 40960 \
--seq-length 2048 \
--max-position-embeddings 2048 \
--attention-backend unfused
