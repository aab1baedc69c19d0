"""The super-step timeline in numbers (explorer/timeline/layout.py, events.EventTable, export).

The bytes, machine levels and chunk blocks the timeline draws come from the cost tree's numeric view
(block quantities and boundary groups, explorer.cost.cold); priced instead collective by collective over
the plan (explorer.timeline.numbers, what the micro-steps draw), they must be the same. The events are
numpy columns until a chart asks for a DataFrame, and the exports write the same text from either; with
the disk cache warm, `timeline --json` imports neither sympy, networkx nor pandas (issue 14)."""
import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from explorer import Strategy, evaluate, load_cluster, load_model
from explorer.cost import collectives as coll
from explorer.cost.collectives import cp_kind
from explorer.cost.tree import cost_tree, payer
from explorer.model.spec import ModelSpec
from explorer.timeline import EventTable, export, superstep_events, superstep_table, to_csv, to_json
from explorer.timeline.events import COLUMNS, table
from explorer.timeline.experts import expert_numbers
from explorer.cost.evaluation import evaluation
from explorer.timeline.layout import context, pass_layout
from explorer.timeline.numbers import block_numbers, boundary_numbers
from explorer.timeline.parts import CP_PART, PART_CATEGORIES
from explorer.timeline.schedules import B, F

ROOT = Path(__file__).resolve().parents[1]
TINY_MOE = ModelSpec(name="tiny-moe", family="llama", layers=4, hidden=512, heads=8, seq_len=256, vocab=1000,
                     ffn_hidden=1024, kv_heads=4, experts=16, experts_per_token=2, moe_ffn_hidden=256,
                     shared_experts=1, first_dense_layers=1)
CASES = [   # dense, interleaved, ZeRO-3 with recompute, ring and Ulysses cp, p2p overlap, tied, MoE
    ("gpt3-175b", "dgx-a100-80gb", dict(dp=2, tp=8, pp=8, global_batch=64, schedule="interleaved", chunks=2)),
    ("gpt3-175b", "dgx-a100-80gb", dict(dp=8, tp=8, pp=1, global_batch=64, zero=3, sequence_parallel=True,
                                        recompute="full")),
    ("llama3-8b", "dgx-h100", dict(dp=8, tp=8, pp=2, cp=2, global_batch=512, sequence_parallel=True, zero=1)),
    ("llama3-8b", "dgx-h100", dict(dp=2, tp=2, pp=2, cp=4, cp_algo="ulysses", global_batch=16,
                                   sequence_parallel=True)),
    ("llama3-8b", "dgx-h100", dict(dp=2, tp=4, pp=4, global_batch=32, overlap_p2p=True, scatter_gather=False,
                                   schedule="interleaved", chunks=2)),
    ("bert-large", "dgx-a100-80gb", dict(dp=2, tp=2, pp=2, global_batch=8)),
    (TINY_MOE, "dgx-h100", dict(dp=8, tp=1, pp=2, ep=4, micro_batch=2, global_batch=32)),
    ("mixtral-8x7b", "dgx-h100", dict(dp=8, tp=2, pp=4, ep=4, global_batch=64, sequence_parallel=True)),
]


def _case(case):
    name, cluster, fields = case
    model = name if isinstance(name, ModelSpec) else load_model(name)
    return model, Strategy(**fields), load_cluster(cluster)


def _by_collective(the_plan, nums):
    """Bytes (stages x passes x parts), levels and chunk blocks summed over the plan's collectives one by
    one, each where the micro-steps draw it."""
    p = the_plan.strategy.pp
    nbytes = np.zeros((p, 3, len(PART_CATEGORIES)))
    names = [[set() for _ in PART_CATEGORIES] for _ in range(p)]

    def add(stage, c, cn):
        j = PART_CATEGORIES.index(c.category)
        nbytes[stage, F if c.phase == "fwd" else B, j] += cn.bytes
        names[stage][j].update(cn.levels())

    ops = np.full((p, the_plan.strategy.chunks), "", dtype=object)
    for placed in the_plan.blocks:
        steps, _ = block_numbers(placed, nums, the_plan.strategy.cp_algo)
        for step in steps:
            for cn in step.collectives:
                add(placed.stage, cn.coll, cn)
            if step.cp_fwd_bytes or step.cp_bwd_bytes:
                nbytes[placed.stage, F, CP_PART] += step.cp_fwd_bytes
                nbytes[placed.stage, B, CP_PART] += step.cp_bwd_bytes
                shares = coll.level_shares(cp_kind(the_plan.strategy.cp_algo), placed.cp_route)
                names[placed.stage][CP_PART].update(i for i, w in enumerate(shares) if w)
        cur = ops[placed.stage, placed.chunk]
        ops[placed.stage, placed.chunk] = placed.block.name if not cur else f"{cur.split('..')[0]}..{placed.block.name}"
    for boundary in the_plan.boundaries:
        for cn in boundary_numbers(boundary, nums):
            add(payer(boundary, cn.coll), cn.coll, cn)
    for cn, stage in expert_numbers(the_plan, nums):
        add(stage, cn.coll, cn)
    levels = np.array([["+".join(nums.level_names[k] for k in sorted(s)) for s in row] for row in names],
                      dtype=object)
    return nbytes, levels, ops


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0] if isinstance(c[0], str) else c[0].name}")
def test_the_layout_is_the_plan_priced_collective_by_collective(case):
    model, strategy, cluster = _case(case)
    nums = context(model, strategy, cluster)
    layout = pass_layout(model, strategy, evaluation(model, strategy, cluster))
    nbytes, levels, ops = _by_collective(cost_tree(model, strategy, cluster).plan, nums)
    assert nbytes.any()
    np.testing.assert_allclose(layout.bytes, nbytes, rtol=1e-12, atol=0)
    assert layout.levels.tolist() == levels.tolist()
    assert layout.operators.tolist() == ops.tolist()


def test_the_table_and_its_frame_hold_the_same_events():
    model, cluster = load_model("gpt3-175b"), load_cluster("dgx-a100-80gb")
    strategy = Strategy(dp=2, tp=8, pp=8, global_batch=64, schedule="interleaved", chunks=2, overlap_dp=True)
    events = superstep_table(model, strategy, cluster)
    frame = superstep_events(model, strategy, cluster)
    assert isinstance(events, EventTable) and len(events) == len(frame) > 100
    assert list(frame.columns) == list(COLUMNS)
    for name in COLUMNS:
        assert frame[name].tolist() == events[name].tolist()
    assert frame.dtypes["stage"] == np.int64 and frame.dtypes["hidden"] == bool
    # sorted by stage, row, start
    keys = list(zip(events["stage"].tolist(), events["row"].tolist(), events["start_s"].tolist()))
    assert keys == sorted(keys)
    hidden = events[events["hidden"]]
    assert isinstance(hidden, EventTable) and 0 < len(hidden) < len(events) and hidden["hidden"].all()


def test_a_given_result_s_evaluation_is_reused_not_rebuilt(monkeypatch):
    """superstep_table(result=evaluate(...)) reads the Result's own Evaluation (explorer.cost.evaluate.evaluation_of):
    build_evaluation runs once for the Result and not again for the timeline; the events are the same."""
    import explorer.cost.evaluation as evaluation_module
    model, cluster = load_model("gpt3-175b"), load_cluster("dgx-a100-80gb")
    strategy = Strategy(dp=2, tp=8, pp=8, global_batch=64, schedule="interleaved", chunks=2, overlap_dp=True)
    fresh = superstep_table(model, strategy, cluster)
    calls = []
    real = evaluation_module.build_evaluation
    monkeypatch.setattr(evaluation_module, "build_evaluation", lambda *a, **k: calls.append(1) or real(*a, **k))
    monkeypatch.setattr("explorer.cost.evaluate.build_evaluation", evaluation_module.build_evaluation)
    result = evaluate(model, strategy, cluster)
    assert len(calls) == 1
    events = superstep_table(model, strategy, cluster, result=result)
    assert len(calls) == 1                            # the old code built a second Evaluation here
    assert events["end_s"].tolist() == fresh["end_s"].tolist() and events["level"].tolist() == fresh["level"].tolist()
    superstep_table(model, strategy, cluster)         # without a Result it builds its own
    assert len(calls) == 2


def test_the_exports_write_what_pandas_reads_back():
    model, strategy, cluster = _case(CASES[2])
    events = superstep_table(model, strategy, cluster)
    frame = events.to_frame()
    text = to_csv(events)
    assert text == frame.to_csv(index=False) == to_csv(frame)       # the same text as pandas writes
    back = pd.read_csv(io.StringIO(text), keep_default_na=False)
    assert back["end_s"].tolist() == frame["end_s"].tolist()
    records = json.loads(to_json(events))
    assert to_json(frame) == to_json(events)
    assert [r["start_s"] for r in records] == frame["start_s"].tolist()     # full precision
    assert {r["level"] for r in records} == set(frame["level"])
    assert export(events, "chrome-trace") == export(frame, "chrome-trace")


def test_a_table_refuses_nothing_it_can_hold_and_quotes_what_csv_needs():
    t = table({"start_s": [0.0], "end_s": [1.5], "operator": 'a,"b"', "kind": "forward"})
    row = next(csv.DictReader(io.StringIO(to_csv(t))))
    assert row["operator"] == 'a,"b"' and row["duration_s"] == "1.5"
    empty = table({"start_s": np.zeros(0), "end_s": np.zeros(0)})
    assert len(empty) == 0 and json.loads(to_json(empty)) == []


PROBE = """
import contextlib, io, json, sys
from explorer.cli.main import main
out, err = io.StringIO(), io.StringIO()
with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
    code = main(sys.argv[1:])
heavy = sorted(m for m in ("sympy", "networkx", "pandas") if m in sys.modules)
print(json.dumps([code, heavy, out.getvalue(), err.getvalue()]))
"""


def test_timeline_json_with_a_warm_cache_imports_no_sympy_nor_pandas(tmp_path):
    env = dict(os.environ, BRIDGING_DL_CACHE=str(tmp_path / "cache"), PYTHONPATH=str(ROOT))
    args = ["timeline", "--model", "tiny-gpt", "--cluster", "classroom", "--gpus", "8", "--tp", "2", "--pp", "2",
            "--dp", "2", "--global-batch", "8", "--schedule", "interleaved", "--chunks", "2", "--json"]
    runs = [json.loads(subprocess.run([sys.executable, "-c", PROBE] + args, env=env, cwd=ROOT, check=True,
                                      capture_output=True, text=True, timeout=300).stdout) for _ in range(2)]
    (code, heavy, first, _), (code_again, heavy_again, again, lines) = runs
    assert code == code_again == 0
    assert "sympy" in heavy and heavy_again == []                 # cold: built with sympy; warm: from disk
    assert again == first
    model, cluster = load_model("tiny-gpt"), load_cluster("classroom")
    strategy = Strategy(dp=2, tp=2, pp=2, global_batch=8, schedule="interleaved", chunks=2)
    assert json.loads(again) == json.loads(to_json(superstep_events(model, strategy, cluster)))
    assert f"cost model iteration time (interleaved): {evaluate(model, strategy, cluster).iteration_time_s:.6g} s" \
        in lines


def test_the_micro_steps_are_a_table_too():
    from explorer.timeline import microstep_events, microstep_table
    model, strategy, cluster = _case(CASES[2])
    events = microstep_table(model, strategy, cluster, layer=1)
    frame = microstep_events(model, strategy, cluster, layer=1)
    assert isinstance(events, EventTable) and len(events) == len(frame) > 0
    assert to_csv(events) == frame.to_csv(index=False)
    assert set(events["category"].tolist()) >= {"compute", "op_comm", "cp_comm"}
