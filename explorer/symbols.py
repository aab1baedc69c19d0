"""The sympy symbols of DESIGN.md's vocabulary, one meaning each.

Expressions in the library are built from these symbols only; no user text is
ever turned into an expression.
"""
import sympy as sp
from sympy.core.operations import ShortCircuit

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
F_a = sp.Symbol("F_a", **_pos)     # peak FLOP/s of the attention core's kernels (bf16 under TE's FP8)
eta_a = sp.Symbol("eta_a", **_pos)  # achieved fraction of F_a on the unfused attention core's GEMMs
# the fused attention kernel's efficiency curve (explorer/hardware/attention.py, explorer/cost/attention_kernel.py):
# saturated fraction of F_a at head dim 128, tokens per call at half of it, the head dimension's constant,
# forward (f) and backward (b); the causal factor
eta_af = sp.Symbol("eta_af", **_pos)
eta_ab = sp.Symbol("eta_ab", **_pos)
n_af = sp.Symbol("n_af", nonnegative=True)
n_ab = sp.Symbol("n_ab", nonnegative=True)
d_af = sp.Symbol("d_af", nonnegative=True)
d_ab = sp.Symbol("d_ab", nonnegative=True)
kappa_a = sp.Symbol("kappa_a", **_pos)
ATTENTION_KERNEL = (eta_af, eta_ab, n_af, n_ab, d_af, d_ab, kappa_a)
"""The curve's constants in the order of explorer.hardware.attention.PARAMS."""
W_hbm = sp.Symbol("W_{hbm}", **_pos)  # HBM bytes/s actually achieved
beta = sp.Symbol("beta", **_pos)    # bytes per element of the training dtype
t_launch = sp.Symbol("tau_k", nonnegative=True)  # kernel launch overhead, s
# the host side of a pass (explorer/model/kernels.py, explorer/cost/block.py host terms): seconds the host CPU
# spends issuing one kernel (framework + library + launch path, not the GPU-side tau_k), and the stall of one
# device-to-host synchronisation (the dropless dispatcher's token counts)
tau_h = sp.Symbol("tau_h", nonnegative=True)
tau_s = sp.Symbol("tau_s", nonnegative=True)

# communication: seconds per byte and latency of each mesh axis's groups -- a group over several machine
# levels uses them at once: g = max over levels of share x g_level, L of the outermost level
# (explorer.cost.collectives.route_g_L)
g_t = sp.Symbol("g_t", nonnegative=True)
L_t = sp.Symbol("L_t", nonnegative=True)
g_d = sp.Symbol("g_d", nonnegative=True)
L_d = sp.Symbol("L_d", nonnegative=True)
g_c = sp.Symbol("g_c", nonnegative=True)   # the context-parallel group's level
L_c = sp.Symbol("L_c", nonnegative=True)
g_p = sp.Symbol("g_p", nonnegative=True)
L_p = sp.Symbol("L_p", nonnegative=True)

# aggregated super-step quantities (per micro-batch, per stage; seconds)
S_T = sp.Symbol("Sigma_T", nonnegative=True)   # sum over stages of fwd+bwd time
F_max = sp.Symbol("F_{max}", nonnegative=True)  # slowest stage forward
B_max = sp.Symbol("B_{max}", nonnegative=True)  # slowest stage backward
T_star = sp.Symbol("T_*", nonnegative=True)     # the most loaded stage's fwd+bwd
X_sum = sp.Symbol("X_{sum}", nonnegative=True)  # zero bubble: Σ_r max(F_r, B_r - W_r, F_r + B_r - 2 W_r)
X_max = sp.Symbol("X_{max}", nonnegative=True)  # the largest of those per-stage terms

MODEL_DIMS = (b, s, h, a, a_kv, f, V)
"""Symbols a layer expression may use for the model and micro-batch."""

phi = sp.Symbol("phi", nonnegative=True)  # GEMM FLOPs at which efficiency is half of eta


# ---- the super-step's per-stage quantities (one value per pipeline stage r) -----------------------
# A symbol below stands for a vector over the stages; its numbers are arrays whose axis 0 is the
# stage (any further axes are candidates). Reductions over the stages are the functions below.
F_r = sp.Symbol("F_r", nonnegative=True)      # forward seconds of one micro-batch on stage r (all chunks)
B_r = sp.Symbol("B_r", nonnegative=True)      # backward seconds of one micro-batch on stage r (recompute incl.)
W_r = sp.Symbol("W_r", nonnegative=True)      # weight-gradient part of B_r (zero-bubble schedules move it)
Psi_r = sp.Symbol("Psi_r", nonnegative=True)  # parameters held per device on stage r
A_r = sp.Symbol("A_r", nonnegative=True)      # activation bytes one micro-batch leaves on stage r
GS_r = sp.Symbol("GS_r", nonnegative=True)    # seconds to all-reduce batch-split layers' gradients (stage r)
g_r = sp.Symbol("g_r", nonnegative=True)      # seconds per byte of stage r's data-parallel groups' level
L_r = sp.Symbol("L_r", nonnegative=True)      # latency of that level
r = sp.Symbol("r", nonnegative=True)          # the stage's index, 0 = first
C_r = sp.Symbol("C_r", nonnegative=True)      # compute part of F_r + B_r
R_r = sp.Symbol("R_r", nonnegative=True)      # recomputation part
O_r = sp.Symbol("O_r", nonnegative=True)      # operator-parallel collectives part
X_r = sp.Symbol("X_r", nonnegative=True)      # redistribution part
P_r = sp.Symbol("P_r", nonnegative=True)      # point-to-point (pipeline) part
S_f_r = sp.Symbol("S^f_r", nonnegative=True)  # of P_r: the activations stage r sends forward (p2p, one micro-batch)
S_b_r = sp.Symbol("S^b_r", nonnegative=True)  # of P_r: the gradients stage r sends backward
K_opt = sp.Symbol("K_{opt}", positive=True)   # optimizer bytes moved per parameter (Adam step)


class QuickMax(sp.Max):
    """sympy's Max without its symbolic ordering proofs. Max(x, y) asks sympy whether x >= y can be
    proved from the symbols' assumptions (factor_terms of x - y, then relational checks): 20-40 ms per
    pair of cost expressions, a third of a cold evaluation. QuickMax only drops an argument that
    equals another or a number below another number, so it keeps arguments Max would have proved
    smaller: the same value for every input, printed as Max (\\max in LaTeX)."""

    @classmethod
    def _new_args_filter(cls, args):
        """Max's filter without its per-argument realness queries (the cost expressions are real by
        construction): flatten nested QuickMax, drop -oo, short-circuit on oo."""
        for arg in args:
            if arg is sp.S.Infinity:
                raise ShortCircuit(arg)
            if arg is not sp.S.NegativeInfinity:
                yield from (arg.args if arg.func is cls else (arg,))

    @classmethod
    def _is_connected(cls, x, y):
        if x == y:
            return True
        if x.is_number and y.is_number and x.is_comparable and y.is_comparable:
            return cls if x >= y else sp.Min
        return False

    def _latex(self, printer):
        excess = _excess(self.args)
        if excess:      # max(0, a - b - c) as max(0, a - (b + c)): what is subtracted reads as one quantity
            more, less = excess
            return r"\max\left(0,\; %s - \left(%s\right)\right)" % (printer._print(more), printer._print(less))
        return printer._print(sp.Max(*self.args, evaluate=False))

    def _sympystr(self, printer):
        return printer._print(sp.Max(*self.args, evaluate=False))


def _excess(args) -> tuple | None:
    """(a, b) when args are 0 and a sum a - b with both parts present (the host's excess over the GPU time,
    explorer/cost/tree.py _beyond, whose GPU part sympy spreads into the sum as negative terms); else None."""
    rest = [x for x in args if x != 0]
    if len(args) != 2 or len(rest) != 1 or not isinstance(rest[0], sp.Add):
        return None
    more = [x for x in rest[0].args if not x.could_extract_minus_sign()]
    less = [-x for x in rest[0].args if x.could_extract_minus_sign()]
    return (sp.Add(*more), sp.Add(*less)) if more and less else None


class StageSum(sp.Function):
    """Sum over the pipeline stages of a per-stage quantity: Σ_r x_r."""

    def _latex(self, printer):
        return r"\sum_{r} \left(" + printer._print(self.args[0]) + r"\right)"


class StageMax(sp.Function):
    """Largest value over the pipeline stages: max_r x_r."""

    def _latex(self, printer):
        return r"\max_{r} \left(" + printer._print(self.args[0]) + r"\right)"


class StageArgMax(sp.Function):
    """The stage holding the largest value (the first of equals): argmax_r x_r."""

    def _latex(self, printer):
        return r"\operatorname{argmax}_{r} \left(" + printer._print(self.args[0]) + r"\right)"


class AtStage(sp.Function):
    """x at stage k: AtStage(x_r, k) = x_k."""

    def _latex(self, printer):
        return r"\left." + printer._print(self.args[0]) + r"\right|_{r=" + printer._print(self.args[1]) + "}"


class StageSuffixSum(sp.Function):
    """Per stage r, the sum over the stages from r to the last: Σ_{l>=r} x_l."""

    def _latex(self, printer):
        return r"\sum_{l \ge r} \left(" + printer._print(self.args[0]).replace("_{r}", "_{l}") + r"\right)"


class StageSuffixMax(sp.Function):
    """Per stage r, the largest value over the stages from r to the last: max_{l>=r} x_l."""

    def _latex(self, printer):
        return r"\max_{l \ge r} \left(" + printer._print(self.args[0]).replace("_{r}", "_{l}") + r"\right)"


class _StageEnd(sp.Function):
    """Per stage r, the end of its last pass: the longest path to it through the schedule's
    dependency graph, from (F_r, B_r, W_r, m, v) (explorer.schedules.critical_path). No closed form
    in the stage sums is exact for unequal stages (fidelity issue, E8)."""

    title = ""

    def _latex(self, printer):
        args = ", ".join(printer._print(a) for a in self.args[:3])
        return r"\operatorname{end}^{\text{" + self.title + r"}}_{r}\left(" + args + r"; m, v\right)"


class StageEnd1F1B(_StageEnd):
    title = "1F1B"


class StageEndInterleaved(_StageEnd):
    title = "interleaved"


class StageEndZBH1(_StageEnd):
    title = "ZB-H1"


def stage_end_class(name: str, title: str):
    """The _StageEnd function named `name` (a schedule's stage ends: explorer.schedules.base.Schedule.
    stage_end_function): the one above of that name, else one made once, so that a schedule defined
    anywhere (a test's, say) has its own."""
    existing = _STAGE_ENDS.get(name) or globals().get(name)
    if isinstance(existing, type) and issubclass(existing, _StageEnd):
        return existing
    made = _STAGE_ENDS[name] = type(name, (_StageEnd,), {"title": title, "__module__": __name__})
    return made


_STAGE_ENDS: dict = {}


class StageEndInterleavedSends(_StageEnd):
    """The interleaved schedule's stage ends with its point-to-point sends overlapped (Megatron-LM
    overlap_p2p_comm): args F_r, B_r without the sends, W_r, m, v, then the sends S^f_r,
    S^b_r, which a pass on the receiving stage waits for after its input's end."""

    title = "interleaved, sends overlapped"

