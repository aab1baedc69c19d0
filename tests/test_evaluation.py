"""The one numeric evaluation object (explorer/cost/evaluation.py, issue 25 item 1): its named fields are what
evaluate() reports, the timeline draws and the search sums; nothing outside explorer/cost/ decodes the block
quantities or the micro-step outputs by position."""
import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from explorer import Evaluation, Strategy, evaluate, evaluation, load_cluster, load_model
from explorer.cost.evaluate import evaluate_batch
from explorer.cost.evaluation import build_evaluation
from explorer.cost.numeric import CATEGORIES, COMM_CATEGORIES, MEMORY_PARTS
from explorer.errors import ExplorerError
from explorer.model.spec import ModelSpec
from explorer.search.tables import STAGE_SUMS, Chain, node_stages, stage_sums
from explorer.timeline.layout import pass_layout
from explorer.timeline.parts import PART_CATEGORIES
from explorer.timeline.schedules import B, F

ROOT = Path(__file__).resolve().parents[1]
A100, H100 = load_cluster("dgx-a100-80gb"), load_cluster("dgx-h100")
TINY_MOE = ModelSpec(name="tiny-moe", family="llama", layers=4, hidden=512, heads=8, seq_len=256, vocab=1000,
                     ffn_hidden=1024, kv_heads=4, experts=16, experts_per_token=2, moe_ffn_hidden=256,
                     shared_experts=1, first_dense_layers=1)
CASES = [
    ("gpt3-175b", A100, dict(dp=2, tp=8, pp=8, global_batch=64, schedule="interleaved", chunks=2, overlap_dp=True)),
    ("gpt3-175b", A100, dict(dp=8, tp=8, pp=1, global_batch=64, zero=3, sequence_parallel=True, recompute="full")),
    ("llama3-8b", H100, dict(dp=8, tp=8, pp=2, cp=2, global_batch=512, sequence_parallel=True, zero=1,
                            schedule="zb-h1")),
    (TINY_MOE, H100, dict(dp=4, tp=1, pp=2, ep=4, global_batch=32, overlap_ep=True,
                                schedule="interleaved", chunks=2)),
]


def _case(case):
    name, cluster, kw = case
    model = load_model(name) if isinstance(name, str) else name
    return model, Strategy(**kw), cluster


@pytest.mark.parametrize("case", CASES, ids=lambda c: c[0] if isinstance(c[0], str) else c[0].name)
def test_the_named_fields_are_what_evaluate_reports(case):
    model, strategy, cluster = _case(case)
    ev, r = evaluation(model, strategy, cluster), evaluate(model, strategy, cluster)
    assert isinstance(ev, Evaluation) and ev.candidates == 1 and ev.stages == strategy.pp
    total = float(ev.output("iteration")[0])
    assert total == pytest.approx(r.iteration_time_s, rel=1e-12)
    assert sum(float(ev.output(c)[0]) for c in CATEGORIES) == pytest.approx(total, rel=1e-9)
    assert {c: float(ev.output(c)[0]) for c in CATEGORIES} == pytest.approx(r.breakdown_s, rel=1e-12)
    # the super-step's stage inputs are the stage sums: blocks plus the boundary collectives each stage pays
    fwd_x, bwd_x = ev.exposed_boundary()
    np.testing.assert_allclose(ev.stage_input("F_r"), ev.stage_q("F") + sum(fwd_x.values()), rtol=1e-12)
    np.testing.assert_allclose(ev.stage_input("B_r"), ev.stage_q("B") + sum(bwd_x.values()), rtol=1e-12)
    np.testing.assert_allclose(ev.stage_input("P_r"), fwd_x["pp_comm"] + bwd_x["pp_comm"], rtol=1e-12)
    np.testing.assert_allclose(ev.stage_input("A_r"), ev.stage_q("act"), rtol=1e-12)
    assert [row["fwd_s"] for row in r.stage_times_s] == pytest.approx(ev.stage_input("F_r")[:, 0], rel=1e-12)
    # the stage's blocks are the block kinds times their counts
    np.testing.assert_allclose(ev.stage_q("F"), ev.tree.counts @ ev.block_q("F"), rtol=1e-12)
    # by phase and by (category, kind, level), the boundary bytes are the category's bytes
    for c in COMM_CATEGORIES:
        np.testing.assert_allclose(ev.boundary.fwd_bytes[c] + ev.boundary.bwd_bytes[c], ev.boundary.bytes[c],
                                   rtol=1e-12, atol=1e-9)
        kinds = [arr[1] for (cat, _, _), arr in ev.boundary.by_kind.items() if cat == c]
        np.testing.assert_allclose(sum(kinds) if kinds else 0.0, ev.boundary.bytes[c], rtol=1e-12, atol=1e-9)
    k = r.critical_stage
    assert r.comm_bytes_per_device["pp_comm"] == pytest.approx(
        strategy.micro_batches * float(ev.boundary.bytes["pp_comm"][k, 0]), rel=1e-12)
    # memory by part and stage, FLOPs
    for i, row in enumerate(r.memory_by_stage):
        assert {p: float(ev.memory(p)[i, 0]) for p in MEMORY_PARTS} == pytest.approx(
            {p: row[p] for p in MEMORY_PARTS}, rel=1e-12)
    assert int(ev.peak_stage[0]) == r.extra["peak_memory_stage"]
    assert float(ev.model_flops[0]) == pytest.approx(r.model_flops_per_iteration, rel=1e-12)
    assert float(ev.stage_q("params").sum()) == pytest.approx(r.params, rel=1e-12)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c[0] if isinstance(c[0], str) else c[0].name)
def test_the_timeline_draws_the_evaluations_bytes(case):
    model, strategy, cluster = _case(case)
    ev = evaluation(model, strategy, cluster)
    layout = pass_layout(model, strategy, ev)
    np.testing.assert_allclose(layout.bytes[:, F, PART_CATEGORIES.index("op_comm")],
                               ev.stage_q("fwd_comm_bytes")[:, 0] + ev.boundary.fwd_bytes["op_comm"][:, 0],
                               rtol=1e-12)
    for category in ("pp_comm", "ep_comm", "redistribution"):
        part = PART_CATEGORIES.index(category)
        np.testing.assert_allclose(layout.bytes[:, F, part], ev.boundary.fwd_bytes[category][:, 0], rtol=1e-12)
        np.testing.assert_allclose(layout.bytes[:, B, part], ev.boundary.bwd_bytes[category][:, 0], rtol=1e-12)
    # every byte the stages pay per micro-batch is drawn on some pass
    drawn = layout.bytes.sum(axis=(1, 2))
    paid = sum(ev.boundary.bytes[c][:, 0] for c in ("op_comm", "ep_comm", "redistribution", "pp_comm")) + \
        ev.stage_q("fwd_comm_bytes")[:, 0] + ev.stage_q("bwd_comm_bytes")[:, 0] + \
        ev.stage_q("cp_fwd_bytes")[:, 0] + ev.stage_q("cp_bwd_bytes")[:, 0]
    np.testing.assert_allclose(drawn, paid, rtol=1e-12)
    assert drawn.sum() > 0


@pytest.mark.parametrize("case", [CASES[0], (TINY_MOE, H100, dict(dp=4, tp=1, pp=2, ep=4, global_batch=32)),
                                  (TINY_MOE, H100, dict(dp=4, tp=2, pp=1, ep=2, global_batch=32, recompute="full",
                                                    sequence_parallel=True))],
                         ids=("gpt3-interleaved", "moe-pp2", "moe-recompute"))
def test_the_searchs_stage_sums_are_the_evaluations_stage_inputs(case):
    """The search's chain of nodes (explorer.search.tables) composes each stage's inputs by name with
    numeric.stage_values and prices the MoE all-to-alls as the tree does: the same numbers as the Evaluation."""
    model, strategy, cluster = _case(case)
    ev = evaluation(model, strategy, cluster)
    chain = Chain(model, cluster, strategy, [strategy.micro_batch])
    splits = strategy.layer_splits or tuple(strategy.split_of(i) for i in range(model.layers))
    stages = node_stages(model, strategy)
    sums = stage_sums(chain, chain.chain(splits, stages), stages, strategy.pp)[:, :, 0]
    for row, name in enumerate(STAGE_SUMS):
        expected = ev.stage_input(name)[:, 0]
        np.testing.assert_allclose(sums[row], expected, rtol=1e-12, atol=1e-18, err_msg=name)
    if model.is_moe:
        assert (ev.boundary.fwd_s["ep_comm"] > 0).all()


def test_a_batch_evaluation_is_each_candidates_own():
    model = load_model("gpt3-175b")
    strategies = [Strategy(dp=dp, tp=8, pp=8, global_batch=512, micro_batch=b) for dp, b in ((2, 1), (4, 2), (8, 1))]
    ev = build_evaluation(model, strategies, A100)
    assert ev.candidates == 3 and ev.output("iteration").shape == (3,) and ev.stage_q("F").shape == (8, 3)
    batch = evaluate_batch(model, strategies, A100)
    for i, s in enumerate(strategies):
        one = evaluation(model, s, A100)
        assert float(ev.output("iteration")[i]) == pytest.approx(float(one.output("iteration")[0]), rel=1e-12)
        np.testing.assert_allclose(ev.stage_input("F_r")[:, i], one.stage_input("F_r")[:, 0], rtol=1e-12)
        assert batch.iteration_time_s[i] == pytest.approx(float(one.output("iteration")[0]), rel=1e-12)


def test_an_evaluation_refuses_arrays_that_do_not_match_its_candidates():
    ev = evaluation(load_model("gpt3-175b"), Strategy(dp=2, tp=8, pp=8, global_batch=64), A100)
    with pytest.raises(ExplorerError, match="2 candidates"):
        replace(ev, strategies=ev.strategies * 2)


def test_an_impossible_strategy_is_one_clear_error():
    with pytest.raises(ExplorerError):
        evaluation(load_model("gpt3-175b"), Strategy(dp=1, tp=7, pp=1, global_batch=8), A100)


POSITIONAL = (re.compile(r"\bQ\s*\["), re.compile(r"import[^\n]*\b(Q|BLOCK_Q)\b"),
              re.compile(r"\[\s*\w+\s*\+\s*\d+\s*\+\s*\d+\s*\*"), re.compile(r"\[\s*\d+\s*\*\s*\w+\s*\+\s*\d+\s*\]"))
"""Decoding the block quantities (BLOCK_Q) or the micro-step outputs (explorer.cost.tree.step_exprs) by position:
Q[...], importing Q or BLOCK_Q, or arithmetic like values[k + 3 + 3 * j] / tail[7 * i + 1]."""


def test_no_module_outside_the_cost_package_decodes_block_quantities_by_position():
    files = [p for p in list(ROOT.glob("explorer/**/*.py")) + list(ROOT.glob("app_pages/*.py"))
             if "cost" not in p.relative_to(ROOT).parts[:2]]
    assert len(files) > 50
    found = [f"{p.relative_to(ROOT)}: {m.group(0)}" for p in files for pattern in POSITIONAL
             for m in pattern.finditer(p.read_text())]
    assert found == []


def test_the_positional_check_sees_what_it_forbids():
    text = ("from explorer.cost.numeric import Q\nx = values[:, Q['F']]\n"
            "at = values[k + 3 + 3 * j]\ny = tail[7 * i + 1]\n")
    assert sum(len(pattern.findall(text)) for pattern in POSITIONAL) == 4


def test_a_category_of_float_noise_is_reported_as_zero():
    """One pipeline stage has no bubble, but makespan - m T_* in floats left 5e-16 s, which the Search page showed as
    0.0000000000000005 (a lecturer's walk): a category below 1e-12 of the iteration is 0, and the categories still sum
    to the iteration."""
    from explorer import Strategy, evaluate, load_cluster, load_model
    r = evaluate(load_model("llama3-8b"), Strategy(dp=4, tp=2, pp=1, micro_batch=1, global_batch=64),
                 load_cluster("dgx-h100"))
    assert r.breakdown_s["bubble"] == 0.0
    assert sum(r.breakdown_s.values()) == pytest.approx(r.iteration_time_s, rel=1e-12)
