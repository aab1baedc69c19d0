"""The sympy symbols of ../shared/DESIGN.md's vocabulary, one meaning each.

Expressions in the library are built from these symbols only; no user text is
ever turned into an expression.
"""
import sympy as sp

_pos = dict(positive=True)

# model dimensions
b = sp.Symbol("b", **_pos)          # micro-batch size (sequences)
B = sp.Symbol("B", **_pos)          # global batch size
s = sp.Symbol("s", **_pos)          # sequence length
h = sp.Symbol("h", **_pos)          # hidden size
a = sp.Symbol("a", **_pos)          # attention heads
a_kv = sp.Symbol("a_{kv}", **_pos)  # key/value heads (grouped-query attention)
f = sp.Symbol("f", **_pos)          # FFN hidden size
V = sp.Symbol("V", **_pos)          # vocabulary size
l = sp.Symbol("l", **_pos)          # layers

# parallel degrees
d = sp.Symbol("d", **_pos)          # data-parallel degree
t = sp.Symbol("t", **_pos)          # operator (tensor) parallel degree
p = sp.Symbol("p", **_pos)          # pipeline-parallel degree
v = sp.Symbol("v", **_pos)          # interleaved chunks per stage
m = sp.Symbol("m", **_pos)          # micro-batches per iteration, B/(b d)

# hardware
F = sp.Symbol("F", **_pos)          # device peak FLOP/s for the dtype
eta = sp.Symbol("eta", **_pos)      # achieved fraction of F on GEMMs
W_hbm = sp.Symbol("W_{hbm}", **_pos)  # HBM bytes/s actually achieved
beta = sp.Symbol("beta", **_pos)    # bytes per element of the training dtype
t_launch = sp.Symbol("tau_k", nonnegative=True)  # kernel launch overhead, s

# communication: seconds per byte and latency of the level each mesh axis uses
g_t = sp.Symbol("g_t", nonnegative=True)
L_t = sp.Symbol("L_t", nonnegative=True)
g_d = sp.Symbol("g_d", nonnegative=True)
L_d = sp.Symbol("L_d", nonnegative=True)
g_p = sp.Symbol("g_p", nonnegative=True)
L_p = sp.Symbol("L_p", nonnegative=True)

# aggregated super-step quantities (per micro-batch, per stage; seconds)
S_T = sp.Symbol("Sigma_T", nonnegative=True)   # sum over stages of fwd+bwd time
F_max = sp.Symbol("F_{max}", nonnegative=True)  # slowest stage forward
B_max = sp.Symbol("B_{max}", nonnegative=True)  # slowest stage backward
T_star = sp.Symbol("T_*", nonnegative=True)     # the most loaded stage's fwd+bwd

MODEL_DIMS = (b, s, h, a, a_kv, f, V)
"""Symbols a layer expression may use for the model and micro-batch."""

phi = sp.Symbol("phi", nonnegative=True)  # GEMM FLOPs at which efficiency is half of eta
