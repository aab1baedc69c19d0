"""Iteration time and peak memory per device from per-stage sums, vectorised.

The search reads the same super-step terms evaluate() reads (explorer.cost.superstep:
the schedule's makespan, each stage's exposed synchronisation + ZeRO gathers +
optimizer step, each stage's memory), lambdified once per variant. Arrays here carry
the pipeline stages on their last axis (the tree's functions take them on axis 0);
any leading axes broadcast (candidates, micro-batch sizes).
"""
from __future__ import annotations

import numpy as np

from explorer.cost import cache
from explorer.cost.generated import function_of, plain_key, source_of
from explorer.cost.numeric import (STAGE_INPUT_NAMES, expert_dp_ratio, grad_norm_seconds, optimizer_state_bytes,
                                   optimizer_update_bytes, stage_dp_g_L, stage_expert_dp_g_L)
from explorer.strategy.mesh import Mesh

_LEAN: dict = {}


def param_gather_with(zero: int, overlap: bool, param_gather: bool | None = None) -> bool:
    """Is the parameter all-gather overlapped with the next forward? Only ZeRO-1/2 gather parameters
    after the step; `param_gather` None is what the search assumes: on with the gradient overlap."""
    on = bool(overlap) if param_gather is None else bool(param_gather)
    return on and int(zero) in (1, 2)


def lean_term(schedule: str, zero: int, overlap: bool, k_states: int, name: str,
              param_gather: bool | None = None, sends: bool = False, moe: bool = False,
              grad_bytes: int | None = None, memory: tuple = ()) -> tuple:
    """(function, argument names) of one super-step term compiled over the symbols it uses
    (superstep.Variant.lean) -- from memory, from the disk cache (explorer.cost.cache: the source
    lambdify wrote, as for evaluate()'s functions), or built with sympy and stored. `sends`: the
    variant with the pipeline's sends overlapped (superstep.overlapped_sends); `moe`: the variant
    whose expert weights synchronise, shard and update over their own group (superstep_inputs.EXPERT_GROUP);
    `grad_bytes`: 4 for gradients reduced in fp32 (Strategy.grad_dtype, options_of), None = beta; `memory`:
    the precision recipe's (name, value) options (Strategy.memory_options: FP8 weight copies, Adam moments)."""
    key = ("lean", schedule, int(zero), bool(overlap), int(k_states), name) + \
        (("param_gather_overlap",) if param_gather_with(zero, overlap, param_gather) else ()) + \
        (("p2p_overlap",) if sends else ()) + (("moe",) if moe else ()) + \
        ((("grad_bytes", int(grad_bytes)),) if grad_bytes is not None else ()) + tuple(memory)
    if key not in _LEAN:
        _LEAN[key] = _stored(key) or _built(key)
    return _LEAN[key]


def _stored(key: tuple):
    stored = cache.load("lean", plain_key(key))
    if not (isinstance(stored, dict) and isinstance(stored.get("args"), list)
            and all(isinstance(a, str) for a in stored["args"])):
        return None
    fn = function_of(stored.get("fn"))
    return None if fn is None else (fn, tuple(stored["args"]))


def _built(key: tuple) -> tuple:
    from explorer.cost.superstep import variant      # sympy: only on a cache miss
    _, schedule, zero, overlap, k_states, name = key[:6]
    # ZeRO-3 candidates prefetch their gathers (Strategy.zero_prefetch, on by default: never slower);
    # ZeRO-1/2 candidates that overlap the gradient reduce-scatter also overlap the parameter
    # all-gather with the next forward (Megatron-LM --overlap-grad-reduce --overlap-param-gather
    # with the distributed optimizer, explorer.search.search.point_strategy: never slower)
    options = dict(k for k in key[6:] if isinstance(k, tuple))      # ("grad_bytes", n), memory options
    fn, args = variant(schedule, zero, overlap, k_states, "moe" in key[6:], zero_prefetch=zero == 3,
                       param_gather_overlap="param_gather_overlap" in key[6:],
                       p2p_overlap="p2p_overlap" in key[6:], **options).lean((name,))
    names = tuple(a.name for a in args)
    source = source_of(fn)
    if source:
        cache.store("lean", plain_key(key), {"fn": source, "args": list(names)})
    return fn, names


def _broadcast(out, *shapes):
    """`out` at the broadcast shape of `shapes` (a view only when its own shape differs)."""
    own = np.shape(out)
    if all(x == own for x in shapes):
        return out
    shape = np.broadcast_shapes(*shapes)
    return out if own == shape else np.broadcast_to(out, shape)


def _first(x):
    """Stage axis last -> first."""
    return np.moveaxis(np.asarray(x, dtype=float), -1, 0)


class Objective:
    """Time and memory of candidates sharing a cluster, dtype, d, t and p (and, for a model with
    experts, `experts`: a strategy with their ep and expert t, whose expert-data-parallel groups the
    expert weights synchronise over -- the super-step's moe variant, as evaluate() prices it)."""

    def __init__(self, cluster, dtype_bytes: int, hw: dict, dp: int, tp: int, pp: int, cp: int = 1,
                 experts=None, grad_bytes=None, memory: dict | None = None, dtype: str = "bf16"):
        # with context parallelism the gradients are reduced (and ZeRO shards) over dp x cp (evaluate.py)
        self.hw, self.dp, self.pp, self.beta = hw, dp * cp, pp, dtype_bytes
        mesh = Mesh.of(tp=tp, dp=dp, pp=pp, cp=cp)
        g, L = stage_dp_g_L(cluster, mesh, pp)    # each stage's dp x cp groups
        # the gradient-norm all-reduce before the step, by ZeRO stage (its group: evaluate()'s T_norm)
        self.norm_s = lambda zero: grad_norm_seconds(cluster, mesh, int(zero), dtype)
        self.g, self.L = np.array(g), np.array(L)
        self.moe = experts is not None
        if self.moe:       # the super-step's g^e_r, L^e_r and e (explorer.cost.evaluation.build_evaluation)
            g, L = stage_expert_dp_g_L(cluster, experts, pp)
            self.g_e, self.L_e, self.e = np.array(g), np.array(L), expert_dp_ratio(experts)
        self.ranks = np.arange(pp)
        self.k_states = optimizer_state_bytes(dtype_bytes)
        self.k_update = optimizer_update_bytes(dtype_bytes)
        self._lean_fns = {}
        # bytes of a reduced gradient element: None (beta) or 4 (fp32), or a function of the ZeRO stage (a
        # framework's default may depend on it: Megatron-FSDP's 'auto', explorer/strategy/frameworks.py)
        self.grad_bytes_of = grad_bytes if callable(grad_bytes) else (lambda zero: grad_bytes)
        self.sends_allowed = True      # the sweep's: may interleaved sends overlap (sweep.p2p_overlap)
        # what the precision recipe keeps (Strategy.memory_options), as evaluate() prices it
        self.precision = tuple(sorted((memory or {}).items()))

    def _lean(self, schedule: str, zero: int, overlap: bool, name: str, param_gather: bool | None = None,
              sends: bool = False, precision: tuple | None = None) -> tuple:
        """The variant's term `name` compiled over the symbols it uses (Variant.lean), with those
        symbols' names (looked up by name: hashing sympy symbols in the search's loops is slow); `precision`:
        a family's own memory options (memory()), else the objective's."""
        precision = self.precision if precision is None else precision
        key = (schedule, zero, bool(overlap), name, param_gather, sends, precision)
        if key not in self._lean_fns:
            self._lean_fns[key] = lean_term(schedule, zero, overlap, self.k_states, name, param_gather, sends,
                                            self.moe, self.grad_bytes_of(zero), precision)
        return self._lean_fns[key]

    def _experts(self, values: dict, psi_e, ranks) -> dict:
        """`values` with the expert weights' inputs (Psi^e_r and their group's g^e_r, L^e_r, e)."""
        if self.moe:
            values["Psi^e_r"] = 0.0 if psi_e is None else psi_e
            values["g^e_r"], values["L^e_r"] = (self.g_e, self.L_e) if ranks is None else \
                (self.g_e[ranks], self.L_e[ranks])
            values["e"] = self.e
        return values

    def stage_ends(self, F, B, m, v, schedule: str = "1f1b", W=None, sends=None):
        """Per stage (last axis), when its last pass ends: the schedule's critical path (the super-step's
        stage_end term, exact for unequal stages: fidelity issue, E8); `sends` (forward, backward) the
        point-to-point sends within F and B, overlapped with computation (interleaved only)."""
        fn, args = self._lean(schedule, 0, False, "stage_end", sends=sends is not None)
        values = {"F_r": _first(F), "B_r": _first(B), "W_r": 0.0 if W is None else _first(W), "m": m, "v": v,
                  "p": self.pp, "d": self.dp, "beta": self.beta, "W_{hbm}": self.hw["W"], "K_{opt}": self.k_update}
        if sends is not None:
            values["S^f_r"], values["S^b_r"] = _first(sends[0]), _first(sends[1])
        out = fn(*[values.get(a, 0.0 if a in STAGE_INPUT_NAMES else 1.0) for a in args])   # as Variant.__call__
        return np.moveaxis(np.asarray(out, dtype=float), 0, -1)

    def pipeline(self, F, B, m, v, schedule: str = "1f1b", W=None):
        """Makespan of the pipelined forward/backward: the latest stage end."""
        return self.stage_ends(F, B, m, v, schedule, W).max(-1)

    def sync(self, psi, bwd, split_sync, m, v, zero: int, overlap: bool, ranks=None, schedule: str = "1f1b",
             fwd=0.0, param_gather: bool | None = None, psi_e=None):
        """Per stage (`ranks`, default all on the last axis), what follows the pipeline: dp sync
        (exposed under the schedule's overlap window), ZeRO gathers (ZeRO-3: exposed under the passes
        `fwd` and `bwd`; fwd 0 = no window, never less than the truth), optimizer. Arrays carry the
        stage on their last axis, so the term is evaluated with the stage last (it is elementwise
        over stages: no reduction). param_gather: the parameter all-gather overlapped with the next
        forward (None: as the search assumes, see param_gather_with); psi_e the expert weights per
        device (Psi^e_r, a model with experts)."""
        fn, args = self._lean(schedule, zero, overlap, "after", param_gather)
        g, L = (self.g, self.L) if ranks is None else (self.g[ranks], self.L[ranks])
        values = self._experts({"T_{norm}": self.norm_s(zero),
                                "Psi_r": psi, "B_r": bwd, "F_r": fwd, "GS_r": split_sync, "g_r": g, "L_r": L,
                                "m": m, "v": v, "p": self.pp, "r": self.ranks if ranks is None else ranks,
                                "d": self.dp, "beta": self.beta, "W_{hbm}": self.hw["W"], "K_{opt}": self.k_update},
                               psi_e, ranks)
        out = fn(*[values[a] for a in args])
        return _broadcast(out, np.shape(psi), np.shape(bwd), np.shape(split_sync), np.shape(fwd), np.shape(psi_e))

    def time(self, F, B, psi, split_sync, m, v, zero: int, overlap: bool, schedule: str = "1f1b", W=None,
             param_gather: bool | None = None, psi_e=None):
        """Iteration time: the latest of each stage's end plus its synchronisation and optimizer (E9)."""
        m_stage = np.asarray(m)[..., None] if np.ndim(m) else m
        return (self.stage_ends(F, B, m, v, schedule, W) +
                self.sync(psi, B, split_sync, m_stage, v, zero, overlap, schedule=schedule, fwd=F,
                          param_gather=param_gather, psi_e=psi_e)).max(-1)

    def memory(self, psi, act, m, v, zero: int, schedule: str, ranks=None, psi_e=None, layer_act=None,
               precision: dict | None = None):
        """Per stage bytes per device (model states + activations in flight); `ranks` default all
        stages. Elementwise over stages, evaluated with the stage on the last axis. `precision`: the family's
        own memory options (Strategy.memory_options: expert-parallel overlap's extra layer, A^l_r = `layer_act`,
        model_states.activations_in_flight), else the objective's."""
        own = None if precision is None else tuple(sorted(precision.items()))
        fn, args = self._lean(schedule, zero, False, "memory_total", precision=own)
        m_stage = np.asarray(m)[..., None] if np.ndim(m) else m
        values = self._experts({"Psi_r": psi, "A_r": act, "r": self.ranks if ranks is None else ranks,
                                "m": m_stage, "v": v, "p": self.pp, "d": self.dp, "beta": self.beta,
                                "W_{hbm}": self.hw["W"], "K_{opt}": self.k_update,
                                "A^l_r": 0.0 if layer_act is None else layer_act}, psi_e, ranks)
        out = fn(*[values[a] for a in args])
        return _broadcast(out, np.shape(psi), np.shape(act), np.shape(psi_e))

    def peak_memory(self, psi, act, m, v, zero: int, schedule: str, psi_e=None, layer_act=None,
                    precision: dict | None = None):
        return self.memory(psi, act, m, v, zero, schedule, psi_e=psi_e, layer_act=layer_act,
                           precision=precision).max(-1)


__all__ = ["Objective"]
