"""Measured runs from published.json turned into (model, strategy, expected) cases.

Each case states the assumptions its source leaves open and how we chose them:
from the source's own text, never to fit the number.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from ..errors import ExplorerError
from ..model_spec import ModelSpec
from ..strategy import Strategy

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared" / "validation" / "published.json"
BUNDLED = ROOT / "assets" / "validation" / "published.json"


@dataclass(frozen=True)
class Case:
    id: str
    group: str               # 'megatron_table1' or 'korthikanti_table4'
    source: str
    model: ModelSpec
    strategy: Strategy
    gpus: int
    metric: str              # 'iteration_time_s', 'layer_fwd_s' or 'layer_bwd_s'
    expected: float
    assumptions: str


def default_cases_path() -> Path:
    return SHARED if SHARED.exists() else BUNDLED


def load_cases(path: str | Path | None = None) -> list:
    path = Path(path) if path else default_cases_path()
    try:
        entries = json.loads(path.read_text())
    except OSError as err:
        raise ExplorerError(f"cannot read cases file {path}: {err.strerror or err}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ExplorerError(f"cases file {path} is not valid JSON: {err}") from None
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
        except (KeyError, TypeError, ValueError) as err:
            raise ExplorerError(f"cases file {path}: entry {ident!r} is malformed ({err})") from None
    return cases


def megatron_table1(entry: dict) -> Case:
    """Narayanan et al. SC'21 Table 1: GPT weak scaling on Selene.

    Open in Table 1: the micro-batch size and the interleaving. Sec 5.1 says the
    runs use the interleaved schedule with the scatter/gather optimisation and
    activation recomputation; we take micro-batch 1 (the value the paper's own
    throughput study in Sec 5.5/Fig. 16 finds best for large models with
    interleaving) and 2 chunks per stage, the smallest interleaving, for p > 1.
    The expected iteration time is derived: Eq. 3 FLOPs / (TFLOP/s x GPUs).
    """
    x = entry["inputs"]
    layers, hidden, heads = int(x["layers"]), int(x["hidden_size"]), int(x["attention_heads"])
    s, V, B = int(x["seq_len"]), int(x["vocab"]), int(x["global_batch_size"])
    t, p, n = int(x["tensor_parallel"]), int(x["pipeline_parallel"]), int(x["num_gpus"])
    d = n // (t * p)
    model = ModelSpec(name=f"gpt-{x['params_billion']}b", family="gpt", layers=layers, hidden=hidden,
                      heads=heads, seq_len=s, vocab=V)
    interleave = p > 1 and layers % (2 * p) == 0 and (B // d) % p == 0
    strategy = Strategy(dp=d, tp=t, pp=p, micro_batch=1, global_batch=B,
                        schedule="interleaved" if interleave else "1f1b", chunks=2 if interleave else 1,
                        recompute="full", scatter_gather=True)
    flops = 96 * B * s * layers * hidden ** 2 * (1 + s / (6 * hidden) + V / (16 * layers * hidden))
    expected = flops / (entry["expected"]["teraflops_per_gpu"] * 1e12 * n)   # Eq. 3 / (X n)
    why = (f"micro-batch 1; {'interleaved, v=2' if interleave else '1F1B (no interleaving possible)'}; "
           "full recomputation; scatter/gather; expected time = Eq.3 FLOPs / (TFLOP/s x GPUs)")
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
        strategy = Strategy(dp=1, tp=8, pp=1, micro_batch=4, global_batch=4,
                            sequence_parallel=sequence_parallel, recompute=recompute)
        for metric, ms in (("layer_fwd_s", values[0]), ("layer_bwd_s", values[1])):
            cases.append(Case(f"{entry['id']}:{row}:{metric[6:9]}", "korthikanti_table4", entry["source"],
                              model, strategy, 8, metric, ms / 1e3,
                              "per-layer time of one transformer layer (t=8, b=4, s=2048) as stated"))
    return cases
