"""AppTest of the Cost breakdown page and the sidebar's global controls."""
from app_util import chart_specs, errors, metric, open_page


def test_cost_page_shows_numbers_formulas_and_charts():
    at = open_page("cost")
    assert at.title[0].value == "Cost of one training iteration"
    assert metric(at, "Iteration time").endswith(" s")
    assert len(at.latex) >= 5, "one formula per non-zero category, plus the total"
    assert any("T_{\\mathrm{compute}}" in f.value for f in at.latex)
    # a hyphen in a category's name, not maths' minus sign (the walk read 'T_{pp − comm}')
    assert any("T_{\\mathrm{pp\\text{-}comm}}" in f.value for f in at.latex)
    titles = [spec["layout"]["title"]["text"] for spec in chart_specs(at)]
    assert any("by category" in t for t in titles) and any("Communication" in t for t in titles)
    assert any("Memory" in t for t in titles)
    assert not errors(at)
    # a formula wider than its column says so (a browser walk found them silently cut at the edge)
    hints = [c.value for c in at.caption if "scroll it sideways" in c.value]
    shown = [f.value.strip("$\n") for f in at.latex]
    wide = [f for f in shown if f.startswith("T_{\\mathrm") and len(f.split(" = ", 1)[-1]) > 120]
    assert wide and len(hints) == len(wide) + 1, "each long term, and the total"


def test_slider_change_changes_the_total():
    at = open_page("cost")
    before = metric(at, "Iteration time")
    at.sidebar.select_slider(key="w_tp").set_value(4).run()
    assert not at.exception
    assert metric(at, "Iteration time") != before
    assert "t4" in at.caption[0].value


def test_invalid_combination_shows_an_error_and_keeps_the_last_valid_result():
    at = open_page("cost")
    before = metric(at, "Iteration time")
    at.sidebar.number_input(key="w_global_batch").set_value(1000).run()
    assert not at.exception
    assert any("global batch 1000 is not divisible" in e for e in errors(at))
    assert metric(at, "Iteration time") == before, "the last valid result stays visible"
    assert at.sidebar.number_input(key="w_global_batch").value == 1000, "what the user typed is kept"
    at.sidebar.number_input(key="w_global_batch").set_value(1024).run()
    assert not errors(at) and metric(at, "Iteration time") != before


def test_impossible_strategy_names_the_problem():
    at = open_page("cost")
    at.sidebar.select_slider(key="w_tp").set_value(64).run()   # 8192 GPUs, and 64 does not divide 96 heads
    assert any("degree 64 does not divide the 96 attention heads" in e for e in errors(at))
    refusal = next(e for e in errors(at) if "does not divide" in e)
    said = refusal.split("cannot run:**", 1)[1].split("\n", 1)[0].rstrip()
    assert said.endswith((".", ")")), said       # a sentence, then "Showing the last valid strategy below"
    at.sidebar.select_slider(key="w_tp").set_value(8).run()
    at.sidebar.select_slider(key="w_dp").set_value(128).run()   # 128 x 8 x 8 = 8192 GPUs: more nodes
    assert not at.exception and not errors(at), "the cluster grows with the run (fidelity issue)"
    assert "8192 GPUs" in at.caption[0].value


def test_moving_t_keeps_the_gpu_count_and_t1_switches_sequence_parallelism_off():
    at = open_page("cost")
    assert at.sidebar.toggle(key="w_keep_gpus").value is True
    at.sidebar.select_slider(key="w_tp").set_value(4).run()
    assert at.session_state["w_dp"] == 32, "1024 GPUs = 32 x 4 x 8"
    at.sidebar.select_slider(key="w_pp").set_value(16).run()
    assert at.session_state["w_dp"] == 16
    at.sidebar.select_slider(key="w_tp").set_value(1).run()
    assert at.session_state["w_dp"] == 64 and at.session_state["w_sequence_parallel"] is False
    assert any("Sequence parallelism needs t" in i.value and "switched off" in i.value for i in at.info)
    assert not errors(at), "t = 1 runs"
    at.sidebar.toggle(key="w_keep_gpus").set_value(False).run()
    at.sidebar.select_slider(key="w_tp").set_value(2).run()
    assert at.session_state["w_dp"] == 64, "d stays when the count is not kept"


def test_a_gpu_count_that_does_not_split_comes_back_when_it_does():
    """Keep the GPU count: p 8 -> 6 cannot split 1,024 GPUs at t 8 (48 does not divide it), so d stays 16 (768 GPUs)
    for now; p 4 splits the kept 1,024 again (d 32), not the 768 shown meanwhile (a lecturer's walk, 2026-12-07)."""
    at = open_page("cost")
    at.sidebar.select_slider(key="w_pp").set_value(6).run()
    assert at.session_state["w_dp"] == 16 and "768 GPUs" in " ".join(i.value for i in at.info)
    at.sidebar.select_slider(key="w_pp").set_value(4).run()
    assert at.session_state["w_dp"] == 32, "1024 GPUs = 32 x 8 x 4"
    at.sidebar.select_slider(key="w_pp").set_value(3).run()        # 24 does not divide 1024 either
    at.sidebar.select_slider(key="w_dp").set_value(8).run()        # the user sets d: that count is the kept one now
    at.sidebar.select_slider(key="w_pp").set_value(2).run()
    assert at.session_state["w_dp"] == 12, "8 x 8 x 3 = 192 GPUs = 12 x 8 x 2"


def test_symbols_are_explained_and_the_textbook_formula_sits_beside_the_term():
    at = open_page("cost")
    legend = next(e for e in at.expander if e.label == "What the symbols mean")
    table = " ".join(m.value for m in legend.markdown)
    for words in ("micro-batches per iteration", "seconds per byte at the node level", "last pass ends"):
        assert words in table
    shown = " ".join(c.value for c in at.caption) + " ".join(f.value for f in at.latex)
    assert r"\frac{p-1}{v\,m}" in shown and "idle-to-ideal ratio (p − 1)/(v m) = 0.0729" in shown   # p = 8, m = 96
    assert "ring all-reduce" in shown


def outside_expanders(node, kind: str) -> list:
    """Elements of `kind` ('latex', 'metric') under `node`, not inside a (closed) expander."""
    found = []
    for child in getattr(node, "children", {}).values():
        if type(child).__name__ == "Expander":
            continue
        if getattr(child, "type", None) == kind:
            found.append(child)
        found += outside_expanders(child, kind)
    return found


def metric_bar(at):
    """The sticky metric bar's block (app_pages/classroom.py: metric_bar)."""
    def find(node):
        for child in getattr(node, "children", {}).values():
            if getattr(child, "key", None) == "metric_bar":
                return child
            hit = find(child)
            if hit is not None:
                return hit
    return find(at.main)


def test_long_terms_show_the_textbook_form_first_and_the_metric_bar_holds_the_refusal():
    """Issue 30 item 4: no term needs sideways scrolling unless asked for (8 of 11 did at 1280 px); the
    iteration time, memory, MFU and the refusal sit in the sticky metric bar."""
    at = open_page("cost")
    visible = [f.value.strip("$\n") for f in outside_expanders(at.main, "latex")]
    visible = [f for f in visible if f.startswith("T_{\\mathrm")]
    assert visible and all(len(f.split(" = ", 1)[-1]) <= 120 for f in visible), "long terms are in expanders"
    folded = [e for e in at.expander if e.label.startswith("The model's term for")]
    assert folded and all(any(len(f.value) > 120 for f in e.latex) for e in folded)
    assert any("ring all-reduce" in f.value for f in outside_expanders(at.main, "latex")), "the textbook form first"
    # the largest term too (a walk: compute, 16 s of 21, showed only "The model's term for compute (5234 characters)")
    assert any("72" in f.value and "F \\eta" in f.value for f in outside_expanders(at.main, "latex"))
    labels = [m.label for m in outside_expanders(metric_bar(at), "metric")]
    assert labels[0] == "Iteration time" and any("MFU" in label for label in labels)
    assert any(label.startswith("Peak memory") for label in labels)
    at.sidebar.number_input(key="w_global_batch").set_value(1000).run()
    assert any("cannot run" in e.value for e in outside_expanders(metric_bar(at), "error"))


def test_the_evidence_names_the_nearest_runs_as_a_person_reads_them():
    """The nearest validated runs by model, GPUs, system, precision and publication (explorer.validation.run_labels),
    not by run id (the browser walk read 'mb_2511_...'); the ids sit in the caption's tooltip."""
    import re
    from explorer.validation.evidence import evidence
    at = open_page("cost")
    assert not at.exception
    line = next(c for c in at.caption if c.value.startswith("Nearest validated runs:"))
    ev = evidence(at.session_state["model"], at.session_state["last_valid"].strategy, at.session_state["cluster"])
    ids = [row["id"] for row in ev["nearest_rows"]]
    assert ids and not any(i in line.value for i in ids)
    assert not re.search(r"\b(mb|ptdp|kor|mlm|automodel)_\w+", line.value)
    assert all(i in line.help for i in ids)
    first = ev["nearest_rows"][0]
    assert first["label"].split(" on ")[0] in line.value       # the model name
    assert " %" in line.value and ("Table" in line.value or "container" in line.value)


def test_a_known_gap_of_the_model_is_a_warning_beside_the_numbers():
    """Expert-parallel overlap without full-iteration graphs: the Cost and Strategy pages warn with the validated runs that show the cost the
    model does not price (explorer.validation.evidence.KNOWN_GAPS); the same strategy without the overlap does not."""
    from app_pages import state as S
    from explorer.io import share
    from explorer.io.clusters import load_cluster
    from explorer.io.models import load_model
    from explorer.strategy.strategy import Strategy
    qwen, h100 = load_model("qwen3-30b-a3b").with_seq_len(4096), load_cluster("dgx-h100")
    plain_ = Strategy(dp=16, micro_batch=1, global_batch=256, ep=16, expert_tp=1, dtype="fp8")
    for strategy, shown in ((plain_.with_(overlap_ep=True), True), (plain_, False)):
        for page in ("cost", "strategy"):
            at = open_page(page, query=share.encode(qwen, h100, strategy))
            assert not at.exception and at.session_state[S.LAST_VALID].strategy.overlap_ep == strategy.overlap_ep
            warned = [w.value for w in at.warning if w.value.startswith("Known gap")]
            assert bool(warned) == shown, (page, warned)
            if shown:
                assert "x the predicted time" in warned[0] and "PR 2184" in warned[0]


def test_interleaved_with_one_chunk_says_what_v_does():
    """Interleaved at v = 1 took 1F1B's time with more memory and no word why (a lecturer's walk, 2026-12-07)."""
    at = open_page("cost")
    hint = lambda: [c.value for c in at.sidebar.caption if c.value.startswith("v = 1")]
    assert not hint()
    at.sidebar.selectbox(key="w_schedule").set_value("interleaved").run()
    assert at.session_state["w_chunks"] == 1 and hint() and "v ≥ 2" in hint()[0]
    at.sidebar.number_input(key="w_chunks").set_value(2).run()
    assert not hint() and not at.exception


def test_the_communication_table_reads_words_not_ids():
    """A lecturer's walk read op_comm, all_gather, exposed_s and 11098128384 in the Cost page's table (the CSV keeps
    the ids)."""
    at = open_page("cost")
    at.session_state["w_comm_table"] = True
    at.run()
    table = next(d.value for d in at.dataframe if "communication" in d.value.columns)
    assert list(table.columns) == ["communication", "machine level", "scope", "exposed (s)",
                                   "hidden under compute (s)", "bytes sent per device"]
    assert not {"op_comm", "all_gather"} & set(table["communication"])


def test_an_moe_model_is_not_shown_the_dense_layers_textbook_compute():
    """A lecturer's walk: Qwen3-30B-A3B's compute (1.004 s) sat beside 72 b s h^2 (1 + s/6h) / (t F eta), which gives
    0.52 s: an MoE layer runs k of E experts of their own width. The dense form stays for dense models."""
    from explorer.facade import TEXTBOOK_FORMULAS
    dense_form = TEXTBOOK_FORMULAS["compute"][0]
    shown = lambda at: " ".join(c.value for c in at.caption) + " ".join(f.value for f in at.latex)
    moe = open_page("cost", {"model": "qwen3-30b-a3b", "cluster": "dgx-h100", "dp": "8", "tp": "1", "pp": "1",
                             "B": "64", "ep": "8"})
    assert dense_form not in shown(moe) and r"72\, b s h^2" not in shown(moe)
    assert r"72\, b s h^2" in shown(open_page("cost"))                     # gpt3-175b: the dense form is there
