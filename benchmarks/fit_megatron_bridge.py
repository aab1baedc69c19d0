"""Fit gemm_max (BF16) on the dense BF16 H100 rows (issue 26), then gemm_max_fp8 per system on the
Megatron-Bridge rows (issue 11). Prints the constants and the errors per system on fitted and
held-out rows; asserts nothing.

    python benchmarks/fit_megatron_bridge.py

What is fitted and how: explorer/validation/fit.py. Copy the printed constants into
assets/clusters/<system>.json (efficiency.gemm_max, efficiency.gemm_max_fp8) after a change to the
cost model; h200 takes dgx-h100's values, and dgx-b200 / gb200-nvl72 derive their gemm_max from
dgx-h100's (their sources say how) -- re-derive it, then refit their gemm_max_fp8.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from explorer.validation.fit import fit_all, report  # noqa: E402

if __name__ == "__main__":
    print(report(fit_all()))
