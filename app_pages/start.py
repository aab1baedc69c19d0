"""Start here: what the tool is, three things to try first, the lessons and the explorer's pages."""
import streamlit as st

from explorer.facade import lessons
from app_pages import compute as C
from app_pages import state as S

if st.session_state.pop(S.LESSON_TARGET, None) == "cost":     # "Cost breakdown of GPT-3 175B" was clicked
    st.switch_page("app_pages/cost.py")
C.show_errors(None, flag_memory=False)
st.title("Bridging DL Explorer")
st.markdown(
    "How long does one training iteration of a large neural network take on many GPUs, and where does the "
    "time go? This explorer answers with a **cost model**: pick a model, a cluster and a parallel strategy "
    "(data, tensor and pipeline parallelism, ZeRO, recomputation) and every page shows the same iteration: "
    "its formulas term by term, its communication, its memory, its pipeline schedule. Each number comes "
    "from the double-level model of H. Wang (IPDPS Workshops 2021): an iteration is a **super-step**, each "
    "operator a **micro-step**.")

st.subheader("Three things to try first")
first, second, third = st.columns(3)
with first:
    st.markdown("**1. Watch the bubble.** Play a pipeline schedule and see the idle triangles; double the "
                "micro-batches and predict what happens.")
    st.page_link("app_pages/learn_4_pipeline.py", label="Lesson 4: the pipeline bubble", icon=":material/play_arrow:")
with second:
    st.markdown("**2. Cross the node boundary.** Split each layer over 8 GPUs instead of 4 and see tensor "
                "parallelism's communication leave the fast links.")
    st.page_link("app_pages/learn_3_tensor_parallel.py", label="Lesson 3: tensor parallelism", icon=":material/hub:")
with third:
    st.markdown("**3. Read a real run.** GPT-3 175B on 1024 GPUs: every term of its iteration time, with "
                "the formula beside the number.")
    # a button (it loads GPT-3 175B first), drawn as the two links beside it (a walk: the only bordered one)
    st.button("Cost breakdown of GPT-3 175B", icon=":material/bar_chart:", on_click=S.load_defaults, type="tertiary",
              help="opens the Cost page on GPT-3 175B, whatever model this session had chosen")

left, right = st.columns(2)
with left:
    st.subheader("Lessons")
    st.caption("One idea each, on an 8-layer GPT and 2 nodes × 4 GPUs; a question to predict, then reveal.")
    for lesson in lessons.LESSONS:
        st.page_link(f"app_pages/learn_{lesson.number}_{lesson.slug.replace('-', '_')}.py",
                     label=f"{lesson.number}. {lesson.title}")
with right:
    st.subheader("The explorer")
    st.caption("The full tool: the sidebar's strategy is shared by every page.")
    for page, label in (("model", "Model & cluster"), ("strategy", "Strategy: drag layers between stages"),
                        ("cost", "Cost breakdown"), ("timeline", "Timelines: super-step and micro-step"),
                        ("compare", "Compare strategies"), ("export", "Export & share"),
                        ("validation", "Validation against published runs"), ("search", "Search"),
                        ("measured", "Measured: a real run against the model")):
        st.page_link(f"app_pages/{page}.py", label=label)
st.caption("Teaching? Switch on **Classroom mode** in the sidebar (or add ?classroom=1 to the address): "
           "large type, colour-blind-safe colours, only the lesson's controls.")
