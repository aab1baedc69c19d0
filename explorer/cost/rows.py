"""Row-shaped views of one evaluated strategy: communication by kind, stage parts."""
from __future__ import annotations

from explorer.cost import collectives as coll
from explorer.cost.collectives import cp_kind
from explorer.cost.numeric import COMM_KINDS, block_quantity


def _split(row: dict, kind: str, route: tuple, nums, names) -> list:
    """One collective's row split over the machine levels of its group: bytes by the level's share
    (explorer.cost.collectives.level_shares), time by how long each level is busy (the levels run
    at once, so their busy times overlap; the parts sum to the collective's time)."""
    shares = [float(w) for w in coll.level_shares(kind, route)]
    busy = [w * g for w, g in zip(shares, nums.hw["g"])]
    total = sum(busy)
    return [dict(row, level=names[i], time_s=row["time_s"] * busy[i] / total,
                 hidden_s=row["hidden_s"] * busy[i] / total, bytes=row["bytes"] * shares[i])
            for i in range(len(shares)) if shares[i]]


_ROW_QUANTITIES = tuple(f"{x}_{name}" for name in COMM_KINDS for x in "thb") + \
    ("cp_total", "cp_fwd", "cp_bwd", "cp_bytes")
"""The block quantities (BLOCK_Q) comm_rows reads."""


def comm_rows(ev, k, M, sync, dp_bytes, zero_bytes, strategy, sends_share=None, ep_share=None) -> list:
    """Communication of the most loaded device (stage k of candidate 0 of the Evaluation `ev`,
    explorer.cost.evaluation) split by category, collective and machine level; `sends_share`: with the
    pipeline's sends overlapped, the exposed fraction of their time (the rest is hidden under computation),
    else None; `ep_share`: the same for the MoE all-to-alls under expert-parallel overlap
    (explorer/cost/numeric.py ep_exposed)."""
    rows, nums, tree = [], ev.nums, ev.tree
    names = nums.level_names
    values = ev.block_values[:, :, 0]
    cols = {name: block_quantity(values, name) for name in _ROW_QUANTITIES}   # per block kind, one micro-batch
    q = cols.__getitem__
    for kind_i, kind in enumerate(tree.kinds):
        count = tree.counts[k, kind_i]
        for name in COMM_KINDS:
            secs = M * count * float(q(f"t_{name}")[kind_i])
            if secs or q(f"h_{name}")[kind_i]:
                row = {"category": "op_comm", "kind": name, "time_s": secs,
                       "hidden_s": M * count * float(q(f"h_{name}")[kind_i]),
                       "bytes": M * count * float(q(f"b_{name}")[kind_i])}
                rows += _split(row, "all_reduce", kind.route, nums, names)   # priced as its ring (Numbers.block_args)
        if getattr(strategy, "cp", 1) > 1 and q("cp_total")[kind_i]:   # context-parallel exchange
            exposed = float(q("cp_fwd")[kind_i] + q("cp_bwd")[kind_i])
            how = cp_kind(strategy.cp_algo)
            row = {"category": "cp_comm", "kind": how, "time_s": M * count * exposed,
                   "hidden_s": M * count * max(0.0, float(q("cp_total")[kind_i]) - exposed),
                   "bytes": M * count * float(q("cp_bytes")[kind_i])}
            rows += _split(row, how, kind.cp_route, nums, names)
    by_kind = {key: arr[:, :, 0] for key, arr in ev.boundary.by_kind.items()}
    for (category, name, level), arr in by_kind.items():
        if arr[0, k] or arr[1, k]:
            secs = M * float(arr[0, k])
            shown = secs * sends_share if sends_share is not None and name == "p2p" and category == "pp_comm" \
                else secs * ep_share if ep_share is not None and category == "ep_comm" else secs
            rows.append({"category": category, "kind": name, "level": names[level],
                         "time_s": shown, "hidden_s": secs - shown, "bytes": M * float(arr[1, k])})
    if float(sync["dp_total"]) > 0:
        kind = "reduce_scatter" if strategy.zero >= 2 else "all_reduce"
        rows += _by_group(sync, "dp_comm", kind, (sync["dp_total"], sync["dp_exposed"], dp_bytes),
                          (sync["experts_total"], sync["experts_bytes"]), nums, names)
        if strategy.zero == 3:
            rows += _by_group(sync, "zero_comm", "all_gather", (sync["zero"], sync["zero_exposed"], zero_bytes),
                              (sync["zero_experts"], sync["zero_experts_bytes"]), nums, names)
    return _merge(rows)


def _by_group(sync: dict, category: str, kind: str, whole: tuple, experts: tuple, nums, names) -> list:
    """A data-parallel collective's rows (the gradient sync, or ZeRO-3's gathers): the dense weights' part over the
    data-parallel groups' route and, with experts, the expert weights' part over their own group's route
    (sync["experts_route"]: with e filling the NVLink domain, GPT-OSS on B200, their d / e replicas sit one per
    node, all on the network), each split over its levels (_split). `whole`: (seconds, exposed seconds, bytes) of
    both parts; `experts`: (seconds, bytes) of the experts' part. The exposed and hidden seconds, known for the whole
    collective, go to the two parts in proportion to their link time."""
    total, exposed, nbytes = (float(x) for x in whole)
    expert = min(max(float(experts[0]), 0.0), total) if total > 0 else 0.0
    share = expert / total if total > 0 else 0.0
    hidden = max(0.0, total - exposed)
    parts = [(1 - share, nbytes - float(experts[1]), sync["route"]),
             (share, float(experts[1]), sync["experts_route"])]
    return [row for part, part_bytes, route in parts if part > 0 or part_bytes > 0
            for row in _split({"category": category, "kind": kind, "time_s": exposed * part,
                               "hidden_s": hidden * part, "bytes": part_bytes}, kind, route, nums, names)]


def _merge(rows) -> list:
    merged = {}
    for row in rows:
        key = (row["category"], row["kind"], row["level"])
        if key in merged:
            for name in ("time_s", "hidden_s", "bytes"):
                merged[key][name] += row[name]
        else:
            merged[key] = dict(row)
    return list(merged.values())


def stage_rows(ev, fwd_b, bwd_b, sync, sync_bytes) -> list:
    """Per stage of candidate 0 of the Evaluation `ev`, one micro-batch's forward and backward split into
    their parts (seconds; fwd_b, bwd_b: the boundary seconds by category, what EP overlap leaves exposed),
    when its last pass ends (end_s, the schedule's critical path), and the stage's own gradient sync, ZeRO
    gathers and optimizer step; fwd/bwd_p2p_s: the point-to-point sends within its pp_comm parts (S^f_r, S^b_r)."""
    rows = []
    dp_total, dp_exposed, zero, opt, ends = sync["per_stage"]
    zero_pass, zero_pass_bytes, zero_fwd, zero_bwd = sync["per_pass"]
    F_r, B_r = ev.stage_input("F_r")[:, 0], ev.stage_input("B_r")[:, 0]
    sends = {name: ev.stage_inputs[name][:, 0] for name in ("S^f_r", "S^b_r") if name in ev.stage_inputs}
    named = {name: ev.stage_q(name)[:, 0] for name in ("fwd_compute", "bwd_compute", "host_fwd_exposed",
                                                        "host_bwd_exposed", "bwd_weight", "recompute", "fwd_comm",
                                                        "bwd_comm", "cp_fwd", "cp_bwd")}
    for i in range(ev.stages):
        q = lambda name: float(named[name][i])
        rows.append({
            "stage": i, "fwd_s": float(F_r[i]), "bwd_s": float(B_r[i]), "end_s": float(ends[i]),
            "fwd_compute_s": q("fwd_compute"), "bwd_compute_s": q("bwd_compute"),
            "fwd_host_s": q("host_fwd_exposed"), "bwd_host_s": q("host_bwd_exposed"),   # parts of compute
            "bwd_weight_s": q("bwd_weight"), "recompute_s": q("recompute"),
            "fwd_op_comm_s": q("fwd_comm") + float(fwd_b["op_comm"][i]),
            "bwd_op_comm_s": q("bwd_comm") + float(bwd_b["op_comm"][i]),
            "fwd_redistribution_s": float(fwd_b["redistribution"][i]),
            "bwd_redistribution_s": float(bwd_b["redistribution"][i]),
            "fwd_pp_comm_s": float(fwd_b["pp_comm"][i]), "bwd_pp_comm_s": float(bwd_b["pp_comm"][i]),
            "fwd_cp_comm_s": q("cp_fwd"), "bwd_cp_comm_s": q("cp_bwd"),
            "fwd_ep_comm_s": float(fwd_b["ep_comm"][i]), "bwd_ep_comm_s": float(bwd_b["ep_comm"][i]),
            "dp_sync_s": float(dp_total[i]), "dp_exposed_s": float(dp_exposed[i]),
            "zero_comm_s": float(zero[i]), "optimizer_s": float(opt[i]),
            "dp_bytes": float(sync_bytes[0][i]), "zero_bytes": float(sync_bytes[1][i]),
            "zero_pass_s": float(zero_pass[i]), "zero_pass_bytes": float(zero_pass_bytes[i]),
            "zero_pass_fwd_exposed_s": float(zero_fwd[i]), "zero_pass_bwd_exposed_s": float(zero_bwd[i]),
            "fwd_p2p_s": float(sends["S^f_r"][i]) if sends else 0.0,
            "bwd_p2p_s": float(sends["S^b_r"][i]) if sends else 0.0,
        })
    return rows
