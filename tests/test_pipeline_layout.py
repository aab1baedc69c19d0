"""Uneven pipeline layouts (issue 26 item 7): Megatron-LM's layout string, the first/last-stage flags, MTP
layers, and their one placement read by the plan, the search, the timeline, the share links and the exporters."""
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from explorer import ExplorerError, ModelSpec, Strategy, evaluate, load_cluster, load_model
from explorer import symbols as sym
from explorer.codegen import export
from explorer.codegen.imports import import_config
from explorer.cost.placement import block_ends, block_stages, layout_of
from explorer.cost.plan import plan
from explorer.io.share import decode, encode
from explorer.io.strategies import strategy_from_dict, strategy_to_dict
from explorer.model.graph import build_blocks
from explorer.search import search
from explorer.search.tables import node_stages
from explorer.timeline.layout import _operators
from explorer.strategy import rules
from explorer.strategy.pipeline_layout import (MAX_LAYOUT_CHARS, MAX_UNROLLED, check_against, layout_from_text,
                                               even_layout, first_last_counts, first_last_layout, parse)

ROOT = Path(__file__).resolve().parents[1]
DSV3 = "Et|(tt|)*30mL"      # Megatron-Bridge's DeepSeek-V3 H100 layout (p = 8, v = 4)
# a small DeepSeek-like model: 5 layers and one MTP module (LLaMA-style, untied head)
SMALL = ModelSpec(name="small-mtp", family="llama", layers=5, hidden=64, heads=4, seq_len=32, vocab=256,
                  mtp_layers=1)
CLASSROOM = load_cluster("classroom")


def test_megatron_layout_string_parses_as_megatron_reads_it():
    """parse_str_to_list's example and DeepSeek-V3's layout: stages in model order, counts per stage."""
    layout = parse("Ettt|(tt|)*29,m|L")
    assert layout.stages == ("Ettt",) + ("tt",) * 29 + ("m", "L")
    ds = parse(DSV3, 32)
    assert ds.layers == 61 and ds.mtp_layers == 1 and len(ds.stages) == 32
    assert ds.counts() == (1,) + (2,) * 30 + (0,)
    assert ds.stage_of("E") == 0 and ds.stage_of("m") == ds.stage_of("L") == 31
    assert parse("E t*3 | t*2L").stages == ("Ettt", "ttL")          # whitespace and c*n


@pytest.mark.parametrize("text", [DSV3, "Ettt|(tt|)*29,m|L", "Et*7|(t*8|)*6t*6mL", "EtL", "Et|t|t|tL"])
def test_canonical_text_round_trips(text):
    layout = parse(text)
    assert parse(layout.text()) == layout
    assert parse(layout.text()).text() == layout.text()


def test_the_published_deepseek_layout_is_the_default_even_one():
    """61 layers + 1 MTP + E + L = 64 slots over 32 virtual stages: Megatron-Bridge's account_for split."""
    assert even_layout(61, 1, 32).text() == DSV3
    assert even_layout(61, 0, 32) is None                       # 63 slots: no even split
    assert even_layout(126, 0, 64).text() == "Et|(tt|)*62tL"    # Llama 3.1 405B, p v = 64


@pytest.mark.parametrize("text, words", [
    ("EEt|(tt|)*30mL", "places the embedding (E) 2 times"),
    ("Et||(tt|)*29mL", "virtual stage 1 is empty"),
    ("Et|(tt|)*30m", "places the loss (L) 0 times"),
    ("tE|(tt|)*30mL", "embedding (E) must come first"),
    ("Et|(tt|)*29mt|L", "must come before the MTP layers"),
    ("Et|((tt|)*30)*1mL", "parentheses inside parentheses"),
    ("Et|(tt|)*30mL;rm", "character ';'"),
    ("Et|(tt|*30mL", "never closed"),
    ("Et|(tt|)mL", "needs a repeat count"),
    ("Et|t*0|mL", "must be at least 1"),
    ("Et*\u00b2|tL", "must be followed by a repeat count"),       # a superscript two: isdigit() but not int()
    ("E" + "t" * MAX_LAYOUT_CHARS + "L", f"more than the {MAX_LAYOUT_CHARS:,} accepted"),
    ("E(t|)*999999L", f"more than {MAX_UNROLLED:,} pieces"),
])
def test_bad_layouts_get_one_line_naming_the_problem(text, words):
    with pytest.raises(ExplorerError) as err:
        parse(text)
    message = str(err.value)
    assert words in message and "\n" not in message


def test_a_layout_against_the_model_names_the_count():
    assert "holds 60 transformer layers (t) but the model has 61" in check_against(parse("Et|(tt|)*29,t|mL"), 61, 1, 8)
    assert "0 MTP layers" in check_against(parse("Et|(tt|)*30L"), 61, 1, 8)
    assert check_against(parse(DSV3), 61, 1, 8) is None
    with pytest.raises(ExplorerError, match="33 virtual stages; the strategy has pp x chunks = 32"):
        Strategy(dp=8, pp=8, schedule="interleaved", chunks=4, global_batch=64, pipeline_layout="Et|(tt|)*31mL")


def test_first_and_last_stage_flags_follow_megatron():
    """transformer_config.py's uneven PP: the rest split evenly over the middle ranks, each divisible by v."""
    assert first_last_counts(61, 8, 7, 6) == (7, 8, 8, 8, 8, 8, 8, 6)
    assert first_last_counts(61, 8, None, 5) == (8, 8, 8, 8, 8, 8, 8, 5)
    assert first_last_layout(62, 0, 4, 2, 14, 16).counts() == (7, 8, 8, 8, 7, 8, 8, 8)   # rank 0: 7 per chunk
    with pytest.raises(ExplorerError, match="not divisible by the 4 chunks"):
        first_last_counts(61, 8, 4, 1, chunks=4)
    with pytest.raises(ExplorerError, match="do not split evenly over the other 6 stages"):
        first_last_counts(61, 8, 6, 6)


def test_strategy_keeps_the_canonical_layout_and_refuses_a_stage_map_too():
    s = Strategy(dp=1, pp=8, schedule="interleaved", chunks=4, global_batch=64,
                 pipeline_layout="Et|" + "tt|" * 30 + "mL")
    assert s.pipeline_layout == DSV3
    assert s.stages(61) == tuple(k % 8 for k in parse(DSV3).layer_stages())
    with pytest.raises(ExplorerError, match="not both"):
        Strategy(pp=2, global_batch=4, stage_map=(0, 1), pipeline_layout="EtL|t")
    assert strategy_to_dict(s)["pipeline_layout"] == DSV3
    read = strategy_from_dict({"version": 1, "dp": 1, "pp": 8, "schedule": "interleaved", "chunks": 4,
                               "global_batch": 64, "pipeline_layout": "Et|" + "tt|" * 30 + "mL"})
    assert read.pipeline_layout == DSV3


def _small_strategy(**changes):
    return Strategy(dp=1, tp=1, pp=2, micro_batch=1, global_batch=4, schedule="interleaved", chunks=2, **changes)


def test_the_plan_places_layers_embedding_mtp_and_loss_where_the_layout_says():
    """5 layers + 1 MTP module: the default layout E t | t t | t t | m L (8 slots over 4 chunks)."""
    s = _small_strategy()
    assert layout_of(SMALL, s).stages == ("Et", "tt", "tt", "mL")
    the_plan = plan(SMALL, s, CLASSROOM)
    where = {pb.block.name: (pb.stage, pb.chunk) for pb in the_plan.blocks}
    assert [pb.block.kind for pb in the_plan.blocks] == ["embedding"] + ["layer"] * 5 + ["mtp", "head"]
    assert where == {"embedding": (0, 0), "layer0": (0, 0), "layer1": (1, 0), "layer2": (1, 0), "layer3": (0, 1),
                     "layer4": (0, 1), "mtp0": (1, 1), "head": (1, 1)}
    # the search and the timeline read the same placement
    assert node_stages(SMALL, s) == tuple(pb.stage for pb in the_plan.blocks)
    assert block_ends(SMALL, s) == {"embedding": (0, 0), "head": (1, 1), "mtp": (1, 1)}
    given = s.with_(pipeline_layout="Et|tt|tt|mL")
    assert block_stages(SMALL, given) == block_stages(SMALL, s)
    assert evaluate(SMALL, given, CLASSROOM).iteration_time_s == evaluate(SMALL, s, CLASSROOM).iteration_time_s


def test_an_uneven_layout_moves_work_between_stages():
    """Two 1F1B stages: 'Ettt|ttmL' puts 3 layers on stage 0 and 2 + MTP + head on stage 1; the even split
    (3 | 2, first stages take the remainder) is the same split, a 1 | 4 layout is not."""
    s = Strategy(dp=1, pp=2, global_batch=4)
    even = evaluate(SMALL, s, CLASSROOM)
    same = evaluate(SMALL, s.with_(pipeline_layout="Ettt|ttmL"), CLASSROOM)
    skewed = evaluate(SMALL, s.with_(pipeline_layout="Et|ttttmL"), CLASSROOM)
    assert same.iteration_time_s == pytest.approx(even.iteration_time_s, rel=1e-12)
    assert skewed.iteration_time_s > even.iteration_time_s


def test_mtp_module_is_a_layer_plus_projection_and_a_second_head():
    """DeepSeek-V3 Sec 2.2: M_k (2h -> h), TRM_k, shared head; its embedding copy lives on the last stage."""
    blocks = build_blocks(SMALL)
    mtp, layer = blocks[-2], blocks[-3]
    assert mtp.kind == "mtp" and layer.kind == "layer"
    h = SMALL.hidden
    dims = {sym.h: h, sym.a: SMALL.heads, sym.a_kv: SMALL.kv_heads, sym.f: SMALL.ffn_hidden, sym.V: SMALL.vocab}
    assert int((mtp.params - layer.params).xreplace(dims)) == 2 * h * h + 3 * h   # eh_proj; enorm, hnorm, final norm
    assert mtp.ops[0].params == 0 and mtp.ops[-2].params == 0   # the shared embedding and output head
    without = replace(SMALL, mtp_layers=0)
    s = Strategy(dp=1, pp=2, global_batch=4)
    with_mtp, plain = evaluate(SMALL, s, CLASSROOM), evaluate(without, s, CLASSROOM)
    assert with_mtp.iteration_time_s > plain.iteration_time_s
    extra = with_mtp.memory_by_stage[-1]["params"] - plain.memory_by_stage[-1]["params"]
    assert extra >= SMALL.vocab * h * 2       # the word-embedding copy (bf16) on the MTP's stage, and more


def test_deepseek_preset_has_its_mtp_module():
    assert load_model("deepseek-v3").mtp_layers == 1
    with pytest.raises(ExplorerError, match="mtp_layers"):
        replace(SMALL, mtp_layers=-1)


def test_rules_accept_the_default_layout_and_refuse_what_nothing_splits():
    model = load_model("deepseek-v3")
    s = Strategy(dp=64, tp=2, pp=8, ep=64, schedule="interleaved", chunks=4, global_batch=8192,
                 sequence_parallel=True)
    rules.check(model, s)                                       # 64 slots over 32 stages
    with pytest.raises(ExplorerError, match="--pipeline-layout"):
        rules.check(replace(model, mtp_layers=0), s)            # 63 slots
    rules.check(replace(model, mtp_layers=0), s.with_(pipeline_layout="Et|(tt|)*30L"))
    with pytest.raises(ExplorerError, match="costs the MTP layers on the loss's pipeline stage"):
        rules.check(model, s.with_(pipeline_layout="Et|(tt|)*29,ttm|L"))


def test_share_link_carries_the_layout_and_names_a_tampered_one():
    model = load_model("tiny-gpt")
    s = Strategy(dp=1, pp=2, global_batch=8, pipeline_layout="Et|tttL")     # tiny-gpt: 4 layers
    params = encode(model, CLASSROOM, s)
    assert params["layout"] == "Et|t*3L"
    assert decode(params).strategy == s
    params["layout"] = "EEt|tttL"
    shared = decode(params)
    assert shared.strategy.pipeline_layout == ""
    assert any("link parameter 'layout'" in m and "2 times" in m for m in shared.messages)


def test_megatron_exports_the_layout_and_reads_it_back_others_refuse():
    model = load_model("llama3.1-405b")
    s = Strategy(dp=16, tp=8, pp=8, schedule="interleaved", chunks=8, global_batch=512, sequence_parallel=True,
                 overlap_p2p=True, zero=1, overlap_dp=True)
    text = export("megatron", model, s, CLASSROOM)
    assert "--pipeline-model-parallel-layout 'Et|(tt|)*62tL'" in text
    assert "--num-layers-per-virtual-pipeline-stage" not in text
    back = import_config(text, "megatron")
    assert back.strategy.pipeline_layout == "Et|(tt|)*62tL" and back.strategy.chunks == 8
    bridge = export("megatron-bridge", model, s, CLASSROOM)
    assert "pipeline_model_parallel_layout = 'Et|(tt|)*62tL'" in bridge
    again = import_config(bridge, "megatron-bridge", 1024)       # and the Bridge recipe reads back alike
    assert again.strategy.pipeline_layout == "Et|(tt|)*62tL" and again.strategy.chunks == 8
    with_mtp = replace(load_model("llama3-8b"), mtp_layers=1)
    recipe = export("megatron-bridge", with_mtp, Strategy(dp=8, global_batch=64, zero=1), CLASSROOM)
    assert "mtp_num_layers = 1" in recipe and import_config(recipe, "megatron-bridge", 8).model["mtp_layers"] == 1
    for framework in ("mindspore",):
        with pytest.raises(ExplorerError, match="cannot express this strategy: the pipeline layout 'Et"):
            export(framework, model, s, CLASSROOM)


def test_cli_takes_the_layout_and_the_first_last_flags():
    base = ["evaluate", "--model", "tiny-gpt", "--cluster", "classroom", "--gpus", "2", "--pp", "2",
            "--global-batch", "8", "--json"]
    run = lambda *extra: subprocess.run([sys.executable, "-m", "explorer", *base, *extra], cwd=ROOT,
                                        capture_output=True, text=True, timeout=300)
    bad = run("--pipeline-layout", "Et||tL")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "virtual stage 1 is empty" in bad.stderr
    layers = load_model("tiny-gpt").layers
    good = run("--decoder-first-pipeline-num-layers", str(layers - 1))
    assert good.returncode == 0, good.stderr
    expected = first_last_layout(layers, 0, 2, 1, layers - 1, None).text()
    assert f'"pipeline_layout": "{expected}"' in good.stdout and expected.endswith("|tL")
    # layer counts per stage, as the Strategy page takes them (a hostile review: the CLI refused '8,8,8,8')
    counts = run("--pipeline-layout", f"{layers - 1},1")
    assert counts.returncode == 0 and f'"pipeline_layout": "{expected}"' in counts.stdout, counts.stderr
    for nothing in (" ", ""):
        blank = run("--pipeline-layout", nothing)
        assert blank.returncode == 2 and "pipeline layout is empty" in blank.stderr, (nothing, blank.stderr)


def test_timeline_names_each_chunk_by_the_layout():
    """The timeline's operator labels come from the same placement (block_place with the layout's ends)."""
    ops = _operators(SMALL, _small_strategy())
    assert ops[0, 0] == "embedding..layer0" and ops[1, 0] == "layer1..layer2"
    assert ops[0, 1] == "layer3..layer4" and ops[1, 1] == "mtp0..head"


def test_the_search_keeps_and_costs_the_default_layout_as_evaluate_does():
    """6 layers over p v = 4 chunks: the search now keeps interleaved strategies with the embedding and the loss
    as chunk members (Megatron-Bridge's account_for split) and prices them as evaluate() does."""
    six = ModelSpec(name="six", family="gpt", layers=6, hidden=64, heads=4, seq_len=16, vocab=100)
    found = [c for c in search(six, CLASSROOM, gpus=2, global_batch=8, top=50, refine_top=0).top
             if c.strategy.schedule == "interleaved" and 6 % (c.strategy.pp * c.strategy.chunks)]
    assert found
    for c in found[:2]:
        assert c.searched_s == pytest.approx(evaluate(six, c.strategy, CLASSROOM).iteration_time_s, rel=1e-9)


def test_a_typed_layout_is_counts_or_a_layout_string_and_each_problem_is_one_line():
    """The Strategy page's box (issue 30): layer counts per virtual stage, the embedding with the first, the MTP
    layers and the loss with the last; or Megatron-LM's string; canonical either way."""
    assert layout_from_text("11, 12,12,12,12,12,12,13", 96, 0, 8, 8) == "Et*11|(t*12|)*6t*13L"
    assert layout_from_text("1,30,30,0", 61, 1, 4, 4) == parse("Et|t*30|t*30|mL").text()     # DeepSeek-V3-like
    assert layout_from_text("Et|(tt|)*30mL", 61, 1, 8, 32) == "Et|(tt|)*30mL"
    for text, words in (("", "is empty"), ("12,12", "lists 2 stages"), ("12,12,12,12,12,12,12,11", "add up to 95"),
                        ("12,12,0,12,12,12,12,24", "stage 2 holds no layer"), ("1234567,1", "not a whole number"),
                        ("Et*95|t*0L", "repeat count 0"), ("Et*12|(t*12|)*6t*13L", "holds 97 transformer layers")):
        with pytest.raises(ExplorerError, match=words) as err:
            layout_from_text(text, 96, 0, 8, 8 if text != "Et*95|t*0L" else 2)
        assert "\n" not in str(err.value)


def test_a_dragged_split_megatron_cannot_flag_exports_as_a_layout_and_comes_back_a_stage_map():
    """A stage map whose middle stages differ (a drag on the Strategy page): --decoder-first/last-pipeline-num-layers
    cannot say it, --pipeline-model-parallel-layout can (Megatron-LM arguments.py: a layout of p virtual stages sets
    no virtual pipeline). The layout costs what the stage map costs, and both importers read it back as the stage
    map. A model with an MTP layer keeps it on the loss's stage."""
    for model, counts in ((load_model("gpt3-175b"), (20, 30, 26, 20)), (SMALL, (1, 2, 1, 1))):
        stage_map = tuple(stage for stage, n in enumerate(counts) for _ in range(n))
        s = Strategy(dp=1, pp=4, global_batch=8, stage_map=stage_map)
        layout = "E" + "|".join(f"t*{n}" if n > 1 else "t" for n in counts) + "m" * model.mtp_layers + "L"
        as_layout = s.with_(stage_map=(), pipeline_layout=layout)
        assert evaluate(model, as_layout, CLASSROOM).iteration_time_s == \
            evaluate(model, s, CLASSROOM).iteration_time_s
        text = export("megatron", model, s, CLASSROOM)
        assert f"--pipeline-model-parallel-layout '{as_layout.layout.text()}'" in text
        assert "--decoder-first-pipeline-num-layers" not in text
        back = import_config(text, "megatron")
        assert back.strategy.stage_map == stage_map and not back.strategy.pipeline_layout
        recipe = export("megatron-bridge", model, s, CLASSROOM)
        assert f"pipeline_model_parallel_layout = '{as_layout.layout.text()}'" in recipe
        assert import_config(recipe, "megatron-bridge", 4).strategy.stage_map == stage_map
    # a split the first/last flags say keeps them; a layout with more than a stage map says stays a layout
    first_last = Strategy(dp=1, pp=4, global_batch=8, stage_map=(0,) * 18 + (1,) * 26 + (2,) * 26 + (3,) * 26)
    text = export("megatron", load_model("gpt3-175b"), first_last, CLASSROOM)
    assert "--decoder-first-pipeline-num-layers 18" in text and "--pipeline-model-parallel-layout" not in text
    skewed = Strategy(dp=1, pp=2, global_batch=4, pipeline_layout="Et|ttttmL")
    assert import_config(export("megatron", SMALL, skewed, CLASSROOM), "megatron").strategy.stage_map == (0, 1, 1, 1, 1)
    alone = Strategy(dp=1, pp=2, global_batch=4, pipeline_layout="E|tttttmL")   # the embedding alone on stage 0
    assert import_config(export("megatron", SMALL, alone, CLASSROOM), "megatron").strategy.pipeline_layout == "E|t*5mL"


def test_an_imported_layout_of_the_wrong_layer_count_stays_a_layout_that_names_the_count():
    """A hostile review: a 4-stage layout of 8 layers in a 32-layer model's config came back from both importers as
    no field at all (the even split of its own 8 layers), and evaluate silently ran the model's even split; an
    uneven one came back as an 8-entry stage map, which evaluate blamed on a 'stage_map' the file never had. Such a
    layout now stays the layout, and evaluate names its layer count. A layout with the first/last stage's counts
    too is refused, as Megatron-LM refuses the pair."""
    model = load_model("llama3-8b")
    s = Strategy(dp=1, pp=4, global_batch=8)
    text = export("megatron", model, s.with_(stage_map=(0,) * 8 + (1,) * 6 + (2,) * 10 + (3,) * 8), CLASSROOM)
    for wrong in ("Et*2|t*2|t*2|t*2L", "Et|t*2|t*3|t*2L"):
        bad = re.sub(r"--pipeline-model-parallel-layout '[^']*'", f"--pipeline-model-parallel-layout '{wrong}'", text)
        back = import_config(bad, "megatron").strategy
        assert back.pipeline_layout and not back.stage_map
        with pytest.raises(ExplorerError, match="8 transformer layers .* but the model has 32"):
            evaluate(model, back, CLASSROOM)
    both = text.replace("--pipeline-model-parallel-layout", "--decoder-first-pipeline-num-layers 8 "
                        "--pipeline-model-parallel-layout")
    with pytest.raises(ExplorerError, match="refuses them together"):
        import_config(both, "megatron")


def test_a_short_layout_of_alternating_stages_stays_short_in_its_canonical_text():
    """A hostile review: 'E(t|tt|)*499t|ttL' (17 characters, 1,000 virtual stages) was stored as its canonical text
    written out stage by stage, 2,501 characters, which parse then refused (MAX_LAYOUT_CHARS): the strategy could not
    be made from a layout the CLI had accepted. The canonical text now groups up to MAX_PERIOD stages."""
    from explorer.strategy.pipeline_layout import MAX_LAYOUT_CHARS, parse
    layout = parse("E(t|tt|)*499t|ttL")
    assert len(layout.stages) == 1000 and parse(layout.text()) == layout
    assert len(layout.text()) < 40 < MAX_LAYOUT_CHARS
    assert parse("Et|(tt|)*62tL").text() == "Et|(tt|)*62tL"      # a run of one stage stays as it was written
    s = Strategy(dp=1, pp=1000, micro_batch=1, global_batch=1000, pipeline_layout="E(t|tt|)*499t|ttL")
    assert s.pipeline_layout == layout.text() and s.layout.stages == layout.stages
    # a repeat of more stages than the canonical text groups is kept as given (a review: 20 characters became 2,705)
    five = Strategy(dp=1, pp=1501, micro_batch=1, global_batch=1501, pipeline_layout=" E(t|t|t|t|tt|)*300tL")
    assert five.pipeline_layout == "E(t|t|t|t|tt|)*300tL" and len(five.layout.stages) == 1501


@pytest.mark.parametrize("text,message", [
    ("Et*000000002|t*2L", None),                               # leading zeros: 2, not "repeat count 0"
    ("Et*99999999999|tL", "more than 999,999"),
    ("Et*0|tL", "at least 1"),
])
def test_a_repeat_count_is_read_whole(text, message):
    """A hostile review: the count was read six digits at most, so 't*000000002' said 'repeat count 0'."""
    from explorer.strategy.pipeline_layout import parse
    if message is None:
        assert parse(text).text() == "Ett|ttL"
    else:
        with pytest.raises(ExplorerError, match=message):
            parse(text)


@pytest.mark.parametrize("size", ["0", "-2"])
def test_an_imported_pipeline_size_below_one_is_named_by_its_flag(size):
    """A hostile review: '--pipeline-model-parallel-size 0' was read as 1 (then 'interleaved schedule needs pp >= 2'
    for a 4-stage layout) and -2 reached the strategy as a negative dp."""
    text = export("megatron", load_model("llama3-8b"), Strategy(dp=1, pp=4, global_batch=8), CLASSROOM)
    bad = text.replace("--pipeline-model-parallel-size 4", f"--pipeline-model-parallel-size {size}")
    with pytest.raises(ExplorerError, match="--pipeline-model-parallel-size must be a whole number >= 1"):
        import_config(bad, "megatron")
