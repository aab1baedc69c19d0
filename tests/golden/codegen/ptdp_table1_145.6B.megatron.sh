# Megatron-LM arguments for gpt-145.6b: d=24 t=8 p=8 b=2 B=2304 interleaved v=2 ZeRO-0 recompute=full fp16
# world size: 1536 (= d 24 x t 8 x p 8; torchrun --nnodes x --nproc-per-node)
# environment: CUDA_DEVICE_MAX_CONNECTIONS=1 (validate_args asserts it with t > 1 or cp > 1 before Blackwell)
--tensor-model-parallel-size 8 \
--pipeline-model-parallel-size 8 \
--context-parallel-size 1 \
--expert-model-parallel-size 1 \
--num-layers-per-virtual-pipeline-stage 5 \
--recompute-granularity full \
--recompute-method uniform \
--recompute-num-layers 1 \
--no-overlap-p2p-communication \
--micro-batch-size 2 \
--global-batch-size 2304 \
--fp16 \
--num-layers 80 \
--hidden-size 12288 \
--num-attention-heads 96 \
--ffn-hidden-size 49152 \
--seq-length 2048 \
--max-position-embeddings 2048 \
--attention-backend unfused
