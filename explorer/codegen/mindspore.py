"""MindSpore semi-auto-parallel: set_auto_parallel_context(...) plus each operator's shard() strategy.

The seed paper's platform (Wang, IPDPS-W 2021, built its first micro-step model on MindSpore). In
semi_auto_parallel mode every operator takes a strategy, `Primitive.shard(in_strategy)`: one tuple per
input, one integer per input dimension saying into how many parts that dimension is cut; the product of a
tuple's numbers is at most the devices of a pipeline stage, the rest repeat the computation (MindSpore
documentation r2.4.0: mindspore.ops.Primitive.shard, as referred to by mindspore.cn/docs/en/r2.4.0/api_python/
mindspore/mindspore.shard.html: "each element ... specifies the layout of the corresponding input ... each
dimension's cut"). set_auto_parallel_context's keys (parallel_mode, device_num, pipeline_stages,
enable_parallel_optimizer, pipeline_config): mindspore.cn/docs/en/r2.4.0/api_python/mindspore/
mindspore.set_auto_parallel_context.html; pipeline_config={"pipeline_interleave": True, "pipeline_scheduler":
"1f1b"} as MindSpore's own parallel tests set it; micro-batches through nn.PipelineCell(net, micro_size) and
each layer Cell's `pipeline_stage` attribute.

What the context says (MindSpore 2.10; tests/data/frameworks/mindspore_api.json is read from its wheel):
ZeRO-1/2/3 are enable_parallel_optimizer with parallel_optimizer_config {"optimizer_level": "level1" |
"level2" | "level3"} (mindspore/parallel/_auto_parallel_context.py set_parallel_optimizer_config; the
AutoParallel.hsdp docstring: level1 splits weights and optimizer state, level2 also the gradients, level3
also gathers the weights again before the backward, "the memory optimization effect is the same" as
Megatron's); gradient_fp32_sync (default True: gradients all-reduced in fp32) is written as the strategy's
gradient dtype; the training dtype is COMPUTE_DTYPE for ms.amp.auto_mixed_precision(net, "O3", dtype=...)
(amp_level O3: every cell in the low precision, as the explorer's activations; float16 or bfloat16 only,
so fp8 is refused).

Every layer's split comes from the explorer's plan (explorer.cost.plan: each operator's split and the
layout it needs for its input), so per-layer splits map one-to-one to shard tuples. The first dimension of
activations also carries the data-parallel degree d (MindSpore expresses data parallelism as a cut of the
batch dimension). With n the layer's split degree:
  MatMul x(b·s, k) · W(k, n_out):  column ((d, 1), (1, n)), row ((d, n), (n, 1)), batch or sequence
  ((d n, 1), (1, 1)), replicated ((d, 1), (1, 1));
  BatchMatMul over (b, heads, s, ·): heads ((d, n, 1, 1), (d, n, 1, 1)), batch ((d n, 1, 1, 1), ...);
  FlashAttentionScore (FlashAttention, layout BNSD) on query, key, value: the same cut for each;
  Gather (embedding) table(V, h), ids(b, s): vocabulary rows ((n, 1), (d, 1));
  Softmax, Dropout, GeLU, Add, LayerNorm/RmsNorm, SoftmaxCrossEntropyWithLogits: the input's layout
  (replicated, or cut by batch, sequence or feature/head) as one cut dimension;
  SwiGLU: two primitives, SiLU on the gate and Mul of it with the up projection, each with the layout of
  the output (MindSpore's fused Swiglu primitive splits its input in halves along the dimension the
  feature cut runs along, and its parallel implementation, SwigluInfo, is Softmax's: no cut there).
"""
from __future__ import annotations

from explorer.codegen.common import check_host_options, check_pipeline_layout, check_rank_order, refuse, title
from explorer.io.quoting import comment_text, python_string
from explorer.schedules import chunked

NAME = "MindSpore"
OPTIMIZER_LEVEL = {1: "level1", 2: "level2", 3: "level3"}
COMPUTE_DTYPE = {"bf16": "ms.bfloat16", "fp16": "ms.float16", "fp32": "ms.float32"}
BATCH, SEQ, FEAT, R, P = "S:batch", "S:seq", "S:feat", "R", "P"
AXIS = {2: {BATCH: 0, SEQ: 1}, 3: {BATCH: 0, SEQ: 1, FEAT: 2}, 4: {BATCH: 0, FEAT: 1, SEQ: 2}}
"""Which dimension a layout cuts, by tensor rank: (b, s) ids; (b, s, h) activations; (b, heads, s, s) scores."""


def _act(rank: int, layout: str, d: int, n: int, op: str) -> tuple:
    dims = [1] * rank
    dims[0] = d
    if layout not in (R, P):
        if layout not in AXIS[rank]:
            raise refuse(NAME, f"operator {op!r} cuts a rank-{rank} tensor by {layout}, which has no dimension here")
        dims[AXIS[rank][layout]] *= n
    return tuple(dims)


def _matmul(step, d, n):
    x = {R: (d, 1), P: (d, 1), FEAT: (d, n), BATCH: (d * n, 1), SEQ: (d * n, 1)}[step.layout_in]
    w = {"column": (1, n), "row": (n, 1)}.get(step.split, (1, 1))
    if step.split not in ("column", "row", "batch", "seq", "replicated"):
        raise refuse(NAME, f"operator {step.op!r} is split by {step.split}, which a MatMul cannot take")
    return "MatMul", (x, w)


def op_strategy(step, op, family: str, d: int, n: int) -> tuple:
    """(MindSpore primitive, shard in_strategy) of one operator's micro-step."""
    kind, layout = op.kind, step.layout_in
    if step.split == "replicated" or n == 1:
        layout = R if layout != BATCH else layout
    if kind == "matmul":
        return _matmul(step, d, n)
    if kind == "attention" and op.bwd_recompute_flops != 0:   # FlashAttention: one fused kernel on Q, K, V
        q = _act(4, layout, d, n, step.op)                       # (MindSpore ops.FlashAttentionScore, BNSD)
        return "FlashAttentionScore", (q, q, q)
    if kind == "attention":
        q = _act(4, layout, d, n, step.op)
        kv = q if step.split != "seq" else _act(4, R, d, n, step.op)
        return "BatchMatMul", (q, kv)
    if kind == "softmax":
        return "Softmax", (_act(4, layout, d, n, step.op),)
    if kind == "embedding":
        table = {"row": (n, 1), "column": (1, n)}.get(step.split, (1, 1))
        ids = {"batch": (d * n, 1), "seq": (d, n)}.get(step.split, (d, 1))
        return "Gather", (table, ids)
    if kind == "norm":
        if layout == FEAT:
            raise refuse(NAME, f"operator {step.op!r} normalises over the feature dimension it is cut along")
        x = _act(3, layout, d, n, step.op)
        return ("RmsNorm", (x, (1,))) if family == "llama" else ("LayerNorm", (x, (1,), (1,)))
    if kind == "elementwise":
        x = _act(len(op.in_shape), layout, d, n, step.op)
        if step.op.startswith("add"):
            return "Add", (x, x)                 # the residual sum: two inputs of one layout
        if step.op == "swiglu":                  # SiLU(gate) * up, on the output's (b, s, f) layout
            y = _act(len(op.out_shape), layout, d, n, step.op)
            return "SiLU+Mul", ((y,), (y, y))
        return {"gelu": "GeLU", "relu": "ReLU"}.get(step.op, "Dropout"), (x,)
    if kind == "loss":
        x = {R: (d, 1), FEAT: (d, n), BATCH: (d * n, 1), SEQ: (d * n, 1)}[layout]
        return "SoftmaxCrossEntropyWithLogits", (x, x)
    raise refuse(NAME, f"operator {step.op!r} is a {kind}; the exporter maps transformer and MLP operators only")


def _block_table(placed, family: str, d: int) -> list:
    ops = {op.name: op for op in placed.block.ops}
    n = placed.split.degree
    out = []
    for step in placed.cost.steps:
        prim, strat = op_strategy(step, ops[step.op], family, d, n)
        if prim == "SiLU+Mul":                   # one explorer operator, two MindSpore primitives
            out += [(f"{step.op}.silu", step.split, "SiLU", strat[0]), (f"{step.op}.mul", step.split, "Mul", strat[1])]
        else:
            out.append((step.op, step.split, prim, strat))
    return out


def _ranges(indices: list) -> str:
    out, start = [], indices[0]
    for prev, cur in zip(indices, indices[1:] + [None]):
        if cur != prev + 1:
            out.append(f"{start}" if start == prev else f"{start}-{prev}")
            start = cur
    return ", ".join(out)


def mindspore_script(model, strategy, cluster) -> str:
    """Python text: the parallel context, the pipeline layout and one shard table per distinct layer split."""
    s = strategy
    check_rank_order(NAME, s)
    check_host_options(NAME, s)
    check_pipeline_layout(NAME, model, s)
    if s.pp > 1 and s.schedule not in ("1f1b", "interleaved"):
        raise refuse(NAME, f"the {s.schedule} schedule: this exporter writes MindSpore's 1F1B pipeline "
                           "scheduler (pipeline_config pipeline_scheduler \"1f1b\", interleaved or not) only")
    if s.overlap_p2p:
        raise refuse(NAME, "overlapped pipeline sends: its pipeline_config has no switch for them "
                           "(Megatron-LM overlaps them by default with a virtual pipeline)")
    if s.dtype not in COMPUTE_DTYPE:
        raise refuse(NAME, f"{s.dtype}: its mixed precision (ms.amp.auto_mixed_precision) takes float16 or "
                           "bfloat16 only")
    from explorer.cost.plan import plan      # (sympy and the model graph: only when exporting)
    placed = plan(model, s, cluster).blocks
    groups = {}                                   # shard table -> block labels (layers grouped)
    for block in placed:
        table = tuple(_block_table(block, model.family, s.dp))
        label = block.block.kind if block.block.kind != "layer" else block.block.layer
        groups.setdefault(table, []).append(label)
    # line 1 declares the encoding, so that no text on line 2 can (PEP 263 reads the first two lines)
    lines = ["# -*- coding: utf-8 -*-",
             f"# MindSpore semi-auto-parallel configuration for {title(model, s)}",
             "# Primitive.shard(in_strategy): one tuple per input, one cut per dimension; activations' first",
             f"# dimension also carries the data-parallel degree d={s.dp}.",
             "import mindspore as ms", "",
             "ms.set_auto_parallel_context(",
             '    parallel_mode="semi_auto_parallel",',
             f"    device_num={s.devices},",
             f"    pipeline_stages={s.pp},"]
    if chunked(s.schedule):
        lines.append('    pipeline_config={"pipeline_interleave": True, "pipeline_scheduler": "1f1b"},')
    if s.zero:
        lines += ["    enable_parallel_optimizer=True,",
                  f'    parallel_optimizer_config={{"optimizer_level": "{OPTIMIZER_LEVEL[s.zero]}"}},'
                  f"  # ZeRO-{s.zero} over d"]
    else:
        lines.append("    enable_parallel_optimizer=False,")
    fp32_grads = s.grad_dtype == "fp32" or s.dtype == "fp32"
    lines += [f"    gradient_fp32_sync={fp32_grads},  # gradients reduced in "
              f"{'fp32' if fp32_grads else s.dtype}", ")",
              "", f"COMPUTE_DTYPE = {COMPUTE_DTYPE[s.dtype]}  # "
              + ("net = ms.amp.auto_mixed_precision(net, \"O3\", dtype=COMPUTE_DTYPE)" if s.dtype != "fp32"
                 else "no mixed precision (amp_level \"O0\")")]
    if s.pp > 1:
        layers = [b for b in placed if b.block.kind == "layer"]
        lines += ["", f"MICRO_BATCHES = {s.micro_batches}  # net = nn.PipelineCell(net, micro_size=MICRO_BATCHES)",
                  f"STAGE_OF_LAYER = {tuple(b.stage for b in layers)}  # layer i: cell.pipeline_stage"]
        if chunked(s.schedule):
            lines.append(f"CHUNK_OF_LAYER = {tuple(b.chunk for b in layers)}  # layer i: its model chunk on the stage")
    if s.recompute != "none":
        lines += ["", {"full": "# full recomputation: layer_cell.recompute() on every transformer layer",
                       "selective": "# selective recomputation: .recompute() on the score, softmax, "
                                    "attn_dropout and context primitives"}[s.recompute]]
    lines += ["", "SHARD = {"]
    for table, labels in groups.items():
        layers = [x for x in labels if isinstance(x, int)]
        names = [x for x in labels if not isinstance(x, int)]
        if layers:
            names.append(f"layer{'s' if len(layers) > 1 else ''} {_ranges(layers)}")
        lines.append(f'    {python_string(" + ".join(names))}: {{')
        for op, split, prim, strat in table:
            lines.append(f'        {python_string(op)}: {strat},  # {comment_text(f"{prim}, {split}")}')
        lines.append("    },")
    lines.append("}")
    return "\n".join(lines) + "\n"


def notes(model, strategy) -> list:
    """What MindSpore would do differently from what was costed, and how the script pins it."""
    s = strategy
    out = ["MindSpore all-reduces gradients in fp32 by default (gradient_fp32_sync=True): written "
           f"{s.grad_dtype == 'fp32' or s.dtype == 'fp32'}, as costed.",
           "Data parallelism is a cut of every activation's batch dimension in the shard() tuples (d first)."]
    if getattr(model, "family", "") == "llama":
        out.append("SwiGLU is written as SiLU then Mul (the fused Swiglu primitive does not split its feature "
                   "dimension).")
    return out
