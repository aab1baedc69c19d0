"""DualPipeV: DualPipe's V-shaped, single-copy variant (DeepSeek-AI, 'DeepSeek-V3 Technical Report',
arXiv:2412.19437, Sec 3.2.1 and Table 2; the order of deepseek-ai/DualPipe, dualpipe/dualpipev.py).

Each of the p devices holds two model chunks placed in a V (base.input_of_v): chunk 0 is pipeline stage
r of 2p, chunk 1 stage 2p-1-r, so stage 0 holds both the first layers and the loss. Micro-batches run
chunk 0 down the devices and chunk 1 back up; backwards go the other way. The reference step()
(steps 1-8 below) needs at least 2p micro-batches, with no parity rule (DualPipe, the bidirectional
original with two copies of the parameters, needs even p and m: not modelled here).

DualPipe overlaps a forward chunk of one micro-batch with a backward chunk of another (F&B) so that
each hides the other's communication (expert all-to-all, point-to-point sends). This cost model runs
a stage's passes one at a time, so the pair costs F + B here: the overlap hides only communication, and
what a device gains from it is the communication it hides, which these passes already hold at full
cost (an upper bound on the time). What the model does keep is DualPipeV's order: the V placement,
the zero-bubble split of some backwards into B (input gradient) and W (weight gradient) that fill the
bubble, and its memory: 2p + 1 chunk-micro-batches of activations in flight on every device (Table 2's
PP + 1 with PP = 2p chunks), and one copy of the parameters (Table 2's 2x is per DualPipe device,
relative to 1F1B with 2p stages: here the same p devices hold the whole model once).
"""
from explorer.errors import ExplorerError
from explorer.schedules.base import B, F, W, Schedule


def order(p: int, m: int, v: int = 2) -> list:
    """Per device r, DualPipeV.step's order: 2(p-r-1) chunk-0 forwards; r+1 pairs F0 F1; p-r-1 steps
    B1 W F1 (zero bubble: the weight gradient split off); m-2p+r+1 main steps F0 B1 F1 B0 (the first on
    the last device without overlap); p-r-1 steps B1 F1 B0; r+1 steps B1 B0 (the second half with the
    weight gradient split off: from B1 on odd devices, from B0 on even ones); p-r-1 steps W B0 (split);
    r+1 W passes. A backward not split off runs its W right after its B (the same time as a full
    backward); W passes run in the order their B did (WeightGradStore's queue)."""
    if m < 2 * p:
        raise ExplorerError(f"DualPipeV needs at least 2 pp micro-batches ({m} < {2 * p})")
    out = []
    for r in range(p):
        seq, fwd, bwd, queue = [], [0, 0], [0, 0], []

        def forward(c):
            seq.append((F, c, fwd[c]))
            fwd[c] += 1

        def backward(c, split=False):
            seq.append((B, c, bwd[c]))
            (queue.append if split else seq.append)((W, c, bwd[c]))
            bwd[c] += 1

        def weight():
            seq.append(queue.pop(0))

        for _ in range(2 * (p - r - 1)):                 # step 1: nF0
            forward(0)
        for _ in range(r + 1):                           # step 2: nF0F1
            forward(0)
            forward(1)
        for _ in range(p - r - 1):                       # step 3: nB1W1F1 (zero bubble)
            backward(1, split=True)
            weight()
            forward(1)
        for _ in range(m - 2 * p + r + 1):               # step 4: nF0B1F1B0 (F0 & B1, F1 & B0 overlapped)
            forward(0)
            backward(1)
            forward(1)
            backward(0)
        for _ in range(p - r - 1):                       # step 5: nB1F1B0
            backward(1)
            forward(1)
            backward(0)
        split = False
        for i in range(r + 1):                           # step 6: nB1B0, the second half zero bubble
            if i == (r + 1) // 2 and r % 2 == 1:
                split = True
            backward(1, split)
            if i == (r + 1) // 2 and r % 2 == 0:
                split = True
            backward(0, split)
        for _ in range(p - r - 1):                       # step 7: nWB0 (zero bubble)
            weight()
            backward(0, split=True)
        for _ in range(r + 1):                           # step 8: nW
            weight()
        out.append(seq)
    return out


def warmup(p: int, r: int, v: int = 2) -> int:
    """Chunk forwards device r runs before its first backward: 2(p-r-1) + 2(r+1) = 2p (steps 1, 2)."""
    return 2 * p


def formulas() -> dict:
    from explorer.symbols import B_max, B_r, F_max, F_r, StageMax, T_star, W_r, m, p, sp, stage_end_class, v
    ends = stage_end_class("StageEndDualPipeV", "DualPipeV")(F_r, B_r, W_r, m, v)
    # Table 2's bubble, (PP/2 - 1)(F&B + B - 3W) in chunk times with PP = 2p chunks on p devices, reads
    # (p-1)(F + 2B - 3W)/2 in stage times once the pair F&B runs as F + B (a chunk is half a stage).
    # With passes run one at a time the order's own critical path is no such closed form: its bubble
    # does not depend on m but is piecewise in F, B, W (below the table's when B >= F,
    # tests/test_schedule_objects.py), so the makespan is the longest stage end itself (exact), and the
    # table's form, an upper bound for B >= F, is the numeric fallback beyond the graph bound.
    table = (p - 1) * sp.Max(F_max + 2 * B_max - 3 * StageMax(W_r), 0) / 2
    return dict(
        makespan=StageMax(ends),
        bubble=StageMax(ends) - m * T_star,
        makespan_bound=m * (F_max + B_max) + table,
        in_flight=sp.Min(m * v, 2 * p + 1) / v,     # Table 2: PP + 1 chunks (of 1/v of the stage each)
        overlap_window=B_r / v,                      # the last chunk backward (its B and W, as ZB-H1)
        stage_end=ends,
    )


DUALPIPE_V = Schedule(
    name="dualpipev", title="DualPipeV",
    source="DeepSeek-V3 technical report (arXiv:2412.19437) Sec 3.2.1, Table 2; deepseek-ai/DualPipe dualpipev.py",
    order=order, formulas=formulas, warmup=warmup,
    chunked=True, chunks=2, placement="v", splits_weight=True, min_stages=2, micro_batches_per_stage=2,
    micro_batches_reason="DualPipeV.step asserts num_chunks >= num_ranks * 2 (deepseek-ai/DualPipe)",
    first_backward_climbs=False, stage_end_name="StageEndDualPipeV",
)
