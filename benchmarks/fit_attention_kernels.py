"""Fit the attention-kernel efficiency curves to the published benchmark points.

    python benchmarks/fit_attention_kernels.py           # print the fit and its errors
    python benchmarks/fit_attention_kernels.py --write   # store them in assets/attention_kernels.json

The points, their figures and the curve's form are in assets/attention_kernels.json; the curve is
explorer/hardware/attention.py: efficiency. Least squares on the relative error of every published
point of a kernel (scipy.optimize.least_squares), forward and backward together so that the causal
factor is shared; a kernel published as forward + backward only (FlashAttention-2 on A100, Fig. 4) is
fitted on that curve and split with its direction_ratio. A kernel published at one head dimension and
under the causal mask only (cuDNN on B200) takes the head dimension's constant and the causal factor
from the kernel it names in `shares` (fitted before it: the file's order).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
from scipy.optimize import least_squares

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from explorer.hardware import attention as att  # noqa: E402

PATH = Path(__file__).resolve().parents[1] / "assets" / "attention_kernels.json"


def fit(entry: dict, seq_lens, kernels: dict | None = None) -> dict:
    """The curve's constants fitted to `entry`'s points; an entry that `shares` constants with another
    kernel (kernels[name]["fit"]: a device whose benchmark has one head dimension and one mask) takes
    those as they are and fits the rest."""
    rows = list(att.published_points(entry, seq_lens))
    dirs = sorted({r[0] for r in rows})
    shares = entry.get("shares", {})
    given = kernels[shares["kernel"]]["fit"] if shares else {}
    fixed_d = "d_half" in shares.get("constants", ())
    fixed_kappa = "causal" in shares.get("constants", ())

    def unpack(x):
        per = {d: dict(eta_max=x[3 * i], n_half=x[3 * i + 1],
                       d_half=given[d]["d_half"] if fixed_d else x[3 * i + 2]) for i, d in enumerate(dirs)}
        return per, given["causal"] if fixed_kappa else x[-1]

    def residuals(x):
        per, kappa = unpack(x)
        return [att.curve(per[d], kappa, n, hd, causal) / eta - 1 for d, causal, hd, n, eta in rows]

    x0 = [0.6, 300.0, 30.0] * len(dirs) + [0.95]
    lo = [0.05, 0.0, 0.0] * len(dirs) + [0.3]
    hi = [1.0, 1e5, 1e4] * len(dirs) + [1.5]
    x = least_squares(residuals, x0, bounds=(lo, hi)).x
    per, kappa = unpack(x)
    err = np.abs(residuals(x))
    out = {}
    if dirs == ["fwd+bwd"]:
        rho = entry["direction_ratio"]["value"]
        fb = per["fwd+bwd"]
        fwd = dict(fb, eta_max=fb["eta_max"] * (rho + 2.5) / (3.5 * rho))
        out = {"fwd": fwd, "bwd": dict(fwd, eta_max=rho * fwd["eta_max"])}
    else:
        out = per
    rounded = {d: {k: float(f"{v:.4g}") for k, v in p.items()} for d, p in out.items()}
    shared = f"; {' and '.join(shares['constants'])} from {shares['kernel']}" if shares else ""
    return {"fwd": rounded["fwd"], "bwd": rounded["bwd"], "causal": float(f"{kappa:.4g}"),
            "fitted_on": f"all {len(rows)} published points above ({', '.join(dirs)}){shared}",
            "error": {"mean": round(float(err.mean()), 4), "max": round(float(err.max()), 4)}}


def main(argv=None) -> int:
    data = json.loads(PATH.read_text())
    for name, entry in data["kernels"].items():
        entry["fit"] = fit(entry, data["seq_lens"], data["kernels"])
        print(name, json.dumps(entry["fit"]))
    if "--write" in (argv or sys.argv[1:]):
        PATH.write_text(json.dumps(data, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
