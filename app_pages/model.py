"""Model & cluster: presets, uploads, the main dimensions, and the operator graph."""
import pandas as pd
import streamlit as st

from explorer.facade import (ATTENTION, ExplorerError, ModelSpec, list_clusters, list_models, load_cluster,
                             load_model)
from explorer.facade import SUGGESTED_SEQ_LEN, cluster_from_upload, hf_sequence_suggestion, model_from_upload
from explorer.facade import suggested_training_length
from explorer.facade import MODEL_DIM_MAX
from app_pages import compute as C
from app_pages import state as S
from app_pages.text import plain

DIMS = {"transformer": ("layers", "hidden", "heads", "kv_heads", "ffn_hidden", "seq_len", "vocab"),
        "mlp": ("layers", "hidden", "seq_len", "vocab"),
        "cnn": ("image_size", "in_channels", "base_width", "vocab")}
DIM_LABELS = {"layers": "layers l", "hidden": "hidden size h", "heads": "heads a", "kv_heads": "KV heads a_kv",
              "ffn_hidden": "FFN size f", "seq_len": "sequence s", "vocab": "vocabulary V", "image_size": "image size",
              "in_channels": "input channels", "base_width": "base width"}
# Each dimension's input as a person reads it, with the letter the formulas use (assets/glossary.json); the model
# file's field name is in its help (the page showed kv_heads, ffn_hidden and seq_len).


@st.cache_resource(max_entries=2, show_spinner=False)
def preset_names() -> tuple:
    return tuple(m.name for m in list_models()), tuple(c.name for c in list_clusters())


def _pick_model():
    if st.session_state[S.W_MODEL_PRESET]:
        S.set_model(load_model(st.session_state[S.W_MODEL_PRESET]), fit_memory=True)


def _pick_cluster():
    S.set_model(st.session_state[S.MODEL], load_cluster(st.session_state[S.W_CLUSTER_PRESET]))


def _upload(key: str, parse, apply):
    upload = st.session_state[key]
    if upload is None:
        return
    try:
        apply(parse(upload.name, upload.getvalue()))
    except ExplorerError as err:
        st.session_state[S.MODEL_MESSAGE] = f"Upload refused: {err}"


def _use_model(model) -> None:
    """An uploaded model in use: the preset box says so (it showed the previous preset's name)."""
    S.set_model(model, fit_memory=True)
    st.session_state[S.W_MODEL_PRESET] = None
    st.session_state.pop(S.PENDING_MODEL, None)


def _use_cluster(cluster) -> None:
    S.set_model(st.session_state[S.MODEL], cluster)
    st.session_state[S.W_CLUSTER_PRESET] = None


def _upload_model():
    """Our schema is used as it is; a HuggingFace config waits for its training sequence length (the config
    holds only the longest it supports, max_position_embeddings; the suggestion is the smaller of it and
    SUGGESTED_SEQ_LEN)."""
    ss = st.session_state
    upload = ss[S.W_MODEL_FILE]
    if upload is None:
        return
    try:
        name, data = upload.name, upload.getvalue()
        longest = hf_sequence_suggestion(name, data)
        if longest is None:
            _use_model(model_from_upload(name, data))
            return
        model_from_upload(name, data, seq_len=longest)          # refused now if it cannot be a model at all
    except ExplorerError as err:
        ss[S.MODEL_MESSAGE] = f"Upload refused: {err}"
        return
    ss[S.PENDING_MODEL] = (name, data, min(longest, MODEL_DIM_MAX["seq_len"]))
    ss[S.W_UPLOAD_SEQ_LEN] = min(suggested_training_length(longest), MODEL_DIM_MAX["seq_len"])
    ss[S.MODEL_MESSAGE] = ""


def _use_pending_model():
    ss = st.session_state
    name, data, _ = ss[S.PENDING_MODEL]
    try:
        _use_model(model_from_upload(name, data, seq_len=int(ss[S.W_UPLOAD_SEQ_LEN])))
    except ExplorerError as err:
        ss[S.MODEL_MESSAGE] = f"Upload refused: {err}"


def _dims(model) -> tuple:
    return DIMS["transformer" if model.is_transformer else model.family]


def _edit_dims():
    model = st.session_state[S.MODEL]
    values = {name: int(st.session_state[S.W_DIM_PREFIX + name]) for name in _dims(model)}
    base = model.name.removesuffix("-edited")
    try:
        S.set_model(ModelSpec(**{**model.to_dict(), **values, "name": f"{base}-edited",
                                 "stage_blocks": model.stage_blocks}))
    except ExplorerError as err:
        st.session_state[S.MODEL_MESSAGE] = f"Dimensions refused (the model in use is unchanged): {err}"


def _edit_attention():
    model = st.session_state[S.MODEL]
    try:
        S.set_model(model.with_attention(st.session_state[S.W_ATTENTION]))
    except ExplorerError as err:
        st.session_state[S.MODEL_MESSAGE] = f"Attention refused (the model in use is unchanged): {err}"


view, error = C.current()
C.show_errors(error)
ss = st.session_state
model, cluster = ss[S.MODEL], ss[S.CLUSTER]
models, clusters = preset_names()
st.title("Model & cluster")
if ss[S.MODEL_MESSAGE]:
    st.error(plain(ss[S.MODEL_MESSAGE]))

left, right = st.columns(2)
S.seed(S.W_MODEL_PRESET, model.name if model.name in models else None)
left.selectbox("Model preset", models, key=S.W_MODEL_PRESET, on_change=_pick_model,
               placeholder=f"custom: {model.name}")
left.file_uploader("…or upload a model spec (our JSON/YAML schema or a HuggingFace config.json)",
                   type=["json", "yaml", "yml"], key=S.W_MODEL_FILE, on_change=_upload_model)
if ss.get(S.PENDING_MODEL):
    pending_name, _, longest = ss[S.PENDING_MODEL]
    left.number_input(f"Training sequence length for {plain(pending_name)}", min_value=1,
                      max_value=MODEL_DIM_MAX["seq_len"], step=1, key=S.W_UPLOAD_SEQ_LEN,
                      help=f"A HuggingFace config holds the longest sequence the model supports "
                           f"(max_position_embeddings = {longest}), not the one it trains with; the suggestion is "
                           f"the smaller of it and {SUGGESTED_SEQ_LEN:,}, a common pre-training length.")
    left.button("Use this model", on_click=_use_pending_model, type="primary", key="model_use_upload")
S.seed(S.W_CLUSTER_PRESET, cluster.name if cluster.name in clusters else None)
right.selectbox("Cluster preset", clusters, key=S.W_CLUSTER_PRESET, on_change=_pick_cluster,
                placeholder=f"custom: {cluster.name}")
right.file_uploader("…or upload a cluster spec (JSON/YAML)", type=["json", "yaml", "yml"], key=S.W_CLUSTER_FILE,
                    on_change=_upload,
                    args=(S.W_CLUSTER_FILE, cluster_from_upload, _use_cluster))

st.subheader(f"Dimensions of {plain(model.name)} ({model.family})")
dims = _dims(model)
for col, name in zip(st.columns(len(dims)), dims):
    S.seed(S.W_DIM_PREFIX + name, getattr(model, name))
    col.number_input(DIM_LABELS.get(name, name), min_value=1, max_value=MODEL_DIM_MAX[name], step=1,
                     key=S.W_DIM_PREFIX + name, on_change=_edit_dims, help=f"`{name}` in a model file")
if model.is_transformer:
    S.seed(S.W_ATTENTION, model.attention)
    st.radio("Attention", ATTENTION, key=S.W_ATTENTION, horizontal=True, on_change=_edit_attention,
             format_func=lambda x: {"standard": "standard (s×s scores kept)",
                                    "flash": "FlashAttention (fused, recomputed in backward)"}[x],
             help="FlashAttention (Dao et al. 2022/2023) keeps no s×s tensor and recomputes QK^T in its "
                  "backward; the LLaMA family uses it by default")
r = view.result
st.caption(f"{r.params / 1e9:.3f} B parameters · {r.model_flops_per_iteration:.3e} model FLOPs per iteration "
           f"(B = {view.strategy.global_batch}) · source: {plain(model.source or 'user input')}")

with st.expander(f"Cluster {plain(cluster.name)}: {plain(cluster.device.name)}, {cluster.devices_per_node} per node "
                 "(the number of nodes follows the GPUs of the strategy)"):
    st.dataframe(pd.DataFrame([{"level": lv.name, "fanout": lv.fanout, "GB/s per device": lv.bandwidth_bytes_per_s / 1e9,
                                "latency µs": lv.latency_s * 1e6, "efficiency": lv.bandwidth_efficiency}
                               for lv in cluster.levels]), hide_index=True)
    st.write(f"Peak {', '.join(f'{plain(k)} {v / 1e12:.0f} TFLOP/s' for k, v in cluster.device.peak_flops.items())}; "
             f"memory {cluster.device.memory_bytes / 2**30:.0f} GiB.")

st.subheader("Operator graph")
c1, c2, c3 = st.columns([2, 2, 3])     # the toggle's label was cut at 1280x720 in classroom mode
colour = c1.radio("Colour by", ("stage", "degree"), key=S.W_GRAPH_COLOUR, horizontal=True,
                  format_func=lambda x: {"stage": "pipeline stage", "degree": "TP degree"}[x])
expand_all = c2.toggle("Expand every layer", key=S.W_GRAPH_ALL)
layers = c3.multiselect("Expand layers to operators", range(view.model.layers), key=S.W_GRAPH_LAYERS,
                        disabled=expand_all, format_func=lambda i: f"layer {i}")
expanded = "all" if expand_all else tuple(sorted(i for i in layers if i < view.model.layers))
st.plotly_chart(C.shown(C.graph(view.model, view.strategy, view.cluster, expanded, colour)), key="model_graph_chart")
