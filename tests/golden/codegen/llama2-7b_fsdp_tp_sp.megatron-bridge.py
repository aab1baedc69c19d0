# -*- coding: utf-8 -*-
# Megatron-Bridge recipe for llama2-7b: d=8 t=2 p=1 b=1 B=64 1f1b ZeRO-3 recompute=full SP bf16
# Megatron-Bridge (NVIDIA-NeMo/Megatron-Bridge at 067f987d (2026-08-22)): a flat performance recipe like src/megatron/bridge/perf_recipes/llama/h100/llama3.py; run it on WORLD_SIZE GPUs with scripts/training/train.sh --recipe explorer_pretrain_config (the function must be importable)
import torch
import torch.nn.functional as F
from megatron.core.transformer.enums import AttnBackend

from megatron.bridge.models.gpt_provider import GPTModelProvider
from megatron.bridge.recipes.common import _pretrain_common
from megatron.bridge.training.comm_overlap import CommOverlapConfig
from megatron.bridge.training.config import ConfigContainer
from megatron.bridge.training.mixed_precision import bf16_mixed

WORLD_SIZE = 16  # d 8 x t 2 x cp 1 x p 1: Megatron-Bridge derives d = world size / (t cp p)
MODEL_NAME = "llama2-7b"


def explorer_pretrain_config() -> ConfigContainer:
    cfg = _pretrain_common()
    cfg.model = GPTModelProvider()
    cfg.model.num_layers = 32
    cfg.model.hidden_size = 4096
    cfg.model.num_attention_heads = 32
    cfg.model.num_query_groups = 32
    cfg.model.ffn_hidden_size = 11008
    cfg.model.seq_length = 4096
    cfg.model.vocab_size = 32000
    cfg.model.normalization = "RMSNorm"
    cfg.model.activation_func = F.silu
    cfg.model.gated_linear_unit = True
    cfg.model.position_embedding_type = "rope"
    cfg.model.add_bias_linear = False
    cfg.model.share_embeddings_and_output_weights = False
    cfg.model.hidden_dropout = 0.0
    cfg.model.attention_dropout = 0.0
    cfg.model.attention_backend = AttnBackend.flash
    cfg.model.tensor_model_parallel_size = 2
    cfg.model.pipeline_model_parallel_size = 1
    cfg.model.virtual_pipeline_model_parallel_size = None
    cfg.model.context_parallel_size = 1
    cfg.model.sequence_parallel = True
    cfg.model.expert_model_parallel_size = 1
    cfg.model.recompute_granularity = "full"
    cfg.model.recompute_method = "uniform"
    cfg.model.recompute_num_layers = 1
    cfg.tokenizer.tokenizer_type = "NullTokenizer"
    cfg.tokenizer.tokenizer_model = None
    cfg.tokenizer.vocab_size = 32000
    cfg.dataset.seq_length = 4096
    cfg.train.micro_batch_size = 1
    cfg.train.global_batch_size = 64
    cfg.mixed_precision = bf16_mixed()
    cfg.mixed_precision.grad_reduce_in_fp32 = True   # setup() copies it to cfg.ddp
    cfg.ddp.use_distributed_optimizer = True
    cfg.ddp.overlap_grad_reduce = True
    cfg.ddp.overlap_param_gather = False
    cfg.ddp.grad_reduce_in_fp32 = True
    cfg.ddp.use_megatron_fsdp = True
    cfg.ddp.data_parallel_sharding_strategy = "optim_grads_params"
    cfg.ddp.megatron_fsdp_main_grads_dtype = torch.float32
    cfg.ddp.megatron_fsdp_grad_comm_dtype = torch.float32
    cfg.optimizer.use_distributed_optimizer = True
    cfg.optimizer.overlap_param_gather = False
    cfg.checkpoint.ckpt_format = "fsdp_dtensor"
    cfg.comm_overlap = CommOverlapConfig(tp_comm_overlap=False, overlap_p2p_comm=False, batch_p2p_comm=False, overlap_grad_reduce=True, overlap_param_gather=False)
    cfg.env_vars["CUDA_DEVICE_MAX_CONNECTIONS"] = 8
    return cfg
