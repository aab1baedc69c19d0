"""The one numeric context: what turns the cost tree's expressions into numbers.

Model dimensions (the micro-batch may be an array over candidates), the
hardware's numbers for the training dtype, and each machine level's seconds per
byte and latency. evaluate(), evaluate_batch(), the search, the timeline and
validation all build one of these and pass it to the tree's compiled functions.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from explorer.hardware.cluster import BYTES_PER_ELEMENT


def hardware_numbers(cluster, dtype: str) -> dict:
    eff = cluster.efficiency
    return {"F": cluster.device.flops(dtype), "eta": eff.gemm_max, "phi": eff.gemm_half_flops,
            "W": cluster.device.hbm_bandwidth_bytes_per_s * eff.hbm, "tau": eff.kernel_launch_s,
            "beta": BYTES_PER_ELEMENT[dtype],
            "g": [lv.seconds_per_byte for lv in cluster.levels],
            "L": [lv.latency_s for lv in cluster.levels]}


@dataclass(frozen=True, eq=False)
class Numbers:
    """b (an array over candidates, or one number), s, h, a, a_kv, f, V and the hardware."""

    dims: tuple          # b, s, h, a, a_kv, f, V
    hw: dict             # hardware_numbers()
    level_names: tuple

    @classmethod
    def of(cls, model, micro_batch, cluster, dtype: str) -> "Numbers":
        b = np.asarray(micro_batch, dtype=float) if np.ndim(micro_batch) else micro_batch
        dims = (b, model.seq_len, model.hidden, model.heads, model.kv_heads, model.ffn_hidden, model.vocab)
        return cls(dims, hardware_numbers(cluster, dtype), tuple(lv.name for lv in cluster.levels))

    def block_args(self, degree: int, level: int, cp_level: int = 0) -> tuple:
        """Arguments of a compiled block function (explorer.cost.program.BLOCK_ARGS); cp_level:
        the level of the context-parallel group (g_c, L_c)."""
        hw = self.hw
        return self.dims + (degree, hw["g"][level], hw["L"][level], hw["F"], hw["eta"], hw["phi"],
                            hw["W"], hw["tau"], hw["beta"], hw["g"][cp_level], hw["L"][cp_level])

    def size_args(self) -> tuple:
        """Arguments of a compiled array-size function (explorer.cost.program.SIZE_ARGS)."""
        return self.dims + (self.hw["beta"],)

    def collective_seconds(self, bytes_sent, steps, level):
        """BSP cost h g + L of a collective (DESIGN.md): bytes sent per device at the level's
        seconds per byte, plus its latency steps (ring algorithms, explorer.cost.collectives)."""
        g, L = np.asarray(self.hw["g"]), np.asarray(self.hw["L"])
        return bytes_sent * g[level] + steps * L[level]
