"""The one numeric context: what turns the cost tree's expressions into numbers.

Model dimensions (the micro-batch may be an array over candidates), the
hardware's numbers for the training dtype, and each machine level's seconds per
byte and latency. evaluate(), evaluate_batch(), the search, the timeline and
validation all build one of these and pass it to the tree's compiled functions.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from explorer.cost import collectives as coll
from explorer.cost.collectives import cp_kind
from explorer.hardware import attention as attention_kernel
from explorer.hardware.cluster import BYTES_PER_ELEMENT


def hardware_numbers(cluster, dtype: str, softmax: str = "vanilla") -> dict:
    eff = cluster.efficiency
    # Transformer Engine's FP8 recipes cast the GEMMs' operands only: the attention core (FlashAttention,
    # or the unfused score and context bmm) runs in bf16 (fp8_dot_product_attention is off by default)
    attn = "bf16" if dtype == "fp8" else dtype
    return {"F": cluster.device.flops(dtype), "eta": eff.gemm_max_for(dtype), "phi": eff.gemm_half_flops,
            "F_a": cluster.device.flops(attn), "eta_a": eff.gemm_max_for(attn),
            # the fused kernel's curve (explorer/hardware/attention.py): a published kernel's, else flat at eta_a
            # (softmax: the model's, ModelSpec.softmax_type: a sink softmax runs on cuDNN's kernel, never FlashAttention)
            "attention": attention_kernel.params(cluster.device.name, attn, eff.gemm_max_for(attn), softmax),
            "W": cluster.device.hbm_bandwidth_bytes_per_s * eff.hbm, "tau": eff.kernel_launch_s,
            "tau_h": eff.host_launch_s, "tau_s": eff.host_sync_s,     # the host side of a pass (model/kernels.py)
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
        return cls(dims, hardware_numbers(cluster, dtype, getattr(model, "softmax_type", "vanilla")),
                   tuple(lv.name for lv in cluster.levels))

    def route_g_L(self, kind: str, route: tuple) -> tuple:
        """Seconds per byte and latency per step of a group with this route (levels at once,
        explorer.cost.collectives.route_g_L)."""
        return coll.route_g_L(kind, route, self.hw["g"], self.hw["L"])

    def block_args(self, degree: int, route: tuple, cp_route: tuple = (), cp_algo: str = "ring") -> tuple:
        """Arguments of a compiled block function (explorer.cost.tree.BLOCK_ARGS). The block's
        collectives are the ring kinds of its operator group (an all-to-all between layouts
        takes the ring's levels too: within a node they coincide); g_c, L_c those of its
        context-parallel group (ring attention's point-to-point steps wait for their slowest hop;
        Ulysses' all-to-alls send by level, explorer.cost.context_parallel.cp_kind)."""
        hw = self.hw
        g, L = self.route_g_L("all_reduce", route)
        g_c, L_c = self.route_g_L(cp_kind(cp_algo), cp_route) if cp_route else (hw["g"][0], hw["L"][0])
        return self.dims + (degree, g, L, hw["F"], hw["eta"], hw["phi"], hw["W"], hw["tau"], hw["beta"], g_c, L_c,
                            hw["F_a"], hw["eta_a"]) + tuple(hw["attention"][k] for k in attention_kernel.PARAMS) + \
            (hw["tau_h"], hw["tau_s"])

    def size_args(self) -> tuple:
        """Arguments of a compiled array-size function (explorer.cost.program.SIZE_ARGS)."""
        return self.dims + (self.hw["beta"],)

    def collective_seconds(self, bytes_sent, steps, kind: str, route: tuple):
        """BSP cost h g + L of a collective (DESIGN.md): bytes sent per device at the group's
        seconds per byte, plus its latency steps (explorer.cost.collectives)."""
        g, L = self.route_g_L(kind, route)
        return coll.bsp_seconds(bytes_sent, g, steps, L)

    def level_seconds(self, bytes_sent, kind: str, route: tuple) -> list:
        """Seconds each machine level is busy sending its share of `bytes_sent` (the levels work
        at once; the largest is the collective's bandwidth time)."""
        shares = coll.level_shares(kind, route)
        return [float(w) * bytes_sent * g for w, g in zip(shares, self.hw["g"])]
