"""How sure a search's ranking is (issue 28 item 3): how often "A is faster than B" holds as the cluster's
uncertain constants vary across the model's validated error.

The uncertain constants are the cluster file's fitted or carried-over efficiencies and latencies
(UNCERTAIN: `efficiency.*`, each level's `bandwidth_efficiency` and `latency_us`), not the datasheet peaks
and bandwidths. Each varies by an independent relative amount delta_c ~ N(0, s^2) (log-normal), and to
first order ln T = ln T0 + sum_c e_c delta_c with e_c its elasticity (explorer.validation.sensitivity:
the exact derivative of the cost tree). The spread s is set so that the fastest strategy's time varies by
its regime's validated error sigma (explorer.validation.evidence: the held-out rows' mean |error|):
s = sigma / ||e_best||. Then for two strategies A and B

    P(A faster than B) = Phi( (ln T_B - ln T_A) / (s ||e_A - e_B||) ),

large when they lean on the constants alike (their errors are shared) or their gap is wide, near 1/2 when a
small gap separates strategies that depend on different constants (more communication against more
compute). Where the regime has no validated run (extrapolating), sigma is the largest validated regime's
error and the answer says so.
"""
from __future__ import annotations

import math

from explorer.validation.evidence import evidence
from explorer.validation.regimes import regimes
from explorer.validation.sensitivity import sensitivity_or_reason

UNCERTAIN = ("efficiency.", "bandwidth_efficiency", "latency_us")
"""Field paths (prefix or suffix) of the constants varied: fitted or carried-over efficiencies and latencies."""
MAX_RANKED = 10
"""At most this many strategies are compared (each needs its sensitivity: a compile per new structure)."""


def uncertain(field: str) -> bool:
    return field.startswith(UNCERTAIN[0]) or field.endswith(UNCERTAIN[1:])


def _phi(x: float) -> float:
    return 0.5 * (1.0 + math.erf(x / math.sqrt(2.0)))


def holds(time_a: float, time_b: float, elasticities_a: dict, elasticities_b: dict, spread: float) -> float:
    """P(A faster than B) with the constants' relative spread `spread` (the module docstring's formula)."""
    fields = set(elasticities_a) | set(elasticities_b)
    norm = math.sqrt(sum((elasticities_a.get(f, 0.0) - elasticities_b.get(f, 0.0)) ** 2 for f in fields))
    gap = math.log(time_b / time_a)
    if norm * spread == 0.0:
        return 1.0 if gap > 0 else (0.5 if gap == 0 else 0.0)
    return _phi(gap / (spread * norm))


def robustness(model, cluster, candidates) -> dict:
    """For the search's candidates (explorer.search.Candidate, fastest first: at most MAX_RANKED of them):
    the regime's error sigma, the spread s of the constants, each candidate's time band (+- sigma-equivalent,
    s ||e||) and how often each of the first one's wins and each neighbour's order holds, as plain JSON values."""
    ranked = list(candidates)[:MAX_RANKED]
    if not ranked:
        return {"sigma": None, "spread": None, "bands": [], "pairs": []}
    ev = evidence(model, ranked[0].strategy, cluster)
    sigma, source = ev["mean_abs_error"], ev["regime"]
    if ev["extrapolating"] or sigma is None:
        widest = max(regimes(), key=lambda r: r.mean_abs_error)
        sigma, source = widest.mean_abs_error, f"extrapolating ({ev['reason']}): the widest validated regime, " \
                                               f"{widest.name}"
    elastic = []
    for c in ranked:
        e = sensitivity_or_reason(model, c.strategy, cluster, c.result)
        if "unavailable" in e:              # a pipeline beyond the exact path weights
            return {"sigma": sigma, "sigma_from": source, "spread": None, "bands": [], "pairs": [],
                    "unavailable": e["unavailable"]}
        elastic.append({f: x for f, x in e["elasticities"].items() if uncertain(f) and x})
    norm0 = math.sqrt(sum(x * x for x in elastic[0].values()))
    spread = sigma / norm0 if norm0 else 0.0
    bands = [spread * math.sqrt(sum(x * x for x in e.values())) for e in elastic]
    pairs = []
    for i in range(len(ranked)):
        for j in range(i + 1, len(ranked)):
            if i == 0 or j == i + 1:           # the first against every other, and each neighbour pair
                pairs.append({"faster": i + 1, "slower": j + 1,
                              "holds": holds(ranked[i].iteration_time_s, ranked[j].iteration_time_s, elastic[i],
                                             elastic[j], spread)})
    return {"sigma": sigma, "sigma_from": source, "spread": spread, "bands": bands, "pairs": pairs,
            "varied": sorted(set().union(*elastic))}


def holds_words(p: float) -> str:
    """'in 93 % of the plausible range' (one decimal past 99 %; 'a tie' at 1/2: the same time, other memory)."""
    if p == 0.5:
        return "a tie (the same time; they differ in memory)"
    shown = f"{100 * p:.1f}" if 0.99 < p < 1 else f"{100 * p:.0f}"
    return f"in {'over 99.9' if p > 0.999 else shown} % of the plausible range"


def robustness_text(rob: dict) -> str:
    """A few lines for the CLI: the spread and each neighbour pair's probability."""
    if "unavailable" in rob:
        return f"robustness: {rob['unavailable']}"
    if not rob["pairs"]:
        return ""
    lines = [f"robustness: constants varied by ±{100 * rob['spread']:.1f} % each, so that the fastest's time "
             f"varies by ±{100 * rob['sigma']:.0f} % ({rob['sigma_from']})"]
    for p in rob["pairs"]:
        if p["slower"] == p["faster"] + 1:
            lines.append(f"  #{p['faster']} faster than #{p['slower']}: " + holds_words(p["holds"]))
    return "\n".join(lines)


__all__ = ["MAX_RANKED", "UNCERTAIN", "holds", "holds_words", "robustness", "robustness_text", "uncertain"]
