"""Validation: predicted vs published for every measured run, with its citation, and a parity plot."""
import pandas as pd
import streamlit as st

from explorer.facade import ExplorerError, load_cluster
from explorer.facade import parity_figure
from explorer.facade import VALIDATION_TARGETS as TARGETS
from explorer.facade import load_cases, summarize, validate
from app_pages.text import plain


@st.cache_data(max_entries=2, show_spinner="Predicting the published runs…")
def run_validation(cluster_name: str):
    rows = validate(load_cases(), load_cluster(cluster_name))
    return rows, summarize(rows)


st.title("Validation against published runs")
st.caption("Every measured run in assets/validation/published.json (with its citation), predicted with one set of "
           "constants for the hardware (assets/clusters/dgx-a100-80gb.json).")
try:
    rows, summary = run_validation("dgx-a100-80gb")
except ExplorerError as err:
    st.error(plain(err))
    st.stop()
cols = st.columns(len(summary))
for col, (group, s) in zip(cols, summary.items()):
    mean_t, max_t = TARGETS.get(group, (None, None))
    col.metric(f"{group}: mean |error|", f"{100 * s['mean_abs_error']:.1f} %",
               help=f"{s['cases']} cases; max {100 * s['max_abs_error']:.1f} %; "
                    f"targets mean <= {100 * mean_t:.0f} %, max <= {100 * max_t:.0f} %")
    col.metric(f"{group}: max |error|", f"{100 * s['max_abs_error']:.1f} %")
st.plotly_chart(parity_figure(rows), key="validation_parity")
table = pd.DataFrame([{"case": r.id, "metric": r.metric, "predicted": r.predicted, "published": r.expected,
                       "error %": 100 * r.relative_error, "assumptions": r.assumptions, "source": r.source}
                      for r in rows])
st.dataframe(table, hide_index=True)
st.download_button("Download CSV", table.to_csv(index=False), "validation.csv", "text/csv", on_click="ignore")
