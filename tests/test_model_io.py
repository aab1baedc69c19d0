"""Model presets and loaders (explorer/model_io.py)."""
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from explorer.errors import ExplorerError
from explorer.io.models import HF_KEYS, MODEL_FIELDS, PRESET_DIR, list_models, load_model, model_from_dict
from explorer.model.spec import ModelSpec

ROOT = Path(__file__).resolve().parents[1]
# published.json lives in validation/ (the repository's copy first, then the shared one)
PUBLISHED_PATH = next((p for p in (ROOT / "validation" / "published.json",
                                   Path("/work/shared/validation/published.json")) if p.is_file()), None)
PUBLISHED = json.loads(PUBLISHED_PATH.read_text()) if PUBLISHED_PATH else []

REQUIRED_PRESETS = {
    "gpt3-175b", "gpt-1.7b", "gpt-3.6b", "gpt-7.5b", "gpt-18.4b", "gpt-39.1b", "gpt-76.1b", "gpt-145.6b",
    "gpt-310.1b", "gpt-529.6b", "gpt-1008b", "megatron-22b", "turing-530b", "megatron-1t", "llama2-7b",
    "llama2-70b", "bert-large", "resnet-50", "tiny-gpt", "tiny-mlp"}


def write(path: Path, data) -> Path:
    path.write_text(json.dumps(data))
    return path


# ---- presets ------------------------------------------------------------------------

@pytest.mark.parametrize("path", sorted(PRESET_DIR.glob("*.json")), ids=lambda p: p.stem)
def test_every_preset_loads_under_its_file_name(path):
    model = load_model(path.stem)
    assert model.name == path.stem
    assert model.source
    assert model_from_dict(model.to_dict()) == model


def test_list_models_is_sorted_and_complete():
    names = [m.name for m in list_models()]
    assert names == sorted(names)
    assert REQUIRED_PRESETS <= set(names)


@pytest.mark.parametrize("entry", [e for e in PUBLISHED if e["id"].startswith("ptdp_table1_")],
                         ids=lambda e: e["id"])
def test_table1_presets_match_published(entry):
    """Narayanan et al. SC'21 Table 1 (published.json ptdp_table1_*)."""
    size = entry["id"].split("_")[-1][:-1].removesuffix(".0").lower()
    model, inputs = load_model(f"gpt-{size}b"), entry["inputs"]
    assert (model.layers, model.hidden, model.heads, model.seq_len, model.vocab) == (
        inputs["layers"], inputs["hidden_size"], inputs["attention_heads"], inputs["seq_len"], inputs["vocab"])


def test_named_presets_have_the_published_shapes():
    assert load_model("gpt3-175b").to_dict() | {"source": ""} == ModelSpec(
        "gpt3-175b", "gpt", 96, 12288, 96, 2048, 51200).to_dict() | {"source": ""}
    llama = load_model("llama2-70b")
    assert (llama.family, llama.kv_heads, llama.ffn_hidden, llama.vocab, llama.seq_len) == ("llama", 8, 28672, 32000, 4096)
    assert load_model("megatron-22b").heads == 64           # Korthikanti et al. 2022 Table 3
    resnet = load_model("resnet-50")
    assert (resnet.family, resnet.stage_blocks, resnet.layers, resnet.vocab) == ("cnn", (3, 4, 6, 3), 16, 1000)
    assert load_model("tiny-mlp").family == "mlp"


def test_unknown_preset_names_close_matches():
    with pytest.raises(ExplorerError, match=r"unknown model preset 'gpt3'.*did you mean.*gpt3-175b.*known presets"):
        load_model("gpt3")


# ---- HuggingFace configs ------------------------------------------------------------

LLAMA2_7B_HF = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
                "intermediate_size": 11008, "max_position_embeddings": 4096, "num_attention_heads": 32,
                "num_hidden_layers": 32, "num_key_value_heads": 32, "vocab_size": 32000,
                "rms_norm_eps": 1e-05, "torch_dtype": "float16"}
GPT2_HF = {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "n_ctx": 1024, "n_embd": 768,
           "n_head": 12, "n_inner": None, "n_layer": 12, "n_positions": 1024, "vocab_size": 50257}


def test_huggingface_llama_config(tmp_path):
    model = load_model(str(write(tmp_path / "config.json", LLAMA2_7B_HF)))
    preset = load_model("llama2-7b")
    assert model.name == "config" and model.family == "llama"
    for name in ("layers", "hidden", "heads", "kv_heads", "ffn_hidden", "seq_len", "vocab"):
        assert getattr(model, name) == getattr(preset, name), name


def test_huggingface_gqa_config(tmp_path):
    config = {**LLAMA2_7B_HF, "hidden_size": 8192, "num_attention_heads": 64, "num_key_value_heads": 8,
              "intermediate_size": 28672, "num_hidden_layers": 80}
    model = load_model(str(write(tmp_path / "llama-70b.json", config)))
    assert (model.name, model.kv_heads, model.ffn_hidden, model.layers) == ("llama-70b", 8, 28672, 80)


def test_huggingface_gpt2_config(tmp_path):
    model = load_model(str(write(tmp_path / "gpt2.json", GPT2_HF)))
    assert (model.name, model.family, model.layers, model.hidden, model.heads) == ("gpt2", "gpt", 12, 768, 12)
    assert (model.ffn_hidden, model.seq_len, model.vocab, model.kv_heads) == (3072, 1024, 50257, 12)


def test_family_from_architectures_when_model_type_is_absent():
    config = {k: v for k, v in LLAMA2_7B_HF.items() if k != "model_type"}
    assert model_from_dict(config, "x").family == "llama"
    bert = {"architectures": ["BertForMaskedLM"], "num_hidden_layers": 24, "hidden_size": 1024,
            "num_attention_heads": 16, "max_position_embeddings": 512, "vocab_size": 30522}
    assert model_from_dict(bert, "b").family == "bert"


def test_unknown_huggingface_model_type_is_refused():
    with pytest.raises(ExplorerError, match="cannot tell the model family from model_type 't5'"):
        model_from_dict({**LLAMA2_7B_HF, "model_type": "t5", "architectures": ["T5Model"]}, "t5")


def test_huggingface_config_without_layers_names_the_keys():
    config = {k: v for k, v in GPT2_HF.items() if k != "n_layer"}
    with pytest.raises(ExplorerError, match="'num_hidden_layers' / 'n_layer'"):
        model_from_dict(config, "gpt2")


# ---- our schema in JSON and YAML ----------------------------------------------------

def test_yaml_file_in_our_schema(tmp_path):
    path = tmp_path / "mine.yaml"
    path.write_text("family: gpt\nlayers: 2\nhidden: 64\nheads: 2\nseq_len: 32\nvocab: 100\n")
    model = load_model(str(path))
    assert (model.name, model.layers, model.ffn_hidden) == ("mine", 2, 256)


@pytest.mark.parametrize("suffix, text", [(".json", '{"family": "gpt", "layers": 2,'),
                                          (".yaml", "family: [gpt\n"),
                                          (".yml", "- just\n- a list\n"),
                                          (".json", "\xff\xfe not text")])
def test_malformed_file_names_the_file(tmp_path, suffix, text):
    path = tmp_path / f"broken{suffix}"
    path.write_bytes(text.encode("latin-1"))
    with pytest.raises(ExplorerError, match=f"broken\\{suffix}"):
        load_model(str(path))


@pytest.mark.parametrize("change, message", [
    ({"hiden": 64}, r"unknown field 'hiden' \(did you mean 'hidden'\?\)"),
    ({"layers": "2"}, "field 'layers' must be an integer, got '2'"),
    ({"layers": 2.0}, "field 'layers' must be an integer"),
    ({"heads": True}, "field 'heads' must be an integer"),
    ({"family": "rnn"}, "field 'family' is 'rnn'"),
    ({"heads": 3}, "not divisible by heads 3"),
    ({"layers": 0}, "'layers' must be a positive integer"),
])
def test_bad_fields_are_named_with_the_file(tmp_path, change, message):
    good = {"name": "m", "family": "gpt", "layers": 2, "hidden": 64, "heads": 2, "seq_len": 8, "vocab": 10}
    path = write(tmp_path / "model.json", {**good, **change})
    with pytest.raises(ExplorerError, match="model.json: .*" + message):
        load_model(str(path))


def test_missing_required_field(tmp_path):
    path = write(tmp_path / "m.json", {"family": "gpt", "layers": 2, "heads": 2, "seq_len": 8, "vocab": 10})
    with pytest.raises(ExplorerError, match="m.json: missing field 'hidden'"):
        load_model(str(path))


def test_cnn_layers_must_match_stage_blocks():
    with pytest.raises(ExplorerError, match="'layers' is 10 but stage_blocks"):
        model_from_dict({"family": "cnn", "layers": 10, "stage_blocks": [1, 1], "vocab": 10}, "c")
    assert model_from_dict({"family": "cnn", "stage_blocks": [1, 1], "vocab": 10}, "c").layers == 2


def test_missing_file_and_not_a_model(tmp_path):
    with pytest.raises(ExplorerError, match="nothing.json: no such file"):
        load_model(str(tmp_path / "nothing.json"))
    with pytest.raises(ExplorerError, match="other.json: not a model"):
        load_model(str(write(tmp_path / "other.json", {"colour": "blue"})))


def test_errors_are_one_line(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("a: b: c\n  d\n")
    with pytest.raises(ExplorerError) as info:
        load_model(str(path))
    assert "\n" not in str(info.value)


# ---- property tests: bad input never escapes as another exception -------------------

json_leaves = (st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8)
               | st.sampled_from(["gpt", "llama", "cnn", "mlp", "bert"]) | st.integers(1, 64))
json_values = st.recursive(json_leaves, lambda inner: st.lists(inner, max_size=4)
                           | st.dictionaries(st.text(max_size=6), inner, max_size=4), max_leaves=12)
model_keys = st.sampled_from(MODEL_FIELDS + tuple(k for ks in HF_KEYS.values() for k in ks)
                             + ("model_type", "architectures")) | st.text(max_size=8)


@given(st.dictionaries(model_keys, json_values, max_size=12))
def test_random_dicts_load_or_raise_explorer_error(d):
    try:
        assert isinstance(model_from_dict(d, "random"), ModelSpec)
    except ExplorerError as e:
        assert "\n" not in str(e)


PRESET_DICTS = [json.loads(path.read_text()) for path in sorted(PRESET_DIR.glob("*.json"))]


@given(st.sampled_from(PRESET_DICTS), st.dictionaries(model_keys, json_values, max_size=3))
def test_mutated_presets_load_or_raise_explorer_error(preset, changes):
    try:
        assert isinstance(model_from_dict({**preset, **changes}, "mutant"), ModelSpec)
    except ExplorerError as e:
        assert "\n" not in str(e)


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=200), suffix=st.sampled_from([".json", ".yaml"]))
def test_random_bytes_load_or_raise_explorer_error(tmp_path, data, suffix):
    path = tmp_path / f"random{suffix}"
    path.write_bytes(data)
    try:
        load_model(str(path))
    except ExplorerError as e:
        assert "random" in str(e)
