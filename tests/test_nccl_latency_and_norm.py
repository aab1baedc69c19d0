"""Issue 26 item 8: a ring's latency charged level by level, the gradient-norm all-reduce before the optimizer
step, one coalesced all-reduce of a block's replicated (LayerNorm) gradients under sequence parallelism.

Sources: NVIDIA/nccl src/graph/tuning.cc at 5067397c (ring: (nsteps - nInterSteps) intraLat + nInterSteps
interLat; tree: 2 ((ppn - 1) intraLat + log2i(nNodes) interLat)); NVIDIA/Megatron-LM at d98e8a64
(megatron/core/optimizer/clip_grads.py get_grad_norm_fp32, optimizer.py get_grad_stats_parallel_group,
megatron/core/distributed/finalize_model_grads.py _allreduce_non_tensor_model_parallel_grads).
"""
from fractions import Fraction

import pytest
import sympy as sp

from explorer.cost import collectives as coll
from explorer.cost import evaluation as evaluation_module
from explorer.cost.block import block_cost
from explorer.cost.evaluate import evaluate
from explorer.cost.numeric import grad_norm_seconds
from explorer.cost.superstep import T_norm, terms
from explorer.io.clusters import load_cluster
from explorer.io.models import load_model
from explorer.model.graph import build_blocks
from explorer.strategy.strategy import Strategy
from explorer.symbols import beta

A100 = load_cluster("dgx-a100-80gb")
L_NODE, L_NET = (lv.latency_s for lv in A100.levels)          # 2 us NVLink, 5 us network (the preset)


def test_ring_latency_is_nccls_per_level_count_at_d_1024():
    """1024 ranks, 8 per node on 128 nodes: NCCL charges 2 (n - 1) - 2 (N - 1) = 1792 steps at the intra-node
    latency and 2 (N - 1) = 254 at the network's -- 4.9 ms here, where every step at the network's gave 10.2."""
    route = (8, 128)
    steps = coll.latency_steps("all_reduce", 1024)
    _, L = coll.route_g_L("all_reduce", route, [1e-11, 4e-11], [L_NODE, L_NET])
    nccl = (2 * 1023 - 2 * 127) * L_NODE + 2 * 127 * L_NET
    assert steps * L == pytest.approx(nccl, rel=1e-12)
    assert steps * L == pytest.approx(4.854e-3, rel=1e-3) and steps * L_NET == pytest.approx(10.23e-3, rel=1e-3)
    # all-gather / reduce-scatter: (n - 1) - (N - 1) intra, N - 1 inter
    _, L = coll.route_g_L("reduce_scatter", route, [1e-11, 4e-11], [L_NODE, L_NET])
    assert coll.latency_steps("reduce_scatter", 1024) * L == pytest.approx(896 * L_NODE + 127 * L_NET, rel=1e-12)


def test_latency_shares_general_routes():
    assert coll.latency_shares("all_reduce", (8,)) == (Fraction(1),)
    assert coll.latency_shares("all_reduce", (1, 16)) == (Fraction(0), Fraction(1))     # one rank per node
    assert coll.latency_shares("all_to_all", (8, 4)) == (Fraction(0), Fraction(1))      # a step waits for its slowest hop
    three = coll.latency_shares("all_gather", (4, 2, 3))                                # 24 ranks, three levels
    assert three == (Fraction(6 * 3, 23), Fraction(3 * 1, 23), Fraction(2, 23)) and sum(three) == 1
    _, L = coll.route_g_L("all_reduce", (8,), [1.0], [L_NODE])
    assert L == L_NODE                                                                  # one level: unchanged


def test_the_symbolic_latency_is_the_same_mean():
    g0, g1, L0, L1 = sp.symbols("g0 g1 L0 L1", positive=True)
    _, L = coll.route_g_L("all_reduce", (8, 4), [g0, g1], [L0, L1])
    assert sp.simplify(L - (sp.Rational(28, 31) * L0 + sp.Rational(3, 31) * L1)) == 0


def test_the_optimizer_step_waits_for_the_gradient_norm_all_reduce(monkeypatch):
    """GPT-3 175B, d16 t8 p8 on 1024 A100s with the distributed optimizer: the norm (4 B) is all-reduced over the
    whole job, a tree (NCCL's choice for a few bytes): 2 (7 x 2 us + log2(128) x 5 us) = 98 us, on the critical
    path between the gradient synchronisation and the step."""
    model = load_model("gpt3-175b")
    s = Strategy(dp=16, tp=8, pp=8, global_batch=1536, zero=1, sequence_parallel=True)
    norm = grad_norm_seconds(A100, s.mesh, 1, "bf16")
    assert norm == pytest.approx(2 * (7 * L_NODE + 7 * L_NET), rel=1e-4)
    assert grad_norm_seconds(A100, s.mesh, 0, "bf16") == pytest.approx(2 * (7 * L_NODE + 3 * L_NET), rel=1e-4)  # tp x pp
    assert grad_norm_seconds(A100, s.mesh, 1, "fp16") == pytest.approx(2 * norm, rel=1e-12)  # + the inf/nan flag
    assert grad_norm_seconds(A100, Strategy().mesh, 1, "bf16") == 0.0                         # one GPU
    with_norm = evaluate(model, s, A100)
    monkeypatch.setattr(evaluation_module, "grad_norm_seconds", lambda *args: 0.0)   # build_evaluation reads it
    without = evaluate(model, s, A100)
    assert with_norm.breakdown_s["optimizer"] - without.breakdown_s["optimizer"] == pytest.approx(norm, rel=1e-9)
    assert with_norm.iteration_time_s - without.iteration_time_s == pytest.approx(norm, rel=1e-6)
    step = terms("1f1b", 1, False, 12)["optimizer_step"].expr
    assert sp.diff(step, T_norm) == 1


def test_layernorm_gradients_are_all_reduced_once_per_block():
    """Under sequence parallelism a GPT layer's two LayerNorms (2h parameters each) send their gradients in one
    coalesced all-reduce of 4h elements (Megatron-LM _allreduce_non_tensor_model_parallel_grads)."""
    layer = next(b for b in build_blocks(load_model("gpt-1.7b")) if b.kind == "layer")
    cost = block_cost(layer, "megatron", (), True, "none", "S:seq")
    norms = [op for op in layer.ops if op.kind == "norm"]                               # ln1, ln2
    assert len(norms) == 2
    assert len(cost.grad_sync) == 1 and cost.grad_sync[0].kind == "all_reduce"
    assert sp.simplify(cost.grad_sync[0].size - beta * sum(op.params for op in norms)) == 0
    assert block_cost(layer, "megatron", (), False, "none", "R").grad_sync == ()        # no SP: nothing to sync
