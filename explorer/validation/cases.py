"""Measured runs from published.json turned into (model, strategy, expected) cases.

Each case states the assumptions its source leaves open and how we chose them:
from the source's own text, never to fit the number.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from explorer.errors import ExplorerError
from explorer.model.spec import ModelSpec
from explorer.io.safe_load import is_regular_file, parse_text, path_exists, read_text_capped, short_repr, shown_path
from explorer.strategy.strategy import Strategy

ROOT = Path(__file__).resolve().parents[2]
BUNDLED = ROOT / "assets" / "validation" / "published.json"


@dataclass(frozen=True)
class Case:
    id: str
    group: str               # 'megatron_table1', 'korthikanti_table4' or 'megatron_bridge_<system>'
    source: str
    model: ModelSpec
    strategy: Strategy
    gpus: int
    metric: str              # 'iteration_time_s', 'layer_fwd_s', 'layer_bwd_s' or 'model_tflops_per_gpu'
    expected: float
    assumptions: str
    cluster: str = ""        # the case's own cluster preset ('' = the one validate() is given)
    model_flops: float = 0.0  # the source's model FLOPs per iteration (metric 'model_tflops_per_gpu')
    subset: str = ""         # 'fitted' or 'held out' where constants were fitted on some rows
    convention: str = ""     # the FLOPs convention of a TFLOP/s metric (explorer.cost.megatron_flops), '' = none


def cases_from_file(path, case_of) -> list:
    """`case_of(entry)` for every entry of a bundled JSON list of published runs (bf16_dense.json, moe_ab_h100.json):
    a file that is not such a list, or an entry that is not what its builder reads, is refused in one line naming
    the file and the entry."""
    entries = parse_text(read_text_capped(path), ".json", f"cases file {path}")
    if not isinstance(entries, list):
        raise ExplorerError(f"cases file {path} must hold a JSON list of entries")
    cases = []
    for entry in entries:
        ident = short_repr(str(entry.get("id"))) if isinstance(entry, dict) else "?"
        try:
            cases.append(case_of(entry))
        except ExplorerError as err:
            raise ExplorerError(f"cases file {path}: entry {ident}: {err}") from None
        except (KeyError, TypeError, ValueError, AttributeError) as err:
            raise ExplorerError(f"cases file {path}: entry {ident} is malformed ({type(err).__name__})") from None
    return cases


def default_cases_path() -> Path:
    """The copy bundled with the repository (assets/validation/README.md says where it comes from)."""
    return BUNDLED


def load_cases(path: str | Path | None = None) -> list:
    path = Path(path) if path else default_cases_path()
    if not is_regular_file(path):         # a named pipe would block the read; a directory is not a file
        why = "not a regular file" if path_exists(path) else "no such file"
        raise ExplorerError(f"cannot read cases file {shown_path(path)}: {why}")
    entries = parse_text(read_text_capped(path), ".json", f"cases file {shown_path(path)}")   # size, depth capped
    if not isinstance(entries, list):
        raise ExplorerError(f"cases file {path} must hold a JSON list of entries")
    cases = []
    for entry in entries:
        if not isinstance(entry, dict):
            raise ExplorerError(f"cases file {path}: every entry must be an object")
        ident = str(entry.get("id", ""))
        try:
            if ident.startswith("ptdp_table1_"):
                cases.append(megatron_table1(entry))
            elif ident.startswith("kor_table4_"):
                cases += korthikanti_table4(entry)
        except ExplorerError as err:
            raise ExplorerError(f"cases file {path}: entry {short_repr(ident)}: {err}") from None
        except (KeyError, TypeError, ValueError, ArithmeticError, AttributeError) as err:
            raise ExplorerError(f"cases file {path}: entry {short_repr(ident)} is malformed "
                                f"({type(err).__name__}: {short_repr(str(err), 80)})") from None
        bad = [c.id for c in cases if not (math.isfinite(c.expected) and c.expected > 0)]
        if bad:
            raise ExplorerError(f"cases file {path}: entry {short_repr(ident)} gives a published value that is "
                                "not a positive finite number")
    return cases


# Open in Table 1: micro-batch size and interleaving. Megatron-LM's own script for
# the table, examples/sc21/run_table_1.sh (NVIDIA/Megatron-LM, commit de7dc40f,
# "scripts for sc21"), gives them per row: MBS and
# --num-layers-per-virtual-pipeline-stage (chunks v = layers / pp / that value).
TABLE1_SCRIPT = {  # params_billion -> (micro-batch, chunks v)
    1.7: (16, 1), 3.6: (16, 1), 7.5: (16, 1), 18.4: (8, 1), 39.1: (4, 1),
    76.1: (2, 3), 145.6: (2, 2), 310.1: (1, 2), 529.6: (1, 3), 1008.0: (1, 1),
}


def megatron_table1(entry: dict) -> Case:
    """Narayanan et al. SC'21 Table 1: GPT weak scaling on Selene (DGX A100 80GB).

    All rows use full activation recomputation and fp16 (run_table_1.sh,
    CONFIG.sh); pipelined rows with chunks > 1 use the interleaved schedule
    with scatter/gather. The expected iteration time is derived:
    Eq. 3 FLOPs / (TFLOP/s per GPU x GPUs).
    """
    x = entry["inputs"]
    layers, hidden, heads = int(x["layers"]), int(x["hidden_size"]), int(x["attention_heads"])
    s, V, B = int(x["seq_len"]), int(x["vocab"]), int(x["global_batch_size"])
    t, p, n = int(x["tensor_parallel"]), int(x["pipeline_parallel"]), int(x["num_gpus"])
    micro, chunks = TABLE1_SCRIPT[float(x["params_billion"])]
    model = ModelSpec(name=f"gpt-{x['params_billion']}b", family="gpt", layers=layers, hidden=hidden,
                      heads=heads, seq_len=s, vocab=V)
    strategy = Strategy(dp=n // (t * p), tp=t, pp=p, micro_batch=micro, global_batch=B,
                        schedule="interleaved" if chunks > 1 else "1f1b", chunks=chunks,
                        recompute="full", scatter_gather=True, dtype="fp16")
    flops = 96 * B * s * layers * hidden ** 2 * (1 + s / (6 * hidden) + V / (16 * layers * hidden))
    expected = flops / (entry["expected"]["teraflops_per_gpu"] * 1e12 * n)   # Eq. 3 / (X n)
    why = (f"micro-batch {micro}, {'interleaved v=' + str(chunks) if chunks > 1 else '1F1B'} "
           "(Megatron-LM examples/sc21/run_table_1.sh); full recomputation; fp16; "
           "expected time = Eq.3 FLOPs / (TFLOP/s x GPUs)")
    return Case(entry["id"], "megatron_table1", entry["source"], model, strategy, n,
                "iteration_time_s", expected, why)


KOR_ROWS = {
    # Table 4 row -> (sequence_parallel, recompute)
    "baseline no recompute": (False, "none"),
    "sequence parallelism": (True, "none"),
    "baseline with recompute": (False, "full"),
    "selective recompute": (False, "selective"),
    "selective + sequence": (True, "selective"),
}


def korthikanti_table4(entry: dict) -> list:
    """Korthikanti et al. MLSys'23 Table 4: one layer of the 22B model (Table 3:
    48 layers, h 6144, 64 heads, s 2048), t = 8, micro-batch 4; forward and
    backward milliseconds. Nothing is left open."""
    model = ModelSpec(name="megatron-22b", family="gpt", layers=48, hidden=6144, heads=64,
                      seq_len=2048, vocab=51200)
    cases = []
    for row, values in entry["expected"].items():
        sequence_parallel, recompute = KOR_ROWS[row]
        # framework megatron-lm: the runs' Megatron-LM (2022) reduced a column-parallel linear's input gradient
        # under its weight gradient (explorer/strategy/frameworks.py ASYNC_DGRAD; commit 02bb1f5c86, 2022-03)
        strategy = Strategy(dp=1, tp=8, pp=1, micro_batch=4, global_batch=4, framework="megatron-lm",
                            sequence_parallel=sequence_parallel, recompute=recompute)
        for metric, ms in (("layer_fwd_s", values[0]), ("layer_bwd_s", values[1])):
            cases.append(Case(f"{entry['id']}:{row}:{metric[6:9]}", "korthikanti_table4", entry["source"],
                              model, strategy, 8, metric, ms / 1e3,
                              "per-layer time of one transformer layer (t=8, b=4, s=2048) as stated"))
    return cases
