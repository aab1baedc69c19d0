"""Framework configs back into strategies (explorer/codegen/imports.py): export -> import -> the same strategy.

A matrix of strategies (dense and MoE, context parallelism, FP8, interleaved, ZeRO-1/2/3 and FSDP, fp32
gradients, uneven stages, overlaps) is exported to every framework that imports; what an exporter writes must
read back as the strategy it was given (and the model shape it states), what it refuses is counted. Bad input
is one ExplorerError line naming the file and the problem.
"""
import json
import subprocess
import sys
from collections import Counter

import pytest

from hypothesis import HealthCheck, given, settings, strategies as st

from explorer.codegen import export
from explorer.codegen.imports import IMPORTERS, detect, import_config
from explorer.errors import ExplorerError
from explorer.io.clusters import load_cluster
from explorer.strategy.strategy import Strategy
from framework_matrix import LLAMA, MATRIX, MOE, run_by

CLUSTER = load_cluster("dgx-a100-80gb")
SHAPE = ("layers", "hidden", "heads", "kv_heads", "ffn_hidden", "seq_len")


def _round_trip(framework, model, strategy):
    """The imported config of an export, or None when the framework refuses the strategy (in one line)."""
    try:
        text = export(framework, model, strategy, CLUSTER)
    except ExplorerError as err:
        assert "\n" not in str(err) and "cannot express" in str(err) or "does not write" in str(err), str(err)
        return None
    return import_config(text, framework)


def _same_model(framework, imported, model):
    if framework == "deepspeed":        # a DeepSpeed config holds no model
        return
    for key in SHAPE:
        assert imported.model[key] == getattr(model, key), (framework, key)
    if model.is_moe:
        assert imported.model["experts"] == model.experts


def test_the_matrix_round_trips_for_every_framework_that_writes_it():
    counts = Counter()
    for model, strategy in MATRIX:
        for framework in IMPORTERS:
            back = _round_trip(framework, model, strategy)
            if back is None:
                counts[framework, "refused"] += 1
                continue
            # a Megatron config comes back naming its framework: it is priced as Megatron-Core runs it (whole
            # pipeline sends, the input gradient's collective under the weight gradient: frameworks.py)
            expected = run_by(strategy, framework)
            assert back.strategy == expected, (framework, model.name, strategy, back.strategy)
            _same_model(framework, back, model)
            counts[framework, "round-tripped"] += 1
    assert len(MATRIX) >= 20
    for framework in IMPORTERS:
        assert counts[framework, "round-tripped"] >= 2, (framework, counts)
    # Megatron-LM and Megatron-Bridge write all but ZeRO-3 without prefetching (Megatron-FSDP always prefetches)
    assert counts["megatron", "round-tripped"] == counts["megatron-bridge", "round-tripped"] == len(MATRIX) - 1
    print(dict(counts))


STRATEGIES = st.builds(
    dict, dp=st.sampled_from([1, 2, 4, 8]), tp=st.sampled_from([1, 2, 4]), pp=st.sampled_from([1, 2, 4]),
    cp=st.sampled_from([1, 1, 2]), micro_batch=st.sampled_from([1, 2]), m=st.sampled_from([1, 2, 4]),
    zero=st.sampled_from([0, 1, 2, 3]), recompute=st.sampled_from(["none", "selective", "full"]),
    dtype=st.sampled_from(["bf16", "fp16", "fp32", "fp8"]), fp32_grads=st.booleans(),
    interleaved=st.booleans(), overlap=st.booleans(), overlap_p2p=st.booleans(), overlap_tp=st.booleans(),
    moe=st.booleans(), ep=st.sampled_from([1, 2, 4]))


def _strategy(d):
    """A valid Strategy from the drawn choices, or None."""
    model = MOE if d["moe"] else LLAMA
    interleaved = d["interleaved"] and d["pp"] > 1
    sp = d["tp"] > 1
    grad = "fp32" if d["fp32_grads"] and d["dtype"] != "fp32" else "model"
    try:
        return model, Strategy(
            dp=d["dp"], tp=d["tp"], pp=d["pp"], cp=d["cp"], micro_batch=d["micro_batch"],
            global_batch=d["micro_batch"] * d["dp"] * d["m"] * d["pp"], zero=d["zero"], recompute=d["recompute"],
            sequence_parallel=sp, dtype=d["dtype"], grad_dtype=grad, overlap_dp=d["overlap"] or d["zero"] >= 2,
            schedule="interleaved" if interleaved else "1f1b", chunks=2 if interleaved else 1,
            overlap_p2p=interleaved and d["overlap_p2p"], overlap_tp=sp and d["overlap_tp"],
            overlap_param_gather=d["overlap"] and d["zero"] in (1, 2), ep=d["ep"] if d["moe"] else 1)
    except ExplorerError:
        return None


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(drawn=STRATEGIES)
def test_export_then_import_gives_the_same_strategy(drawn):
    made = _strategy(drawn)
    if made is None:
        return
    model, strategy = made
    for framework in IMPORTERS:
        back = _round_trip(framework, model, strategy)
        if back is not None:
            assert back.strategy == run_by(strategy, framework), (framework, strategy, back.strategy)
            _same_model(framework, back, model)


def test_detect_by_suffix_and_content():
    assert detect("", "a.sh") == "megatron" and detect("", "a.py") == "megatron-bridge"
    assert detect("", "a.json") == "deepspeed" and detect("", "a.toml") == "torchtitan"
    assert detect('{"train_batch_size": 8}') == "deepspeed"
    assert detect("--num-layers 2") == "megatron"
    with pytest.raises(ExplorerError, match="cannot tell"):
        detect("hello")


BAD = [
    ("deepspeed", "{oops", "malformed JSON at line 1"),
    ("deepspeed", '{"train_batch_size": 64, "train_micro_batch_size_per_gpu": 3}', "not divisible by 3"),
    ("deepspeed", '{"train_batch_size": 64, "train_micro_batch_size_per_gpu": 1, "zero_optimization": '
                  '{"stage": 7}}', "zero_optimization.stage = '7'"),
    ("deepspeed", '{"train_batch_size": 999999999999, "train_micro_batch_size_per_gpu": 1}', "more than"),
    ("deepspeed", '{"train_batch_size": 64, "train_micro_batch_size_per_gpu": 1, "bf16": 3}', "deepspeed"),
    ("torchtitan", "[parallelism\n", "malformed TOML"),
    ("torchtitan", '[model]\nname = "llama3"\nflavor = "huge"\n[training]\nseq_len = 8\nlocal_batch_size = 1\n',
     "flavor 'huge'"),
    ("torchtitan", '[model]\nflavor = "8B"\n[parallelism]\ndata_parallel_shard_degree = 1\npipeline_parallel_degree = 2\n'
                   'pipeline_parallel_schedule = "Magic"\npipeline_parallel_layers_per_stage = 16\n'
                   '[training]\nseq_len = 8\nlocal_batch_size = 1\n', "pipeline_parallel_schedule = 'Magic'"),
    ("megatron", "# world size: 8\n--num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 32 "
                 "--micro-batch-size 1 --global-batch-size 8 --tensor-model-parallel-size 3", "not divisible"),
    ("megatron", "--num-layers 2", "world size"),
    ("megatron", "# world size: 8\n--num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 32 "
                 "--micro-batch-size 1 --global-batch-size 8 --tensor-model-parallel-size x", "invalid int"),
    ("megatron-bridge", "def f(:\n", "not Python"),
    ("megatron-bridge", "WORLD_SIZE = 8\ndef f():\n    cfg.model.num_layers = __import__('os').getpid()\n",
     "not a literal"),
    ("megatron-bridge", "def f():\n    cfg.model.num_layers = 2\n", "world size"),
    ("megatron-bridge", "WORLD_SIZE = 10 ** 30\n", "not a literal"),
    ("megatron-bridge", "WORLD_SIZE = 100000000000\ndef f():\n    cfg.model.num_layers = 2\n", "more than"),
    ("megatron-bridge", "WORLD_SIZE = 8\ndef f():\n" + "".join(
        f"    cfg.model.{k} = {v}\n" for k, v in (("num_layers", 2), ("hidden_size", 64), ("num_attention_heads", 4),
                                                  ("seq_length", 32))) +
     "    cfg.train.micro_batch_size = 1\n    cfg.train.global_batch_size = 8\n"
     "    cfg.mixed_precision = bf16_with_nvfp4_mixed()\n", "cfg.mixed_precision = 'bf16_with_nvfp4_mixed'"),
    ("megatron-bridge", "WORLD_SIZE = 8\nx = " + "(" * 2000 + ")" * 2000 + "\n", "megatron-bridge"),
]


_GPT_OSS_ARGS = ("# world size: 8\n--num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 32 --swiglu "
                 "--micro-batch-size 1 --global-batch-size 8 ")
BAD += [("megatron", _GPT_OSS_ARGS + "--window-size 127,5", "--window-size '127,5'"),
        ("megatron", _GPT_OSS_ARGS + "--window-size=-1,0", "--window-size '-1,0'"),
        ("megatron", _GPT_OSS_ARGS + "--window-size 15,0 --window-attn-skip-freq '[1,0]*1'",
         "--window-attn-skip-freq '[1,0]*1'"),
        ("megatron", _GPT_OSS_ARGS + "--window-attn-skip-freq 2", "with a window size"),
        ("megatron", _GPT_OSS_ARGS + "--softmax-type off-by-one", "--softmax-type 'off-by-one'"),
        ("megatron", _GPT_OSS_ARGS + "--attention-backend local", "--attention-backend 'local'"),
        ("megatron", _GPT_OSS_ARGS + "--window-size " + "9" * 500 + ",0", "--window-size '999"),
        ("megatron", _GPT_OSS_ARGS + "--window-size 15,0 --window-attn-skip-freq " + "7" * 30,
         "--window-attn-skip-freq '777")]
_BRIDGE_ARGS = "WORLD_SIZE = 8\ndef f():\n" + "".join(
    f"    cfg.model.{k} = {v}\n" for k, v in (("num_layers", 2), ("hidden_size", 64), ("num_attention_heads", 4),
                                              ("seq_length", 32))) + \
    "    cfg.train.micro_batch_size = 1\n    cfg.train.global_batch_size = 8\n"
BAD += [("megatron-bridge", _BRIDGE_ARGS + "    cfg.model.window_size = (" + "9" * 500 + ", 0)\n", "window_size"),
        ("megatron-bridge", _BRIDGE_ARGS + "    cfg.model.window_size = (127, 5)\n", "window_size '[127, 5]'"),
        ("megatron-bridge", _BRIDGE_ARGS + "    cfg.model.window_attn_skip_freq = 2\n", "with a window size"),
        ("megatron-bridge", _BRIDGE_ARGS + "    cfg.model.window_size = (15, 0)\n"
                            "    cfg.model.window_attn_skip_freq = " + "7" * 30 + "\n", "window_attn_skip_freq")]


def test_gpt_oss_round_trips_its_attention_and_biases():
    """GPT-OSS 120B exported for Megatron-LM (--window-size 127,0, --window-attn-skip-freq 2, --softmax-type
    learnable, --attention-backend fused, no --disable-bias-linear) and Megatron-Bridge (cfg.model.window_size,
    window_attn_skip_freq, softmax_type, attention_backend, add_bias_linear) reads back as the same model fields and
    strategy (issue 27); a Llama export (--disable-bias-linear, no window) reads back without them."""
    from explorer.io.models import load_model
    from explorer.model.spec import ModelSpec
    model = load_model("gpt-oss-120b")
    strategy = Strategy(dp=64, micro_batch=4, global_batch=1024, ep=8, moe_dispatcher="alltoall", overlap_ep=True,
                        pp=1)
    cluster = load_cluster("dgx-b200")
    fields = ("sliding_window_tokens", "window_attn_skip_freq", "attention_sinks", "linear_bias", "attention",
              "experts", "experts_per_token", "head_dim") + SHAPE
    for framework in ("megatron", "megatron-bridge"):
        back = import_config(export(framework, model, strategy, cluster), framework)
        assert back.strategy == run_by(strategy, framework), framework
        assert {k: back.model[k] for k in fields} == {k: getattr(model, k) for k in fields}, framework
        assert (back.model["sliding_window_tokens"], back.model["window_attn_skip_freq"]) == (128, 2)
        rebuilt = ModelSpec(**{**{k: back.model[k] for k in fields}, "name": "back", "family": "llama",
                               "vocab": model.vocab, "moe_ffn_hidden": back.model["moe_ffn_hidden"]})
        assert rebuilt.attention_sinks and rebuilt.linear_bias and rebuilt.sliding_window_tokens == 128
        plain = import_config(export(framework, LLAMA, MATRIX[0][1], CLUSTER), framework).model
        assert not {"sliding_window_tokens", "window_attn_skip_freq", "attention_sinks", "linear_bias"} & set(plain)


@pytest.mark.parametrize("framework,text,needle", BAD)
def test_bad_input_is_one_line_naming_the_problem(framework, text, needle):
    with pytest.raises(ExplorerError) as err:
        import_config(text, framework, name="bad")
    message = str(err.value)
    assert "\n" not in message and message.startswith("bad") and needle in message, message


def test_nothing_in_a_recipe_runs(tmp_path):
    """The reader parses: a recipe whose body would write a file leaves no file."""
    text = export("megatron-bridge", LLAMA, MATRIX[0][1], CLUSTER)
    planted = text.replace("    return cfg", f"    open({str(tmp_path / 'PWNED')!r}, 'w').write('x')\n    return cfg")
    assert import_config(planted, "megatron-bridge").strategy == run_by(MATRIX[0][1], "megatron-bridge")
    assert not (tmp_path / "PWNED").exists()


def test_oversized_and_non_utf8_files_are_refused():
    with pytest.raises(ExplorerError, match="more than the"):
        import_config(b"x" * 2_000_000, "deepspeed", name="big.json")
    with pytest.raises(ExplorerError, match="not UTF-8"):
        import_config(b"\xff\xfe", "deepspeed", name="bin.json")
    with pytest.raises(ExplorerError, match="cannot import"):
        import_config("{}", "mindspore")


def test_import_config_cli(tmp_path):
    strategy = MATRIX[9][1]
    path = tmp_path / "recipe.py"
    path.write_text(export("megatron-bridge", LLAMA, strategy, CLUSTER), encoding="utf-8")
    out = tmp_path / "s.json"
    run = subprocess.run([sys.executable, "-m", "explorer", "import-config", str(path), "--out", str(out)],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    from explorer.io.strategies import load_strategy
    assert load_strategy(out) == run_by(strategy, "megatron-bridge")
    assert "llama3-8b" in run.stdout and "layers" in run.stdout
    bad = tmp_path / "bad.json"
    bad.write_text("{oops", encoding="utf-8")
    run = subprocess.run([sys.executable, "-m", "explorer", "import-config", str(bad)], capture_output=True, text=True)
    assert run.returncode == 2 and run.stderr.count("\n") == 1 and "malformed JSON" in run.stderr
    json.dumps(run.stderr)
