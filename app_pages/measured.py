"""Measured: a reference run on torch.distributed next to the model (bytes, losses, times, Gantt)."""
import streamlit as st

from explorer.facade import (ExplorerError, RUN_INSTALL_HINT, Strategy, list_clusters, load_cluster, load_model,
                             load_run, reference_run_request, run_bytes_table, run_gantt, run_loss_table, run_microstep,
                             run_time_table, runnable_models, torch_available)
from app_pages import jobs as J
from app_pages import state as S
from app_pages.text import plain
from app_pages.compute import shown     # classroom mode: palette, large type, the projector's layout

RUN_JOB = "reference_run"        # the kind of this page's job in the worker pool


def start_run() -> None:
    """Button callback: run the chosen strategy and keep the result (or why it was refused)."""
    ss = st.session_state
    try:
        dp, tp, pp = ss[S.W_RUN_DP], ss[S.W_RUN_TP], ss[S.W_RUN_PP]
        strategy = Strategy(dp=dp, tp=tp, pp=pp, micro_batch=ss[S.W_RUN_MICRO], global_batch=ss[S.W_RUN_BATCH],
                            schedule=ss[S.W_RUN_SCHEDULE], dtype="fp32")
        cluster = None if ss[S.W_RUN_CLUSTER] == S.RUN_THIS_MACHINE else load_cluster(ss[S.W_RUN_CLUSTER])
        # in the worker pool (app_pages/jobs.py): the page shows its progress and a Cancel button meanwhile
        J.start(RUN_JOB, "reference_run", reference_run_request(load_model(ss[S.W_RUN_MODEL]), strategy,
                                                                dp * tp * pp, cluster, ss[S.W_RUN_ITERATIONS]))
        ss[S.MEASURED_MESSAGE] = ""
    except ExplorerError as err:
        ss[S.MEASURED_MESSAGE] = plain(err)


def collect_run() -> None:
    """The reference run once its worker has finished: the page's run, or why it did not finish."""
    job = J.take(RUN_JOB)
    if job is None:
        return
    if job.state == "done":
        ss = st.session_state
        ss[S.MEASURED_RUN], ss[S.MEASURED_MESSAGE] = job.result, ""
    else:
        st.session_state[S.MEASURED_MESSAGE] = "The run was cancelled." if job.state == "cancelled" else \
            plain(job.error)


def open_file() -> None:
    """Uploader callback: read a saved run (explorer run --out FILE)."""
    ss = st.session_state
    uploaded = ss.get(S.W_RUN_FILE)
    if uploaded is None:
        return
    try:
        ss[S.MEASURED_RUN], ss[S.MEASURED_MESSAGE] = load_run(uploaded.getvalue()), ""
    except ExplorerError as err:
        ss[S.MEASURED_MESSAGE] = plain(err)


st.title("Measured vs modelled")
st.caption("A small GPT trained for a few iterations on several processes with torch.distributed (gloo on CPU, "
           "nccl on GPUs): data parallel, Megatron tensor parallel, pipeline (GPipe / 1F1B). Every collective and "
           "point-to-point call is recorded; its bytes per device use the model's own bus-bandwidth factors.")
if torch_available():
    with st.form("run_form"):
        cols = st.columns(4)
        cols[0].selectbox("Model", runnable_models(), key=S.W_RUN_MODEL)
        cols[1].number_input("d (data)", 1, 4, 2, key=S.W_RUN_DP)
        cols[2].number_input("t (tensor)", 1, 4, 1, key=S.W_RUN_TP)
        cols[3].number_input("p (pipeline)", 1, 4, 1, key=S.W_RUN_PP)
        cols = st.columns(4)
        cols[0].number_input("micro-batch b", 1, 8, 1, key=S.W_RUN_MICRO)
        cols[1].number_input("global batch B", 1, 64, 4, key=S.W_RUN_BATCH)
        cols[2].selectbox("Schedule", ["1f1b", "gpipe"], key=S.W_RUN_SCHEDULE)
        cols[3].number_input("Iterations", 1, 10, 3, key=S.W_RUN_ITERATIONS)
        st.selectbox("Cluster for the prediction", [S.RUN_THIS_MACHINE] + [c.name for c in list_clusters()],
                     key=S.W_RUN_CLUSTER)
        st.form_submit_button("Run", on_click=start_run, type="primary")
else:
    st.info(f"Running here needs PyTorch: {RUN_INSTALL_HINT}. A saved run (`python -m explorer run ... --out "
            "run.json`) can still be opened below.")
st.file_uploader("Open a saved run (JSON from `python -m explorer run --out FILE`)", type=["json"],
                 key=S.W_RUN_FILE, on_change=open_file)
collect_run()
if J.running(RUN_JOB):
    J.progress(RUN_JOB, "Training")
if st.session_state.get(S.MEASURED_MESSAGE):
    st.error(st.session_state[S.MEASURED_MESSAGE])
run = st.session_state.get(S.MEASURED_RUN)
if run:
    s, times = run["strategy"], run["iteration_time_s"]
    st.subheader(f"{plain(run['model'])}: d={s['dp']} t={s['tp']} p={s['pp']}, b={s['micro_batch']} "
                 f"B={s['global_batch']} {plain(s['schedule'])}, {run['procs']} processes")
    cols = st.columns(3)
    cols[0].metric("Iteration, measured", f"{times['measured'] * 1e3:.1f} ms")
    cols[1].metric("Iteration, predicted", f"{times['predicted'] * 1e3:.1f} ms",
                   help=f"cluster: {plain(run['cluster_file']['name'])}")
    cols[2].metric("Largest loss difference", f"{run.get('loss_max_relative_difference', 0):.1e}",
                   help="relative, parallel run vs one process, same model, seed and batches")
    cluster = run["cluster_file"]
    st.caption(f"The prediction uses the cluster **{plain(cluster['name'])}** "
               f"({plain(cluster.get('source') or 'no source given')}). "
               "A calibration of the machine that ran it (`python -m explorer calibrate`) predicts its time; "
               "another cluster only compares shapes, as the % toggle below does.")
    st.markdown("**Bytes sent per device per iteration**, by cost category")
    st.dataframe(run_bytes_table(run), hide_index=True)
    for call in run.get("unmodelled_calls", []):
        st.caption(f"Not in the model: {plain(call['op'])} ({plain(call['kind'])}, {plain(call['category'])}) — "
                   f"{plain(call['note'])}")
    st.dataframe(run_loss_table(run), hide_index=True)
    st.markdown("**Time per category in one iteration** (model vs one rank of its critical stage)")
    st.dataframe(run_time_table(run), hide_index=True)
    normalise = st.toggle("Times as % of each side's own iteration", key=S.W_RUN_NORMALISE)
    try:
        st.plotly_chart(shown(run_gantt(run, normalise)), key="measured_gantt")
        layer = st.selectbox("Micro-step of layer", range(run["model_spec"]["layers"]), key=S.W_RUN_LAYER)
        st.plotly_chart(shown(run_microstep(run, layer, normalise)), key="measured_microstep")
        st.caption("Measured: each operator's forward and the collectives of the layer, micro-batch 0 of replica 0 "
                   "(backward spans are recorded per pass, not per operator).")
    except ExplorerError as err:
        st.error(plain(err))
