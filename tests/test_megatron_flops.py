"""TFLOP/s and MFU in Megatron-LM's count beside the Eq. 3 figures (issue 26, item 4).

Megatron-LM: megatron/training/training.py, num_floating_point_operations -> transformer_flops()
(NVIDIA/Megatron-LM at d98e8a64ddf3): causal attention core at half ("causal mask (only half of the
mask is non-zero)"), logits over the vocabulary padded to a multiple of 128 x TP. Eq. 3: Narayanan et
al. 2021 (SC'21) without the recomputation pass, full s x s attention (explorer.cost.megatron_flops).
"""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from explorer.cost.evaluate import evaluate
from explorer.cost.megatron_flops import megatron_model_flops, padded_vocab
from explorer.io.clusters import load_cluster
from explorer.io.models import load_model
from explorer.io.report import FLOPS_CONVENTIONS, result_dict
from explorer.strategy.strategy import Strategy
from explorer.validation.megatron_bridge import model_flops as bridge_model_flops

ROOT = Path(__file__).resolve().parents[1]
H100 = load_cluster("dgx-h100")


def _eq3_and_megatron(model, strategy, gpus):
    r = evaluate(model, strategy, H100, gpus)
    return r, r.model_flops_per_iteration, r.megatron_model_flops_per_iteration


def test_llama3_70b_by_hand_against_megatron_lm_formula():
    """Megatron-LM transformer_flops() (GQA branch, swiglu, no experts, no MTP), by hand for Llama 3 70B
    (L 80, h 8192, a 64, g 8, d 128, f 28672, V 128256), s 8192, TP 4, B 128:
      3 x 2 x [h (q + 2 g d) + q h]                    per token and layer: QKV and output projections
      3 x 2 x h x 3 f                                  per token and layer: SwiGLU MLP (ffn_expansion_factor 3)
      3 x 2 x h x V_pad, V_pad = ceil(V / (128 x 4)) x 512 = 128512   per token: logits
      3 x 2 x q / 2 x 2 x s^2                          per sequence and layer: causal core attention
    = 449.2 GFLOP per token (Megatron-Bridge's tables imply 449.0, 25.09 H100: assets/validation/README.md)."""
    L, h, a, g, d, f, V, s, B = 80, 8192, 64, 8, 128, 28672, 128256, 8192, 128
    q = a * d
    v_pad = -(-V // 512) * 512
    assert v_pad == 128512 == padded_vocab(V, 4)
    per_token = L * (6 * (h * (q + 2 * g * d) + q * h) + 6 * h * 3 * f) + 6 * h * v_pad
    core = L * 6 * q / 2 * 2 * s * s
    by_hand = B * (s * per_token + core)
    model = load_model("llama3-70b")
    assert megatron_model_flops(model, B, 4) == pytest.approx(by_hand, rel=1e-12)
    assert by_hand / (B * s) == pytest.approx(449.2e9, rel=5e-4)
    assert megatron_model_flops(model, B, 4) == pytest.approx(bridge_model_flops(model, 4, B), rel=1e-12)


def test_result_and_json_carry_both_counts_with_their_labels():
    model = load_model("llama3-70b")
    strategy = Strategy(dp=2, tp=4, pp=8, micro_batch=1, global_batch=128, schedule="interleaved", chunks=5, zero=1,
                        sequence_parallel=True, overlap_tp=True, overlap_dp=True)
    r, eq3, meg = _eq3_and_megatron(model, strategy, 64)
    assert meg == megatron_model_flops(model, 128, 4)
    assert r.megatron_tflops_per_gpu == pytest.approx(meg / (r.iteration_time_s * 64) / 1e12, rel=1e-12)
    assert r.megatron_mfu == pytest.approx(r.megatron_tflops_per_gpu * 1e12 / H100.device.flops("bf16"), rel=1e-12)
    assert r.megatron_tflops_per_gpu / r.tflops_per_gpu == pytest.approx(meg / eq3, rel=1e-12)
    d = result_dict(r)
    for key in ("megatron_model_flops_per_iteration", "megatron_tflops_per_gpu", "megatron_mfu"):
        assert d[key] == getattr(r, key)
        assert "Megatron-LM num_floating_point_operations" in d["flops_conventions"][key]
        assert "causal attention core counted at half" in d["flops_conventions"][key]
    for key in ("model_flops_per_iteration", "tflops_per_gpu", "mfu"):
        assert "Eq. 3" in d["flops_conventions"][key] and "full (non-causal)" in d["flops_conventions"][key]
    assert d["flops_conventions"] == FLOPS_CONVENTIONS


def _expected_ratio(model, tp: int) -> float:
    """Megatron / Eq. 3 per token: Eq. 3 counts 12 s h per layer of attention core (4 s^2 h forward, 8 backward,
    per sequence: explorer/model/graph/transformer.py), Megatron half of it, and Megatron's logits use V_pad."""
    s, h, L = model.seq_len, model.hidden, model.layers
    megatron = megatron_model_flops(model, 1, tp) / s
    eq3 = megatron + 6 * h * s * L - 6 * h * (padded_vocab(model.vocab, tp) - model.vocab)
    return megatron / eq3


@pytest.mark.parametrize("name,seq,tp,cp,gpus", [("llama3-8b", 1024, 1, 1, 8), ("llama3-70b", 131072, 8, 8, 64)])
def test_the_two_counts_agree_at_short_sequences_and_differ_as_the_formula_says_at_131k(name, seq, tp, cp, gpus):
    model = load_model(name).with_seq_len(seq)
    strategy = Strategy(dp=gpus // (tp * cp), tp=tp, cp=cp, micro_batch=1, global_batch=gpus // (tp * cp),
                        sequence_parallel=tp > 1)
    r, eq3, meg = _eq3_and_megatron(model, strategy, gpus)
    assert meg / eq3 == pytest.approx(_expected_ratio(model, tp), rel=1e-9)
    if seq <= 1024:      # attention is a few % of the FLOPs: the two agree within 2 %
        assert 0.98 <= meg / eq3 < 1
    else:                # 131k tokens: attention dominates; Megatron's count is 1 - 0.644 = 36 % lower
        assert meg / eq3 == pytest.approx(0.644, abs=0.002)
        assert r.tflops_per_gpu / r.megatron_tflops_per_gpu == pytest.approx(1 / 0.644, abs=0.01)


def test_not_defined_for_a_bidirectional_model():
    model = load_model("bert-large")
    assert megatron_model_flops(model, 8, 1) is None
    r = evaluate(model, Strategy(dp=1, micro_batch=1, global_batch=8), H100, 1)
    assert r.megatron_tflops_per_gpu is None and r.megatron_mfu is None and r.tflops_per_gpu > 0
    assert result_dict(r)["megatron_mfu"] is None


def test_moe_and_latent_attention_follow_megatron_lm_terms():
    """DeepSeek-V3 (MLA, 3 dense + 58 MoE layers, top-8 of 256 plus one shared expert) without its MTP layer:
    249.8 GFLOP per token at s 4096 (assets/validation/README.md: the 25.11 'w/o MTP' rows imply 249.1-249.7,
    with V_pad = 130560 from make_vocab_size_divisible_by 1280 in Megatron-Bridge's DeepSeek provider; Megatron-LM's
    default 128 x TP gives 129280 at TP 1, 0.2 GFLOP less)."""
    model = load_model("deepseek-v3")
    per_token = megatron_model_flops(model, 1, 1) / 4096
    assert per_token + 6 * 7168 * (130560 - 129280) == pytest.approx(249.8e9, rel=5e-4)


def test_cli_json_has_both_numbers():
    out = subprocess.run([sys.executable, "-m", "explorer", "evaluate", "--model", "llama3-8b", "--cluster", "dgx-h100",
                          "--gpus", "8", "--micro-batch", "1", "--global-batch", "8", "--json"],
                         capture_output=True, text=True, cwd=ROOT, check=True)
    d = json.loads(out.stdout)
    assert d["megatron_tflops_per_gpu"] < d["tflops_per_gpu"] and d["megatron_mfu"] < d["mfu"]
    assert set(d["flops_conventions"]) >= {"tflops_per_gpu", "megatron_tflops_per_gpu", "mfu", "megatron_mfu"}


def test_search_json_and_tables_carry_both_conventions():
    """search --json, the search's rows and its text: Megatron-LM's count beside Eq. 3, each labelled (item 4)."""
    from explorer.search import search
    from explorer.search.report import FLOPS_CONVENTIONS as SEARCH_CONVENTIONS
    from explorer.search.report import MEGATRON_MFU_COLUMN, rows, search_dict, search_text
    model, cluster = load_model("tiny-gpt"), load_cluster("classroom")
    found = search(model, cluster, 8, 16, top=3, refine_top=1)
    d = search_dict(found, model, cluster, 8, 16)
    assert SEARCH_CONVENTIONS["megatron_mfu"].startswith("Megatron-LM") and d["flops_conventions"] == SEARCH_CONVENTIONS
    for c, row, table_row in zip(found.top, d["top"], rows(found.top)):
        r = evaluate(model, c.strategy, cluster, 8)
        assert row["megatron_mfu"] == pytest.approx(r.megatron_mfu, rel=1e-12) and row["megatron_mfu"] < row["mfu"]
        assert row["megatron_tflops_per_gpu"] == pytest.approx(r.megatron_tflops_per_gpu, rel=1e-12)
        assert row["tflops_per_gpu"] == pytest.approx(r.tflops_per_gpu, rel=1e-12)
        assert table_row[MEGATRON_MFU_COLUMN] == pytest.approx(100 * r.megatron_mfu, rel=1e-12)
    assert "Meg. %" in search_text(found, "t") and "causal attention core counted at half" in search_text(found, "t")


def test_megatron_bridge_validation_compares_megatron_counts():
    """The Megatron-Bridge rows publish TFLOP/s in Megatron's count: the prediction is the evaluation's own
    megatron_tflops_per_gpu (one spelling of the count), and each row says which convention it uses."""
    from explorer.cost.megatron_flops import CONVENTION
    from explorer.validation import load_megatron_bridge, validate
    cases = [c for c in load_megatron_bridge()[0] if c.metric == "model_tflops_per_gpu"][:3]
    assert cases
    for case, row in zip(cases, validate(cases, H100)):
        r = evaluate(case.model, case.strategy, load_cluster(case.cluster), case.gpus)
        assert row.predicted == pytest.approx(r.megatron_tflops_per_gpu, rel=1e-12)
        assert row.convention == case.convention == CONVENTION


def test_cost_page_labels_both_conventions():
    from app_util import open_page
    at = open_page("cost")
    assert not at.exception
    assert any(m.label == "MFU (Eq. 3)" for m in at.metric)
    assert any("In Megatron-LM's count" in c.value and "causal attention core counted at half" in c.value
               for c in at.caption)
    # on a projector, one short line with the conventions on hover (a walk: at 1280x720 the paragraph and the
    # metrics filled the first screen), and three significant digits
    at = open_page("cost", query={"classroom": "1"})
    line = next(c for c in at.caption if "In Megatron-LM's count" in c.value)
    assert "causal attention core counted at half" not in line.value and "counted at half" in line.help
    # the tokens the published tables list, from the model's own time: B s / (T d) (the default: gpt3-175b)
    r = at.session_state["last_valid"]
    shown = r.strategy.global_batch * r.model.seq_len / (r.result.iteration_time_s * r.result.gpus)
    assert f"{float(f'{shown:.3g}'):g}" in line.value.replace(",", "") and "tokens/s per GPU" in line.value
    tflops = next(m.value for m in at.metric if m.label.startswith("TFLOP/s per GPU"))
    assert len(tflops.replace(".", "").lstrip("0")) <= 3, tflops
