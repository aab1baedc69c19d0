"""What every exporter checks the same way: one refusal type, the layer split and the stage counts."""
from __future__ import annotations

from explorer.cost.placement import block_stages, layout_of
from explorer.errors import ExplorerError
from explorer.io.quoting import comment_text
from explorer.schedules import chunked
from explorer.strategy.mesh import DEFAULT_ORDER
from explorer.strategy.pipeline_layout import layout_of_counts
from explorer.strategy.strategy import LayerSplit


def refuse(framework: str, reason: str) -> ExplorerError:
    """The one-line refusal every exporter raises: '<framework> cannot express this strategy: <reason>'."""
    return ExplorerError(f"{framework} cannot express this strategy: {reason}")


def uniform_split(model, strategy) -> LayerSplit | None:
    """None when every layer uses Megatron's pairing at degree tp (the default); else the first layer that
    does not, as (index, LayerSplit)."""
    default = LayerSplit(degree=strategy.tp, preset="megatron")
    for index in range(model.layers):
        split = strategy.split_of(index)
        same = split == default or (split.degree == 1 and strategy.tp == 1 and not split.overrides)
        if not same:
            return index, split
    return None


def describe_split(split: LayerSplit) -> str:
    over = "".join(f", {name}={dim}" for name, dim in split.overrides)
    return f"{split.effective_preset} over {split.degree} device(s){over}"


def check_uniform_split(framework: str, model, strategy) -> None:
    odd = uniform_split(model, strategy)
    if odd:
        index, split = odd
        raise refuse(framework, f"it splits every layer the same way (Megatron's column->row pairing over "
                                f"t={strategy.tp}), but layer {index} is split {describe_split(split)}")


def check_rank_order(framework: str, strategy) -> None:
    if strategy.rank_order != DEFAULT_ORDER:
        raise refuse(framework, f"its ranks are ordered {DEFAULT_ORDER} (tensor-parallel fastest), "
                                f"not {strategy.rank_order}")


def check_host_options(framework: str, strategy, writes_moments: bool = False, writes_host: bool = False) -> None:
    """CUDA graphs, the MoE dispatchers other than the all-to-all and expert-parallel overlap change what was
    costed (the host's issue time, the dispatch's syncs and bytes, the exposed all-to-alls: explorer/model/
    kernels.py, explorer/cost/moe_terms.py); only Megatron-LM and Megatron-Bridge write them (`writes_host`:
    explorer/codegen/megatron_moe.py, megatron_bridge.py), every other exporter refuses a strategy with them
    rather than export it to run otherwise (issue 29 item 1's rule)."""
    if getattr(strategy, "overlap_ep", False) and not writes_host:
        raise refuse(framework, "expert-parallel overlap (the MoE all-to-alls under another micro-batch's compute): "
                                "this exporter does not write it, and the framework would leave them exposed")
    if strategy.cuda_graphs != "none" and not writes_host:
        raise refuse(framework, f"CUDA graphs ({strategy.cuda_graphs}): this exporter does not write them yet, and "
                                "the framework would run the layers eagerly, as the cost model did not")
    if strategy.moe_dispatcher != "alltoall" and not writes_host:
        raise refuse(framework, f"the {strategy.moe_dispatcher} dispatcher: this exporter does not write it yet, and "
                                "the framework would dispatch by all-to-all, as the cost model did not")
    # `writes_moments`: the exporter writes the Adam moments' dtype and the recompute modules (Megatron-LM and
    # Megatron-Bridge: explorer/hardware/precision.py, explorer/model/recompute.py); the others cannot
    if getattr(strategy, "adam_moments", "fp32") != "fp32" and not writes_moments:
        raise refuse(framework, f"{strategy.adam_moments} Adam moments: its optimizer keeps them in fp32, so the run "
                                "would hold more memory than was costed")
    if strategy.recompute == "selective" and getattr(strategy, "recompute_modules", ()) and not writes_moments:
        raise refuse(framework, f"recomputing {', '.join(strategy.recompute_modules)}: it has no per-module "
                                "recomputation (Megatron-LM's --recompute-modules)")


def pipeline_layout_text(model, strategy) -> str:
    """The Megatron-LM --pipeline-model-parallel-layout string the strategy was costed with: its own, or the
    default uneven one (explorer.cost.placement.layout_of); '' for the even split."""
    layout = layout_of(model, strategy)
    return layout.text() if layout is not None else ""


def megatron_layout_text(model, strategy) -> str:
    """What Megatron-LM's --pipeline-model-parallel-layout (and Megatron-Bridge's pipeline_model_parallel_layout)
    must say for the strategy: pipeline_layout_text; and for a stage map (a dragged split) whose middle stages hold
    different numbers of layers, which --decoder-first/last-pipeline-num-layers cannot say, that split as a layout
    (layout_of_counts: the embedding with the first stage, the MTP layers and the loss with the last, as the plan
    places them for a stage map). '' when the first/last flags or the even split say it."""
    text = pipeline_layout_text(model, strategy)
    if text or not strategy.stage_map or strategy.pp <= 2:
        return text
    counts = stage_counts(model, strategy)
    if len(set(counts[1:-1])) <= 1:
        return ""
    return layout_of_counts(counts, model.mtp_layers).text()


def check_pipeline_layout(framework: str, model, strategy) -> None:
    """Refuse what only Megatron-LM and Megatron-Bridge write: a pipeline layout (uneven chunks, the embedding
    and the loss as stage members) and multi-token-prediction modules."""
    text = pipeline_layout_text(model, strategy)
    if text:
        raise refuse(framework, f"the pipeline layout {text!r} (stages of uneven layers, the embedding and the "
                                "loss as members): only the Megatron-LM and Megatron-Bridge exporters write it")
    if getattr(model, "mtp_layers", 0):
        raise refuse(framework, f"{model.name}'s {model.mtp_layers} multi-token-prediction module(s): only "
                                "Megatron-LM (--mtp-num-layers) and Megatron-Bridge write them")


def stage_counts(model, strategy) -> tuple:
    """Layers on each pipeline stage (whole stage, all model chunks together)."""
    if layout_of(model, strategy) is not None:      # as the plan places them
        stages = [stage for stage, _ in block_stages(model, strategy)]
        return tuple(stages.count(stage) for stage in range(strategy.pp))
    if chunked(strategy.schedule):
        return (model.layers // strategy.pp,) * strategy.pp
    stages = strategy.stages(model.layers)
    return tuple(stages.count(stage) for stage in range(strategy.pp))


def layers_per_model_chunk(model, strategy) -> int | None:
    """l / (p v) when the layers split into p v equal model chunks (None otherwise)."""
    chunks = strategy.pp * strategy.chunks
    if layout_of(model, strategy) is not None or model.layers % chunks or (not chunked(strategy.schedule) and strategy.stage_map
                                 and len(set(stage_counts(model, strategy))) > 1):
        return None
    return model.layers // chunks


def title(model, strategy) -> str:
    """One printable line naming the model and the strategy, for a comment: the model's name comes from
    links and uploads, so it is quoted for a comment (explorer.io.quoting) and can never end the comment."""
    s = strategy
    text = (f"{model.name}: d={s.dp} t={s.tp} p={s.pp} b={s.micro_batch} B={s.global_batch} {s.schedule}"
            + (f" v={s.chunks}" if chunked(s.schedule) else "")
            + f" ZeRO-{s.zero} recompute={s.recompute}{' SP' if s.sequence_parallel else ''} {s.dtype}")
    return comment_text(text)
