"""The super-step's inputs: the per-stage and scalar symbols a variant reads (explorer.cost.superstep), in the
order numeric.STAGE_INPUT_NAMES and SCALAR_INPUT_NAMES name them, the expert weights' own data-parallel group, and
`Term`, one named node of the cost tree."""
from __future__ import annotations

from dataclasses import dataclass

import sympy as sp

from explorer.cost.numeric import SCALAR_INPUT_NAMES, STAGE_INPUT_NAMES
from explorer.symbols import (A_r, B_r, C_r, F_r, GS_r, K_opt, L_r, O_r, P_r, Psi_r, R_r, S_b_r, S_f_r, W_hbm,
                              W_r, X_r, beta, d, g_r, m, p, r, v)


GSB_r = sp.Symbol("GSB_r", nonnegative=True)   # bytes of GS_r per device
CP_r = sp.Symbol("CP_r", nonnegative=True)     # exposed context-parallel exchange (cp_comm) of stage r
# Mixture-of-Experts (issue 11): the expert layers' all-to-alls and the experts' own weights
E_r = sp.Symbol("E_r", nonnegative=True)       # expert-parallel all-to-all part of F_r + B_r (ep_comm)
Psi_e_r = sp.Symbol("Psi^e_r", nonnegative=True)  # expert parameters per device on stage r (sharded over ep)
g_e_r = sp.Symbol("g^e_r", nonnegative=True)   # seconds per byte of stage r's expert-data-parallel groups
L_e_r = sp.Symbol("L^e_r", nonnegative=True)   # latency of that level
e = sp.Symbol("e", positive=True)              # d over the expert weights' data-parallel replicas: ep (ep etp / t)
T_norm = sp.Symbol("T_{norm}", nonnegative=True)  # gradient-norm all-reduce(s) before the step (numeric.grad_norm_seconds)
A_l_r = sp.Symbol("A^l_r", nonnegative=True)   # the largest layer's activations on stage r (numeric.layer_activations)
STAGE_INPUTS = (F_r, B_r, W_r, C_r, R_r, O_r, X_r, P_r, Psi_r, A_r, GS_r, GSB_r, g_r, L_r, r, CP_r, E_r, Psi_e_r,
                g_e_r, L_e_r, S_f_r, S_b_r, A_l_r)
"""Per-stage arrays (axis 0 = stage) a variant reads; F_r + B_r = C_r + R_r + O_r + E_r + X_r + P_r + CP_r,
and S^f_r + S^b_r the point-to-point sends within P_r."""
SENDS_EXPOSED = sp.Symbol("T^{sends}", nonnegative=True)
"""explain()'s name for pp_sends_exposed: what overlapped point-to-point sends still add to the iteration."""
SCALAR_INPUTS = (m, v, p, d, beta, W_hbm, K_opt, e, T_norm)
"""Numbers (or arrays over candidates) a variant reads."""
assert tuple(x.name for x in STAGE_INPUTS) == STAGE_INPUT_NAMES
assert tuple(x.name for x in SCALAR_INPUTS) == SCALAR_INPUT_NAMES


@dataclass(frozen=True)
class Term:
    """One named node of the cost tree."""

    name: str
    category: str            # a DESIGN.md category, or '' for intermediate nodes
    citation: str
    expr: sp.Expr
    per_stage: bool = False  # a vector over stages (axis 0) rather than one number


EXPERT_GROUP = {"psi": Psi_e_r, "n": d / e, "g": g_e_r, "L": L_e_r}
"""The expert weights' data-parallel group: their d / e replicas (Megatron-Core expert data
parallelism: expert gradients are all-reduced, and their ZeRO shards split, over dp x cp / ep ranks;
Psi_r then counts only the other, dense weights)."""
