"""The MoE rules of explorer/strategy/rules.py's table: how expert parallelism divides the ranks and the experts,
sequence parallelism under tensor parallelism, and the host side's and the dispatchers' (issue 27): expert-parallel
overlap as Megatron-Core accepts it, and the hardware a fused dispatcher needs."""
from __future__ import annotations

from types import SimpleNamespace

from explorer.schedules import get as schedule_of


def ep_overlap_refusal(v, model):
    """Megatron-Core's checks of --overlap-moe-expert-parallel-comm (NVIDIA/Megatron-LM d98e8a64,
    megatron/core/transformer/transformer_config.py __post_init__): experts over ep > 1 devices, the all-to-all
    or a flex dispatcher, no full recomputation, and with pp > 1 a virtual pipeline (interleaved chunks)."""
    if not getattr(v, "overlap_ep", False):
        return None
    if not getattr(model, "is_moe", False) or getattr(v, "ep", 1) < 2:
        return ("expert-parallel overlap hides the MoE all-to-alls under another micro-batch's compute: it needs a "
                f"model with experts and ep > 1, not ep={getattr(v, 'ep', 1)} for {model.name} (Megatron-Core: "
                "'overlap_moe_expert_parallel_comm is only supported with expert model parallelism')")
    if getattr(v, "moe_dispatcher", "alltoall") == "allgather":
        return ("expert-parallel overlap needs the all-to-all or a flex dispatcher (deepep, hybridep), not allgather "
                "(Megatron-Core: 'overlap_moe_expert_parallel_comm is supported with alltoall/flex token dispatcher')")
    if v.recompute == "full":
        return ("expert-parallel overlap cannot run with full recomputation (Megatron-Core: 'disable full "
                "recomputation when enabling overlap_moe_expert_parallel_comm')")
    if v.pp > 1 and not schedule_of(v.schedule).chunked:
        return (f"expert-parallel overlap with pp={v.pp} needs a chunked schedule (interleaved), not {v.schedule!r} "
                "(Megatron-Core: 'virtual_pipeline_model_parallel_size must be specified when "
                "pipeline_model_parallel_size > 1')")
    return None


def ep_overlap_blocker(model, ep: int, moe_dispatcher: str, recompute: str, pp: int, schedule: str):
    """Why the EP overlap cannot be switched on with these choices (ep_overlap_refusal's line), None when it can:
    what a control asks before it offers the overlap (the sidebar: not with 1F1B at p > 1)."""
    asked = SimpleNamespace(overlap_ep=True, ep=ep, moe_dispatcher=moe_dispatcher, recompute=recompute, pp=pp,
                            schedule=schedule)
    return ep_overlap_refusal(asked, model)


def dispatcher_hardware(strategy, model, cluster):
    """Why `cluster` cannot run `strategy`'s MoE dispatcher (None when it can). The fused dispatchers need a
    Hopper or later GPU: HybridEP moves tokens with the Tensor Memory Accelerator (DeepEP's hybrid-ep branch,
    NVIDIA: Hybrid-EP_Intra-node_Implementation.md at shifangx/DeepEP 1242eb4f), DeepEP's kernels are built for
    SM90 (deepseek-ai/DeepEP README); the devices with an FP8 peak are those. Not refused: HybridEP across
    NVLink domains -- its first release ran inside one ('RDMA functionality not yet available' there), but
    Megatron-Bridge v0.5.0 ran it over two DGX H100 nodes (scripts/performance/configs/qwen/
    qwen3_workload_base_configs.py QWEN3_30B_A3B_PRETRAIN_CONFIG_H100_FP8_CS_V1: 16 GPUs, ep 16, hybridep;
    a published row of assets/validation/megatron_bridge.json)."""
    dispatcher = getattr(strategy, "moe_dispatcher", "alltoall")
    if cluster is None or not getattr(model, "is_moe", False) or dispatcher not in ("deepep", "hybridep"):
        return None
    if "fp8" not in cluster.device.peak_flops:
        return (f"the {dispatcher} dispatcher needs a Hopper or later GPU (its kernels use the Tensor Memory "
                f"Accelerator / SM90 instructions); {cluster.device.name} is older (use alltoall or allgather)")
    return None


def ep_divides_dp(v, model=None):
    ep, cp = getattr(v, "ep", 1), getattr(v, "cp", 1)
    etp = getattr(v, "expert_tp", 0) or v.tp
    ranks = v.dp * cp * v.tp // etp      # the ranks of a stage outside the expert tensor-parallel group
    if ranks % ep:
        where = "dp" + (" x cp" if cp > 1 else "") + (" x tp" if etp != v.tp else "")
        return (f"ep={ep} does not divide {where} = {ranks}: expert parallelism is carved out of the "
                f"data-parallel ranks (Megatron-Core: ep x expert_tp divides tp x cp x dp, and each expert's "
                "weights are replicated over the rest, the expert-data-parallel ranks)")
    if etp != v.tp and not getattr(v, "sequence_parallel", False):
        return ("expert_tp=1 with tp > 1 needs sequence parallelism (Megatron-LM refuses MoE with tensor "
                "parallelism without it)")
    return None


def ep_divides_experts(v, model):
    ep = getattr(v, "ep", 1)
    if ep == 1:
        return None
    experts = getattr(model, "experts", 0)
    if not experts:
        return f"ep={ep} needs a model with experts; {model.name} is dense"
    if experts % ep:
        return f"ep={ep} does not divide the model's {experts} experts (each ep rank holds experts / ep of them)"
    return None


def moe_needs_sequence_parallel(v, model):
    if getattr(model, "is_moe", False) and v.tp > 1 and not v.sequence_parallel:
        return (f"{model.name} has experts: with tp={v.tp} it needs sequence parallelism (Megatron-Core's "
                "MoELayer refuses to train MoE with tensor parallelism without it)")
    return None
