"""The host side of a pass (issue 27 item 1): kernels per operator, max(GPU, host issue time) + syncs, CUDA graphs.

explorer/model/kernels.py counts each operator's kernels (eager Megatron-Core + Transformer Engine), the cluster
constants tau_h (efficiency.host_launch_s) and tau_s (host_sync_s) price them, explorer/cost/tree.py host_bound
composes a block's pass as max(GPU time, host issue time) + sync stalls.
"""
from dataclasses import replace

import numpy as np
import pytest
import sympy as sp

from explorer.cost.block import block_cost
from explorer.cost.evaluate import evaluate
from explorer.cost.numeric import Q
from explorer.cost.placement import host_options
from explorer.cost.tree import block_function, host_bound
from explorer.errors import ExplorerError
from explorer.io.clusters import load_cluster
from explorer.io.models import load_model
from explorer.model import kernels as kn
from explorer.model.graph.build import build_blocks
from explorer.strategy.strategy import Strategy
from explorer.symbols import tau_h, tau_s

QWEN = load_model("qwen3-30b-a3b").with_seq_len(4096)
LLAMA = load_model("llama3-8b")


def _layer(model, index=0):
    return next(b for b in build_blocks(model) if b.kind == "layer" and b.layer == index)


def _counts(block, recipe=kn.Recipe()):
    return {op.name: kn.launches(op, recipe) for op in block.ops}


def test_kernel_counts_per_operator_come_from_the_graph():
    """A dense Llama layer launches 12 kernels forward and 18 backward; a Qwen3-30B-A3B MoE layer with 16 local
    experts (128 over ep 8) 86 and 116 (82 and 110 before its query and key norms, 2026-12-07): the ~200-300 of an
    eager Megatron-Core MoE layer (issue 27)."""
    dense = _counts(_layer(LLAMA))
    assert sum(f for f, _ in dense.values()) == 12 and sum(b for _, b in dense.values()) == 18
    assert dense["flash_attn"] == (3, 3) and dense["rms1"] == (1, 2) and dense["qkv"] == (1, 2)
    moe = _counts(_layer(QWEN), kn.Recipe(local_experts=16))
    assert moe["router"] == (15, 15)                        # the gating GEMM and ~28 routing kernels
    assert moe["dispatch"] == (15, 7) and moe["combine"] == (8, 10)
    assert moe["expert_fc1"] == (17, 32) and moe["expert_fc2"] == (17, 32)   # a GEMM per local expert
    fwd, bwd = sum(f for f, _ in moe.values()), sum(b for _, b in moe.values())
    assert moe["qk_norm"] == kn.QK_NORM_KERNELS == (4, 6)
    assert (fwd, bwd) == (86, 116) and 150 <= fwd + bwd <= 300
    fp8 = _counts(_layer(QWEN), kn.Recipe(fp8=True, local_experts=16))
    assert fp8["qkv"] == (2, 4) and fp8["router"] == (15, 15)     # the router's GEMM stays in high precision
    flex = _counts(_layer(QWEN), kn.Recipe(local_experts=16, flex=True))
    assert flex["dispatch"] == kn.FLEX_DISPATCH_KERNELS and flex["combine"] == kn.FLEX_COMBINE_KERNELS


def test_only_the_dropless_all_to_all_dispatcher_syncs():
    dispatch = next(op for op in _layer(QWEN).ops if op.name == "dispatch")
    assert kn.syncs(dispatch, kn.Recipe()) == 1
    assert kn.syncs(dispatch, kn.Recipe(dropless=False)) == 0          # token-drop with padding: static shapes
    assert kn.syncs(dispatch, kn.Recipe(syncs=False)) == 0             # HybridEP
    assert all(kn.syncs(op) == 0 for op in _layer(QWEN).ops if op.name != "dispatch")


def _moe_cost(**recipe):
    block = _layer(QWEN)
    host = tuple(kn.Recipe(**recipe))
    return block_cost(block, "replicated", (), False, "none", "replicated", host=host)


def test_block_host_terms_are_named_sympy_terms():
    cost = _moe_cost(local_experts=16)
    assert cost.host_fwd_s == 86 * tau_h and cost.host_bwd_s == 116 * tau_h
    assert cost.sync_fwd_s == tau_s + tau_h and cost.sync_bwd_s == 0
    forward, backward, (x_fwd, x_bwd) = host_bound(cost)
    assert forward.has(sp.Max)
    # what the host adds is max(0, host - GPU) (+ the stalls): the same number as F + B - GPU, at host- and GPU-bound
    # points alike, and never a bare negative collective outside that max (what compute's formula showed before)
    excess = x_fwd + x_bwd - (forward + backward - _gpu(cost))
    free = sorted((excess + forward + backward).free_symbols, key=str)
    for scale in (1e-9, 1.0, 1e9):
        point = {x: scale * (1 + 0.37 * i) if x in (tau_h, tau_s) else 1 + 0.37 * i for i, x in enumerate(free)}
        assert abs(float(excess.xreplace(point))) <= 1e-9 * max(1.0, float((forward + backward).xreplace(point)))
    beyond = x_fwd - cost.sync_fwd_s
    assert isinstance(beyond, sp.Max) and sp.Integer(0) in beyond.args


def _gpu(cost):
    return (cost.fwd_compute_s + cost.fwd_comm_s + cost.cp_fwd_s + cost.bwd_compute_s + cost.bwd_comm_s +
            cost.recompute_s + cost.cp_bwd_s)


def test_cuda_graphs_remove_the_issue_time_of_the_graphed_parts():
    eager = _moe_cost(local_experts=16)
    router = _moe_cost(graphs="router", local_experts=16)
    layer = _moe_cost(graphs="layer", local_experts=16)
    full = _moe_cost(graphs="full", local_experts=16, syncs=False)
    drop = _moe_cost(graphs="layer", local_experts=16, dropless=False)
    n = lambda c: int((c.host_fwd_s + c.host_bwd_s) / tau_h)
    # router scope: the router (30) and the dispatcher's preprocess (6); layer scope: the attention part too
    # (8 + 12 = 20 kernels, the query and key norms' 10, and add2's 2); the dropless MoE part after the preprocess
    # stays eager
    assert n(eager) - n(router) == 30 + kn.DISPATCH_PREPROCESS
    assert n(router) - n(layer) == 20 + 10 + 2
    assert n(full) == 0 and n(drop) == 0           # token-drop with padding: the whole layer is one graph
    assert layer.sync_fwd_s == tau_s + tau_h and full.sync_fwd_s == 0
    assert n(layer) == n(eager) - sum(f + b for op in _layer(QWEN).ops if not (op.routes or op.expert)
                                      for f, b in [kn.launches(op, kn.Recipe(local_experts=16))]) \
        - kn.DISPATCH_PREPROCESS


def _values(cost, cluster, micro_batch=1, model=QWEN):
    from explorer.cost.numbers import Numbers
    nums = Numbers.of(model, micro_batch, cluster, "bf16")
    return block_function(cost)(*nums.block_args(1, (1,) + (0,) * (len(cluster.levels) - 1)))


@pytest.mark.parametrize("tau", [0.0, 2e-6, 45e-6, 500e-6])
def test_max_binds_exactly_when_the_host_is_slower(tau):
    cluster = load_cluster("dgx-b200")
    cluster = replace(cluster, efficiency=replace(cluster.efficiency, host_launch_s=tau, host_sync_s=0.0))
    cost = _moe_cost(graphs="full", local_experts=16, syncs=False)      # no syncs: the max alone
    eager = _moe_cost(local_experts=16, syncs=False)
    v, e = _values(cost, cluster), _values(eager, cluster)
    gpu_f, gpu_b = v[Q["F"]], v[Q["B"]]            # nothing issued one by one: F, B are the GPU's
    assert v[Q["host_fwd_exposed"]] == v[Q["host_bwd_exposed"]] == 0
    host_f, host_b = e[Q["host_fwd"]], e[Q["host_bwd"]]
    assert host_f == pytest.approx(86 * tau) and host_b == pytest.approx(116 * tau)
    assert e[Q["F"]] == pytest.approx(max(gpu_f, host_f), rel=1e-12)
    assert e[Q["B"]] == pytest.approx(max(gpu_b, host_b), rel=1e-12)
    assert (e[Q["host_fwd_exposed"]] > 0) == (host_f > gpu_f) and (e[Q["host_bwd_exposed"]] > 0) == (host_b > gpu_b)


def test_a_sync_stalls_tau_s_plus_the_next_issue():
    cluster = load_cluster("dgx-b200")
    with_sync, without = _values(_moe_cost(local_experts=16), cluster), \
        _values(_moe_cost(local_experts=16, syncs=False), cluster)
    eff = cluster.efficiency
    assert with_sync[Q["F"]] - without[Q["F"]] == pytest.approx(eff.host_sync_s + eff.host_launch_s, rel=1e-9)
    assert with_sync[Q["B"]] == pytest.approx(without[Q["B"]], rel=1e-12)


def test_the_host_binds_at_small_micro_batches_and_larger_ones_amortise_it():
    """Qwen3-30B-A3B on 8 B200, eager: the host binds at b = 1 (issue 27: the gap falls from b = 1 to b = 4);
    per token the iteration gets cheaper with b exactly while the host binds."""
    cluster = load_cluster("dgx-b200")
    times = {}
    for b in (1, 2, 4, 8):
        s = Strategy(dp=8, micro_batch=b, global_batch=512, ep=8, expert_tp=1, dtype="fp8")
        r = evaluate(QWEN, s, cluster)
        times[b] = (r.iteration_time_s, r.extra["host_exposed_s"])
    assert times[1][1] > 0.5 * times[1][0]                 # host-bound at b = 1
    assert times[1][1] > times[4][1] > times[8][1]
    assert times[1][0] > times[2][0] > times[4][0]
    graphed = evaluate(QWEN, Strategy(dp=8, micro_batch=1, global_batch=512, ep=8, expert_tp=1, dtype="fp8",
                                      cuda_graphs="full", moe_dispatcher="hybridep"), cluster)
    assert graphed.extra["host_exposed_s"] == 0 and graphed.iteration_time_s < times[1][0] / 2


def test_host_options_from_the_strategy():
    s = Strategy(dp=8, global_batch=8, ep=8, expert_tp=1, dtype="fp8", cuda_graphs="layer", moe_dispatcher="hybridep")
    assert host_options(QWEN, s) == {"host": ("layer", "delayed", 16, True, True, True)}    # the FP8 recipe; HybridEP
    full = s.with_(cuda_graphs="full")                   # syncs but with the static budget full graphs need (kernels.syncs)
    assert host_options(QWEN, full) == {"host": ("full", "delayed", 16, True, False, True)}
    assert host_options(LLAMA, Strategy(dp=8, global_batch=8)) == {}                       # eager bf16: the default key
    assert host_options(LLAMA, Strategy(dp=8, global_batch=8, cuda_graphs="full")) == {"host": ("full", False)}


def test_a_cluster_without_a_host_constant_prices_no_host():
    """dgx-a100-80gb has no host_launch_s (0 = not priced): its numbers are the GPU's."""
    assert load_cluster("dgx-a100-80gb").efficiency.host_launch_s == 0
    assert load_cluster("dgx-b200").efficiency.host_launch_s == pytest.approx(42e-6)


def test_bad_input_is_refused_in_one_line():
    with pytest.raises(ExplorerError) as err:
        evaluate(QWEN, Strategy(dp=8, global_batch=8, ep=8, expert_tp=1, cuda_graphs="full"), load_cluster("dgx-b200"))
    message = str(err.value)
    assert "\n" not in message and "full-iteration CUDA graphs" in message and "alltoall" in message
    evaluate(QWEN, Strategy(dp=8, global_batch=8, ep=8, expert_tp=1, cuda_graphs="full", moe_dispatcher="hybridep"),
             load_cluster("dgx-b200"))                          # HybridEP with its static budget: no sync
    evaluate(replace(QWEN, moe_capacity_factor=1.0), Strategy(dp=8, global_batch=8, ep=8, expert_tp=1, cuda_graphs="full"),
             load_cluster("dgx-b200"))                                            # token-drop: static shapes
    for bad in (0.5, -1.0):
        with pytest.raises(ExplorerError) as err:
            replace(QWEN, moe_capacity_factor=bad)
        assert "\n" not in str(err.value) and "moe_capacity_factor" in str(err.value)
    for field, value in (("cuda_graphs", "sometimes"), ("moe_dispatcher", "pigeon")):
        with pytest.raises(ExplorerError) as err:
            Strategy(**{field: value})
        assert "\n" not in str(err.value) and field in str(err.value)


def test_the_search_sees_the_option():
    from explorer.search.space import enumerate_space
    space = enumerate_space(QWEN, 8, 64, cuda_graphs="layer", moe_dispatcher="hybridep")
    assert space.families and all(f.cuda_graphs == "layer" and f.moe_dispatcher == "hybridep"
                                  for f in space.families)
    from explorer.search import search
    with pytest.raises(ExplorerError, match="full-iteration CUDA graphs"):
        search(QWEN, load_cluster("dgx-b200"), 8, 64, cuda_graphs="full")


def _cluster(tau):
    base = load_cluster("dgx-h100")
    return replace(base, efficiency=replace(base.efficiency, host_launch_s=tau))


def _best_micro_batch(model, tau, **kw):
    times = {b: evaluate(model, Strategy(micro_batch=b, **kw), _cluster(tau)).iteration_time_s for b in (1, 2, 4, 8)}
    return min(times, key=times.get)


def test_larger_micro_batches_win_exactly_when_the_host_binds():
    """bert-large on 8 H100, p = 4, d = 2, B = 64: without the host's issue time b = 4 is fastest (a larger one
    lengthens the pipeline's bubble); with tau_h = 45 us the host binds and b = 8 wins. gpt-1.7b on the same
    layout is GPU-bound: b = 1 either way."""
    layout = dict(dp=2, pp=4, global_batch=64)
    assert _best_micro_batch(load_model("bert-large"), 0.0, **layout) == 4
    assert _best_micro_batch(load_model("bert-large"), 45e-6, **layout) == 8
    assert _best_micro_batch(load_model("gpt-1.7b"), 0.0, **layout) == 1
    assert _best_micro_batch(load_model("gpt-1.7b"), 45e-6, **layout) == 1


def test_the_search_prices_the_host_as_evaluate_does():
    """The search's sweep (its compiled block functions) sees the host side: within one family, the
    micro-batch it finds fastest moves from 4 to 8 when the host binds, as evaluate() says."""
    from explorer.search.space import enumerate_space
    from explorer.search.sweep import settle_fastest, sweep
    model = load_model("bert-large")
    fam = [f for f in enumerate_space(model, 8, 64).families
           if (f.tp, f.pp, f.dp, f.schedule, f.recompute, f.sequence_parallel, f.pipeline_layout) ==
           (1, 4, 2, "1f1b", "none", False, "")]     # the default split (bert-large's output layer earns layouts too)
    assert len(fam) == 1
    best = {}
    for tau in (0.0, 45e-6):
        points = sweep(model, _cluster(tau), fam, 64, "bf16")
        keep = np.flatnonzero((points.zero == 0) & ~points.overlap.astype(bool))
        settle_fastest(points, keep, len(keep))           # the critical path of every kept point
        k = keep[np.argmin(points.time_s[keep])]
        best[tau] = int(points.micro_batch[k])
    assert best == {0.0: 4, 45e-6: 8}


def test_the_micro_step_gantt_has_a_host_row():
    """A layer's micro-steps draw the host issuing each phase's kernels (row 'gpu N · host', from the phase's
    start) and, where it binds, the GPU waiting for it (kind host_wait, category compute); under full-iteration
    graphs there is no host row."""
    from explorer.timeline.microstep import microstep_table
    cluster = load_cluster("dgx-b200")
    eager = Strategy(dp=8, micro_batch=1, global_batch=512, ep=8, expert_tp=1, dtype="fp8")
    frame = microstep_table(QWEN, eager, cluster, layer=0).to_frame()
    host = frame[frame["row"].str.endswith("· host")]
    assert set(host["phase"]) == {"fwd", "bwd"} and set(host["kind"]) == {"host_issue"}
    fwd = host[(host["phase"] == "fwd") & (host["device"] == host["device"].iloc[0])]
    # 86 + FP8's 4 (delayed scaling: one fused quantisation call per grouped GEMM, nothing launched per split)
    tau = cluster.efficiency.host_launch_s
    assert float(fwd["end_s"].iloc[0] - fwd["start_s"].iloc[0]) == pytest.approx(90 * tau)
    assert float(fwd["start_s"].iloc[0]) == 0.0
    assert (frame["kind"] == "host_wait").any() and set(frame[frame["kind"] == "host_wait"]["category"]) == {"compute"}
    # the host row has its own category, hence its own legend entry and colour (it drew as 'compute' before)
    from explorer.charts.classroom import classroom_figure
    from explorer.charts.gantt import microstep_figure
    from explorer.charts.palette import OKABE_ITO, opaque
    from explorer.timeline.microstep import HOST_CATEGORY
    assert set(host["category"]) == {HOST_CATEGORY}
    fig = microstep_figure(frame)
    traces = {t.meta: t for t in fig.data}                 # by category (the names are the legend's words)
    assert set(traces[HOST_CATEGORY].y) == set(host["row"]) and len(traces[HOST_CATEGORY].x) == len(host)
    assert not any(str(y).endswith("· host") for y in traces["compute"].y)
    assert traces[HOST_CATEGORY].marker.color != traces["compute"].marker.color
    room = {t.name: t.marker.color for t in classroom_figure(fig).data}
    assert opaque(room["host issuing kernels"]) == OKABE_ITO["host"] != opaque(room["compute"])
    graphed = microstep_table(QWEN, replace(eager, cuda_graphs="full", moe_dispatcher="hybridep"), cluster,
                              layer=0).to_frame()
    assert not graphed["row"].str.endswith("· host").any() and not (graphed["kind"] == "host_wait").any()


@pytest.mark.parametrize("framework", ["deepspeed", "torchtitan", "mindspore"])
@pytest.mark.parametrize("option", [dict(cuda_graphs="layer"), dict(cuda_graphs="full"), dict(moe_dispatcher="deepep"),
                                    dict(overlap_ep=True)])
def test_no_exporter_writes_a_config_that_runs_the_host_side_otherwise(framework, option):
    """Issue 29's rule for the new options: written as costed (Megatron-LM, Megatron-Bridge: the next test), or
    refused in one line (explorer.codegen.common.check_host_options)."""
    from explorer.codegen import export
    from explorer.codegen.common import check_host_options
    from explorer.errors import ExplorerError
    model = load_model("tiny-gpt")
    s = Strategy(dp=2, global_batch=4, **{k: v for k, v in option.items() if k != "overlap_ep"})
    s = replace(s, **option) if "overlap_ep" in option else s       # (a dense model: the rule, not the export)
    with pytest.raises(ExplorerError) as err:
        check_host_options(framework, s)
    assert "does not write" in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(ExplorerError):
        export(framework, model, s, load_cluster("dgx-h100"))


@pytest.mark.parametrize("framework", ["megatron", "megatron-bridge"])
@pytest.mark.parametrize("option", [dict(cuda_graphs="router", moe_dispatcher="hybridep"),
                                    dict(cuda_graphs="full", moe_dispatcher="hybridep", overlap_ep=True),
                                    dict(cuda_graphs="layer", moe_dispatcher="allgather"),
                                    dict(moe_dispatcher="deepep", overlap_ep=True)])
def test_megatron_exporters_write_the_host_side_and_read_it_back(framework, option):
    """Megatron-LM (--cuda-graph-impl/--cuda-graph-modules, --moe-token-dispatcher-type, --moe-flex-dispatcher-
    backend, --overlap-moe-expert-parallel-comm: explorer/codegen/megatron_moe.py) and Megatron-Bridge (the same
    TransformerConfig and CommOverlapConfig fields) write each option, and the importer reads the same strategy."""
    from explorer.codegen import export
    from explorer.codegen.imports import import_config
    s = Strategy(dp=8, global_batch=64, ep=8, expert_tp=1, dtype="fp8", **option)
    text = export(framework, QWEN, s, load_cluster("dgx-b200"))
    back = import_config(text, framework).strategy
    assert (back.cuda_graphs, back.moe_dispatcher, back.overlap_ep) == (s.cuda_graphs, s.moe_dispatcher, s.overlap_ep)
    words = {"megatron": {"full": "--cuda-graph-impl full_iteration", "hybridep": "--moe-flex-dispatcher-backend hybridep",
                          "allgather": "--moe-token-dispatcher-type allgather", "router": "--cuda-graph-modules moe_router moe_preprocess",
                          "overlap": "--overlap-moe-expert-parallel-comm"},
             "megatron-bridge": {"full": 'cuda_graph_impl = "full_iteration"', "hybridep": '"hybridep"',
                                 "allgather": '"allgather"', "router": "= ['moe_router', 'moe_preprocess']",
                                 "overlap": "overlap_moe_expert_parallel_comm=True"}}[framework]
    for key, word in words.items():
        expected = key in (s.cuda_graphs, s.moe_dispatcher) or (key == "overlap" and s.overlap_ep)
        assert (word in text) == expected, (key, word)
    if framework == "megatron":      # Megatron-LM's own parser (its table at d98e8a64) takes every flag written
        from test_codegen_frameworks import PARSER, megatron_argv
        args = PARSER.parse_args(megatron_argv(text))
        assert args.overlap_moe_expert_parallel_comm == s.overlap_ep
        assert args.moe_token_dispatcher_type == ("flex" if s.moe_dispatcher in ("deepep", "hybridep")
                                                  else s.moe_dispatcher)
        assert args.cuda_graph_impl == {"none": "none", "full": "full_iteration"}.get(s.cuda_graphs,
                                                                                      "transformer_engine")


def _best_micro_batches(model, cluster, gpus, batch, dtype, **options):
    """Every family of the search's space under `options` (CUDA graphs, dispatcher), the fastest micro-batch of
    each at its first ZeRO stage without the gradient overlap, every point on its critical path."""
    from explorer.search.space import enumerate_space
    from explorer.search.sweep import settle, sweep
    space = enumerate_space(model, gpus, batch, **options)
    points = sweep(model, cluster, space.families, batch, dtype)
    settle(points, np.arange(points.time_s.size))
    best = {}
    for k in range(points.time_s.size):
        i = int(points.family[k])
        if points.zero[k] != space.families[i].zeros[0] or points.overlap[k]:
            continue
        if i not in best or points.time_s[k] < points.time_s[best[i]] * (1 - 1e-9):
            best[i] = k
    return space, points, best


@pytest.mark.parametrize("name,cluster,dtype,eager,graphed", [
    ("bert-large", "dgx-h100", "bf16", {}, {"cuda_graphs": "full"}),
    ("qwen3-30b-a3b", "dgx-b200", "fp8", {"moe_dispatcher": "alltoall"},
     {"cuda_graphs": "full", "moe_dispatcher": "hybridep"})])
def test_the_search_prefers_larger_micro_batches_exactly_where_the_host_binds(name, cluster, dtype, eager, graphed):
    """Issue 27's done-when, over the search's whole space on 8 GPUs (B = 64): with the host's issue time priced
    (eager; the all-to-all dispatcher, which syncs) against none (full-iteration CUDA graphs; HybridEP, which does
    not), every family's fastest micro-batch is never smaller; it is larger only where the eager strategy at the
    graphed one's micro-batch is host-bound (evaluate()'s host_exposed_s > 0), and the same wherever it is not --
    and it does move somewhere."""
    from explorer.search.search import point_strategy
    model = QWEN if name.startswith("qwen3") else load_model(name)
    cluster = load_cluster(cluster)
    kw = {"ep": 4} if model.is_moe else {}        # (ep 8 leaves p = 1, where b = B / d is always fastest)
    space_e, points_e, best_e = _best_micro_batches(model, cluster, 8, 64, dtype, **kw, **eager)
    space_g, points_g, best_g = _best_micro_batches(model, cluster, 8, 64, dtype, **kw, **graphed)
    assert len(space_e.families) == len(space_g.families) and best_e.keys() == best_g.keys()
    moved = 0
    for i, k_e in best_e.items():
        k_g = best_g[i]
        fam_e, fam_g = space_e.families[i], space_g.families[i]
        assert (fam_e.tp, fam_e.pp, fam_e.schedule, fam_e.recompute, fam_e.overlap_ep) == \
            (fam_g.tp, fam_g.pp, fam_g.schedule, fam_g.recompute, fam_g.overlap_ep)
        b_e, b_g = int(points_e.micro_batch[k_e]), int(points_g.micro_batch[k_g])
        at = point_strategy(space_e, points_e, k_e, 64, dtype).with_(micro_batch=b_g)    # eager, graphed's b
        host_bound = evaluate(model, at, cluster).extra["host_exposed_s"] > 0
        assert b_e >= b_g, (i, b_e, b_g)
        assert host_bound or b_e == b_g, (i, b_e, b_g)
        moved += b_e > b_g
    assert moved > 0


def _outside_max(expr):
    """The summands of expr reached without entering a Max (a Mul's factors are walked too)."""
    if isinstance(expr, sp.Max):
        return []
    if isinstance(expr, sp.Add):
        return [x for arg in expr.args for x in ([arg] if not isinstance(arg, (sp.Add, sp.Mul)) else
                                                  [arg] + _outside_max(arg))]
    if isinstance(expr, sp.Mul):
        return [x for arg in expr.args for x in _outside_max(arg)]
    return []


def test_the_compute_formula_has_no_bare_negative_network_term():
    """T_compute = compute + the host's excess over the GPU time, max(0, host - GPU): the GPU's exposed collectives
    enter only inside that max. Written as max(GPU, host) - GPU, the Cost page showed -2 L_node (2t - 2) in front of
    compute's formula (a lecturer's walk, 2026-12-07); the numbers are the same either way."""
    from explorer.cost.explain import explain
    from explorer.cost.explain import level_symbols
    cluster = load_cluster("dgx-a100-80gb")
    s = Strategy(dp=2, tp=4, pp=2, micro_batch=1, global_batch=16)
    model = load_model("llama2-7b")
    term = explain(model, s, cluster).terms["compute"]
    g, L = level_symbols(cluster)
    network = set(g) | set(L)
    negative = [x for x in _outside_max(term) if isinstance(x, sp.Mul) and x.could_extract_minus_sign()
                and x.free_symbols & network]
    assert term.has(sp.Max) and not negative, negative[:2]
    assert evaluate(model, s, cluster).breakdown_s["compute"] > 0
    # printed as the host's time minus the GPU's, the GPU's terms in one parenthesis (explorer/symbols.py _excess)
    latex = explain(model, s, cluster).latex()["compute"]
    assert r"\max\left(0,\; 12 \tau_{h} - \left(2 L_{node}" in latex and r"\max\left(0,\; -" not in latex


def test_the_host_constant_in_the_sources_table_is_the_clusters():
    """assets/hardware_sources.json lists tau_h with its fit; it said 45 us for a day after the refit to 42 us."""
    import json
    from pathlib import Path
    rows = json.loads((Path(__file__).resolve().parents[1] / "assets" / "hardware_sources.json").read_text())
    listed = [row["value"] for row in rows if row.get("field") == "host_launch_s"]
    assert listed and all(v == load_cluster(name).efficiency.host_launch_s for v in listed
                          for name in ("dgx-h100", "h200", "dgx-b200", "gb200-nvl72"))
