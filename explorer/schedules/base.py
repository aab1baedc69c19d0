"""What a pipeline schedule is, and the pass kinds its orders use.

A schedule's formulas are sympy expressions built on first use (`formulas`), so
that the rules and the numeric path (names, flags, orders) never import sympy."""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Callable

import numpy as np

F, B, W = 0, 1, 2
PERIODIC_RTOL = 1e-13
"""Two steps of a pipeline's walk count as adding the same amount when they differ by at most this
fraction of the ends (critical_path.py, one_f_one_b.ends_1f1b)."""
PASS_NAMES = ("forward", "backward", "weight")
"""Pass kinds: F forward, B backward (input gradient only when the schedule splits the
weight gradient off), W weight gradient (zero-bubble schedules)."""


def input_of(kind: int, i: int, c: int, j: int, p: int, v: int):
    """The pass (stage, kind, chunk, micro-batch) whose end pass (kind, stage i, chunk c, micro-batch j)
    waits for, or None, when chunks loop over the stages (chunk c+1 starts on stage 0 again): a forward
    for the same chunk's forward on the stage before, or on the first stage the previous chunk's on the
    last stage; a backward for the next stage's, or on the last stage the next chunk's on the first, the
    last chunk's for its own forward; W only for its own B, which every order runs earlier on the same
    stage. The default dependency rule of the timeline's simulation and of the critical path (Narayanan
    et al. SC'21 Sec 2.2); Schedule.input_of reads the schedule's own."""
    if kind == F:
        if i > 0:
            return (i - 1, F, c, j)
        return None if c == 0 else (p - 1, F, c - 1, j)
    if kind == B:
        if i < p - 1:
            return (i + 1, B, c, j)
        return (0, B, c + 1, j) if c < v - 1 else (i, F, c, j)
    return None


def input_of_v(kind: int, i: int, c: int, j: int, p: int, v: int):
    """input_of for a V-shaped placement (DualPipeV; Qi et al.'s ZB-V): even chunks run stages 0 -> p-1,
    odd chunks come back p-1 -> 0 on the same devices, so with two chunks the model's first and last
    layers share stage 0. A forward waits for its chunk's forward on the stage before it in its
    direction, at the turn for the previous chunk's on the same stage; a backward for its chunk's
    backward on the stage after it in its direction, at the turn for the next chunk's on the same stage,
    the last chunk's (the loss) for its own forward."""
    down = c % 2 == 0                          # chunk 0 goes down the stages, chunk 1 comes back up
    edge = i == (0 if down else p - 1)         # where the chunk's forward starts
    turn = i == (p - 1 if down else 0)         # where it ends
    if kind == F:
        if not edge:
            return (i - 1 if down else i + 1, F, c, j)
        return None if c == 0 else (i, F, c - 1, j)
    if kind == B:
        if not turn:
            return (i + 1 if down else i - 1, B, c, j)
        return (i, F, c, j) if c == v - 1 else (i, B, c + 1, j)
    return None


def inputs_of(kind, stage, chunk, mb, p: int, v: int, where, none: int):
    """input_of for arrays of passes: the index (in `where`, stage x kind x chunk x micro-batch) of the
    pass each waits for, or `none` (tests/test_critical_path.py checks the two agree on every pass of
    every schedule)."""
    out = np.full(len(stage), none, dtype=np.int64)
    fwd, bwd = kind == F, kind == B
    sel = fwd & (stage > 0)
    out[sel] = where[stage[sel] - 1, F, chunk[sel], mb[sel]]
    sel = fwd & (stage == 0) & (chunk > 0)
    out[sel] = where[p - 1, F, chunk[sel] - 1, mb[sel]]
    sel = bwd & (stage < p - 1)
    out[sel] = where[stage[sel] + 1, B, chunk[sel], mb[sel]]
    sel = bwd & (stage == p - 1) & (chunk < v - 1)
    out[sel] = where[0, B, chunk[sel] + 1, mb[sel]]
    sel = bwd & (stage == p - 1) & (chunk == v - 1)
    out[sel] = where[stage[sel], F, chunk[sel], mb[sel]]
    return out


def inputs_of_v(kind, stage, chunk, mb, p: int, v: int, where, none: int):
    """input_of_v for arrays of passes (as inputs_of)."""
    out = np.full(len(stage), none, dtype=np.int64)
    down = chunk % 2 == 0
    step = np.where(down, 1, -1)
    edge = stage == np.where(down, 0, p - 1)
    turn = stage == np.where(down, p - 1, 0)
    fwd, bwd = kind == F, kind == B
    sel = fwd & ~edge
    out[sel] = where[stage[sel] - step[sel], F, chunk[sel], mb[sel]]
    sel = fwd & edge & (chunk > 0)
    out[sel] = where[stage[sel], F, chunk[sel] - 1, mb[sel]]
    sel = bwd & ~turn
    out[sel] = where[stage[sel] + step[sel], B, chunk[sel], mb[sel]]
    sel = bwd & turn & (chunk < v - 1)
    out[sel] = where[stage[sel], B, chunk[sel] + 1, mb[sel]]
    sel = bwd & turn & (chunk == v - 1)
    out[sel] = where[stage[sel], F, chunk[sel], mb[sel]]
    return out


def place(k: int, p: int, v: int) -> tuple:
    """(stage, chunk) of model chunk k of p v (in layer order) when chunks loop over the stages: round
    robin (Narayanan et al. SC'21 Sec 2.2.2)."""
    return k % p, k // p


def place_v(k: int, p: int, v: int) -> tuple:
    """(stage, chunk) of model chunk k of 2p in a V: down the stages, then back up."""
    c = k // p
    return (k % p if c % 2 == 0 else p - 1 - k % p), c


PLACEMENTS = {"loop": (input_of, inputs_of, place), "v": (input_of_v, inputs_of_v, place_v)}
"""How a schedule's chunks sit on the stages -> (its dependency rule, the same over arrays, where model
chunk k goes). A new placement is one row."""


def _aggregates() -> dict:
    import sympy as sp

    from explorer.symbols import B_max, B_r, F_max, F_r, S_T, StageMax, StageSum, T_star, W_r, X_max, X_sum
    return {
        S_T: StageSum(F_r + B_r),          # Σ_T: sum over stages of one micro-batch's forward + backward
        F_max: StageMax(F_r),              # the slowest forward
        B_max: StageMax(B_r),              # the slowest backward
        T_star: StageMax(F_r + B_r),       # T_*: the most loaded stage's forward + backward
        X_sum: StageSum(sp.Max(F_r, B_r - W_r, F_r + B_r - 2 * W_r)),   # zero-bubble schedules' warm-up terms
        X_max: StageMax(sp.Max(F_r, B_r - W_r, F_r + B_r - 2 * W_r)),
    }


def __getattr__(name: str):
    """AGGREGATES: the stage reductions a schedule's formulas use, as named aggregates of the
    per-stage symbols (built with sympy on first use)."""
    if name == "AGGREGATES":
        globals()["AGGREGATES"] = value = _aggregates()
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@dataclass(frozen=True)
class Schedule:
    """One pipeline schedule: everything the cost model, the critical path, the timeline, the search and
    the app know about it, so that no code outside explorer/schedules/ branches on a schedule's name.

    Its pass order (`order`) and dependency rule (`input_of`, from its `placement` of chunks on stages)
    make the pass graph that the free functions of critical_path.py (longest path) and
    explorer.timeline.simulate (simulation) walk. makespan and bubble are its closed forms in the
    AGGREGATES symbols (Σ_T, F_max, ...) and m, v, p: exact for equal stages (GPipe's for any); the
    numeric fallback of the critical path lambdifies the same makespan (`numeric_makespan`), so the two
    cannot disagree. stage_end, in_flight and overlap_window are per stage (r, F_r, B_r, W_r): stage_end
    is the end of stage r's last pass, the exact critical path (fidelity issue, E8) that the super-step
    reads. `formulas()` returns those five sympy expressions (and, optionally, `sync_exposed`: rest ->
    the exposed part of an overlapped sync; `stage_end_with`: (F, B, sends) -> the stage ends with the
    sends overlapped); they are read as attributes. Its rules (stages, micro-batches, chunks) are
    fields the rule table (explorer/strategy/rules.py) reads."""

    name: str
    title: str
    source: str                       # paper and section the order and formulas come from
    order: Callable                   # (p, m, v) -> per stage, a list of (pass, chunk, micro_batch)
    formulas: Callable                # () -> {makespan, bubble, in_flight, overlap_window, stage_end}
    chunked: bool = False             # v > 1 model chunks per stage
    splits_weight: bool = False       # the backward is split into B (input grad) and W (weight grad)
    min_stages: int = 1
    micro_batches_multiple_of_stages: bool = False   # (and the order runs whole groups of p micro-batches)
    micro_batches_per_stage: int = 0  # at least this many micro-batches per stage (m >= k p)
    micro_batches_reason: str = ""    # why, for the rule's refusal
    warmup: Callable | None = None    # (p, r, v) -> forwards stage r runs before its first backward when
    #                                   micro-batches are plenty (None: read off the order)
    placement: str = "loop"           # how chunks sit on the stages: a key of PLACEMENTS
    chunks: int = 0                   # the one chunk count a chunked schedule takes (0: any v >= 2)
    overlaps_sends: bool = False      # may overlap its point-to-point sends (formulas' stage_end_with)
    closed_form_exact: bool = False   # its stage_end is a closed form exact for any stages (no graph walk)
    drawn_as: tuple = ()              # other schedules a strategy of this one may be drawn as (what-ifs)
    fast_ends: Callable | None = None  # (fwd, bwd, m) -> stage ends for m >= p, without sends: a faster
    #                                    exact walk than the graph's (1F1B's step recursion)
    first_backward_climbs: bool = True  # each stage's first backward climbs from the last stage (the
    #                                     loop placement; stage_end_lower_bounds uses it)
    stage_end_name: str = ""          # the sympy function of its stage ends (explorer.symbols)

    def input_of(self, kind: int, i: int, c: int, j: int, p: int, v: int):
        """The pass (stage, kind, chunk, micro-batch) pass (kind, i, c, j) waits for, or None: the
        dependency rule of its placement (input_of, input_of_v)."""
        return PLACEMENTS[self.placement][0](kind, i, c, j, p, v)

    def inputs_of(self, kind, stage, chunk, mb, p: int, v: int, where, none: int):
        """input_of over arrays of passes (indices into `where`, stage x kind x chunk x micro-batch)."""
        return PLACEMENTS[self.placement][1](kind, stage, chunk, mb, p, v, where, none)

    def place(self, k: int, p: int, v: int) -> tuple:
        """(stage, chunk) of model chunk k of p v, in layer order."""
        return PLACEMENTS[self.placement][2](k, p, v)

    @property
    def pass_kinds(self) -> int:
        """Passes per micro-batch, stage and chunk: F and B, and W when the backward is split."""
        return 3 if self.splits_weight else 2

    def chunk_count(self, v: int) -> int:
        """The chunks v its passes are cut into (1 for an unchunked schedule, whatever v says)."""
        return int(v) if self.chunked else 1

    def chunk_choices(self, layers: int) -> tuple:
        """The chunk counts a search tries with `layers` layers."""
        if not self.chunked:
            return (1,)
        return (self.chunks,) if self.chunks else tuple(range(2, layers + 1))

    def block(self, p: int) -> int:
        """Micro-batches one more steady block of its order adds (critical_path._ends_periodic)."""
        return p if self.micro_batches_multiple_of_stages else 1

    def min_micro_batches(self, p: int) -> int:
        """The fewest micro-batches its order takes on p stages."""
        return self.micro_batches_per_stage * p

    def base_micro_batches(self, p: int) -> int:
        """The shortest pipeline a long one extends (critical_path._ends_periodic's m_1, before m's
        remainder modulo the block): p, or the fewest the order takes."""
        return max(p, self.min_micro_batches(p))

    def stage_end_function(self):
        """The sympy function of its exact stage ends (F_r, B_r, W_r, m, v), named stage_end_name;
        explorer.cost.reductions gives it its numpy meaning (critical_path.stage_ends)."""
        from explorer.symbols import stage_end_class
        return stage_end_class(self.function_name, self.title)

    @property
    def function_name(self) -> str:
        """stage_end_name, or one made from the schedule's name."""
        return self.stage_end_name or "StageEnd_" + "".join(ch if ch.isalnum() else "_" for ch in self.name)

    def numeric_makespan(self, fwd, bwd, weight, m, v):
        """The closed-form makespan in numbers (stages on axis 0): the sympy `makespan` (or, where that is
        the critical path itself, the formulas' `makespan_bound`) lambdified once (the critical path's
        fallback beyond its graph bound, _ends_closed_form)."""
        return _lambdified_makespan(self)(fwd, bwd, weight, m, v, fwd.shape[0])

    @cached_property
    def _formulas(self) -> dict:
        return self.formulas()

    @property
    def makespan(self):
        """Seconds from the first forward to the last backward pass (sympy)."""
        return self._formulas["makespan"]

    def stage_end_with(self, fwd, bwd, sends=None):
        """stage_end with other per-stage pass times (sympy), and the point-to-point `sends` (S^f, S^b)
        overlapped with computation when given (only where overlaps_sends)."""
        rule = self._formulas.get("stage_end_with")
        if rule is None:
            raise ValueError(f"the {self.name} schedule does not overlap its point-to-point sends")
        return rule(fwd, bwd, sends)

    @property
    def stage_end(self):
        """Per stage: seconds from the first forward to the end of stage r's last pass (sympy)."""
        return self._formulas["stage_end"]

    @property
    def bubble(self):
        """Idle seconds of the most loaded stage in that span (sympy)."""
        return self._formulas["bubble"]

    @property
    def in_flight(self):
        """Micro-batches whose activations stage r holds at its peak (sympy)."""
        return self._formulas["in_flight"]

    @property
    def overlap_window(self):
        """Per stage: seconds the gradient sync may hide under (sympy)."""
        return self._formulas["overlap_window"]

    @cached_property
    def backwards_adjacent(self) -> bool:
        """On one stage, do two micro-batches' backwards run back to back (GPipe), or does a forward
        come between them (1F1B)? Read off the schedule's own order for p = 1, m = 2."""
        passes = [kind for kind, _, _ in self.order(1, 2, 1)[0] if kind != W]
        first = passes.index(B)
        return passes[first + 1] == B

    def exposed_sync(self, rest):
        """Per stage: the part of the overlapped gradient sync `rest` (seconds, sympy) left after
        stage r's last pass: the schedule's own rule `sync_exposed(rest)` where its syncs start at
        several points (interleaved chunks), else what exceeds overlap_window."""
        rule = self._formulas.get("sync_exposed")
        if rule is not None:
            return rule(rest)
        from explorer.symbols import QuickMax
        return QuickMax(0, rest - self.overlap_window)


_MAKESPANS: dict = {}


def _lambdified_makespan(schedule: Schedule):
    """schedule.makespan over (F_r, B_r, W_r arrays, m, v, p), lambdified on first use."""
    fn = _MAKESPANS.get(schedule.name)
    if fn is None:
        import explorer.symbols as S
        stages = {"StageSum": lambda x: np.sum(x, axis=0), "StageMax": lambda x: np.max(x, axis=0)}
        expr = schedule._formulas.get("makespan_bound", schedule.makespan).xreplace(dict(__getattr__("AGGREGATES")))
        fn = _MAKESPANS[schedule.name] = S.sp.lambdify((S.F_r, S.B_r, S.W_r, S.m, S.v, S.p), expr,
                                                       modules=[stages, "numpy"])
    return fn
