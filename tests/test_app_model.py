"""AppTest of the Model & cluster page: presets, uploads, dimensions, the operator graph."""
import json

from app_util import chart_specs, errors, metric, open_page

HF_CONFIG = {"model_type": "llama", "num_hidden_layers": 4, "hidden_size": 512, "num_attention_heads": 8,
             "num_key_value_heads": 8, "intermediate_size": 1376, "max_position_embeddings": 1024,
             "vocab_size": 32000}


def _graph(at):
    return next(s for s in chart_specs(at) if "nodes, coloured by" in s["layout"]["title"]["text"])


def _nodes(spec) -> int:
    return len(spec["data"][-1]["x"])


def test_graph_collapses_and_expands_layers_and_colours_by_degree():
    at = open_page("model")
    spec = _graph(at)
    assert _nodes(spec) == 98, "embedding + 96 layers + head"
    assert "FLOPs fwd" in spec["data"][-1]["hovertext"][1]
    at.multiselect(key="w_graph_layers").set_value([0, 1]).run()
    assert _nodes(_graph(at)) == 98 - 2 + 2 * 13
    at.radio(key="w_graph_colour").set_value("degree").run()
    assert _graph(at)["layout"]["title"]["text"].endswith("coloured by degree")
    assert set(_graph(at)["data"][-1]["marker"]["color"]) == {8}


def test_choosing_a_small_model_switches_to_a_strategy_that_fits():
    at = open_page("model")
    at.selectbox(key="w_model_preset").set_value("tiny-gpt").run()
    assert not at.exception and not errors(at)
    assert at.session_state["model"].name == "tiny-gpt"
    assert any("cannot run tiny-gpt" in i.value for i in at.info)
    assert _nodes(_graph(at)) == 6


def test_editing_a_dimension_updates_the_model_and_a_bad_one_is_refused():
    at = open_page("model")
    at.number_input(key="w_dim_seq_len").set_value(4096).run()
    assert at.session_state["model"].seq_len == 4096
    assert at.session_state["model"].name == "gpt3-175b-edited"
    at.number_input(key="w_dim_heads").set_value(7).run()
    assert not at.exception
    assert any("not divisible by heads 7" in e for e in errors(at))
    assert at.session_state["model"].heads == 96, "the model in use is unchanged"
    assert at.number_input(key="w_dim_heads").value == 7, "what the user typed is kept"


def test_uploading_a_huggingface_config_and_a_malformed_file():
    at = open_page("model")
    at.file_uploader(key="w_model_file").upload("config.json", json.dumps(HF_CONFIG).encode(), "application/json")
    at.run()
    assert not at.exception
    # issue 30: the training sequence length is asked for, max_position_embeddings only suggested
    assert at.session_state["model"].name == "gpt3-175b", "not used before its sequence length is chosen"
    assert at.number_input(key="w_upload_seq_len").value == 1024
    at.number_input(key="w_upload_seq_len").set_value(512).run()
    at.button(key="model_use_upload").click().run()
    assert not at.exception
    model = at.session_state["model"]
    assert (model.family, model.layers, model.hidden, model.seq_len) == ("llama", 4, 512, 512)
    assert model.name == "llama-config" and "sequence length 512 chosen" in model.source
    assert at.selectbox(key="w_model_preset").value is None, "the preset box no longer names gpt3-175b"
    total = metric(at, "Iteration time") if any(m.label == "Iteration time" for m in at.metric) else None
    at.file_uploader(key="w_model_file").set_value(("bad.json", b"{not json", "application/json")).run()
    assert not at.exception
    assert any("Upload refused: bad.json: malformed JSON" in e for e in errors(at))
    assert at.session_state["model"] == model
    assert total is None or metric(at, "Iteration time") == total


def test_uploading_a_cluster_spec_with_a_missing_field_is_refused():
    at = open_page("model")
    at.file_uploader(key="w_cluster_file").set_value(("c.yaml", b"name: x\nlevels: []\n", "text/yaml")).run()
    assert not at.exception
    assert any("Upload refused: c.yaml:" in e for e in errors(at))
    assert at.session_state["cluster"].name == "dgx-a100-80gb"


def test_our_schema_upload_is_used_at_once_and_the_preset_box_follows():
    at = open_page("model")
    spec = {"family": "gpt", "layers": 2, "hidden": 64, "heads": 4, "seq_len": 32, "vocab": 100}
    at.file_uploader(key="w_model_file").upload("small.json", json.dumps(spec).encode(), "application/json")
    at.run()
    assert not at.exception and at.session_state["model"].name == "small"
    assert at.selectbox(key="w_model_preset").value is None


def test_choosing_a_model_the_strategy_cannot_hold_switches_to_its_preset_that_fits():
    """A lecturer's walk: deepseek-v3 kept GPT-3's d 16 t 8 p 8 (187 GiB a device, no expert parallelism) where
    qwen3-30b-a3b switched to its preset; a model picked whose memory the strategy cannot hold now switches to the
    model's preset strategy when that one fits. Editing a dimension keeps the strategy (its memory is the lesson)."""
    at = open_page("model")
    at.selectbox(key="w_model_preset").set_value("deepseek-v3").run()
    assert not at.exception and not errors(at)
    assert any("switched to a preset strategy that fits" in i.value for i in at.info), [i.value for i in at.info]
    assert at.session_state["w_ep"] > 1                               # the MoE preset spreads the experts
    at = open_page("model")
    at.number_input(key="w_dim_seq_len").set_value(16384).run()     # gpt3-175b at 16k: out of memory, kept
    assert at.session_state["model"].seq_len == 16384 and at.session_state["w_tp"] == 8
    assert not any("switched" in i.value for i in at.info)
