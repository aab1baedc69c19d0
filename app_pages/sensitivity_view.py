"""The Cost page's "What this number depends on": the tornado chart of the iteration time's elasticities
to the cluster file's constants (explorer.validation.sensitivity; issue 28 item 2)."""
import streamlit as st

from explorer.facade import sensitivity_constant_name, tornado_figure
from app_pages import compute as C
from app_pages.text import plain


W_SHOW = "w_cost_sensitivity"      # the toggle: the first sensitivity of a structure compiles its derivatives


def show(view) -> None:
    """The chart and a line on how to read it, for the evaluated view, when asked: the derivatives of a new
    structure are compiled on first use (1-2 s of CPU, benchmarks/bench_sensitivity.py), which a page view
    should not pay unasked while a class shares the server."""
    st.subheader("What this number depends on")
    if not st.toggle("Show the elasticities (compiled once per model structure: a second or two the first time)",
                     key=W_SHOW):
        return
    sens = C.sensitivity_of(view.model, view.strategy, view.cluster)
    if "unavailable" in sens:
        st.info(plain(sens["unavailable"].capitalize() + "."))
        return
    st.plotly_chart(C.shown(tornado_figure(sens)), key="cost_sensitivity_chart")
    top = next(iter(sens["top"]), None)
    if top:
        st.caption(f"Elasticity d ln T / d ln c of the iteration time to each constant of the cluster file: raising "
                   f"the {plain(sensitivity_constant_name(top[0]))} by 1 % changes the time by {top[1]:+.2f} % (lowering "
                   "it by 1 %, the opposite). Exact derivatives of the same "
                   "cost formulas (the branch each maximum takes here), not a re-run; a category's share is in "
                   "the hover text.")
