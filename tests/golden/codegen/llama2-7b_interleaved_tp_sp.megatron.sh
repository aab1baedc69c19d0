# Megatron-LM arguments for llama2-7b: d=4 t=2 p=4 b=1 B=64 interleaved v=2 ZeRO-0 recompute=selective SP bf16
# world size: 32 (= d 4 x t 2 x p 4; torchrun --nnodes x --nproc-per-node)
# environment: CUDA_DEVICE_MAX_CONNECTIONS=1 (validate_args asserts it with t > 1 or cp > 1 before Blackwell)
--tensor-model-parallel-size 2 \
--pipeline-model-parallel-size 4 \
--context-parallel-size 1 \
--expert-model-parallel-size 1 \
--sequence-parallel \
--num-layers-per-virtual-pipeline-stage 4 \
--recompute-granularity selective \
--no-overlap-p2p-communication \
--micro-batch-size 1 \
--global-batch-size 64 \
--bf16 \
--grad-reduce-in-bf16 \
--num-layers 32 \
--hidden-size 4096 \
--num-attention-heads 32 \
--ffn-hidden-size 11008 \
--seq-length 4096 \
--max-position-embeddings 4096 \
--swiglu \
--normalization RMSNorm \
--position-embedding-type rope \
--untie-embeddings-and-output-weights \
--disable-bias-linear \
--attention-dropout 0.0 \
--hidden-dropout 0.0 \
--attention-backend flash
