"""evaluate_batch gives exactly evaluate()'s numbers, whatever mix of strategies it is given."""
import numpy as np

from explorer import LayerSplit, Strategy, evaluate, load_cluster, load_model
from explorer.cost.evaluate import evaluate_batch

A100 = load_cluster("dgx-a100-80gb")
GPT = load_model("gpt-1.7b")


def test_mixed_dp_micro_batch_structure_zero_and_overlap():
    base = Strategy(tp=4, pp=2, dp=1, micro_batch=1, global_batch=64)
    strategies = [base, base.with_(dp=4), base.with_(dp=2, micro_batch=2), base.with_(dp=8, zero=1),
                  base.with_(dp=4, overlap_dp=True),
                  Strategy(tp=8, pp=1, dp=1, micro_batch=1, global_batch=64, schedule="gpipe"),
                  base.with_(layer_splits=(LayerSplit(4),) * 12 + (LayerSplit(2, "column"),) * 12)]
    batch = evaluate_batch(GPT, strategies, A100)
    single = [evaluate(GPT, s, A100) for s in strategies]
    assert np.array_equal(batch.iteration_time_s, [r.iteration_time_s for r in single])
    assert np.array_equal(batch.peak_memory_bytes, [r.memory_bytes_per_device["total"] for r in single])
    assert np.allclose(batch.mfu, [r.mfu for r in single], rtol=1e-12)
    assert (batch.mfu < 1).all()
    for c, values in batch.breakdown_s.items():
        assert np.array_equal(values, [r.breakdown_s[c] for r in single]), c


def test_bubble_is_zero_without_a_pipeline():
    """p = 1: the bubble expression is zero exactly; in floating point to rounding (S_T - F_max - B_max
    sums three terms of the same stage)."""
    r = evaluate(load_model("llama2-7b"), Strategy(tp=2, dp=1, micro_batch=8, global_batch=48, schedule="gpipe",
                                                   recompute="selective", sequence_parallel=True, dtype="fp32"),
                 load_cluster("dgx-h100"))
    assert abs(r.breakdown_s["bubble"]) <= 1e-12 * r.iteration_time_s
