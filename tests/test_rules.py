"""One table of strategy rules: evaluate() and the search accept exactly the same strategies.

Every raw choice of the search's grid is built as a Strategy and checked as evaluate()
checks it; it is accepted iff the search keeps it, and a refused one is counted by the
search under the reason of the first rule it breaks.
"""
import itertools
from collections import Counter

import pytest

from explorer import ExplorerError, ModelSpec, Strategy, evaluate, load_cluster, load_model
from explorer.search.space import OVERLAPS, SEQ_PAR, ZEROS, _schedules, divisors, enumerate_space, layouts
from explorer.strategy import rules
from explorer.strategy.strategy import RECOMPUTE

SIX = ModelSpec(name="six", family="gpt", layers=6, hidden=64, heads=4, seq_len=16, vocab=100)


def first_reason(model, fields, gpus):
    """The reason evaluate() refuses these fields (None if it accepts them)."""
    view = rules.view(**fields)
    for rule in rules.RULES:
        if rule.broken(view, model):
            return rule.reason
    try:
        rules.check(model, Strategy(**fields), gpus)
    except ExplorerError as err:
        raise AssertionError(f"a refusal the table did not name: {err}")
    return None


@pytest.mark.parametrize("model,gpus,batch", [(load_model("tiny-gpt"), 8, 8), (SIX, 4, 8), (SIX, 6, 12),
                                              (load_model("tiny-mlp"), 4, 16)])
def test_search_and_evaluate_accept_the_same_strategies(model, gpus, batch):
    space = enumerate_space(model, gpus, batch)
    kept = {(f.tp, f.pp, b, f.schedule, f.chunks, f.pipeline_layout, z, f.recompute, f.sequence_parallel, o)
            for f in space.families for b in f.micro_batches for z in f.zeros for o in f.overlaps}
    reasons = Counter()
    accepted = set()
    for tp in divisors(gpus):
        for pp in divisors(gpus // tp):
            for b, (schedule, chunks), zero, recompute, seq, overlap, layout in (
                    (*x, layout) for x in itertools.product(divisors(batch), _schedules(model.layers), ZEROS,
                                                            RECOMPUTE, SEQ_PAR, OVERLAPS)
                    for layout in ("",) + layouts(model, pp, *x[1])):     # Megatron's first/last-stage layouts
                fields = dict(dp=gpus // (tp * pp), tp=tp, pp=pp, micro_batch=b, global_batch=batch,
                              schedule=schedule, chunks=chunks, zero=zero, recompute=recompute,
                              sequence_parallel=seq, overlap_dp=overlap, pipeline_layout=layout)
                reason = first_reason(model, fields, gpus)
                if reason is None:
                    accepted.add((tp, pp, b, schedule, chunks, layout, zero, recompute, seq, overlap))
                else:
                    reasons[reason] += 1
    assert accepted == kept
    assert reasons == Counter({k: n for k, n in space.pruned.items() if n})


SEVEN = ModelSpec(name="seven", family="gpt", layers=7, hidden=64, heads=4, seq_len=16, vocab=100)


def test_the_interleave_disagreement_is_fixed():
    """7 layers on p = 2 with v = 2 chunks: 4 model chunks of unequal size, and 9 pieces with the embedding and
    the loss (Megatron's account_for_embedding/loss_in_pipeline_split) do not split either; evaluate() used to
    accept what the search pruned, now both refuse, naming the flags that would say how."""
    strategy = Strategy(dp=1, tp=1, pp=2, micro_batch=1, global_batch=4, schedule="interleaved", chunks=2)
    with pytest.raises(ExplorerError, match="equal model chunks.*--pipeline-layout"):
        evaluate(SEVEN, strategy, load_cluster("classroom"))
    pruned = enumerate_space(SEVEN, 2, 4).pruned
    assert pruned[rules.UNEVEN] > 0


def test_six_layers_in_four_chunks_run_with_the_embedding_and_loss_as_members():
    """6 layers on p = 2, v = 2: E t | t t | t t | t L (explorer.cost.placement.layout_of), the same evaluation as
    that layout given explicitly, and the search keeps what evaluate() accepts."""
    cluster = load_cluster("classroom")
    strategy = Strategy(dp=1, tp=1, pp=2, micro_batch=1, global_batch=4, schedule="interleaved", chunks=2)
    default = evaluate(SIX, strategy, cluster)
    given = evaluate(SIX, strategy.with_(pipeline_layout="Et|tt|tt|tL"), cluster)
    assert default.iteration_time_s == given.iteration_time_s
    assert enumerate_space(SIX, 2, 4).pruned[rules.UNEVEN] == 0


def test_a_strategy_is_checked_once_per_evaluation(monkeypatch):
    calls = []
    real = rules.check
    monkeypatch.setattr(rules, "check", lambda *a, **k: calls.append(1) or real(*a, **k))
    evaluate(load_model("tiny-gpt"), Strategy(dp=2, tp=2, pp=2, global_batch=8), load_cluster("classroom"))
    assert len(calls) == 1
