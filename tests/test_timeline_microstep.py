"""Micro-steps (explorer.timeline.microstep, numbers): BSP steps of one layer or operator.

Each collective is its transfer h*g plus its latency/barrier part (DESIGN.md BSP cost);
the micro-steps of a stage's blocks add up to the stage's fwd_s and bwd_s.
"""
import numpy as np
import pytest
import sympy as sp

from explorer import ExplorerError, LayerSplit, Strategy, evaluate, load_cluster, load_model
from explorer.cost.tree import BLOCK_ARGS, cost_tree
from explorer.timeline import block_segments, find_block, microstep_events
from explorer.timeline.numbers import block_numbers, context

GPT3, A100 = load_model("gpt3-175b"), load_cluster("dgx-a100-80gb")


def strat(**kw):
    return Strategy(**{**dict(dp=2, tp=8, pp=8, micro_batch=1, global_batch=32), **kw})


VARIANTS = [dict(), dict(recompute="selective"), dict(recompute="full"),
            dict(sequence_parallel=True, recompute="selective"), dict(scatter_gather=False),
            # chosen modules (Megatron's --recompute-modules): drawn until 2026-12-07 as the attention core alone
            dict(recompute="selective", recompute_modules=("layernorm", "mlp")),
            dict(sequence_parallel=True, recompute="selective", recompute_modules=("core_attn", "layernorm", "mlp")),
            dict(layer_splits=tuple(LayerSplit(degree=8, preset="column" if i % 2 else "megatron")
                                    for i in range(96)))]


@pytest.mark.parametrize("kw", VARIANTS)
def test_micro_steps_of_a_stage_add_up_to_its_pass_times(kw):
    s = strat(**kw)
    result = evaluate(GPT3, s, A100)
    the_plan = cost_tree(GPT3, s, A100).plan
    ctx = context(GPT3, s, A100)
    fwd, bwd = np.zeros(s.pp), np.zeros(s.pp)
    for k, placed in enumerate(the_plan.blocks):
        for phase, _, _, _, secs, _, _ in block_segments(the_plan, k, ctx):
            (fwd if phase == "fwd" else bwd)[placed.stage] += secs
    for row in result.stage_times_s:
        assert fwd[row["stage"]] == pytest.approx(row["fwd_s"], rel=1e-9)
        assert bwd[row["stage"]] == pytest.approx(row["bwd_s"], rel=1e-9)


def test_lambdified_step_numbers_equal_the_exact_expressions():
    s = strat()
    the_plan = cost_tree(GPT3, s, A100).plan
    ctx = context(GPT3, s, A100)
    placed = the_plan.blocks[1]
    values = dict(zip(BLOCK_ARGS, ctx.block_args(placed.split.degree, placed.route)))
    g, L = values[BLOCK_ARGS[8]], values[BLOCK_ARGS[9]]
    steps, _ = block_numbers(placed, ctx)
    for sn in steps:
        assert sn.fwd_s == pytest.approx(float(sn.step.fwd_s.subs(values)), rel=1e-12)
        assert sn.bwd_s == pytest.approx(float(sn.step.bwd_s.subs(values)), rel=1e-12)
        for cn in sn.collectives:
            assert cn.time_s == pytest.approx(float(cn.coll.time(g, L).subs(values)), rel=1e-12)
            assert cn.bytes == pytest.approx(float(sp.sympify(cn.coll.bytes()).subs(values)), rel=1e-12)


def test_layer_events_on_every_device_of_the_group():
    s = strat(dp=2)
    ev = microstep_events(GPT3, s, A100, layer=20)       # layer 20 is on stage 1 (12 layers a stage)
    assert sorted(ev.row.unique()) == sorted(f"gpu {16 + r}" for r in range(8))
    assert (ev.stage == 1).all() and (ev.micro_batch == 0).all()
    per_row = ev.groupby("row").duration_s.sum()
    assert per_row.nunique() == 1
    one = ev[ev.row == "gpu 16"]
    assert np.allclose(one.start_s.to_numpy()[1:], one.end_s.to_numpy()[:-1])
    comm = one[one.category == "op_comm"]
    assert set(comm.kind) == {"all_reduce", "barrier"}
    assert set(comm.level) == {"node"}
    assert (comm[comm.kind == "all_reduce"].bytes > 0).all() and (comm[comm.kind == "barrier"].bytes == 0).all()
    assert list(one[one.phase == "fwd"].operator.unique())[:2] == ["ln1", "qkv"]
    assert list(one[one.phase == "bwd"].operator.unique())[-1] == "ln1"


def test_an_operator_alone_and_its_weight_gradient():
    ev = microstep_events(GPT3, strat(), A100, op="fc1")
    one = ev[ev.row == "gpu 0"]
    assert set(one.operator) == {"fc1"}
    assert list(one.kind) == ["compute", "compute", "weight_grad", "all_reduce", "barrier"]
    assert list(one.phase) == ["fwd", "bwd", "bwd", "bwd", "bwd"]


def test_recompute_replays_the_forward_in_the_backward():
    ev = microstep_events(GPT3, strat(recompute="full"), A100, layer=0)
    one = ev[ev.row == "gpu 0"]
    redo = one[one.category == "recompute"]
    fwd = one[one.phase == "fwd"]
    assert redo.duration_s.sum() == pytest.approx(fwd.duration_s.sum(), rel=1e-12)
    assert (redo.phase == "bwd").all() and redo.start_s.min() >= fwd.end_s.max()


def test_boundary_sends_belong_to_the_sender():
    s = strat()
    ev = microstep_events(GPT3, s, A100, layer=11)       # last layer of stage 0: sends forward
    pp = ev[(ev.category == "pp_comm") & (ev.row == "gpu 0")]
    assert set(pp[pp.kind == "p2p"].phase) == {"fwd"}
    assert pp.operator.iloc[0] == "layer11->layer12"
    # Megatron's scatter/gather: the receiver of the gradient all-gathers it over NVLink
    assert set(pp[pp.phase == "bwd"].kind) == {"all_gather", "barrier"}
    ev = microstep_events(GPT3, s, A100, layer=12)       # first of stage 1: sends the gradient back
    sends = ev[(ev.category == "pp_comm") & (ev.kind == "p2p")]
    assert set(sends.phase) == {"bwd"}


def test_embedding_and_head_operators():
    ev = microstep_events(GPT3, strat(), A100, op="logits")
    assert set(ev.operator) == {"logits"} and (ev.stage == 7).all()


@pytest.mark.parametrize("kw,message", [(dict(layer=96), "outside the model's layers 0..95"),
                                        (dict(op="nope"), "operator 'nope' not found"),
                                        (dict(layer=2, op="embed"), "operators: ln1")])
def test_bad_layer_or_operator(kw, message):
    with pytest.raises(ExplorerError, match=message):
        microstep_events(GPT3, strat(), A100, **kw)


def test_find_block_defaults_to_the_first_layer():
    the_plan = cost_tree(GPT3, strat(), A100).plan
    assert the_plan.blocks[find_block(the_plan)].block.name == "layer0"
