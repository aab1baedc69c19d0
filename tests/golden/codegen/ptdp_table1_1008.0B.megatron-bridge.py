# -*- coding: utf-8 -*-
# Megatron-Bridge recipe for gpt-1008.0b: d=6 t=8 p=64 b=1 B=3072 1f1b ZeRO-0 recompute=full fp16
# Megatron-Bridge (NVIDIA-NeMo/Megatron-Bridge at 067f987d (2026-08-22)): a flat performance recipe like src/megatron/bridge/perf_recipes/llama/h100/llama3.py; run it on WORLD_SIZE GPUs with scripts/training/train.sh --recipe explorer_pretrain_config (the function must be importable)
import torch
import torch.nn.functional as F
from megatron.core.transformer.enums import AttnBackend

from megatron.bridge.models.gpt_provider import GPTModelProvider
from megatron.bridge.recipes.common import _pretrain_common
from megatron.bridge.training.comm_overlap import CommOverlapConfig
from megatron.bridge.training.config import ConfigContainer
from megatron.bridge.training.mixed_precision import fp16_mixed

WORLD_SIZE = 3072  # d 6 x t 8 x cp 1 x p 64: Megatron-Bridge derives d = world size / (t cp p)
MODEL_NAME = "gpt-1008.0b"


def explorer_pretrain_config() -> ConfigContainer:
    cfg = _pretrain_common()
    cfg.model = GPTModelProvider()
    cfg.model.num_layers = 128
    cfg.model.hidden_size = 25600
    cfg.model.num_attention_heads = 160
    cfg.model.num_query_groups = 160
    cfg.model.ffn_hidden_size = 102400
    cfg.model.seq_length = 2048
    cfg.model.vocab_size = 51200
    cfg.model.attention_backend = AttnBackend.unfused
    cfg.model.tensor_model_parallel_size = 8
    cfg.model.pipeline_model_parallel_size = 64
    cfg.model.virtual_pipeline_model_parallel_size = None
    cfg.model.context_parallel_size = 1
    cfg.model.sequence_parallel = False
    cfg.model.expert_model_parallel_size = 1
    cfg.model.recompute_granularity = "full"
    cfg.model.recompute_method = "uniform"
    cfg.model.recompute_num_layers = 1
    cfg.tokenizer.tokenizer_type = "NullTokenizer"
    cfg.tokenizer.tokenizer_model = None
    cfg.tokenizer.vocab_size = 51200
    cfg.dataset.seq_length = 2048
    cfg.train.micro_batch_size = 1
    cfg.train.global_batch_size = 3072
    cfg.mixed_precision = fp16_mixed()
    cfg.mixed_precision.grad_reduce_in_fp32 = False   # setup() copies it to cfg.ddp
    cfg.ddp.use_distributed_optimizer = False
    cfg.ddp.overlap_grad_reduce = False
    cfg.ddp.overlap_param_gather = False
    cfg.ddp.grad_reduce_in_fp32 = False
    cfg.ddp.use_megatron_fsdp = False
    cfg.ddp.data_parallel_sharding_strategy = "no_shard"
    cfg.optimizer.use_distributed_optimizer = False
    cfg.optimizer.overlap_param_gather = False
    cfg.comm_overlap = CommOverlapConfig(tp_comm_overlap=False, overlap_p2p_comm=False, batch_p2p_comm=True, overlap_grad_reduce=False, overlap_param_gather=False)
    cfg.env_vars["CUDA_DEVICE_MAX_CONNECTIONS"] = 1
    return cfg
