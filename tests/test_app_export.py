"""AppTest of the Export & share page and of share links (round trip, tampering)."""
from urllib.parse import parse_qsl, urlparse

from app_util import errors, metric, open_page

from explorer.io.export import strategy_json
from explorer.io.presets import DEFAULT_STRATEGY
from explorer.io.share import decode


def _link(at) -> dict:
    return dict(parse_qsl(urlparse(at.code[0].value).query))


def test_exports_are_offered():
    at = open_page("export")
    labels = {b.label for b in at.get("download_button")}
    assert {"PNG", "SVG", "HTML (works offline)", "Strategy (JSON)", "Formulas (LaTeX)",
            "time_by_category.csv", "superstep_events.csv"} <= labels


def test_share_link_round_trips():
    at = open_page("export")
    at.sidebar.select_slider(key="w_tp").set_value(4).run()
    at.sidebar.selectbox(key="w_zero").set_value(1).run()
    params = _link(at)
    assert params["tp"] == "4" and params["zero"] == "1"
    assert dict(at.query_params) == params, "the address bar holds the same link"
    strategy = at.session_state["last_valid"].strategy
    assert decode(params).strategy == strategy
    opened = open_page(query=params)                     # a new session opens the link
    assert opened.session_state["last_valid"].strategy == strategy
    assert any("Opened a shared configuration" in i.value for i in opened.info)


def test_share_link_with_per_layer_choices_round_trips():
    params = {"model": "gpt3-175b", "cluster": "dgx-a100-80gb", "dp": "16", "tp": "8", "pp": "8", "b": "1",
              "B": "1536", "sched": "1f1b", "rc": "selective", "sp": "1", "splits": "4mx48,8mx48",
              "stages": "11,13,12,12,12,12,12,12"}
    at = open_page(query=params)
    strategy = at.session_state["last_valid"].strategy
    assert strategy.stage_map.count(0) == 11 and strategy.layer_splits[0].degree == 4
    assert not errors(at)


def test_tampered_link_falls_back_to_defaults_with_a_message():
    at = open_page(query={"model": "../../etc/passwd", "tp": "8; rm -rf /", "splits": "99zx3"})
    assert not at.exception
    infos = " ".join(i.value for i in at.info)
    assert "names no preset" in infos and "'tp' must be a whole number" in infos and "splits" in infos
    assert at.session_state["model"].name == "gpt3-175b"
    assert metric(at, "Iteration time").endswith(" s")


def test_impossible_shared_strategy_falls_back():
    at = open_page(query={"model": "tiny-gpt", "cluster": "classroom", "tp": "64", "dp": "1", "pp": "1"})
    assert not at.exception
    assert any("the shared strategy cannot run" in i.value for i in at.info)
    assert at.session_state["model"].name == "tiny-gpt"


def test_uploaded_strategy_json_is_applied_and_a_bad_one_refused():
    at = open_page("export")
    good = DEFAULT_STRATEGY.with_(dp=8, global_batch=1024)
    at.file_uploader(key="w_strategy_file").set_value(("s.json", strategy_json(good).encode(), "application/json"))
    at.run()
    assert not at.exception and at.session_state["last_valid"].strategy == good
    huge = DEFAULT_STRATEGY.with_(global_batch=16 * 10 ** 7)      # beyond explorer/limits.py MAX_GLOBAL_BATCH
    at.file_uploader(key="w_strategy_file").set_value(("h.json", strategy_json(huge).encode(), "application/json"))
    at.run()
    assert not at.exception
    assert any("16,777,216 this explorer accepts" in e for e in errors(at))
    assert at.session_state["last_valid"].strategy == good


def test_link_with_a_value_beyond_the_inputs_falls_back():
    at = open_page(query={"model": "gpt3-175b", "B": "1000000", "dp": "1", "tp": "8", "pp": "8", "v": "1"})
    assert not at.exception
    at = open_page(query={"model": "gpt3-175b", "dp": "16", "tp": "8", "pp": "8", "B": "1536", "sched": "interleaved",
                          "v": "2000"})
    assert not at.exception
    assert any("using the default strategy" in i.value for i in at.info)


def test_framework_config_panel_shows_configs_and_refusals():
    at = open_page("export")
    box = at.selectbox(key="w_export_framework")
    assert box.value == "megatron"
    assert any("--tensor-model-parallel-size" in c.value for c in at.code)
    assert "Megatron-LM config (.sh)" in {b.label for b in at.get("download_button")}
    box.set_value("mindspore").run()
    assert any('parallel_mode="semi_auto_parallel"' in c.value for c in at.code)
    box.set_value("deepspeed").run()                 # the default strategy has t > 1: DeepSpeed refuses
    warnings = " ".join(w.value for w in at.warning)
    assert "DeepSpeed cannot express this strategy" in warnings and "tensor parallelism" in warnings
    assert "\\(" in warnings                          # escaped by plain(): no markdown from the message
    assert not any('"train_batch_size"' in c.value for c in at.code)


def test_framework_panel_shows_notes_from_the_exporter_and_megatron_bridge():
    at = open_page("export")
    text = " ".join(md.value for md in at.markdown)
    assert "What it expresses" in text and "Megatron" in text
    at.selectbox(key="w_export_framework").set_value("megatron-bridge").run()
    assert not at.exception
    assert any("def explorer_pretrain_config()" in c.value for c in at.code)
    text = " ".join(md.value for md in at.markdown)
    assert "CommOverlapConfig" in text or "grad\\_reduce\\_in\\_fp32" in text or "WORLD\\_SIZE" in text
    assert "Megatron-Bridge config (.py)" in {b.label for b in at.get("download_button")}    # was 'megatron-bridge config'


def test_uploaded_framework_config_sets_the_strategy_and_a_bad_one_is_refused():
    from framework_matrix import run_by
    from explorer.codegen import export
    from explorer.io.clusters import load_cluster
    at = open_page("export")
    model = at.session_state["model"]
    good = DEFAULT_STRATEGY.with_(dp=8, global_batch=1024)
    recipe = export("megatron-bridge", model, good, load_cluster("dgx-a100-80gb"))
    at.file_uploader(key="w_framework_config_file").set_value(("r.py", recipe.encode(), "text/x-python"))
    at.run()
    good = run_by(good, "megatron-bridge")                  # a Megatron-Bridge recipe names its framework
    assert not at.exception and at.session_state["last_valid"].strategy == good
    at.file_uploader(key="w_framework_config_file").set_value(("d.json", b"{oops", "application/json"))
    at.run()
    assert not at.exception
    assert any("Framework config refused" in e and "malformed JSON" in e for e in errors(at))
    assert at.session_state["last_valid"].strategy == good


def test_a_link_for_a_framework_opens_its_config_first():
    """A link whose strategy names Megatron-Bridge (fw=megatron-bridge) opens the Export page on the Bridge recipe,
    not on the first framework of the list (a lecturer's walk, 2026-12-07); generic opens Megatron-LM's."""
    params = {"model": "gpt-oss-120b", "cluster": "dgx-b200", "dp": "64", "tp": "1", "pp": "1", "b": "4",
              "B": "1280", "v": "1", "zero": "1", "sched": "1f1b", "rc": "selective", "dtype": "bf16", "sp": "0",
              "ov": "1", "sg": "1", "gd": "model", "fw": "megatron-bridge", "ep": "8", "etp": "1",
              "disp": "hybridep", "rcm": "layernorm,moe_act"}
    at = open_page("export", query=params)
    assert not at.exception and errors(at) == []
    assert at.selectbox(key="w_export_framework").value == "megatron-bridge"
    code = " ".join(c.value for c in at.code)
    assert "cfg.model.activation_func = quick_gelu" in code and 'position_embedding_type = "yarn"' in code
    assert open_page("export").selectbox(key="w_export_framework").value == "megatron"
