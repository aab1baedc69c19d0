# -*- coding: utf-8 -*-
# Megatron-Bridge recipe for gpt3-175b: d=8 t=8 p=16 b=1 B=1536 interleaved v=2 ZeRO-1 recompute=selective SP bf16
# Megatron-Bridge (NVIDIA-NeMo/Megatron-Bridge at 067f987d (2026-08-22)): a flat performance recipe like src/megatron/bridge/perf_recipes/llama/h100/llama3.py; run it on WORLD_SIZE GPUs with scripts/training/train.sh --recipe explorer_pretrain_config (the function must be importable)
import torch
import torch.nn.functional as F
from megatron.core.transformer.enums import AttnBackend

from megatron.bridge.models.gpt_provider import GPTModelProvider
from megatron.bridge.recipes.common import _pretrain_common
from megatron.bridge.training.comm_overlap import CommOverlapConfig
from megatron.bridge.training.config import ConfigContainer
from megatron.bridge.training.mixed_precision import bf16_mixed

WORLD_SIZE = 1024  # d 8 x t 8 x cp 1 x p 16: Megatron-Bridge derives d = world size / (t cp p)
MODEL_NAME = "gpt3-175b"


def explorer_pretrain_config() -> ConfigContainer:
    cfg = _pretrain_common()
    cfg.model = GPTModelProvider()
    cfg.model.num_layers = 96
    cfg.model.hidden_size = 12288
    cfg.model.num_attention_heads = 96
    cfg.model.num_query_groups = 96
    cfg.model.ffn_hidden_size = 49152
    cfg.model.seq_length = 2048
    cfg.model.vocab_size = 51200
    cfg.model.attention_backend = AttnBackend.unfused
    cfg.model.tensor_model_parallel_size = 8
    cfg.model.pipeline_model_parallel_size = 16
    cfg.model.virtual_pipeline_model_parallel_size = 2
    cfg.model.context_parallel_size = 1
    cfg.model.sequence_parallel = True
    cfg.model.expert_model_parallel_size = 1
    cfg.model.recompute_granularity = "selective"
    cfg.model.recompute_modules = ["core_attn"]
    cfg.tokenizer.tokenizer_type = "NullTokenizer"
    cfg.tokenizer.tokenizer_model = None
    cfg.tokenizer.vocab_size = 51200
    cfg.dataset.seq_length = 2048
    cfg.train.micro_batch_size = 1
    cfg.train.global_batch_size = 1536
    cfg.mixed_precision = bf16_mixed()
    cfg.mixed_precision.grad_reduce_in_fp32 = False   # setup() copies it to cfg.ddp
    cfg.ddp.use_distributed_optimizer = True
    cfg.ddp.overlap_grad_reduce = True
    cfg.ddp.overlap_param_gather = False
    cfg.ddp.grad_reduce_in_fp32 = False
    cfg.ddp.use_megatron_fsdp = False
    cfg.ddp.data_parallel_sharding_strategy = "no_shard"
    cfg.optimizer.use_distributed_optimizer = True
    cfg.optimizer.overlap_param_gather = False
    cfg.comm_overlap = CommOverlapConfig(tp_comm_overlap=False, overlap_p2p_comm=False, batch_p2p_comm=True, overlap_grad_reduce=True, overlap_param_gather=False)
    cfg.env_vars["CUDA_DEVICE_MAX_CONNECTIONS"] = 1
    return cfg
