"""The Cost page's small chart: the attention kernel's efficiency by tokens per call, with its source."""
import streamlit as st

from app_pages.compute import attention_curve_of, shown


def show(view) -> None:
    """Under the symbolic terms, for a model whose attention core is the fused kernel (FlashAttention)."""
    if getattr(view.model, "attention", "") != "flash":
        return
    fig, caption = attention_curve_of(view.model, view.strategy, view.cluster)
    with st.expander("Attention kernel: efficiency by tokens per call"):
        st.plotly_chart(shown(fig), key="cost_attention_curve")
        st.caption(caption)
