"""Interleaved 1F1B over v model chunks per stage (Narayanan et al. SC'21 Sec 2.2.2, Fig. 4 bottom)."""
from explorer.errors import ExplorerError
from explorer.schedules.base import B, F, Schedule


def order(p: int, m: int, v: int) -> list:
    """The order of Megatron-LM's forward_backward_pipelining_with_interleaving.

    Virtual micro-batch k runs chunk (k mod pv) // p forward (reversed for backward) on
    micro-batch (k // pv) p + k mod p; stage i warms up with 2(p-i-1) + (v-1)p forwards.
    Needs m to be a multiple of p.
    """
    if m % p:
        raise ExplorerError(f"the interleaved schedule needs the micro-batches ({m}) to be a multiple of pp={p}")
    total = m * v

    def virtual(k: int, kind: int) -> tuple:
        chunk = (k % (p * v)) // p
        return kind, (chunk if kind == F else v - 1 - chunk), (k // (p * v)) * p + k % p

    out = []
    for i in range(p):
        warm = min(2 * (p - i - 1) + (v - 1) * p, total)
        seq = [virtual(k, F) for k in range(warm)]
        for k in range(total - warm):
            seq += [virtual(warm + k, F), virtual(k, B)]
        out.append(seq + [virtual(k, B) for k in range(total - warm, total)])
    return out


def warmup(p: int, r: int, v: int) -> int:
    """Forwards stage r runs before its first backward when m v exceeds them: Megatron-LM's
    2(p-r-1) + (v-1)p warm-up forwards and the first of the steady state (order above)."""
    return 2 * (p - r - 1) + (v - 1) * p + 1


def sync_exposed(rest):
    """Per stage r, the exposed part of an overlapped gradient sync of `rest` seconds split over the
    v chunks (Megatron-Core pipeline_parallel/schedules.py, forward_backward_pipelining_with_
    interleaving: chunk c's sync is launched once its last micro-batch's backward is done, and with
    align_grad_reduce, the default with --overlap-grad-reduce, r backward passes later on stage r, "at
    the same time across the pipeline-parallel group"; a chunk whose delayed launch falls past the
    stage's last backward is launched at its end). In `order`, chunk c's last backward has c p chunk
    backwards after it, all in the cooldown; the chunks' syncs run one after another on the DP
    stream, chunk v-1 first. Each takes rest/v, and b = B_r/v is one chunk's backward, so the sync
    ends max over c of (c+1) rest/v - max(0, c p - r) b after the stage's last pass: linear in c for
    c >= 1 (r < p), so the maximum is at c = 0, 1 or v-1 (g = min(1, v-1) drops c = 1 when v = 1).
    Chunk 0's sync is always exposed. The cooldown's waits between backwards are left out of the
    windows: never less than Megatron's exposed time."""
    import sympy as sp

    from explorer.symbols import B_r, QuickMax, p, r, v
    chunk, g = B_r / v, sp.Min(1, v - 1)
    return QuickMax(rest / v, (1 + g) * rest / v - g * (p - r) * chunk,
                    rest - QuickMax(0, (v - 1) * p - r) * chunk)


def formulas() -> dict:
    import sympy as sp

    from explorer.symbols import (B_max, B_r, F_max, F_r, S_T, StageEndInterleaved, StageEndInterleavedSends, T_star,
                                  W_r, m, p, r, v)
    return dict(
        # A chunk is 1/v of its stage: m(F+B) + (p-1)(F+B)/v for equal stages, i.e. the bubble
        # divided by v; in general (Σ_r (F_r+B_r) + (mv-1)(max F + max B)) / v.
        makespan=(S_T + (m * v - 1) * (F_max + B_max)) / v,
        bubble=(S_T - F_max - B_max) / v + m * (F_max + B_max - T_star),
        # Megatron-LM's warm-up of 2(p-r-1) + (v-1)p chunk-micro-batches plus the one in flight,
        # in whole micro-batches (a chunk holds 1/v of the stage); for r = 0 this is
        # p(1 + (p-1)/(pv)), Korthikanti et al. Sec 4.2.3's interleaving factor.
        in_flight=sp.Min(m * v, 2 * (p - r - 1) + (v - 1) * p + 1) / v,
        overlap_window=B_r / v,            # the last backward pass is one chunk's
        sync_exposed=sync_exposed,         # each chunk's sync from its own last backward (Megatron-Core)
        stage_end=StageEndInterleaved(F_r, B_r, W_r, m, v),   # exact (critical_path.py); makespan bounds it
        # with Megatron-LM overlap_p2p_comm: a pass on another stage waits for its input's end
        # plus the send (critical_path.stage_ends(sends=...))
        stage_end_with=lambda fwd, bwd, sends=None: StageEndInterleaved(fwd, bwd, W_r, m, v) if sends is None
        else StageEndInterleavedSends(fwd, bwd, W_r, m, v, *sends),
    )


INTERLEAVED = Schedule(
    name="interleaved", title="interleaved 1F1B",
    source="Narayanan et al. SC'21 Sec 2.2.2 (published.json ptdp_bubble_interleaved)",
    order=order, formulas=formulas, warmup=warmup,
    chunked=True, min_stages=2, micro_batches_multiple_of_stages=True, overlaps_sends=True,
    stage_end_name="StageEndInterleaved",
)
