"""Cost breakdown of one strategy: widgets in, one library call, table and chart out."""
import pandas as pd
import plotly.express as px
import streamlit as st

from explorer import ExplorerError, Strategy, evaluate, list_clusters, list_models, load_cluster, load_model

st.title("Cost of one training iteration")
models = [m.name for m in list_models()]
clusters = [c.name for c in list_clusters()]
col1, col2 = st.columns(2)
model = load_model(col1.selectbox("Model", models, index=models.index("gpt3-175b")))
cluster = load_cluster(col2.selectbox("Cluster", clusters, index=clusters.index("dgx-a100-80gb")))
c1, c2, c3, c4, c5 = st.columns(5)
tp = c1.select_slider("t (operator parallel)", [1, 2, 4, 8], value=8)
pp = c2.select_slider("p (pipeline)", [1, 2, 4, 8, 16], value=8)
dp = c3.select_slider("d (data parallel)", [1, 2, 4, 8, 16, 32], value=16)
micro = c4.select_slider("b (micro-batch)", [1, 2, 4, 8], value=1)
batch = c5.number_input("B (global batch)", min_value=1, value=1536, step=micro * dp)
schedule = st.radio("Schedule", ["gpipe", "1f1b"], index=1, horizontal=True)
try:
    result = evaluate(model, Strategy(dp=dp, tp=tp, pp=pp, micro_batch=micro, global_batch=int(batch),
                                      schedule=schedule), cluster)
except ExplorerError as err:
    st.error(str(err))
    st.stop()
st.metric("Iteration time", f"{result.iteration_time_s:.3f} s")
table = pd.DataFrame({"category": list(result.breakdown_s), "seconds": list(result.breakdown_s.values())})
st.plotly_chart(px.bar(table, x="seconds", y="category", orientation="h"), key="breakdown_chart")
st.dataframe(table, hide_index=True)
