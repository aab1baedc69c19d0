"""Invariants of ../shared/DESIGN.md ("Invariants worth a test").

* the categories sum to the iteration time and none is negative;
* the symbolic terms of explain() evaluated exactly equal the numeric breakdown;
* collective costs follow the ring formulas of published.json nccl_busbw and mpich_alpha_beta;
* a strategy whose degrees do not multiply to the device count is refused, naming the numbers.
"""
import pytest
import sympy as sp

from explorer import ExplorerError, LayerSplit, Strategy, evaluate, load_cluster, load_model
from explorer.cost import collectives as coll
from explorer.cost.explain import explain
from explorer.cost.superstep import CATEGORIES

LS = LayerSplit

# id -> (model preset, cluster preset, strategy)
CASES = {
    "gpt3-1f1b": ("gpt3-175b", "dgx-a100-80gb",
                  Strategy(dp=16, tp=8, pp=8, micro_batch=1, global_batch=1536, schedule="1f1b")),
    "gpt3-gpipe": ("gpt3-175b", "dgx-a100-80gb",
                   Strategy(dp=16, tp=8, pp=8, micro_batch=1, global_batch=1536, schedule="gpipe")),
    "gpt3-interleaved": ("gpt3-175b", "dgx-a100-80gb",
                         Strategy(dp=16, tp=8, pp=8, micro_batch=1, global_batch=1536,
                                  schedule="interleaved", chunks=2)),
    "gpt3-zero1-overlap": ("gpt3-175b", "dgx-a100-80gb",
                           Strategy(dp=16, tp=8, pp=8, micro_batch=1, global_batch=1536, zero=1,
                                    overlap_dp=True)),
    "gpt3-selective": ("gpt3-175b", "dgx-a100-80gb",
                       Strategy(dp=16, tp=8, pp=8, micro_batch=2, global_batch=1536, recompute="selective")),
    "gpt3-full": ("gpt3-175b", "dgx-a100-80gb",
                  Strategy(dp=16, tp=8, pp=8, micro_batch=1, global_batch=1536, recompute="full")),
    "gpt3-sp": ("gpt3-175b", "dgx-a100-80gb",
                Strategy(dp=16, tp=8, pp=8, micro_batch=1, global_batch=1536, sequence_parallel=True,
                         recompute="selective", scatter_gather=False)),
    "llama2-7b": ("llama2-7b", "dgx-h100",
                  Strategy(dp=4, tp=2, pp=2, micro_batch=1, global_batch=32, zero=1)),
    "llama2-7b-zero3": ("llama2-7b", "h200",
                        Strategy(dp=8, tp=1, pp=1, micro_batch=2, global_batch=64, zero=3, overlap_dp=True)),
    "gpt3-param-gather": ("gpt3-175b", "dgx-a100-80gb",
                          Strategy(dp=16, tp=8, pp=8, micro_batch=1, global_batch=1536, zero=1, overlap_dp=True,
                                   overlap_param_gather=True, schedule="interleaved", chunks=2)),
    "llama2-7b-zero3-prefetch": ("llama2-7b", "h200",
                                 Strategy(dp=8, tp=1, pp=1, micro_batch=2, global_batch=64, zero=3,
                                          overlap_dp=True, zero_prefetch=True)),
    "bert-large": ("bert-large", "dgx-a100-80gb",
                   Strategy(dp=4, tp=2, pp=1, micro_batch=8, global_batch=256)),
    "resnet-50": ("resnet-50", "classroom", Strategy(dp=8, tp=1, pp=1, micro_batch=32, global_batch=512)),
    "resnet-50-tp-pp": ("resnet-50", "classroom",
                        Strategy(dp=2, tp=2, pp=2, micro_batch=8, global_batch=64, dtype="fp32")),
    "tiny-mlp": ("tiny-mlp", "classroom", Strategy(dp=2, tp=2, pp=2, micro_batch=4, global_batch=32)),
    "per-layer-mix": ("tiny-gpt", "classroom",
                      Strategy(dp=2, tp=4, pp=2, micro_batch=2, global_batch=16,
                               layer_splits=(LS(4, "megatron"), LS(2, "column"), LS(4, "row"), LS(2, "batch")))),
    "per-layer-mix-sp": ("tiny-gpt", "classroom",
                         Strategy(dp=1, tp=4, pp=1, micro_batch=4, global_batch=8, sequence_parallel=True,
                                  recompute="full",
                                  layer_splits=(LS(1, "replicated"), LS(4, "batch"), LS(2, "megatron"),
                                                LS(4, "column", (("fc2", "row"),))))),
    "dp-across-nodes": ("gpt-1.7b", "dgx-a100-80gb",      # E1: 8 ranks on each of 2 nodes
                        Strategy(dp=16, tp=1, pp=1, micro_batch=1, global_batch=64)),
    "tp-across-nodes-zero3": ("gpt-7.5b", "dgx-a100-80gb",  # E1: a tp group of 16 over 2 nodes
                              Strategy(dp=4, tp=16, pp=1, micro_batch=1, global_batch=64, zero=3,
                                       sequence_parallel=True)),
    "uneven-stage-map": ("tiny-gpt", "classroom",
                         Strategy(dp=1, tp=2, pp=2, micro_batch=1, global_batch=8, stage_map=(0, 1, 1, 1))),
    "uneven-three-stages": ("tiny-gpt", "classroom",
                            Strategy(dp=3, tp=1, pp=3, micro_batch=1, global_batch=12, schedule="gpipe",
                                     stage_map=(0, 0, 1, 2))),
    # context parallelism (issue 10): ring attention with FlashAttention (LLaMA's default), Ulysses
    "cp-ring-flash": ("llama2-7b", "classroom",
                      Strategy(dp=1, tp=2, cp=2, pp=2, micro_batch=1, global_batch=4, sequence_parallel=True,
                               recompute="full")),
    "cp-ulysses": ("tiny-gpt", "classroom",
                   Strategy(dp=1, tp=2, cp=2, cp_algo="ulysses", pp=2, micro_batch=2, global_batch=8)),
    # the pipeline's sends overlapped with computation (issue 10, Megatron-LM overlap_p2p_comm)
    "p2p-overlap": ("gpt-1.7b", "dgx-a100-80gb",
                    Strategy(dp=2, tp=1, pp=8, micro_batch=2, global_batch=64, schedule="interleaved", chunks=3,
                             overlap_p2p=True, overlap_dp=True)),
    "p2p-overlap-sp": ("gpt3-175b", "dgx-a100-80gb",
                       Strategy(dp=16, tp=8, pp=8, micro_batch=1, global_batch=1536, schedule="interleaved",
                                chunks=2, sequence_parallel=True, recompute="selective", scatter_gather=False,
                                overlap_p2p=True)),
}


def run(case):
    preset, cluster_name, strategy = CASES[case]
    model, cluster = load_model(preset), load_cluster(cluster_name)
    return model, strategy, cluster, evaluate(model, strategy, cluster, strategy.devices)


@pytest.mark.parametrize("case", list(CASES))
def test_categories_sum_to_the_total_and_are_non_negative(case):
    """DESIGN.md: "The categories sum to the total" (the exposed seconds of the nine
    categories add up to iteration_time_s) and no category is negative."""
    *_, result = run(case)
    assert set(result.breakdown_s) == set(CATEGORIES)
    total = result.iteration_time_s
    assert total > 0
    assert sum(result.breakdown_s.values()) == pytest.approx(total, rel=1e-12)
    for category, secs in result.breakdown_s.items():
        assert secs >= 0, (category, secs)
    assert result.breakdown_s["compute"] > 0


def exactly(expr, values: dict) -> float:
    """The expression evaluated exactly: every symbol replaced by the exact rational value of
    its number (as expr.subs(values) does, but with xreplace, which is ~100x faster on the
    Max-laden bubble term), rounded to a float only at the end."""
    return float(expr.xreplace({sym: sp.Rational(x) for sym, x in values.items()}))


@pytest.mark.parametrize("case", list(CASES))
def test_symbolic_terms_equal_the_numbers(case):
    """DESIGN.md: "The lambdified numbers equal the sympy expression evaluated exactly":
    every term of explain() with its symbols replaced by their values equals the
    breakdown's category (rel 1e-9), and the total equals iteration_time_s."""
    model, strategy, cluster, result = run(case)
    sc = explain(model, strategy, cluster, strategy.devices, result)
    assert set(sc.terms) == set(CATEGORIES)
    for category, term in sc.terms.items():
        exact = exactly(term, sc.values)
        assert exact == pytest.approx(result.breakdown_s[category], rel=1e-9, abs=1e-15 * result.iteration_time_s), \
            category
    assert exactly(sc.total, sc.values) == pytest.approx(result.iteration_time_s, rel=1e-9)
    assert sc.total_latex().startswith("T_{iter} = ")


# ---- collectives ---------------------------------------------------------------------------

n_, S_, alpha, beta_ = sp.symbols("n S alpha beta", positive=True)


def test_ring_formulas_match_mpich_alpha_beta(published):
    """pmodels/mpich allgather_intra_ring.c and Thakur, Rabenseifner & Gropp 2005
    (mpich_alpha_beta): ring all-gather (p-1) alpha + n (p-1)/p beta; ring all-reduce
    (reduce-scatter ring + all-gather ring) 2(p-1) alpha + 2(p-1)/p n beta (no gamma: the
    reduction arithmetic is not charged)."""
    assert "ring allgather" in published["mpich_alpha_beta"]["expected"]
    p_ = n_  # group size
    ag = coll.time("all_gather", S_, p_, beta_, alpha)
    assert sp.simplify(ag - ((p_ - 1) * alpha + S_ * (p_ - 1) / p_ * beta_)) == 0
    ar = coll.time("all_reduce", S_, p_, beta_, alpha)
    assert sp.simplify(ar - (2 * (p_ - 1) * alpha + 2 * (p_ - 1) / p_ * S_ * beta_)) == 0
    rs = coll.time("reduce_scatter", S_, p_, beta_, alpha)
    assert sp.simplify(ar - rs - ag) == 0           # all-reduce = reduce-scatter + all-gather
    assert sp.simplify(coll.time("p2p", S_, 2, beta_, alpha) - (S_ * beta_ + alpha)) == 0


@pytest.mark.parametrize("kind,factor", [
    ("all_reduce", 2 * (n_ - 1) / n_), ("reduce_scatter", (n_ - 1) / n_),
    ("all_gather", (n_ - 1) / n_), ("all_to_all", (n_ - 1) / n_), ("p2p", sp.Integer(1))])
def test_bytes_follow_nccl_bus_bandwidth_factors(published, kind, factor):
    """NVIDIA nccl-tests doc/PERFORMANCE.md (nccl_busbw): bytes per rank = S x bus factor,
    all-reduce 2(n-1)/n, reduce-scatter / all-gather / all-to-all (n-1)/n, S the total
    array size."""
    assert published["nccl_busbw"]["expected"]["allreduce"].startswith("t = (S/B) * 2(n-1)/n")
    assert sp.simplify(coll.bytes_per_device(kind, S_, n_) - factor * S_) == 0
    # time at zero latency is the nccl lower bound t = S/B x factor (B = 1/beta)
    assert sp.simplify(coll.time(kind, S_, n_, beta_, 0) - factor * S_ * beta_) == 0


def test_dp_ring_time_scales_with_one_minus_one_over_d():
    """Narayanan et al. SC'21 Sec 3.3.1 (ptdp_dp_ring_scaling): ring all-reduce time scales
    with (d-1)/d = 1 - 1/d."""
    d_ = sp.Symbol("d", positive=True)
    ratio = coll.time("all_reduce", S_, d_, beta_, 0) / (2 * S_ * beta_)
    assert sp.simplify(ratio - (1 - 1 / d_)) == 0


# ---- device count ---------------------------------------------------------------------------

@pytest.mark.parametrize("dp,tp,pp,gpus", [(2, 2, 2, 10), (1, 4, 1, 8), (3, 1, 2, 5), (1, 1, 1, 2)])
def test_device_count_mismatch_is_refused(dp, tp, pp, gpus):
    """DESIGN.md: "d . t . p multiply to the device count; an invalid strategy is refused
    with a message naming the offending value"."""
    strategy = Strategy(dp=dp, tp=tp, pp=pp, micro_batch=1, global_batch=dp * 4)
    with pytest.raises(ExplorerError) as err:
        evaluate(load_model("tiny-gpt"), strategy, load_cluster("classroom"), gpus)
    message = str(err.value)
    assert f"{dp} x {tp} x {pp} = {dp * tp * pp}" in message
    assert str(gpus) in message
    assert "\n" not in message


def test_subs_gives_the_same_numbers():
    """explain()'s documented use, float(term.subs(values)), agrees with exactly() (one
    small case: subs is slow on large expressions)."""
    model, strategy, cluster, result = run("tiny-mlp")
    sc = explain(model, strategy, cluster, strategy.devices, result)
    for category, term in sc.terms.items():
        assert float(term.subs(sc.values)) == pytest.approx(exactly(term, sc.values), rel=1e-12, abs=1e-18)
