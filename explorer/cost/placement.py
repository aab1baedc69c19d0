"""Where the plan puts each block (sympy-free: the search reads it too): each block's split, each layer's
pipeline stage and model chunk, and an MoE block's expert arguments. explorer.cost.plan places the blocks
with these; explorer.search.tables prices the same placement in numbers."""
from __future__ import annotations

from explorer.cost.fused_dispatch import overlap_exposed_fraction
from explorer.model.spec import ModelSpec
from explorer.schedules import chunked, get as schedule_of
from explorer.strategy.frameworks import overlaps_dgrad
from explorer.strategy.pipeline_layout import resolve as resolve_layout
from explorer.strategy.strategy import LayerSplit, Strategy


def block_splits(model: ModelSpec, strategy: Strategy, blocks) -> list:
    """Each block's split: layers from the strategy; embedding and head use tp (Megatron)."""
    outer = LayerSplit(degree=strategy.tp, preset="megatron")
    return [strategy.split_of(b.layer) if b.kind == "layer" else outer for b in blocks]


def layout_of(model: ModelSpec, strategy: Strategy):
    """The pipeline layout `strategy` runs `model` with (explorer.strategy.pipeline_layout.PipelineLayout):
    its own; for a chunked schedule whose layers do not split into p v equal chunks, the embedding, the
    layers, the MTP layers and the loss as equal slots (even_layout: Megatron's account_for_embedding/
    loss_in_pipeline_split, DeepSeek-V3's published layout); else None (the even split of block_stages)."""
    return resolve_layout(model.layers, model.mtp_layers, strategy)


def block_stages(model: ModelSpec, strategy: Strategy) -> tuple:
    """(stage, chunk) of every layer; the schedule places the model chunks (Schedule.place: interleaving
    deals them round-robin, Narayanan Sec 2.2.2; DualPipeV in a V); a pipeline layout's virtual stage k
    is model chunk k (Megatron-LM PipelineParallelLayerLayout: rank k mod p, chunk k // p)."""
    layers = model.layers
    layout = layout_of(model, strategy)
    if layout is not None:
        place = schedule_of(strategy.schedule).place
        return tuple(place(k, strategy.pp, strategy.chunks) for k in layout.layer_stages())
    if not chunked(strategy.schedule):
        return tuple((stage, 0) for stage in strategy.stages(layers))
    chunks = strategy.pp * strategy.chunks
    base, extra = divmod(layers, chunks)
    out, place = [], schedule_of(strategy.schedule).place
    for c in range(chunks):
        out += [place(c, strategy.pp, strategy.chunks)] * (base + (1 if c < extra else 0))
    return tuple(out)


def block_ends(model: ModelSpec, strategy: Strategy) -> dict:
    """(stage, chunk) of the embedding, the MTP modules and the head where a pipeline layout puts E, m and L
    (layout_of); {} without a layout."""
    layout = layout_of(model, strategy)
    if layout is None:
        return {}
    place = schedule_of(strategy.schedule).place
    out = {"embedding": place(layout.stage_of("E"), strategy.pp, strategy.chunks),
           "head": place(layout.stage_of("L"), strategy.pp, strategy.chunks)}
    if layout.mtp_layers:
        out["mtp"] = place(layout.stage_of("m"), strategy.pp, strategy.chunks)
    return out


def block_place(kind: str, layer: int, layer_places: tuple, ends: dict | None = None) -> tuple:
    """(stage, chunk) of a block: a layer's from block_stages (`layer_places`); the embedding, MTP modules
    and head where the layout puts them (`ends`, block_ends), else the embedding on stage 0's first chunk
    and the MTP modules and the head with the last layer."""
    if kind == "layer":
        return layer_places[layer]
    if ends:
        return ends[kind]
    return (0, 0) if kind == "embedding" else layer_places[-1]


def host_options(model: ModelSpec, strategy: Strategy) -> dict:
    """block_cost's host-side recipe for `strategy` (explorer/model/kernels.py Recipe, as a plain tuple):
    CUDA graphs, FP8 (its recipe's name, Strategy.fp8_recipe: quantisation kernels and what TE saves in
    FP8, explorer/hardware/precision.py; False without FP8), the local experts per device and the drop
    policy, selective recomputation's modules and Megatron's asynchronous input-gradient collective; none for the
    eager bf16 default of a dense model."""
    fp8 = getattr(strategy, "fp8_recipe", "delayed") if strategy.dtype == "fp8" else False
    graphs = getattr(strategy, "cuda_graphs", "none")
    # selective recomputation of other modules than the attention core (Strategy.recompute_modules)
    modules = getattr(strategy, "recompute_modules", ()) if strategy.recompute == "selective" else ()
    # Megatron's column-parallel linears reduce their input gradient asynchronously, under the weight-gradient GEMM
    # (explorer/strategy/frameworks.py ASYNC_DGRAD): it changes the block only where the block has tensor parallelism
    async_dgrad = strategy.tp > 1 and overlaps_dgrad(strategy.framework)
    if modules or async_dgrad:     # the whole Recipe, its MoE fields at their defaults for a dense model
        host = _moe_host(model, strategy, graphs, fp8) if model.is_moe else (graphs, fp8, 1, True, True, False)
        host = host + (False,) * (7 - len(host)) + (modules,)
        return {"host": host + ((True,) if async_dgrad else ())}
    if not model.is_moe:
        return {"host": (graphs, fp8)} if (fp8 or graphs != "none") else {}
    return {"host": _moe_host(model, strategy, graphs, fp8)}


def _moe_host(model: ModelSpec, strategy: Strategy, graphs, fp8) -> tuple:
    """The Recipe tuple of an MoE model (explorer/model/kernels.py): graphs, FP8, local experts, drop policy,
    the dispatcher's syncs, a fused dispatcher, the all-gather one (only when it is)."""
    dropless = not model.moe_capacity_factor
    dispatcher = getattr(strategy, "moe_dispatcher", "alltoall")
    syncs = dropless and not (dispatcher == "hybridep" and graphs == "full")    # kernels.syncs: HybridEP's budget
    flex, gather = dispatcher in ("deepep", "hybridep"), dispatcher == "allgather"
    return (graphs, fp8, model.experts // strategy.ep, dropless, syncs, flex) + ((True,) if gather else ())


def ep_overlaps(model: ModelSpec, strategy: Strategy) -> bool:
    """Whether the MoE all-to-alls run under the partner pass's compute (Strategy.overlap_ep with experts
    spread over ep > 1 devices: explorer/cost/moe_terms.py, priced in explorer/cost/numeric.py stage_values)."""
    return bool(model.is_moe and getattr(strategy, "overlap_ep", False) and strategy.ep > 1)


def ep_sm_share(model: ModelSpec, strategy: Strategy, cluster, exact: bool = False):
    """Under expert-parallel overlap, the share of its all-to-alls that stays exposed at least: the SMs the fused
    dispatcher's kernels hold from the partner pass's compute, or what a step that is not one CUDA graph leaves
    unhidden (explorer/cost/fused_dispatch.py overlap_exposed_fraction); 0 without overlap. `exact`: as a Fraction
    (explain's formulas print it as one), else a float."""
    if not ep_overlaps(model, strategy):
        return 0 if exact else 0.0
    share = overlap_exposed_fraction(strategy.moe_dispatcher, cluster.device.sms, strategy.cuda_graphs)
    return share if exact else float(share)


def expert_options(model: ModelSpec, strategy: Strategy) -> dict:
    """block_cost's expert arguments for `strategy` (none for a dense model)."""
    if not model.is_moe:
        return {}
    from explorer.cost.experts import expert_load      # sympy: MoE models only
    return {"load": expert_load(model, strategy.ep), "experts_by_seq": strategy.etp != strategy.tp}
