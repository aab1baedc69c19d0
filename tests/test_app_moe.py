"""The sidebar's expert-parallel control (issue 11): drawn for a model with experts only, and the
Cost page prices its all-to-alls."""
from app_util import open_page

from app_pages import state as S
from explorer.facade import load_cluster, load_model

EP_LABEL = "e — expert parallel (of d)"


def _labels(at) -> list:
    return [w.label for w in at.sidebar.select_slider]


def _moe(at, model="qwen3-30b-a3b"):
    """Switch to an MoE model with t = 2 (its 4 key/value heads allow it) and the largest e offered; the Cost page's
    communication table open (its expander builds the table only while open)."""
    at.session_state[S.MODEL] = load_model(model)
    at.session_state[S.W_COMM_TABLE] = True
    at.run()
    next(w for w in at.sidebar.select_slider if w.key == S.W_TP).set_value(2).run()
    slider = next(w for w in at.sidebar.select_slider if w.key == S.W_EP)
    slider.set_value(max(int(e) for e in slider.options)).run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    return slider


def test_ep_control_only_for_moe_models_and_the_cost_page_shows_the_all_to_all():
    at = open_page("cost")
    assert EP_LABEL not in _labels(at)                      # a dense model: no expert parallelism
    slider = _moe(at)
    assert EP_LABEL in _labels(at)
    d = at.session_state[S.W_DP]
    options = [int(e) for e in slider.options]
    assert options == [e for e in range(1, d + 1) if d % e == 0 and 128 % e == 0]
    assert at.session_state[S.W_EP] == max(options) > 1
    assert at.session_state[S.LAST_VALID].strategy.ep == max(options)
    comm = next(df.value for df in at.dataframe if "communication" in df.value.columns)   # the table in words
    assert (comm.loc[comm["communication"] == "EP all-to-all", "exposed (s)"] > 0).all()
    assert (comm["communication"] == "EP all-to-all").any()


def test_timeline_page_draws_the_all_to_all():
    import json
    at = open_page("cost")
    _moe(at)
    at.switch_page("app_pages/timeline.py").run()
    assert not at.exception
    categories = {trace.get("meta") for chart in at.get("plotly_chart") for trace in json.loads(chart.proto.spec)["data"]}
    assert "ep_comm" in categories     # the micro-step Gantt of layer 0, an MoE layer (the name reads 'EP all-to-all')


def test_whole_experts_toggle_sets_expert_tp_1():
    at = open_page("cost")
    _moe(at)
    toggle = next(w for w in at.sidebar.toggle if w.key == S.W_WHOLE_EXPERTS)
    toggle.set_value(True).run()
    slider = next(w for w in at.sidebar.select_slider if w.key == S.W_EP)
    t, d = at.session_state[S.W_TP], at.session_state[S.W_DP]
    assert max(int(e) for e in slider.options) == max(e for e in range(1, t * d + 1) if t * d % e == 0 and 128 % e == 0)
    slider.set_value(max(int(e) for e in slider.options)).run()
    assert not at.exception
    strategy = at.session_state[S.LAST_VALID].strategy
    assert strategy.expert_tp == 1 and strategy.ep == max(int(e) for e in slider.options)


def test_dispatcher_cuda_graphs_and_ep_overlap_controls_reach_the_strategy():
    """Issue 27 item 6: the MoE dispatcher and the EP overlap are drawn for a model with experts only, CUDA graphs for
    every model; each lands in the evaluated strategy, and the overlap hides part of the EP all-to-all on the Cost
    page; a choice Megatron refuses (full-iteration graphs with the syncing all-to-all) shows one line."""
    at = open_page("cost")
    keys = lambda: {w.key for w in at.sidebar.selectbox} | {w.key for w in at.sidebar.toggle}
    assert S.W_CUDA_GRAPHS in keys() and S.W_MOE_DISPATCHER not in keys() and S.W_OVERLAP_EP not in keys()
    at.session_state[S.CLUSTER] = load_cluster("dgx-h100")      # the fused dispatchers need Hopper or later
    _moe(at)
    assert {S.W_CUDA_GRAPHS, S.W_MOE_DISPATCHER, S.W_OVERLAP_EP} <= keys()
    next(w for w in at.sidebar.select_slider if w.key == S.W_PP).set_value(1).run()   # overlap: p = 1 or interleaved
    next(w for w in at.sidebar.selectbox if w.key == S.W_MOE_DISPATCHER).set_value("hybridep").run()
    next(w for w in at.sidebar.selectbox if w.key == S.W_CUDA_GRAPHS).set_value("full").run()
    next(w for w in at.sidebar.toggle if w.key == S.W_OVERLAP_EP).set_value(True).run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    s = at.session_state[S.LAST_VALID].strategy
    assert (s.moe_dispatcher, s.cuda_graphs, s.overlap_ep) == ("hybridep", "full", True)
    comm = next(df.value for df in at.dataframe if "communication" in df.value.columns)
    assert (comm.loc[comm["communication"] == "EP all-to-all", "hidden under compute (s)"] > 0).any()
    at.switch_page("app_pages/timeline.py").run()        # one micro-batch's all-to-alls are drawn whole: said so
    assert not at.exception and any("drawn whole" in c.value for c in at.caption)
    at.switch_page("app_pages/cost.py").run()
    next(w for w in at.sidebar.selectbox if w.key == S.W_MOE_DISPATCHER).set_value("alltoall").run()
    assert at.error and "full-iteration CUDA graphs" in at.error[0].value.splitlines()[0]   # the library's one line


def test_ep_overlap_is_offered_only_where_megatron_runs_it():
    """Issue 30: the EP overlap was offered with 1F1B at p > 1, which Megatron-Core refuses (it needs a virtual
    pipeline there: explorer/strategy/moe_rules.py); it is disabled there, and a strategy that had it on runs
    without it until the schedule allows it again."""
    at = open_page("cost")
    _moe(at)
    overlap = lambda: next(w for w in at.sidebar.toggle if w.key == S.W_OVERLAP_EP)
    assert at.session_state[S.W_PP] > 1 and at.session_state[S.W_SCHEDULE] == "1f1b"
    assert overlap().disabled and "interleaved" in overlap().help
    next(w for w in at.sidebar.selectbox if w.key == S.W_SCHEDULE).set_value("interleaved").run()
    assert not overlap().disabled
    overlap().set_value(True).run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert at.session_state[S.LAST_VALID].strategy.overlap_ep
    next(w for w in at.sidebar.selectbox if w.key == S.W_SCHEDULE).set_value("1f1b").run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert overlap().disabled and not at.session_state[S.LAST_VALID].strategy.overlap_ep


def test_recompute_modules_offered_are_the_models_own():
    """Issue 30: Mixtral was offered mla_up_proj (no latent attention) and mlp (every layer has experts)."""
    at = open_page("cost")
    modules = lambda: next(w for w in at.sidebar.multiselect if w.key == S.W_RECOMPUTE_MODULES).options
    assert "mla_up_proj" not in modules() and "mlp" in modules()           # GPT-3: dense, no MLA
    at.session_state[S.MODEL] = load_model("mixtral-8x7b")
    at.run()
    assert modules() == ["core_attn", "layernorm", "moe_act"]
    at.session_state[S.MODEL] = load_model("deepseek-v3")
    at.run()
    assert {"mla_up_proj", "mlp", "shared_experts"} <= set(modules())


def test_a_strategy_label_names_its_expert_parallelism():
    """The Cost and Compare pages' labels dropped e: d8 t1 p1 with e = 8 and with e = 1 read alike next to very
    different numbers (a lecturer's walk)."""
    from app_pages.compute import strategy_label
    from explorer import Strategy
    base = Strategy(dp=8, micro_batch=1, global_batch=64)
    assert "e8" in strategy_label(base.with_(ep=8)).split() and "e8" not in strategy_label(base)
