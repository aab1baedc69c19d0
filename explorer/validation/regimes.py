"""The validated residuals by regime (issue 28 item 4): accelerator x precision x dense/MoE, each with the
number of held-out rows and their mean and max absolute error, each row's error signed as a speed (predicted over
published speed - 1, explorer.validation.evidence.speed_error: + the model optimistic) -- the bands explorer.validation.evidence
shows beside a number, laid out as the Validation page's heatmap. Read from the bundled residuals
(assets/validation/residuals.json, explorer.validation.evidence.residuals): no prediction runs here."""
from __future__ import annotations

from dataclasses import dataclass

from explorer.validation.evidence import residuals


@dataclass(frozen=True)
class Regime:
    accelerator: str
    precision: str           # '16-bit' (bf16, fp16) or the dtype (fp8)
    kind: str                # 'dense' or 'MoE'
    rows: int                # held-out rows (all rows where every row of the regime was fitted)
    fitted: int              # rows a constant was fitted on (not counted in the errors unless all are)
    mean_abs_error: float
    max_abs_error: float
    mean_error: float        # signed: > 0 the model is optimistic (predicts more throughput, less time)

    @property
    def name(self) -> str:
        return f"{self.accelerator} · {self.precision} · {self.kind}"


def regimes(rows=None) -> list:
    """Every regime with validated rows, ordered by accelerator, precision and kind. `rows`: residual rows as
    explorer.validation.evidence.residuals gives them (default: the bundled ones)."""
    rows = residuals() if rows is None else rows
    grouped = {}
    for _id, _group, _source, features, error, subset in rows:
        accelerator, precision, kind = (part.strip() for part in features.regime.split("·"))
        grouped.setdefault((accelerator, precision, kind), []).append((error, subset))
    out = []
    for (accelerator, precision, kind), members in sorted(grouped.items()):
        held = [e for e, subset in members if subset != "fitted"] or [e for e, _ in members]
        out.append(Regime(accelerator, precision, kind, len(held), sum(s == "fitted" for _, s in members),
                          sum(abs(e) for e in held) / len(held), max(abs(e) for e in held),
                          sum(held) / len(held)))
    return out
