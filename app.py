"""Bridging DL Explorer: the Streamlit entry script (routes the pages)."""
import streamlit as st

st.set_page_config(page_title="Bridging DL Explorer", layout="wide")

PAGES = [
    st.Page("pages/cost.py", title="Cost breakdown", default=True),
]

st.navigation(PAGES).run()
