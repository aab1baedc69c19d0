"""Breakdown tables and figures, and the operator-graph figure (explorer.charts)."""
import pytest

from explorer import LayerSplit, evaluate, load_cluster, load_model
from explorer.charts import tables
from explorer.charts.breakdown import breakdown_bar, comm_figure, memory_figure
from explorer.charts.graph_figure import contracted_graph, graph_figure
from explorer.cost.explain import symbol_values
from explorer.model.graph import build_graph
from explorer.io.presets import DEFAULT_STRATEGY
from explorer.cost.tree import cost_tree
from explorer.cost.superstep import CATEGORIES

GPT3, A100 = load_model("gpt3-175b"), load_cluster("dgx-a100-80gb")


@pytest.fixture(scope="module")
def result():
    return evaluate(GPT3, DEFAULT_STRATEGY, A100)


def test_breakdown_table_sums_to_the_total(result):
    table = tables.breakdown_table(result)
    assert table["seconds"].sum() == pytest.approx(result.iteration_time_s, rel=1e-12)
    assert table["share_%"].sum() == pytest.approx(100)


def test_comm_table_rows_match_result_and_scopes(result):
    table = tables.comm_table(result, "node")
    assert table["bytes"].sum() == pytest.approx(sum(r["bytes"] for r in result.comm_by_kind))
    assert set(table["type"]) >= {"DP all-reduce", "PP point-to-point"}
    assert set(table[table["type"] == "DP all-reduce"]["scope"]) == {"inter-node"}
    assert set(table[table["type"].str.startswith("TP")]["scope"]) == {"intra-node"}


def test_breakdown_bar_one_trace_per_category(result):
    fig = breakdown_bar({"a": result, "b": result})
    assert len(fig.data) == len(CATEGORIES) == len(tables.CATEGORY_LABELS) and all(len(trace.x) == 2 for trace in fig.data)
    assert sum(trace.x[0] for trace in fig.data) == pytest.approx(result.iteration_time_s)


def test_breakdown_bar_legend_lists_only_the_categories_drawn_below_the_plot(result):
    """The Strategy page's legend at 1920x1080 listed all 11 categories in a column with a scroll bar: EP all-to-all,
    redistribution, ZeRO gathers and CP of the default dense run without ZeRO included."""
    fig = breakdown_bar({"a": result})
    listed = [trace.name for trace in fig.data if trace.showlegend is not False]
    drawn = [tables.CATEGORY_LABELS[c] for c in CATEGORIES if tables.breakdown_table(result).set_index("category")
             .loc[c, "seconds"] > 0]
    assert listed == drawn and "EP all-to-all" not in listed and "CP context exchange" not in listed
    assert set(listed) <= set(tables.CATEGORY_LABELS.values())          # the friendly names, never 'op_comm'
    assert fig.layout.legend.orientation == "h" and fig.layout.legend.yref == "container"


def test_breakdown_bar_wraps_a_long_label_and_keeps_a_rank_a_name(result):
    """A long strategy label took half of the Strategy page's chart at 1280x720 and ran past the Search page's
    figure; '#1' was read by plotly as the number 1 (an axis labelled 2, 4, 6)."""
    long = "d16 t8 p8 b1 B1536 interleaved v2 ZeRO-1 rc:selective SP cp2 ulysses e8 per-layer"
    fig = breakdown_bar({long: result})
    lines = fig.data[0].y[0].split("<br>")
    assert len(lines) > 1 and max(map(len, lines)) <= 24 and " ".join(lines) == long
    assert fig.layout.height >= 190 + 24 * len(lines)
    ranks = breakdown_bar({"#1": result, "#2": result}, names={"#1": "#1 d16 t8", "#2": "#2 d8 t8"})
    assert ranks.layout.yaxis.type == "category" and list(ranks.data[0].y) == ["#1", "#2"]
    assert [row[1] for row in ranks.data[0].customdata] == ["#1 d16 t8", "#2 d8 t8"]
    assert "customdata[1]" in ranks.data[0].hovertemplate


def test_comm_figure_splits_exposed_hidden_and_levels(result):
    fig = comm_figure(tables.comm_table(result, "node"))
    names = {trace.name for trace in fig.data}
    assert {"intra-node exposed", "intra-node hidden", "inter-node exposed", "inter-node hidden"} <= names
    empty = comm_figure(tables.comm_table(evaluate(load_model("tiny-gpt"), DEFAULT_STRATEGY.__class__(),
                                                   load_cluster("classroom")), "node"))
    assert empty.data


def test_memory_figure_draws_the_capacity(result):
    table = tables.memory_table(result, A100.device.memory_bytes)
    fig = memory_figure(table, A100.device.memory_bytes)
    assert len(fig.data) == 4 and len(table) == 8
    assert fig.layout.shapes[0].y0 == pytest.approx(80)


def test_graph_collapsed_expanded_and_coloured():
    plan = cost_tree(GPT3, DEFAULT_STRATEGY, A100).plan
    values = symbol_values(GPT3, DEFAULT_STRATEGY, A100)
    collapsed = graph_figure(plan, values)
    assert len(collapsed.data[-1].x) == 98
    assert list(collapsed.data[-1].marker.color[1:4]) == [0, 0, 0]
    full = graph_figure(plan, values, "all", "degree")
    assert len(full.data[-1].x) == build_graph(GPT3).number_of_nodes()
    assert set(full.data[-1].marker.color) == {8}
    hover = graph_figure(plan, values, (0,)).data[-1].hovertext
    assert any("qkv" in h and "12288" in h and "FLOPs fwd" in h for h in hover)


def test_contracted_graph_keeps_chain_edges_between_collapsed_layers():
    g = contracted_graph(build_graph(load_model("tiny-gpt")), frozenset())
    assert g.number_of_nodes() == 6 and not g.edges["layer0", "layer1"]["residual"]


def test_graph_colours_layers_by_their_split_degree():
    strategy = DEFAULT_STRATEGY.with_(layer_splits=(LayerSplit(4),) * 48 + (LayerSplit(1, "replicated"),) * 48)
    plan = cost_tree(GPT3, strategy, A100).plan
    fig = graph_figure(plan, symbol_values(GPT3, strategy, A100), (), "degree")
    colours = list(fig.data[-1].marker.color)
    assert colours[1] == 4 and colours[96] == 1 and colours[0] == 8


def test_graph_stage_colours_are_discrete_and_stage_boundaries_are_marked():
    from explorer.charts.graph_figure import discrete_colours
    plan = cost_tree(GPT3, DEFAULT_STRATEGY, A100).plan
    fig = graph_figure(plan, symbol_values(GPT3, DEFAULT_STRATEGY, A100))
    nodes = fig.data[-1]
    assert list(nodes.marker.colorbar.tickvals) == list(range(8))
    scale = [colour for _, colour in nodes.marker.colorscale]
    assert scale[0] == scale[1] != scale[2], "stage 0 and stage 1 get different flat colours"
    boundaries = next(t for t in fig.data if t.name == "stage boundaries")
    assert sum(x is None for x in boundaries.x) == 7, "p - 1 = 7 boundaries"
    one = discrete_colours([8, 8, 8])
    assert one[1:] == (7.5, 8.5, [8]) and len({c for _, c in one[0]}) == 1, "t = 8 everywhere: one colour, one tick"
