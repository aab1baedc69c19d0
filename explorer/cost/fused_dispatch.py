"""The fused token dispatchers' bytes between NVLink domains (issue 27's open item: DeepEP/HybridEP's bandwidth
term).

The fused dispatchers (DeepEP, HybridEP) send a token once to each remote NVLink domain
that holds one of its experts, not once per expert: DeepEP's internode "normal" kernels move a token over RDMA
to the GPU of the same local index on each target node with the bit mask of the NVLink ranks there that need
it, which forward it over NVLink (deepseek-ai/DeepEP csrc/kernels/internode.cu at b805c0e1, SourceMeta
is_token_in_nvl_rank_bits; DeepSeek-V3 technical report arXiv:2412.19437 Sec 3.2.2: "tokens are first
transmitted via IB to the GPUs with the same in-node index on their target nodes ... then forwarded via
NVLink"); HybridEP keeps this hierarchy (RDMA between domains, NVLink/TMA inside: deepseek-ai/DeepEP
Hybrid-EP_Implementation.md at 07eea0c0, "Hierarchical Communication Design"). With a token's k experts
uniform over the E experts of the ep group, spread evenly over its u domains (E/u each), a remote domain
receives the token with probability 1 - C(E - E/u, k)/C(E, k), so a token crosses the scale-out network
(u - 1)(1 - C(E - E/u, k)/C(E, k)) times instead of the all-to-all's k (u - 1)/u: the factor
u (1 - C(E - E/u, k)/C(E, k)) / k on the bytes the all-to-all sends between domains (DeepSeek-V3 at ep 32 over
4 nodes: 0.452; Qwen3-30B-A3B at ep 16 over 2 nodes: 0.249). The group's time is the busiest level's
(explorer.cost.collectives.route_g_L): the factor multiplies the collective, so the inner level's share
scales too; it stays the faster one (NVLink's g is 9-18x below the RDMA level's).

Inside one NVLink domain (u = 1: an 8-GPU node at ep <= 8, GB200 NVL72 at ep <= 72) DeepEP sends a token once to
each rank that holds one of its experts, and the rank makes the copies for its local experts by a permute of its
own: its layout kernel counts num_tokens_per_rank and is_token_in_rank from the top-k indices
(deepseek-ai/DeepEP csrc/kernels/internode.cu get_dispatch_layout, which Buffer.get_dispatch_layout runs for the
intranode dispatch too), Megatron-Core passes them to
Buffer.dispatch and permutes the received rows to experts afterwards (megatron/core/transformer/moe/fused_a2a.py
FusedDispatch, token_dispatcher.py _DeepepManager; NVIDIA/Megatron-LM at d98e8a64). The same count with ranks
for domains: n (1 - C(E - E/n, k)/C(E, k)) / k of the all-to-all's bytes over an ep group of n ranks (Qwen3-30B-A3B
at ep 8: 0.667; a review against the source found the intranode copies counted per expert, 2026-12-07). HybridEP
inside a domain is left at the all-to-all's bytes: its dispatch permutes on the receiving side too
(HybridEPBuffer.dispatch_with_permute), but what it sends per rank was not read from its kernels.

The SMs the dispatch kernels hold (overlap_sm_share): DeepEP and HybridEP move tokens with kernels of their own that
keep a fixed number of SMs (Megatron-Core core_v0.16.0 megatron/core/transformer/transformer_config.py:
moe_deepep_num_sms = 20, moe_hybridep_num_sms = 16, "In pure NVL scenarios, 16 SMs can generally achieve good
bandwidth"; DISPATCH_SMS). Under expert-parallel overlap the partner pass's compute runs beside them on the other
SMs: while a dispatch or combine of E seconds runs, compute progresses at (1 - sigma) of its rate, sigma = the
kernels' SMs over the device's (Device.sms), so a pass of compute C and all-to-alls E under it ends after
max(E, C + sigma E) when E <= C/(1 - sigma): exposed max(sigma E, E - C) (explorer/cost/numeric.py ep_exposed). The
all-to-all dispatcher (NCCL's kernels) is not given an SM share here: 0. The recipes that set their own SM counts
(DeepSeek-V3 26.08 GB200: moe_hybridep_num_sms 32) are not keyed.

No sympy here: the search's numeric path reads the factor too (explorer/search/tables.py).
"""
from __future__ import annotations

from fractions import Fraction
from math import comb

FUSED_DISPATCHERS = ("deepep", "hybridep")
DISPATCH_SMS = {"deepep": 20, "hybridep": 16}
"""SMs each fused dispatcher's kernels keep (Megatron-Core core_v0.16.0 TransformerConfig moe_deepep_num_sms,
moe_hybridep_num_sms defaults: module docstring)."""


def fused_rdma_factor(dispatcher: str, experts: int, top_k: int, route: tuple) -> Fraction:
    """The fused dispatchers' bytes between NVLink domains over the all-to-all's (module docstring), and DeepEP's
    between the ranks of one domain: 1 for the all-to-all and all-gather dispatchers, and for HybridEP inside one
    domain; `route` is the ep group's
    fan-in per machine level, the NVLink domain innermost (explorer.cost.numeric.ep_group_route)."""
    n = 1
    for c in route:
        n *= int(c)
    domains = n // int(route[0]) if route else 1
    if dispatcher == "deepep" and domains <= 1:     # one domain: once per rank that holds one of its experts
        domains = n
    if dispatcher not in FUSED_DISPATCHERS or domains <= 1 or experts % domains or top_k < 1:
        return Fraction(1)
    missed = Fraction(comb(experts - experts // domains, top_k), comb(experts, top_k))
    return domains * (1 - missed) / top_k


def fused_factor(model, strategy, route: tuple) -> Fraction:
    """The strategy's dispatcher's bytes over the all-to-all's for an ep group of `route` (fused_rdma_factor),
    as explorer.cost.experts.ep_sized and the search's explorer.cost.tree.expert_seconds apply it."""
    return fused_rdma_factor(strategy.moe_dispatcher, model.experts, model.experts_per_token, route)


def overlap_sm_fraction(dispatcher: str, device_sms: int) -> Fraction:
    """sigma: the share of the device's SMs `dispatcher`'s kernels hold while they run under compute (module
    docstring), exact (explain prints it as a fraction); 0 for the all-to-all and all-gather dispatchers and for a
    device without an SM count; at most 1 (a device with fewer SMs than the kernels keep runs no compute beside
    them: the all-to-alls wholly exposed)."""
    return min(Fraction(1), Fraction(DISPATCH_SMS.get(dispatcher, 0), device_sms)) if device_sms else Fraction(0)


def overlap_sm_share(dispatcher: str, device_sms: int) -> float:
    """overlap_sm_fraction as a float, for the numbers."""
    return float(overlap_sm_fraction(dispatcher, device_sms))


EAGER_HIDDEN = Fraction(3655, 10000)
"""The share of its all-to-alls' time expert-parallel overlap hides under the partner pass's compute when the step is
not one CUDA graph: 36.55 %, measured. NVIDIA's rank-0 Nsight Systems comparison of Qwen3-30B-A3B pretraining on 16
H100 (BF16, t 1 p 1 e 16, b 1, HybridEP, Transformer Engine graph scopes moe_router and moe_preprocess), EP overlap off
and on: 'Communication time hidden by compute 0.11 % / 36.55 %' (NVIDIA-NeMo/Megatron-Bridge
skills/nemo-mbridge-perf-moe-comm-overlap/SKILL.md, snapshot 067f987d, 'HybridEP production-shape validation'; the
same file: 'concurrent kernels can run longer because they contend for SMs or bandwidth'). Measured with the router
scope's graphs (Strategy.cuda_graphs 'router') and applied there and to eager steps ('none': the same merged schedule,
more host work: Megatron-LM PR 2184 'EP Overlap brings extra cpu overhead and may cause GPU bubble'); per-layer and
full-iteration graphs keep the model's whole hiding (no measurement; the GB200 full-iteration rows validate it)."""
EAGER_GRAPHS = ("none", "router")


def overlap_exposed_fraction(dispatcher: str, device_sms: int, graphs: str) -> Fraction:
    """sigma: the share of an overlapped all-to-all that stays exposed at least, max(sigma E, E - C): the SMs the
    fused dispatcher's kernels hold (overlap_sm_fraction), and under a step that is not one graph (`graphs` in
    EAGER_GRAPHS) 1 - EAGER_HIDDEN, exact (explain prints it)."""
    sm = overlap_sm_fraction(dispatcher, device_sms)
    return max(sm, 1 - EAGER_HIDDEN) if graphs in EAGER_GRAPHS else sm
