"""Machine levels from the ranks a group really holds (named mesh axes, Megatron order tp-cp-ep-dp-pp)."""
import pytest

from explorer import ExplorerError, Strategy, evaluate, load_cluster, load_model
from explorer.cost.plan import plan
from explorer.strategy.mesh import Mesh, group_level, pair_level, span_level, top_level

A100 = load_cluster("dgx-a100-80gb")          # 8 GPUs per node
GPT = load_model("gpt-1.7b")                  # 24 heads: t = 6 is allowed


def test_span_level_uses_the_unit_boundaries():
    assert span_level(A100, 0, 7) == 0
    assert span_level(A100, 4, 11) == 1       # same size as 0..7, but across two nodes
    assert span_level(A100, 8, 15) == 0


def test_group_levels():
    assert group_level(A100, Mesh.of(tp=6, dp=1, pp=2), "tp", pp=0) == 0    # ranks 0-5
    assert group_level(A100, Mesh.of(tp=6, dp=1, pp=2), "tp", pp=1) == 1    # ranks 6-11 straddle nodes
    assert group_level(A100, Mesh.of(tp=2, dp=3, pp=2), "dp", pp=0) == 0    # ranks 0..5
    assert group_level(A100, Mesh.of(tp=2, dp=3, pp=2), "dp", pp=1) == 1    # ranks 6..11
    assert pair_level(A100, Mesh.of(tp=4, dp=1, pp=3), "pp", 0, 1) == 0    # 0-3 -> 4-7
    assert pair_level(A100, Mesh.of(tp=4, dp=1, pp=3), "pp", 1, 2) == 1    # 4-7 -> 8-11


def test_mesh_rank_order_is_megatron_and_configurable():
    """Megatron-LM's default order tp-cp-ep-dp-pp: rank = stage*d*t + replica*t + tp_index."""
    mesh = Mesh.of(tp=2, dp=3, pp=4)
    assert mesh.rank(tp=1, dp=2, pp=3) == 3 * 6 + 2 * 2 + 1
    assert [name for name, _ in mesh.axes] == ["tp", "cp", "ep", "dp", "pp"]
    swapped = Mesh.of("dp-cp-ep-tp-pp", tp=2, dp=3, pp=4)
    assert swapped.rank(tp=1, dp=2, pp=3) == 3 * 6 + 1 * 3 + 2
    # tp=8 groups leave the node when dp varies fastest: the same strategy, another level
    fast = Strategy(tp=8, dp=2, micro_batch=1, global_batch=2)
    slow = fast.with_(rank_order="dp-cp-ep-tp-pp")
    assert group_level(A100, fast.mesh, "tp") == 0 and group_level(A100, slow.mesh, "tp") == 1
    assert evaluate(GPT_8, slow, A100).breakdown_s["op_comm"] > evaluate(GPT_8, fast, A100).breakdown_s["op_comm"]
    with pytest.raises(ExplorerError, match="rank_order"):
        Strategy(rank_order="tp-dp-pp")


GPT_8 = load_model("gpt-7.5b")                # 32 heads: t = 8 is allowed


def test_pipeline_send_across_a_node_boundary_is_priced_on_the_network():
    strategy = Strategy(tp=4, pp=4, dp=1, micro_batch=1, global_batch=8)
    the_plan = plan(GPT, strategy, A100)
    p2p = {(b.stage_from, b.stage_to): top_level(route) for b in the_plan.boundaries
           for c, route in zip(b.collectives, b.routes) if c.kind == "p2p"}
    assert p2p == {(0, 1): 0, (1, 2): 1, (2, 3): 0}
    sends = [row["fwd_pp_comm_s"] for row in evaluate(GPT, strategy, A100).stage_times_s]
    assert sends[1] > 2 * max(sends[0], sends[2])   # stage 1 sends over InfiniBand


def test_same_structure_other_dp_moves_the_p2p_level_and_matches_a_cold_run():
    """dp changes where stages sit: the cached program must not keep the old levels."""
    small = Strategy(tp=4, pp=2, dp=1, micro_batch=1, global_batch=64)
    large = small.with_(dp=4)
    warm = (evaluate(GPT, small, A100), evaluate(GPT, large, A100))[1]
    from explorer.cost.tree import _TREES
    _TREES.clear()
    cold = evaluate(GPT, large, A100)
    assert warm.iteration_time_s == cold.iteration_time_s
    assert warm.breakdown_s == cold.breakdown_s


def test_dp_row_time_and_bytes_come_from_the_same_stage():
    r = evaluate(GPT, Strategy(tp=4, pp=2, dp=4, micro_batch=1, global_batch=64), A100)
    rows = [x for x in r.comm_by_kind if x["category"] == "dp_comm"]     # one per machine level (E1)
    j = r.extra["sync_stage"]
    assert sum(row["bytes"] for row in rows) == pytest.approx(r.stage_times_s[j]["dp_bytes"], rel=1e-12)
    assert sum(row["time_s"] for row in rows) == pytest.approx(r.stage_times_s[j]["dp_exposed_s"], rel=1e-12)
