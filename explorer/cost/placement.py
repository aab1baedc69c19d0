"""Where the plan puts each block (sympy-free: the search reads it too): each block's split, each layer's
pipeline stage and model chunk, and an MoE block's expert arguments. explorer.cost.plan places the blocks
with these; explorer.search.tables prices the same placement in numbers."""
from __future__ import annotations

from explorer.model.spec import ModelSpec
from explorer.schedules import chunked, get as schedule_of
from explorer.strategy.strategy import LayerSplit, Strategy


def block_splits(model: ModelSpec, strategy: Strategy, blocks) -> list:
    """Each block's split: layers from the strategy; embedding and head use tp (Megatron)."""
    outer = LayerSplit(degree=strategy.tp, preset="megatron")
    return [strategy.split_of(b.layer) if b.kind == "layer" else outer for b in blocks]


def block_stages(model: ModelSpec, strategy: Strategy) -> tuple:
    """(stage, chunk) of every layer; the schedule places the model chunks (Schedule.place: interleaving
    deals them round-robin, Narayanan Sec 2.2.2; DualPipeV in a V)."""
    layers = model.layers
    if not chunked(strategy.schedule):
        return tuple((stage, 0) for stage in strategy.stages(layers))
    chunks = strategy.pp * strategy.chunks
    base, extra = divmod(layers, chunks)
    out, place = [], schedule_of(strategy.schedule).place
    for c in range(chunks):
        out += [place(c, strategy.pp, strategy.chunks)] * (base + (1 if c < extra else 0))
    return tuple(out)


def block_place(kind: str, layer: int, layer_places: tuple) -> tuple:
    """(stage, chunk) of a block: a layer's from block_stages (`layer_places`); the embedding on stage 0's
    first chunk, the head with the last layer."""
    if kind == "layer":
        return layer_places[layer]
    return (0, 0) if kind == "embedding" else layer_places[-1]


def host_options(model: ModelSpec, strategy: Strategy) -> dict:
    """block_cost's host-side recipe for `strategy` (explorer/model/kernels.py Recipe, as a plain tuple):
    CUDA graphs, FP8 (quantisation kernels), the local experts per device and the drop policy; none for
    the eager bf16 default of a dense model."""
    fp8 = strategy.dtype == "fp8"
    graphs = getattr(strategy, "cuda_graphs", "none")
    if not model.is_moe:
        return {"host": (graphs, fp8)} if (fp8 or graphs != "none") else {}
    dropless = not model.moe_capacity_factor
    dispatcher = getattr(strategy, "moe_dispatcher", "alltoall")
    syncs = dropless and dispatcher != "hybridep"
    return {"host": (graphs, fp8, model.experts // strategy.ep, dropless, syncs, dispatcher != "alltoall")}


def expert_options(model: ModelSpec, strategy: Strategy) -> dict:
    """block_cost's expert arguments for `strategy` (none for a dense model)."""
    if not model.is_moe:
        return {}
    from explorer.cost.experts import expert_load      # sympy: MoE models only
    return {"load": expert_load(model, strategy.ep), "experts_by_seq": strategy.etp != strategy.tp}
