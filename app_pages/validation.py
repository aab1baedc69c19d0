"""Validation: predicted vs published for every measured run, with its citation, and a parity plot."""
import pandas as pd
import streamlit as st

from explorer.facade import ExplorerError, load_cluster
from explorer.facade import band_of, parity_figure, residual_heatmap, validated_regimes
from explorer.facade import VALIDATION_GROUPS, VALIDATION_TARGETS as TARGETS
from explorer.facade import load_all_cases, load_megatron_bridge, summarize, validate
from explorer.facade import validation_group_name as group_name
from app_pages.text import plain
from app_pages.compute import shown, table as shown_table     # classroom mode: palette, 3 significant digits

A100_GROUPS = ("megatron_table1", "korthikanti_table4")
OTHER_GROUPS = ("bf16_h100", "moe_ab_h100")     # the dense BF16 H100 rows and NVIDIA's matched MoE A/B runs


@st.cache_data(max_entries=2, show_spinner="Predicting the published runs…")
def run_validation(cluster_name: str):
    rows = validate(load_all_cases(VALIDATION_GROUPS), load_cluster(cluster_name))
    return rows, summarize(rows), load_megatron_bridge()[1]


def _metrics(summary: dict, groups) -> None:
    groups = [g for g in groups if g in summary]
    cols = st.columns(len(groups))
    for col, group in zip(cols, groups):
        s = summary[group]
        mean_t, max_t = TARGETS.get(group, (None, None))
        parts = "; ".join(f"{k}: {v['cases']} cases, mean {100 * v['mean_abs_error']:.1f} %, "
                          f"max {100 * v['max_abs_error']:.1f} %" for k, v in s.items() if isinstance(v, dict))
        col.metric(f"{group_name(group)}: mean |error|", f"{100 * s['mean_abs_error']:.1f} %",
                   help=f"{s['cases']} cases; max {100 * s['max_abs_error']:.1f} %; "
                        f"targets mean <= {100 * mean_t:.0f} %, max <= {100 * max_t:.0f} %" + (f"; {parts}" if parts else ""))
        col.metric(f"{group_name(group)}: max |error|", f"{100 * s['max_abs_error']:.1f} %")


def _parity(rows):
    """The parity plot of `rows`, each group named as a person reads it."""
    return shown(parity_figure(rows, band_of(rows), names={r.group: group_name(r.group) for r in rows}))


def _table(rows) -> pd.DataFrame:
    return pd.DataFrame([{"case": r.id, "metric": r.metric, "predicted": r.predicted, "published": r.expected,
                          "error %": 100 * r.relative_error, "fit": r.subset,
                          "FLOPs convention": r.convention, "assumptions": r.assumptions,
                          "source": r.source} for r in rows])


st.title("Validation against published runs")
try:
    rows, summary, skipped = run_validation("dgx-a100-80gb")
except ExplorerError as err:
    st.error(plain(err))
    st.stop()

st.subheader("A100: Megatron-LM SC'21 Table 1 and Korthikanti et al. Table 4")
st.caption("Every measured run in assets/validation/published.json (with its citation), predicted with one set of "
           "constants for the hardware (assets/clusters/dgx-a100-80gb.json).")
old = [r for r in rows if r.group in A100_GROUPS]
_metrics(summary, A100_GROUPS)
st.plotly_chart(_parity(old), key="validation_parity")

st.subheader("Megatron-Bridge 2025–26: DGX H100, DGX B200, GB200 NVL72")
st.caption("NVIDIA's published pre-training throughput (NVIDIA-NeMo/Megatron-Bridge docs/performance-summary*.md, "
           "assets/validation/megatron_bridge.json), model TFLOP/s per GPU in Megatron-Bridge's FLOPs convention "
           "over our iteration time; each system on its own preset (one constant set per hardware, FP8 GEMM "
           "efficiency per system: benchmarks/fit_megatron_bridge.py, 'fit' says which rows it was fitted on). "
           "Gradients reduced in bf16; Megatron's distributed optimizer (ZeRO-1 over dp), or ZeRO-3 for the Megatron "
           "FSDP rows; TP communication under the GEMMs: as the recipes set them.")
new = [r for r in rows if r.group not in A100_GROUPS + OTHER_GROUPS and r.metric != "tokens_per_sec_per_gpu"]
if new:
    _metrics(summary, sorted({r.group for r in new}))
    st.plotly_chart(_parity(new), key="validation_parity_bridge")

moe = [r for r in rows if r.metric == "tokens_per_sec_per_gpu" and r.group not in OTHER_GROUPS]
if moe:
    st.subheader("Megatron-Bridge 2025–26, Mixture-of-Experts rows")
    st.caption("DeepSeek-V3, Qwen3-30B-A3B, Qwen3-235B-A22B and GPT-OSS-120B rows, compared on the published "
               "tokens/s per GPU (no FLOPs convention involved) with the same constants, each with what its container's "
               "recipes ran (CUDA graph scope, token dispatcher, token-drop), and the host's issue time per kernel "
               "(one constant, fitted on the NeMo 26.02 DGX-B200 rows; every other row held out). What is still "
               "missing is in each case's assumptions and docs/validation.md.")
    _metrics(summary, sorted({r.group for r in moe}))
    st.plotly_chart(_parity(moe), key="validation_parity_bridge_moe")

other = [r for r in rows if r.group in OTHER_GROUPS]
if other:
    st.subheader("H100: dense BF16 runs, and NVIDIA's matched MoE A/B runs")
    st.caption("Megatron-LM's H100 weak-scaling table and NeMo AutoModel's Llama 3.1 70B row, the BF16 GEMM "
               "efficiency's fit ('fit' says which rows; assets/validation/bf16_dense.json); and Qwen3-30B-A3B on 16 H100 "
               "with one option changed at a time -- the token dispatcher, expert-parallel overlap, CUDA graphs -- from "
               "Megatron-Bridge's performance skills, compared on the step time (assets/validation/moe_ab_h100.json, "
               "all held out). One parity plot per metric: the dense rows' TFLOP/s, the A/B runs' seconds; "
               "AutoModel's row (tokens/s) is in the table below.")
    _metrics(summary, [g for g in OTHER_GROUPS if g in summary])
    for metric in ("model_tflops_per_gpu", "iteration_time_s"):    # one unit an axis (explorer/charts/parity.py)
        same = [r for r in other if r.metric == metric]
        if same:
            st.plotly_chart(_parity(same), key=f"validation_parity_h100_{metric}")

st.subheader("Residuals by regime: the error bar beside every number")
st.caption("Each cell is a regime (accelerator × precision × dense/MoE): the mean and worst |error| of its validated "
           "runs that no constant was fitted on, from assets/validation/residuals.json. The Cost page shows the "
           "regime's band beside the iteration time; a strategy in an empty cell is extrapolating (no validated run "
           "there), and the Cost page says so.")
st.plotly_chart(shown(residual_heatmap(validated_regimes())), key="validation_regimes")

st.subheader("Every case")
st.caption("error %: predicted / published − 1 of the row's metric, so for a throughput + means the model predicted "
           "it faster than it ran, and for a time (iteration_time_s, layer_fwd_s, layer_bwd_s) + means slower. The "
           "Cost page's nearest runs and the regimes above sign every row as a speed: + is faster.")
table = _table(rows)
st.dataframe(shown_table(table), hide_index=True)
st.download_button("Download CSV", table.to_csv(index=False), "validation.csv", "text/csv", on_click="ignore")
with st.expander(f"Megatron-Bridge rows not compared, each with its reason ({len(skipped)})"):
    st.dataframe(pd.DataFrame([{"row": i, "system": s, "why": why} for i, s, why in skipped]), hide_index=True)
