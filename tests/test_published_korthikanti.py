"""Activation memory of Korthikanti et al., 'Reducing Activation Recomputation in Large
Transformer Models', MLSys'23 (arXiv:2205.05198): Table 2 and Eqs. (1)-(6),
published.json entry kor_act_mem_formulas.

Per-layer bytes come from block_cost(layer, preset, (), sequence_parallel, recompute,
incoming).act_bytes, with incoming 'S:seq' under sequence parallelism (the residual
stream arrives sharded by sequence) and 'R' otherwise; the symbols are replaced by
numbers with a_kv = a (no GQA), f = 4h and beta = 2 (16-bit activations).
"""
from fractions import Fraction

import pytest
import sympy as sp

from explorer import ModelSpec, Strategy, evaluate, load_cluster, load_model
from explorer.cost.block import block_cost
from explorer.model.graph import build_blocks
from explorer.symbols import a, a_kv, b, beta, f, h, s, t

MiB = 2 ** 20
GPT = ModelSpec(name="kor", family="gpt", layers=2, hidden=64, heads=4, seq_len=32, vocab=100)
LAYER = next(block for block in build_blocks(GPT) if block.kind == "layer")


def formulas(s_, b_, h_, a_, t_) -> dict:
    """Korthikanti et al. Table 2 (kor_act_mem_formulas), bytes per layer, exact."""
    sbh, att = s_ * b_ * h_, Fraction(5 * a_ * s_, h_)
    return {
        "none": sbh * (34 + att),                                     # Eq. (1)
        "tp": sbh * (10 + Fraction(24, t_) + att / t_),               # Eq. (2)
        "tp+sp": sbh * (34 + att) / t_,                               # Eq. (4)
        "tp+selective": sbh * (10 + Fraction(24, t_)),                # Table 2
        "tp+sp+selective": Fraction(34 * sbh, t_),                    # Eq. (6)
        "full": 2 * sbh,                                              # Table 2
    }


CASES = {  # name -> (preset, sequence_parallel, recompute)
    "none": ("replicated", False, "none"),
    "tp": ("megatron", False, "none"),
    "tp+sp": ("megatron", True, "none"),
    "tp+selective": ("megatron", False, "selective"),
    "tp+sp+selective": ("megatron", True, "selective"),
    "full": ("megatron", False, "full"),
}


def layer_act_bytes(case: str, s_, b_, h_, a_, t_) -> sp.Rational:
    preset, seq_par, recompute = CASES[case]
    cost = block_cost(LAYER, preset, (), seq_par, recompute, "S:seq" if seq_par else "R")
    numbers = {s: s_, b: b_, h: h_, a: a_, a_kv: a_, f: 4 * h_, beta: 2, t: t_}
    return sp.Rational(cost.act_bytes.subs(numbers))


def as_rational(x: Fraction) -> sp.Rational:
    return sp.Rational(x.numerator, x.denominator)


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("s_,b_,h_,a_,t_", [
    (2048, 4, 6144, 64, 8),      # 22B of Korthikanti Table 3
    (2048, 1, 12288, 96, 8),     # GPT-3 175B
    (2048, 1, 20480, 128, 8),    # MT-NLG 530B
    (512, 2, 1024, 16, 2),
    (128, 3, 768, 12, 4),
    (1000, 5, 96, 6, 3),
])
def test_per_layer_activation_bytes_match_table2(case, s_, b_, h_, a_, t_):
    """Korthikanti et al. MLSys'23 Eqs. (1),(2),(4),(5),(6) and Table 2 (kor_act_mem_formulas):
    exact equality, bytes per transformer layer per micro-batch per device."""
    assert layer_act_bytes(case, s_, b_, h_, a_, t_) == as_rational(formulas(s_, b_, h_, a_, t_)[case])


@pytest.mark.parametrize("s_,b_,h_,a_", [(2048, 4, 6144, 64), (512, 2, 1024, 16)])
def test_megatron_preset_at_degree_one_is_no_parallelism(s_, b_, h_, a_):
    """kor_act_mem_formulas (Korthikanti et al. Eq. (1)): t = 1 gives sbh(34 + 5as/h) for the
    megatron preset too, with and without sequence parallelism."""
    expected = as_rational(formulas(s_, b_, h_, a_, 1)["none"])
    for case in ("tp", "tp+sp"):
        assert layer_act_bytes(case, s_, b_, h_, a_, 1) == expected


def test_per_layer_activation_bytes_symbolic():
    """kor_act_mem_formulas (Korthikanti et al. Table 2), as expressions in s, b, h, a, t."""
    sbh = s * b * h
    expected = {"none": sbh * (34 + 5 * a * s / h), "tp": sbh * (10 + 24 / t + 5 * a * s / (h * t)),
                "tp+sp": sbh * (34 + 5 * a * s / h) / t, "tp+selective": sbh * (10 + 24 / t),
                "tp+sp+selective": 34 * sbh / t, "full": 2 * sbh}
    for case, (preset, seq_par, recompute) in CASES.items():
        cost = block_cost(LAYER, preset, (), seq_par, recompute, "S:seq" if seq_par else "R")
        got = cost.act_bytes.subs({a_kv: a, f: 4 * h, beta: 2})
        assert sp.simplify(got - expected[case]) == 0, case


# The derived MiB per layer of the entry's notes, at s = 2048 (kor_act_mem_formulas notes):
# 22B (b=4, t=8): none 6752, tp 1264, tp+sp 844, tp+sel 624, tp+sp+sel 204, full 96;
# 175B (b=1, t=8): 2736 / 552 / 342 / 312 / 102 / 48.
NOTES_MIB = {
    ("megatron-22b", 4): dict(zip(CASES, (6752, 1264, 844, 624, 204, 96))),
    ("gpt3-175b", 1): dict(zip(CASES, (2736, 552, 342, 312, 102, 48))),
}


@pytest.mark.parametrize("preset,b_", list(NOTES_MIB))
def test_derived_mib_per_layer_of_the_notes(published, preset, b_):
    """kor_act_mem_formulas notes (derived from Korthikanti et al. Table 2 for the Table 3
    configurations, t = 8): per-layer MiB, to the integer MiB the notes print."""
    assert "Derived per-layer MiB" in published["kor_act_mem_formulas"]["notes"]
    model = load_model(preset)
    for case, mib in NOTES_MIB[(preset, b_)].items():
        got = layer_act_bytes(case, model.seq_len, b_, model.hidden, model.heads, 8) / MiB
        assert round(float(got)) == mib, case


# ---- whole first stage: Eq. (5) and the interleaved factor ------------------------------------

def eq5(model, b_, t_) -> float:
    """Korthikanti et al. Eq. (5) (kor_act_mem_formulas): the first 1F1B stage holds
    s b h L / t (34 + 5 a s / h) bytes (TP + SP), independent of p."""
    s_, h_, a_, L_ = model.seq_len, model.hidden, model.heads, model.layers
    return s_ * b_ * h_ * L_ / t_ * (34 + 5 * a_ * s_ / h_)


def eq5_extras(model, b_, t_, pp) -> float:
    """The 'extra (embeddings/last LN/output)' line of kor_act_mem_formulas (Korthikanti et
    al. Sec 4.3): s b h L/t (p/L + delta_{p=1} 4/L (1 + V/h)) -- the paper's lower-case v
    there is the vocabulary size. p embedding-dropout masks in flight; for p = 1 the
    first stage also holds the final LayerNorm and logit inputs and the fp32 loss input."""
    s_, h_, V_ = model.seq_len, model.hidden, model.vocab
    return s_ * b_ * h_ / t_ * (pp + (4 * (1 + V_ / h_) if pp == 1 else 0))


def first_stage_activations(model, b_, t_, pp):
    m_ = 4 * pp  # enough micro-batches that the first stage holds p of them
    strategy = Strategy(dp=1, tp=t_, pp=pp, micro_batch=b_, global_batch=b_ * m_,
                        schedule="1f1b", sequence_parallel=True)
    return evaluate(model, strategy, load_cluster("dgx-a100-80gb"), t_ * pp).memory_by_stage[0]["activations"]


@pytest.mark.parametrize("preset,b_,t_,pps", [
    ("gpt3-175b", 1, 8, (1, 2, 8, 16)),
    ("megatron-22b", 4, 8, (1, 2, 4, 8)),
])
def test_first_stage_activations_follow_eq5(preset, b_, t_, pps):
    """Korthikanti et al. Eq. (5) (kor_act_mem_formulas): memory_by_stage[0]['activations']
    under 1F1B with TP + SP is s b h L/t (34 + 5as/h) whatever p is; the embedding and
    (for p = 1) the head add a little: allowed within 2 %."""
    model = load_model(preset)
    for pp in pps:
        stage0 = first_stage_activations(model, b_, t_, pp)
        assert stage0 == pytest.approx(eq5(model, b_, t_), rel=0.02), pp
        assert stage0 >= eq5(model, b_, t_)


@pytest.mark.parametrize("preset,b_,t_,pps", [
    ("gpt3-175b", 1, 8, (1, 2, 8, 16)),
    ("megatron-22b", 4, 8, (1, 2, 4, 8)),
    ("tiny-gpt", 2, 2, (1, 2, 4)),
])
def test_first_stage_activations_with_the_extras_are_exact(preset, b_, t_, pps):
    """kor_act_mem_formulas (Korthikanti et al. Eq. (5) plus the embedding/last-LN/output
    term of Sec 4.3): exact to rounding, also for a small model where the extras matter."""
    model = load_model(preset)
    for pp in pps:
        expected = eq5(model, b_, t_) + eq5_extras(model, b_, t_, pp)
        assert first_stage_activations(model, b_, t_, pp) == pytest.approx(expected, rel=1e-12), pp


@pytest.mark.parametrize("pp,chunks", [(2, 2), (4, 2), (4, 3), (8, 2), (8, 4)])
def test_interleaved_first_stage_multiplier(pp, chunks):
    """Korthikanti et al. Sec 4.2.3 (kor_act_mem_formulas, 'interleaved schedule
    multiplier'): the first stage holds Eq. (5) x (1 + (p-1)/(p v)), v chunks per stage."""
    model, cluster, t_ = load_model("gpt3-175b"), load_cluster("dgx-a100-80gb"), 8
    strategy = Strategy(dp=1, tp=t_, pp=pp, micro_batch=1, global_batch=8 * pp,
                        schedule="interleaved", chunks=chunks, sequence_parallel=True)
    stage0 = evaluate(model, strategy, cluster, t_ * pp).memory_by_stage[0]["activations"]
    assert stage0 == pytest.approx(eq5(model, 1, t_) * (1 + (pp - 1) / (pp * chunks)), rel=0.02)


def test_selective_recompute_savings(published):
    """Korthikanti et al. Sec 5 (kor_selective_savings): 5as/h = 80 for GPT-3 and 64 for
    MT-NLG; selective recomputation (TP + SP) keeps 34/(34 + 5as/h) of the activations:
    savings 70 % and 65 % (to the integer percent the paper prints)."""
    entry = published["kor_selective_savings"]
    for inputs, ratio_key, saving_key in zip(entry["inputs"], ("gpt3_5as_over_h", "mtnlg_5as_over_h"),
                                             ("gpt3_memory_saving_pct", "mtnlg_memory_saving_pct")):
        s_, h_, a_ = inputs["s"], inputs["h"], inputs["a"]
        assert 5 * a_ * s_ / h_ == entry["expected"][ratio_key]
        full = layer_act_bytes("tp+sp", s_, 1, h_, a_, 8)
        kept = layer_act_bytes("tp+sp+selective", s_, 1, h_, a_, 8)
        assert round(100 * float(1 - kept / full)) == entry["expected"][saving_key]


def test_selective_recompute_flops_overhead(published):
    """Korthikanti et al. Sec 5 (kor_selective_savings): selective recomputation redoes only
    QK^T, softmax, dropout and attention over V: 4 b s^2 h FLOPs, an overhead of 2.7 % of
    the layer's forward for GPT-3 and 1.6 % for MT-NLG (one decimal, as printed)."""
    entry = published["kor_selective_savings"]
    cost = block_cost(LAYER, "megatron", (), True, "selective", "S:seq")
    for inputs, key in zip(entry["inputs"], ("gpt3_flops_overhead_pct", "mtnlg_flops_overhead_pct")):
        numbers = {b: 1, s: inputs["s"], h: inputs["h"], a: inputs["a"], a_kv: inputs["a"], f: 4 * inputs["h"]}
        overhead = cost.recompute_flops.subs(numbers) / cost.flops_fwd.subs(numbers)
        assert sp.simplify(cost.recompute_flops - 4 * b * s ** 2 * h) == 0
        assert round(100 * float(overhead), 1) == entry["expected"][key]


def test_full_recompute_overhead_is_30_to_40_percent(published):
    """Korthikanti et al. Sec 5 (kor_selective_savings 'full_recompute_overhead': 30-40 %):
    hardware FLOPs exceed model FLOPs by about a third (one more forward of each layer)."""
    assert published["kor_selective_savings"]["expected"]["full_recompute_overhead"] == "30-40%"
    cluster = load_cluster("dgx-a100-80gb")
    for preset in ("gpt3-175b", "turing-530b", "megatron-22b"):
        model = load_model(preset)
        strategy = Strategy(dp=1, tp=8, pp=8, micro_batch=1, global_batch=8, recompute="full")
        result = evaluate(model, strategy, cluster, 64)
        overhead = result.hardware_flops_per_iteration / result.model_flops_per_iteration - 1
        assert 0.30 <= overhead <= 0.40, (preset, overhead)


@pytest.mark.parametrize("pp,m_", [(4, 8), (4, 16), (8, 8), (2, 1)])
def test_gpipe_keeps_m_micro_batches_1f1b_at_most_p(pp, m_):
    """Narayanan et al. SC'21 Sec 2.2.1 (ptdp_bubble_gpipe_1f1b): 1F1B stashes activations
    for at most p micro-batches on the first stage (p - r on stage r), GPipe for all m."""
    model, cluster = load_model("tiny-gpt"), load_cluster("classroom")
    model = ModelSpec(**{**model.to_dict(), "layers": 8, "stage_blocks": ()})
    acts = {}
    for schedule in ("gpipe", "1f1b"):
        strategy = Strategy(dp=1, tp=1, pp=pp, micro_batch=1, global_batch=m_, schedule=schedule)
        acts[schedule] = [row["activations"] for row in evaluate(model, strategy, cluster, pp).memory_by_stage]
    for r in range(pp):
        assert acts["1f1b"][r] == pytest.approx(acts["gpipe"][r] * min(pp - r, m_) / m_, rel=1e-12)
