"""Validation group "bf16_h100": published dense BF16 pre-training runs on H100 (issue 26, item 1).

The BF16 GEMM efficiency of a preset (Efficiency.gemm_max, the fraction of the bf16/fp16 peak the
model's GEMMs reach) is fitted on these rows, one constant per hardware, the way the FP8 one is
fitted on the Megatron-Bridge rows (explorer/validation/fit.py). Rows (assets/validation/bf16_dense.json,
README in that folder, each with its citation):

* Megatron-LM's H100 weak-scaling table (NVIDIA/Megatron-LM README.md, images/model_table.png,
  commit f2e5db402c, Megatron-Core r0.8.0): nine GPT models, 1.7B-462B, 48-6144 H100, s = 4096,
  V = 131072. Published metric: model TFLOP/s per GPU in r0.8.0's own count (megatron/training/
  training.py num_floating_point_operations at core_r0.8.0: full attention, s/h, no recomputation --
  the Eq. 3 convention, not the causal half Megatron-LM counts since 8873b55d6a, 2025-03-06), so the
  prediction is that count over our iteration time. Precision is not stated: the MFU column is the
  TFLOP/s over 989 (H100's dense BF16 peak) in every row, so BF16 (an inference, labelled in the data).
  How each row becomes a strategy, from the README's own text and r0.8.0's defaults, never to fit:
  - d, t, p and the batch from the row; GPT (GeLU, ffn 4h, multi-head attention, learned positions),
    untied embedding and output layer in the runs (the parameter counts, 1.7B = 12 L h^2 + 2 V h, say
    so), tied in our gpt family: the data-parallel bytes of the 1.7B row are 16 % low, < 2 % from 16B on;
  - FlashAttention (Megatron-Core's Transformer Engine attention, r0.8.0's default transformer_impl);
  - the distributed optimizer (ZeRO-1: --overlap-param-gather requires it) with --overlap-grad-reduce
    and --overlap-param-gather (overlap_dp, overlap_param_gather); TP > 1 with sequence parallelism and
    --tp-comm-overlap (overlap_tp; TE's userbuffers overlap needs sequence parallelism);
  - gradients reduced in fp32: r0.8.0 sets accumulate_allreduce_grads_in_fp32 whenever --bf16
    (megatron/training/arguments.py at core_r0.8.0: "bfloat16 requires gradient accumulation and
    all-reduce to be done in fp32"), so grad_dtype = "fp32";
  - micro-batch 1: not stated; every row's batch is 4 x d x p sequences, i.e. 4p micro-batches of one
    sequence per pipeline, the multiple of p the interleaved schedule needs;
  - p > 1: the interleaved schedule with v = layers / p (one layer per model chunk): v is not stated;
    the published MFU does not fall as p grows (42-48 %), which a 1F1B bubble of (p-1)/(4p) = 12-23 %
    would make it do. These rows are held out; with v = 1 they come out 8-14 % slower (docs/validation.md).
  - no activation recomputation (the README names none).
  Fitted: the four p = 1 rows (1.7B-32B, nothing open but the micro-batch); held out: the five p > 1
  rows (v assumed) and the AutoModel row.
* NeMo AutoModel's Llama 3.1 70B BF16 row on 64 H100 (NVIDIA-NeMo/Automodel docs/performance-summary.md at
  2013a4dd6): a different framework (PyTorch FSDP2 + Transformer Engine), held out. Metric: the
  published tokens/s per GPU (no FLOPs convention). Strategy from its configuration file
  (examples/llm_pretrain/custom_llama3_1_70b_pretrain_benchmark_8nodes.yaml at the same commit): d = 32,
  cp = 2 (SDPA context parallelism, priced as ring attention), micro-batch 1, B = 128, FSDP2 = ZeRO-3
  with prefetch and a reduce-scatter under every backward (defer_fsdp_grad_sync: False), activation
  checkpointing of every layer (full recomputation), bf16 gradient reduce (FSDP2Config's default
  MixedPrecisionPolicy, reduce_dtype bfloat16). Not modelled: torch.compile, the fp32 RMSNorm.
"""
from __future__ import annotations

from explorer.errors import ExplorerError
from explorer.io.models import load_model
from explorer.model.spec import ModelSpec
from explorer.strategy.strategy import Strategy
from explorer.validation.cases import ROOT, Case, cases_from_file
from explorer.validation.megatron_bridge import padded_vocab

PATH = ROOT / "assets" / "validation" / "bf16_dense.json"
GROUP = "bf16_h100"
CLUSTER = "dgx-h100"
R08_CONVENTION = ("Megatron-LM r0.8.0 num_floating_point_operations (megatron/training/training.py at core_r0.8.0): "
                  "full (non-causal) attention core, logits over the vocabulary padded to a multiple of 128 x TP, "
                  "no recomputation (the causal half came with 8873b55d6a, 2025-03-06)")
"""The FLOPs convention of the Megatron-LM README's H100 TFLOP/s (megatron_r08_flops), labelled on its cases as the
Megatron-Bridge cases carry theirs (Case.convention; `validate` prints it per group)."""


def megatron_r08_flops(layers: int, hidden: int, seq_len: int, vocab: int, tp: int, global_batch: int) -> float:
    """Megatron-LM r0.8.0's num_floating_point_operations (megatron/training/training.py at core_r0.8.0)
    for a GPT model (multi-head attention, ffn 4h, no SwiGLU, no experts):
    12 B s L h^2 [(1 + 1 + s/h) + 4 + V_pad / (2 L h)], V_pad a multiple of 128 x TP."""
    L, h, s = layers, hidden, seq_len
    return float(12 * global_batch * s * L * h * h * ((2 + s / h) + 4 + padded_vocab(vocab, tp) / (2 * L * h)))


def _megatron_lm_case(entry: dict) -> Case:
    x = entry["inputs"]
    L, h, a, s, V = x["layers"], x["hidden_size"], x["attention_heads"], x["seq_len"], x["vocab"]
    t, p, d = x["tensor_parallel"], x["pipeline_parallel"], x["data_parallel"]
    n, B = x["num_gpus"], x["global_batch_size"]
    if d * t * p != n:
        raise ExplorerError(f"d x t x p = {d * t * p} is not the row's {n} GPUs")
    v = L // p if p > 1 else 1
    model = ModelSpec(name=f"gpt-{x['model_size_verbatim'].lower()}", family="gpt", layers=L, hidden=h, heads=a,
                      seq_len=s, vocab=V, attention="flash")
    strategy = Strategy(dp=d, tp=t, pp=p, micro_batch=1, global_batch=B,
                        schedule="interleaved" if v > 1 else "1f1b", chunks=v, zero=1,
                        sequence_parallel=t > 1, overlap_tp=t > 1, overlap_dp=True, overlap_param_gather=True,
                        dtype="bf16", grad_dtype="fp32")
    subset = "fitted" if p == 1 else "held out"
    why = (f"Megatron-LM README H100 weak scaling (Megatron-Core r0.8.0), {subset}; t={t} p={p} d={d}"
           f"{f' interleaved v={v} (v not stated: one layer per chunk)' if v > 1 else ''}, micro-batch 1 "
           f"(not stated: B = 4 d p), B={B}, s={s}; GPT with FlashAttention; distributed optimizer (ZeRO-1) with "
           "--overlap-grad-reduce --overlap-param-gather"
           + (", sequence parallel with --tp-comm-overlap" if t > 1 else "")
           + "; fp32 gradient reduce (r0.8.0 with --bf16); bf16 inferred from the MFU column (over 989 TFLOP/s); "
           "predicted = r0.8.0 num_floating_point_operations (full attention) / (our iteration time x GPUs)")
    return Case(entry["id"], GROUP, entry["source"], model, strategy, n, "model_tflops_per_gpu",
                float(entry["expected"]["model_tflops_per_gpu"]), why, cluster=CLUSTER,
                model_flops=megatron_r08_flops(L, h, s, V, t, B), subset=subset, convention=R08_CONVENTION)


def _automodel_case(entry: dict) -> Case:
    x = entry["inputs"]
    n, cp, B, s = x["num_gpus"], x["context_parallel"], x["global_batch_size"], x["seq_len"]
    dp = n // (x["tensor_parallel"] * x["pipeline_parallel"] * cp)
    model = load_model(x["model"]).with_seq_len(int(s))
    strategy = Strategy(dp=dp, tp=x["tensor_parallel"], pp=x["pipeline_parallel"], cp=cp, cp_algo="ring",
                        micro_batch=x["micro_batch_size"], global_batch=B, zero=3, zero_prefetch=True,
                        overlap_dp=True, recompute="full", dtype="bf16", grad_dtype="model")
    why = (f"NeMo AutoModel (PyTorch FSDP2 + TE), held out; d={dp} cp={cp} (SDPA context parallelism priced as ring "
           f"attention), micro-batch {x['micro_batch_size']}, B={B}, s={s}; FSDP2 = ZeRO-3 with prefetch, a "
           "reduce-scatter under every backward (defer_fsdp_grad_sync: False); activation checkpointing = full "
           "recomputation; bf16 gradient reduce (FSDP2Config's default MixedPrecisionPolicy); torch.compile and the "
           "fp32 RMSNorm not modelled; predicted = B x s / (our iteration time x GPUs)")
    return Case(entry["id"], GROUP, entry["source"], model, strategy, n, "tokens_per_sec_per_gpu",
                float(entry["expected"]["tokens_per_sec_per_gpu"]), why, cluster=CLUSTER, subset="held out")


def _case(entry: dict) -> Case:
    ident = str(entry["id"])
    if ident.startswith("mlm_h100_weak_"):
        return _megatron_lm_case(entry)
    if ident.startswith("automodel_"):
        return _automodel_case(entry)
    raise ExplorerError(f"entry {ident!r} is of no known source")


def load_bf16_cases(path=None) -> list:
    """Every row of assets/validation/bf16_dense.json as a case of group 'bf16_h100'."""
    return cases_from_file(path or PATH, _case)
