# Megatron-LM arguments for gpt-1.7b: d=32 t=1 p=1 b=16 B=512 1f1b ZeRO-0 recompute=full fp16
# world size: 32 (= d 32 x t 1 x p 1; torchrun --nnodes x --nproc-per-node)
--tensor-model-parallel-size 1 \
--pipeline-model-parallel-size 1 \
--context-parallel-size 1 \
--expert-model-parallel-size 1 \
--recompute-granularity full \
--recompute-method uniform \
--recompute-num-layers 1 \
--micro-batch-size 16 \
--global-batch-size 512 \
--fp16 \
--num-layers 24 \
--hidden-size 2304 \
--num-attention-heads 24 \
--ffn-hidden-size 9216 \
--seq-length 2048 \
--max-position-embeddings 2048 \
--attention-backend unfused
