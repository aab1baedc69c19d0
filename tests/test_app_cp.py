"""AppTest: the sidebar's context-parallel controls (issue 10) on the Cost page."""
from app_util import errors, metric, open_page


def test_cp_moves_the_gpu_count_refuses_ring_without_flash_and_runs_ulysses():
    at = open_page("cost")
    before = metric(at, "Iteration time")
    at.sidebar.select_slider(key="w_cp").set_value(4).run()      # GPT-3 175B: t=8, p=8, 1024 GPUs kept
    assert not at.exception
    assert at.session_state["w_dp"] == 4, "d follows so that d·t·cp·p stays 1024"
    assert any("d·t·cp·p = **1024**" in m.value for m in at.sidebar.markdown)
    assert any("needs FlashAttention" in e for e in errors(at)), "GPT-3 uses the standard attention"
    at.sidebar.selectbox(key="w_cp_algo").set_value("ulysses").run()
    assert not at.exception and not errors(at)
    assert metric(at, "Iteration time") != before
    assert "cp4 ulysses" in at.caption[0].value
    at.sidebar.select_slider(key="w_cp").set_value(1).run()
    assert at.session_state["w_dp"] == 16 and not errors(at)


def test_model_page_switches_flash_attention():
    at = open_page("model")
    assert at.radio(key="w_dim_attention").value == "standard"           # GPT-3 175B
    at.radio(key="w_dim_attention").set_value("flash").run()
    assert not at.exception and at.session_state["model"].attention == "flash"
    at.switch_page("app_pages/cost.py").run()
    at.sidebar.select_slider(key="w_cp").set_value(2).run()          # ring context parallelism now runs
    assert not at.exception and not errors(at)
