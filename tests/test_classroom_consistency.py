"""Issue 30 items 2, 3 and 5 in the library: one bubble, schedules offered only where they apply, the
HuggingFace sequence length asked for, hover numbers in plain decimals, projector layouts and the
classroom rounding. (The pages' side: tests/test_app_classroom.py; the rendered boxes:
tests/test_browser_projector.py.)"""
import json

import plotly.graph_objects as go
import pandas as pd
import pytest

from explorer import Strategy, evaluate, load_cluster, load_model
from explorer.charts.classroom import classroom_figure, fewer_digits, significant_table
from explorer.charts.gantt import HOVER
from explorer.errors import ExplorerError
from explorer.io.glossary import BUBBLE_MEANING, IDLE_TO_IDEAL, STAGES_IDLE, TEXTBOOK
from explorer.io.models import model_from_dict
from explorer.io.projector import projector_layout
from explorer.io.slides import slide_figure
from explorer.io.uploads import hf_sequence_suggestion, model_from_upload
from explorer.lessons import LESSONS
from explorer.schedules.registry import SCHEDULES, names_for
from explorer.search import search

HF = {"model_type": "llama", "num_hidden_layers": 4, "hidden_size": 512, "num_attention_heads": 8,
      "intermediate_size": 1376, "max_position_embeddings": 131072, "vocab_size": 32000,
      "_name_or_path": "meta-llama/Tiny-Llama"}


def test_the_three_pipeline_idle_measures_have_three_names():
    """The bubble was 37.5 % of ideal, 19 % of the iteration and 36.5 % idle on three pages: one is the
    bubble (the cost model's category), the others are named apart from it."""
    assert "critical stage's idle time" in BUBBLE_MEANING and "share is of the iteration" in BUBBLE_MEANING
    names = {IDLE_TO_IDEAL, STAGES_IDLE}
    assert len(names) == 2 and not any("bubble" in name for name in names)
    assert "T_{\\mathrm{bubble}}" in TEXTBOOK["bubble"][0]     # the textbook ratio, shown as the idle-to-ideal ratio
    # the three differ on the lesson's own example, so naming them apart matters
    model, cluster = load_model("classroom-gpt"), load_cluster("classroom")
    s = Strategy(dp=2, pp=4, micro_batch=1, global_batch=16)
    r = evaluate(model, s, cluster)
    share, ratio = r.breakdown_s["bubble"] / r.iteration_time_s, (s.pp - 1) / r.micro_batches
    assert abs(share - ratio) > 0.05


def test_no_schedule_is_offered_where_it_cannot_apply():
    assert "zb-h1" not in names_for(1) and "interleaved" not in names_for(1) and "1f1b" in names_for(1)
    assert set(names_for(4)) == set(SCHEDULES)
    model = load_model("classroom-gpt")
    with pytest.raises(ExplorerError, match="'zb-h1' schedule needs pp >= 2"):
        Strategy(dp=8, pp=1, schedule="zb-h1", global_batch=16)
    found = search(model, load_cluster("classroom"), 8, 16, top=200)
    ranked = list(found.top) + list(found.pareto)
    assert ranked and not any(c.strategy.schedule == "zb-h1" and c.strategy.pp == 1 for c in ranked)
    assert any(c.strategy.pp == 1 for c in ranked), "p = 1 strategies are still searched, as 1F1B"


def test_a_huggingface_config_suggests_its_longest_sequence_and_takes_the_one_asked_for():
    data = json.dumps(HF).encode()
    assert hf_sequence_suggestion("config.json", data) == 131072
    # the app offers the smaller of it and a common pre-training length (a lecturer's walk: Qwen2.5-7B at 131,072
    # tokens read 175.9 s and 732 GiB a device on its first view); a shorter config keeps its own
    from explorer.io.uploads import SUGGESTED_SEQ_LEN, suggested_training_length
    assert suggested_training_length(131072) == SUGGESTED_SEQ_LEN == 4096 and suggested_training_length(1024) == 1024
    assert hf_sequence_suggestion("ours.json", json.dumps({"family": "gpt", "layers": 2, "hidden": 64, "heads": 4,
                                                           "seq_len": 32, "vocab": 100}).encode()) is None
    model = model_from_upload("config.json", data, seq_len=4096)
    assert model.seq_len == 4096 and model.name == "Tiny-Llama"
    assert "sequence length 4096 chosen (the config supports up to 131072)" in model.source
    silent = model_from_dict(HF)                # the CLI's path: said in the source, not silent
    assert silent.seq_len == 131072 and "max_position_embeddings, the longest it supports" in silent.source
    with pytest.raises(ExplorerError, match="sequence length must be a positive integer"):
        model_from_upload("config.json", data, seq_len=0)


def test_hover_numbers_are_plain_decimals_in_classroom_mode():
    """'start 1.7e+2 ms': d3's 'g' switches to exponents; classroom mode rounds to 3 significant digits
    in plain decimals (d3's 'r')."""
    template = fewer_digits(HOVER)
    assert ":.4g" not in template and template.count(":.3r") == 3
    assert fewer_digits("%{x:,.1f} GiB") == "%{x:,.1f} GiB"


def test_classroom_tables_round_to_three_significant_digits():
    table = significant_table(pd.DataFrame({"iteration_s": [43.8005, 20.8857], "gpus": [8, 16]}))
    assert table["iteration_s"].tolist() == [43.8, 20.9] and table["gpus"].tolist() == [8, 16]


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda lesson: lesson.slug)
def test_projector_figures_list_only_what_they_draw_below_the_plot(lesson):
    fig = classroom_figure(lesson.figure(), memory=lesson.slug in ("zero", "activations"))
    legend = fig.layout.legend
    assert (legend.orientation, legend.yref, legend.yanchor, legend.y) == ("h", "container", "bottom", 0)
    assert fig.layout.title.yref == "container" and fig.layout.title.automargin
    for trace in fig.data:
        if trace.type == "bar" and trace.showlegend is not False:
            values = trace.x if trace.orientation == "h" else trace.y
            assert any(float(v or 0) for v in values), f"{trace.name}: a legend entry for nothing drawn"
    slide = slide_figure(fig, "caption")
    assert slide.layout.title.subtitle.text == "caption" and slide.layout.legend.yanchor == "bottom"


def test_the_data_parallel_lesson_does_not_list_expert_or_context_parallelism():
    lesson = next(lesson for lesson in LESSONS if lesson.slug == "data-parallel")
    listed = {t.name for t in classroom_figure(lesson.figure()).data if t.showlegend is not False}
    assert not any(word in name for name in listed for word in ("EP", "CP", "expert", "context"))


def test_a_two_line_title_becomes_title_and_subtitle():
    fig = projector_layout(go.Figure(layout=dict(title="Super-step<br><sup>5 bars not drawn</sup>")), 18)
    assert fig.layout.title.text == "Super-step" and fig.layout.title.subtitle.text == "5 bars not drawn"
