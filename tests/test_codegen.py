"""Framework config exporters (explorer/codegen): goldens, the Megatron round trip, refusals."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from explorer.codegen import FILE_SUFFIX, FRAMEWORKS, export, megatron_args, parse_megatron_args
from explorer.codegen.mindspore import mindspore_script
from explorer.errors import ExplorerError
from explorer.io.clusters import load_cluster
from explorer.io.models import load_model
from explorer.strategy.strategy import LayerSplit, Strategy
from framework_matrix import run_by

GOLDEN = Path(__file__).parent / "golden"
_spec = importlib.util.spec_from_file_location("make_codegen_golden", GOLDEN / "make_codegen_golden.py")
make = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(make)
CASES = make.cases()
CLUSTER = load_cluster("dgx-a100-80gb")


def test_the_golden_cases_are_table1_plus_five():
    names = [name for name, _, _ in CASES]
    assert sum(name.startswith("ptdp_table1_") for name in names) == 10
    assert len(names) == 15


@pytest.mark.parametrize("name,model,strategy", CASES, ids=[c[0] for c in CASES])
def test_exporters_match_their_goldens(name, model, strategy):
    for framework in FRAMEWORKS:
        suffix, text = make.render(framework, model, strategy)
        golden = GOLDEN / "codegen" / f"{name}.{framework}{suffix}"
        assert golden.exists(), f"{golden.name} missing (a refusal changed into output, or back?)"
        assert text == golden.read_text(encoding="utf-8"), golden.name


def test_megatron_expresses_every_table1_row():
    rows = [(n, m, s) for n, m, s in CASES if n.startswith("ptdp_table1_")]
    for name, model, strategy in rows:
        text = megatron_args(model, strategy)
        assert f"--tensor-model-parallel-size {strategy.tp} " in text
        _, back = parse_megatron_args(text)
        assert back == run_by(strategy, "megatron-lm"), name


def test_table1_interleaving_gives_layers_per_virtual_stage():
    name, model, strategy = next(c for c in CASES if c[0] == "ptdp_table1_76.1B")   # 60 layers, p=4, v=3
    assert "--num-layers-per-virtual-pipeline-stage 5 " in megatron_args(model, strategy)


def test_gpt3_175b_round_trips():
    model, strategy = load_model("gpt3-175b"), make.GPT3_175B
    fields, back = parse_megatron_args(megatron_args(model, strategy))
    assert back == run_by(strategy, "megatron-lm")
    assert fields == {"layers": 96, "hidden": 12288, "heads": 96, "seq_len": 2048, "ffn_hidden": 49152,
                      "kv_heads": 96, "family": "gpt", "attention": "standard"}


@pytest.mark.parametrize("name, backend", [("gpt3-175b", "unfused"), ("llama2-7b", "flash")])
def test_the_megatron_export_pins_the_attention_that_was_costed(name, backend):
    """Issue 30: the export left Megatron's --attention-backend at auto (Transformer Engine picks a kernel), while
    the cost model priced FlashAttention (no s x s scores) or the unfused core (the scores kept): the flag names
    the one that was costed, the import reads it back, the older --use-flash-attn still reads, and a backend the
    explorer does not price is one line."""
    model = load_model(name)
    strategy = Strategy(dp=2, tp=4, pp=2, micro_batch=1, global_batch=16, sequence_parallel=True)
    text = megatron_args(model, strategy)
    assert text.count("--attention-backend") == 1 and f"--attention-backend {backend}" in text
    assert "--use-flash-attn" not in text
    assert parse_megatron_args(text)[0]["attention"] == model.attention
    older = text.replace(f"--attention-backend {backend}", "--use-flash-attn")      # arguments written before
    assert parse_megatron_args(older)[0]["attention"] == "flash"
    with pytest.raises(ExplorerError, match="--attention-backend 'local': the explorer prices flash, fused and unfused"):
        parse_megatron_args(text.replace(f"--attention-backend {backend}", "--attention-backend local"))
    # cuDNN's fused kernel (what a model with attention sinks pins, codegen.megatron.attention_backend_of) is the
    # explorer's fused kernel too
    assert parse_megatron_args(text.replace(f"--attention-backend {backend}", "--attention-backend fused"))[0][
        "attention"] == "flash"


def test_uneven_stages_use_first_and_last_and_round_trip():
    model = load_model("gpt3-175b")                         # 96 layers on 5 stages: 20, 19, 19, 19, 19
    strategy = Strategy(dp=2, tp=8, pp=5, micro_batch=1, global_batch=16)
    text = megatron_args(model, strategy)
    assert "--decoder-first-pipeline-num-layers 20 " in text and "--decoder-last-pipeline-num-layers 19 " in text
    assert parse_megatron_args(text)[1] == run_by(strategy, "megatron-lm")
    custom = strategy.with_(stage_map=(0,) * 16 + tuple(s for s in (1, 2, 3) for _ in range(20)) + (4,) * 20)
    _, back = parse_megatron_args(megatron_args(model, custom))
    assert back.stages(96) == custom.stage_map


def test_megatron_reads_gqa_and_swiglu():
    fields, _ = parse_megatron_args(megatron_args(load_model("llama2-70b"), Strategy(dp=1, tp=8, pp=4,
                                                                                      global_batch=4)))
    assert fields["kv_heads"] == 8 and fields["family"] == "llama" and fields["ffn_hidden"] == 28672


def test_parse_needs_the_world_size():
    with pytest.raises(ExplorerError, match="world size"):
        parse_megatron_args("--num-layers 2 --hidden-size 8 --num-attention-heads 2 --seq-length 4 "
                            "--micro-batch-size 1 --global-batch-size 1")
    _, s = parse_megatron_args("--num-layers 2 --hidden-size 8 --num-attention-heads 2 --seq-length 4 "
                               "--micro-batch-size 1 --global-batch-size 4 --lr 1e-4", world_size=4)
    assert s.dp == 4 and s.tp == 1


REFUSALS = [
    ("megatron", "tiny-gpt", make.PER_LAYER, "layer 1 is split column over 2 device"),
    ("megatron", "tiny-gpt", Strategy(dp=2, zero=3, global_batch=2), "ZeRO-3 without overlapped gradient"),
    ("megatron", "tiny-gpt", Strategy(dp=2, zero=1, global_batch=2, overlap_param_gather=True),
     "Must use --overlap-param-gather with --overlap-grad-reduce"),
    ("megatron", "tiny-gpt", Strategy(dp=1, pp=2, global_batch=4, schedule="interleaved", chunks=2),
     "with p > 2 only"),
    ("megatron", "tiny-gpt", Strategy(dp=1, pp=2, global_batch=4, schedule="zb-h1"), "zb-h1 schedule"),
    ("megatron", "tiny-gpt", Strategy(dp=1, pp=2, global_batch=4, schedule="gpipe"), "gpipe schedule"),
    ("megatron", "tiny-mlp", Strategy(), "tiny-mlp is a mlp model"),
    ("deepspeed", "gpt-7.5b", Strategy(dp=2, tp=4, global_batch=2), "tensor parallelism t=4"),
    ("deepspeed", "tiny-gpt", Strategy(dp=1, pp=2, global_batch=4, schedule="gpipe"), "gpipe schedule"),
    ("deepspeed", "tiny-gpt", Strategy(recompute="selective"), "selective recomputation"),
    ("torchtitan", "tiny-gpt", Strategy(), "its models are Llama-style"),
    ("torchtitan", "llama2-7b", Strategy(dp=2, zero=1, global_batch=2), "ZeRO-1"),
    ("torchtitan", "llama2-7b", Strategy(dp=2, zero=2, global_batch=2), "ZeRO-2"),
    ("torchtitan", "llama2-7b", Strategy(dtype="fp16"), "fp16"),
    ("torchtitan", "llama2-7b", Strategy(tp=2, dtype="fp32"), "without sequence parallelism"),
    ("torchtitan", "llama2-7b", Strategy(dp=2, tp=2, sequence_parallel=True, global_batch=2, grad_dtype="fp32"),
     "DDP has not supported > 1D parallelism"),
    ("torchtitan", "llama2-7b", Strategy(pp=5, global_batch=5, dtype="fp32"), "uneven stages"),
    ("torchtitan", "llama2-7b", Strategy(dp=2, zero=3, global_batch=2, grad_dtype="fp32", recompute="selective"),
     "selective recomputation"),
    ("mindspore", "llama2-7b", Strategy(dtype="fp8"), "fp8"),
    ("deepspeed", "llama2-7b", Strategy(dp=2, global_batch=2, grad_dtype="fp32"), "unsupported mix"),
    ("mindspore", "tiny-gpt", Strategy(pp=2, global_batch=4, schedule="zb-h1"), "zb-h1 schedule"),
    ("mindspore", "resnet-50", Strategy(), "conv"),
    ("megatron", "tiny-gpt", Strategy(rank_order="dp-tp-cp-ep-pp"), "ranks are ordered"),
]
"""The refusals of issue 29 (a)-(g) are checked against the frameworks' own rules in test_codegen_frameworks.py."""


@pytest.mark.parametrize("framework,model,strategy,words", REFUSALS,
                         ids=[f"{r[0]}-{r[3][:20]}" for r in REFUSALS])
def test_refusals_name_the_reason_in_one_line(framework, model, strategy, words):
    with pytest.raises(ExplorerError) as err:
        export(framework, load_model(model), strategy, CLUSTER)
    message = str(err.value)
    assert "\n" not in message and words in message and "cannot express this strategy" in message


def test_mindspore_expresses_mixed_per_layer_splits():
    text = mindspore_script(load_model("tiny-gpt"), make.PER_LAYER, CLUSTER)
    d = make.PER_LAYER.dp
    # layer 0 (Megatron pairing, t=2): column QKV, row proj; layer 1 all-column; layer 2 replicated; 3 batch
    assert f'"qkv": (({d}, 1), (1, 2)),  # MatMul, column' in text
    assert f'"proj": (({d}, 2), (2, 1)),  # MatMul, row' in text
    assert f'"proj": (({d}, 1), (1, 2)),  # MatMul, column' in text
    assert f'"qkv": (({d}, 1), (1, 1)),  # MatMul, replicated' in text
    assert f'"qkv": (({2 * d}, 1), (1, 1)),  # MatMul, batch' in text
    for label in ('"layer 0"', '"layer 1"', '"layer 2"', '"layer 3"'):
        assert label in text


def test_mindspore_shard_products_fit_a_stage():
    """Every shard tuple cuts a tensor into at most d x t parts (the devices of one pipeline stage)."""
    import ast
    for name, model, strategy in CASES:
        suffix, text = make.render("mindspore", model, strategy)
        if suffix == ".refused":
            continue
        table = ast.literal_eval(text.split("SHARD = ", 1)[1])
        for ops in table.values():
            for strat in ops.values():
                for dims in strat:
                    prod = 1
                    for x in dims:
                        prod *= x
                    assert strategy.devices // strategy.pp % prod == 0, (name, strat)


def test_deepspeed_batch_identity():
    name, model, strategy = next(c for c in CASES if c[0] == "llama2-7b_pp_zero1")
    cfg = json.loads(export("deepspeed", model, strategy, CLUSTER))
    assert cfg["train_batch_size"] == (cfg["train_micro_batch_size_per_gpu"] * cfg["gradient_accumulation_steps"]
                                       * strategy.dp)
    assert cfg["pipeline"]["stages"] == 4 and cfg["zero_optimization"]["stage"] == 1


def test_unknown_framework():
    with pytest.raises(ExplorerError, match="framework 'caffe' is unknown"):
        export("caffe", load_model("tiny-gpt"), Strategy(), CLUSTER)


def test_every_framework_has_a_suffix():
    assert set(FILE_SUFFIX) == set(FRAMEWORKS) == {"megatron", "megatron-bridge", "deepspeed", "torchtitan", "mindspore"}


def test_per_layer_default_split_is_megatron_uniform():
    model = load_model("tiny-gpt")
    explicit = Strategy(tp=2, sequence_parallel=True, layer_splits=(LayerSplit(2, "megatron"),) * 4)
    assert megatron_args(model, explicit) == megatron_args(model, explicit.with_(layer_splits=()))


def test_random_strategies_export_or_refuse_and_megatron_round_trips():
    """Every exporter returns text or refuses in one line (never another exception); whatever Megatron-LM
    expresses parses back to the same strategy (up to what Megatron cannot distinguish: the schedule
    without a pipeline, and per-layer splits equal to the default)."""
    import random
    rng = random.Random(13)
    models = [load_model(n) for n in ("tiny-gpt", "tiny-mlp", "bert-large", "llama2-7b", "resnet-50")]
    exported = 0
    for _ in range(200):
        model = rng.choice(models)
        tp, pp, dp, b = rng.choice([1, 2, 4]), rng.choice([1, 2, 4]), rng.choice([1, 2, 3]), rng.choice([1, 2, 4])
        schedule = rng.choice(["1f1b", "gpipe", "interleaved", "zb-h1"])
        fields = dict(dp=dp, tp=tp, pp=pp, micro_batch=b, global_batch=b * dp * pp * rng.choice([1, 2]),
                      schedule=schedule, chunks=2 if schedule == "interleaved" else 1, zero=rng.choice([0, 1, 2, 3]),
                      recompute=rng.choice(["none", "selective", "full"]), sequence_parallel=rng.random() < .5,
                      overlap_dp=rng.random() < .5, dtype=rng.choice(["bf16", "fp16", "fp32"]))
        if rng.random() < .3 and model.layers <= 24:
            fields["layer_splits"] = tuple(
                LayerSplit(1, "replicated") if rng.random() < .5 else LayerSplit(tp, rng.choice(["megatron", "column"]))
                for _ in range(model.layers))
        try:
            strategy = Strategy(**fields)
        except ExplorerError:
            continue
        for framework in FRAMEWORKS:
            try:
                text = export(framework, model, strategy, CLUSTER)
            except ExplorerError as err:
                assert "\n" not in str(err)
                continue
            exported += 1
            if framework == "megatron":
                same = strategy.with_(layer_splits=(), schedule=strategy.schedule if strategy.pp > 1 else "1f1b")
                assert parse_megatron_args(text)[1] == run_by(same, "megatron-lm")
    assert exported > 30
