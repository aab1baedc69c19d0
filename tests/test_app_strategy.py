"""AppTest of the Strategy page: drags (set through the sortables' keys), the table, presets."""
import json

from app_util import chart_specs, errors, metric, open_page

STAGES = 8


def _stage_columns(layers=96, pp=STAGES):
    per = layers // pp
    return [{"header": f"stage {r}", "items": [f"L{i}" for i in range(r * per, (r + 1) * per)]} for r in range(pp)]


def _drag(at, kind, columns):
    at.session_state[at.session_state["drag_keys"][kind]] = columns
    return at.run()


def _breakdown(at):
    spec = next(s for s in chart_specs(at) if "by category" in s["layout"]["title"]["text"])
    return {trace["name"]: trace["x"][0] for trace in spec["data"]}


def test_dragging_a_layer_to_the_next_stage_changes_the_breakdown():
    at = open_page("strategy")
    before, total = _breakdown(at), metric(at, "Iteration time")
    columns = _stage_columns()
    columns[1]["items"].insert(0, columns[0]["items"].pop())       # L11: stage 0 -> stage 1
    _drag(at, "stage", columns)
    assert not at.exception and not errors(at)
    stage_map = at.session_state["stage_map"]
    assert stage_map[11] == 1 and stage_map[10] == 0 and stage_map.count(1) == 13
    assert _breakdown(at) != before and metric(at, "Iteration time") != total


def _shown_columns(at, kind):
    """The columns the drag widget in use was last given (its front end shows those)."""
    key = at.session_state["drag_keys"][kind]
    widget = next(c for c in at.get("component_instance") if c.proto.id.endswith(key))
    return json.loads(widget.proto.json_args)["items"]


def test_after_a_drag_each_stage_lists_its_layers_in_model_order():
    """Issue 30: a layer dropped at the end of the next stage stayed there (L12 ... L23, L11): the columns are drawn
    again with each stage's layers in model order, and a move within a stage is put back in order too."""
    at = open_page("strategy")
    columns = _stage_columns()
    columns[1]["items"].append(columns[0]["items"].pop())          # L11 dropped below L23
    _drag(at, "stage", columns)
    assert not at.exception and not errors(at)
    assert at.session_state["stage_map"][11] == 1
    shown = _shown_columns(at, "stage")
    assert shown[0]["items"] == [f"L{i}" for i in range(11)]
    assert shown[1]["items"] == [f"L{i}" for i in range(11, 24)]
    columns = _shown_columns(at, "stage")
    columns[2]["items"].reverse()                                  # a move inside stage 2: no change but order
    _drag(at, "stage", columns)
    assert not at.exception and not errors(at)
    assert _shown_columns(at, "stage")[2]["items"] == [f"L{i}" for i in range(24, 36)]


def test_a_non_contiguous_drag_is_refused_and_the_last_valid_map_kept():
    at = open_page("strategy")
    total = metric(at, "Iteration time")
    columns = _stage_columns()
    columns[5]["items"].append(columns[0]["items"].pop(3))           # L3 into stage 5
    _drag(at, "stage", columns)
    assert not at.exception
    assert any("stages hold consecutive layers" in e for e in errors(at))
    assert at.session_state["stage_map"] == ()
    assert metric(at, "Iteration time") == total


def test_emptying_a_stage_is_refused():
    at = open_page("strategy")
    columns = _stage_columns()
    columns[1]["items"] = columns[0]["items"] + columns[1]["items"]
    columns[0]["items"] = []
    _drag(at, "stage", columns)
    assert any("stage 0 would have no layers" in e for e in errors(at))


def test_dragging_layers_to_a_smaller_split_changes_op_comm():
    at = open_page("strategy")
    before = _breakdown(at)
    key = at.session_state["drag_keys"]["split"]
    columns = [{"header": h, "items": []} for h in
               ("replicated", "TP column→row ×2", "TP column→row ×4", "TP column→row ×8")]
    columns[2]["items"] = [f"L{i}" for i in range(48)]
    columns[3]["items"] = [f"L{i}" for i in range(48, 96)]
    at.session_state[key] = columns
    at.run()
    assert not at.exception and not errors(at)
    splits = at.session_state["layer_splits"]
    assert splits[0].degree == 4 and splits[95].degree == 8
    after = _breakdown(at)
    assert after["redistribution"] > 0 and after != before


def test_table_edit_sets_a_split_and_a_bad_stage_is_refused():
    at = open_page("strategy")
    key = at.session_state["drag_keys"]["table"]
    at.session_state[key] = {"edited_rows": {95: {"split": "replicated"}}, "added_rows": [], "deleted_rows": []}
    at.run()
    assert not at.exception and not errors(at)
    assert at.session_state["layer_splits"][95].degree == 1
    key = at.session_state["drag_keys"]["table"]
    at.session_state[key] = {"edited_rows": {0: {"stage": 3}}, "added_rows": [], "deleted_rows": []}
    at.run()
    assert any("Table edit refused" in e for e in errors(at))
    assert at.session_state["stage_map"] == ()


def test_applying_a_preset_sets_the_global_controls():
    at = open_page("strategy")
    at.selectbox(key="w_preset").set_value("ZeRO-3").run()
    next(b for b in at.button if b.label == "Apply preset").click().run()
    assert not at.exception and not errors(at)
    assert at.session_state["w_zero"] == 3 and at.session_state["w_dp"] == 1024
    assert any("ZeRO-3" in i.value for i in at.info)


def test_a_preset_that_changes_b_or_does_not_fit_says_so_before_and_after():
    at = open_page("strategy")
    at.selectbox(key="w_preset").set_value("Pure DP").run()
    caption = " ".join(c.value for c in at.caption)
    assert "changes the global batch B from 1536 to 2048" in caption
    assert "does NOT fit in memory" in caption
    next(b for b in at.button if b.label == "Apply preset").click().run()
    notes = " ".join(i.value for i in at.info)
    assert "B from 1536 to 2048" in notes and "does NOT fit" in notes
    assert any("Does not fit in memory" in w.value for w in at.warning), "and the page flags it"


def test_the_numbers_stay_in_view_while_dragging():
    """Issue 12: the sidebar (always on screen) repeats the numbers the drag columns change."""
    at = open_page("strategy")
    now = [m.value for m in at.sidebar.markdown if m.value.startswith("**Now:**")]
    assert now and metric(at, "Iteration time").split()[0] in now[0]


def test_an_applied_pipeline_layout_is_shown_read_only_and_costed():
    """A strategy with a Megatron-LM layout (from a link or a file) shows its stages as a table, not as drag
    columns, and the numbers are those of the layout (issue 26 item 7)."""
    at = open_page("strategy")
    total = metric(at, "Iteration time")
    at.session_state["pipeline_layout"] = "Et*11|(t*12|)*6,t*13L"       # 96 layers, 11 | 12 x 6 | 13
    at.run()
    assert not at.exception and not errors(at)
    table = next(df.value for df in at.dataframe if "chunk 0" in df.value.columns)
    assert list(table["chunk 0"]) == ["E t×11"] + ["t×12"] * 6 + ["t×13 L"]
    assert metric(at, "Iteration time") != total


def _layout_box(at):
    return next(w for w in at.text_input if w.key == "w_pipeline_layout")


def test_uneven_stages_typed_on_the_strategy_page_are_costed_and_shared():
    """Issue 30: the pipeline layout (Strategy.pipeline_layout) had no browser control. Layer counts per stage (or a
    Megatron-LM layout string) typed in the box: costed, shown as the layout table, kept in the share link; cleared:
    the even split again."""
    at = open_page("strategy")
    total = metric(at, "Iteration time")
    _layout_box(at).input("11,12,12,12,12,12,12,13").run()
    assert not at.exception and not errors(at), errors(at)
    strategy = at.session_state["last_valid"].strategy
    assert strategy.pipeline_layout == "Et*11|(t*12|)*6t*13L" and strategy.stages(96).count(7) == 13
    assert metric(at, "Iteration time") != total
    assert at.query_params["layout"] in ("Et*11|(t*12|)*6t*13L", ["Et*11|(t*12|)*6t*13L"])   # str or its list
    # the box shows the layout applied in the notation typed (it came back as 'Et*11|(t*12|)*6t*13L' before);
    # the link keeps Megatron-LM's
    assert _layout_box(at).value == "11,12,12,12,12,12,12,13"
    _layout_box(at).input("Et*13|(t*12|)*6t*11L").run()               # a Megatron-LM layout string
    assert not errors(at) and at.session_state["last_valid"].strategy.stages(96).count(0) == 13
    assert _layout_box(at).value == "Et*13|(t*12|)*6t*11L"
    _layout_box(at).input("8, 9,9,6").run()                          # wrong count: refused, the last layout kept
    assert errors(at) and _layout_box(at).value == "Et*13|(t*12|)*6t*11L"
    at.session_state["pipeline_layout"] = "Et*11|(t*12|)*6,t*13L"     # set otherwise (a link): its own spelling
    at.run()
    assert _layout_box(at).value == at.session_state["last_valid"].strategy.pipeline_layout != "11,12,12,12,12,12,12,13"
    _layout_box(at).input("").run()
    assert not errors(at) and at.session_state["last_valid"].strategy.pipeline_layout == ""
    assert "layout" not in at.query_params and metric(at, "Iteration time") == total


def test_a_bad_pipeline_layout_is_one_line_and_the_last_valid_choice_stays():
    at = open_page("strategy")
    total = metric(at, "Iteration time")
    for text, words in (("12,12", "lists 2 stages; the strategy has p x v = 8"),
                        ("11,12,12,12,12,12,12,12", "add up to 95; the model has 96 layers"),
                        ("12,12,12,0,24,12,12,12", "stage 3 holds no layer"),
                        ("12,x,12,12,12,12,12,12", "character 'x' is neither a digit nor a comma"),
                        ("E(t|)*", "must be followed by a repeat count")):
        _layout_box(at).input(text).run()
        assert not at.exception
        shown = errors(at)
        assert len(shown) == 1 and words in shown[0] and "\n" not in shown[0], (text, shown)
        assert at.session_state["last_valid"].strategy.pipeline_layout == ""
        assert metric(at, "Iteration time") == total


def test_the_preset_box_opens_on_the_applied_preset_not_one_that_does_not_fit():
    """Qwen3-30B-A3B from a link lands on its Megatron 3D preset (explorer.io.presets.fallback_strategy); the box
    opened on Pure DP (476 GiB of an 80 GiB device), the first in its list (a lecturer's walk, 2026-12-07)."""
    at = open_page("strategy", query={"model": "qwen3-30b-a3b", "cluster": "dgx-a100-80gb"})
    assert not at.exception, at.exception
    assert at.selectbox(key="w_preset").value == "Megatron 3D"
    assert at.session_state["w_ep"] == 8


def test_the_layout_box_shows_a_dragged_split_and_clearing_it_gives_the_even_split():
    """A link's stages= (what a drag writes): the box showed nothing, as if the stages were even (a lecturer's walk,
    2026-12-07); it shows the layers per stage, and clearing it restores the even split."""
    at = open_page("strategy", query={"model": "llama2-7b", "cluster": "dgx-a100-80gb", "dp": "2", "tp": "2",
                                      "pp": "4", "B": "64", "stages": "8,6,10,8"})
    assert not errors(at), errors(at)
    assert _layout_box(at).value == "8,6,10,8"
    assert at.session_state["last_valid"].strategy.stages(32).count(2) == 10
    _layout_box(at).input("").run()
    assert not errors(at) and at.session_state["last_valid"].strategy.stage_map == ()
    assert _layout_box(at).value == ""
