"""Smaller defects of issue 15: upload size config, Gantt hovers, share link on every page, downloads."""
import re
import tomllib
from pathlib import Path

import numpy as np

from explorer import Strategy, load_cluster, load_model
from explorer.charts import microstep_figure, superstep_figure, time_unit
from explorer.charts.gantt import CUSTOM_COLUMNS
from explorer.io.safe_load import MAX_FILE_BYTES
from explorer.timeline import microstep_events, superstep_events
from tests.app_util import open_page

ROOT = Path(__file__).resolve().parents[1]
GPT3, A100 = load_model("gpt3-175b"), load_cluster("dgx-a100-80gb")
COL = {name: i for i, name in enumerate(CUSTOM_COLUMNS)}


def test_upload_limit_of_the_server_matches_the_library():
    config = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    megabytes = config["server"]["maxUploadSize"]
    assert megabytes * 2 ** 20 >= MAX_FILE_BYTES > (megabytes - 1) * 2 ** 20


def hovers(fig):
    for trace in fig.data:
        custom = np.asarray(trace.customdata, dtype=object)
        yield trace, custom


def test_gantt_hover_shows_start_duration_and_end_with_the_right_values():
    ev = superstep_events(GPT3, Strategy(dp=2, tp=8, pp=4, global_batch=16, overlap_dp=True), A100)
    fig = superstep_figure(ev)
    unit, factor = time_unit(ev.end_s.max())
    for trace, custom in hovers(fig):
        template = trace.hovertemplate
        assert "duration %{customdata[7]" in template and "end %{customdata[8]" in template
        assert "%{x" not in template          # plotly's x of a based horizontal bar is its end
        sel = ev[ev.category == trace.meta]          # the trace's category (its name is the legend's)
        assert np.allclose(custom[:, COL["start"]].astype(float), sel.start_s * factor)
        assert np.allclose(custom[:, COL["duration"]].astype(float), sel.duration_s * factor)
        assert np.allclose(custom[:, COL["end"]].astype(float), sel.end_s * factor)


def test_fc2_hover_duration_is_not_its_end():
    ev = microstep_events(GPT3, Strategy(dp=1, tp=8, pp=8, global_batch=8), A100, layer=0)
    fig = microstep_figure(ev)
    fc2 = ev[(ev.operator == "fc2") & (ev.category == "compute") & (ev.start_s > 0)].iloc[0]
    unit, factor = time_unit(ev.end_s.max())
    for trace, custom in hovers(fig):
        rows = [r for r in custom if r[COL["operator"]] == "fc2" and np.isclose(float(r[COL["start"]]),
                                                                                  fc2.start_s * factor)]
        for row in rows:
            assert np.isclose(float(row[COL["duration"]]), fc2.duration_s * factor)
            assert float(row[COL["end"]]) > float(row[COL["duration"]])


def test_bubble_and_sync_bars_name_no_micro_batch():
    ev = superstep_events(GPT3, Strategy(dp=2, tp=8, pp=4, global_batch=16, overlap_dp=True), A100)
    fig = superstep_figure(ev)
    seen = set()
    for trace, custom in hovers(fig):
        for where in custom[:, COL["where"]]:
            assert "-1" not in where
        if trace.meta in ("bubble", "dp_comm", "optimizer"):
            seen.add(trace.meta)
            assert set(custom[:, COL["where"]]) == {""}
        if trace.meta == "compute":
            assert all(re.fullmatch(r"<br>micro-batch \d+", w) for w in custom[:, COL["where"]])
    assert {"bubble", "dp_comm"} <= seen


def test_interleaved_hover_names_the_chunk():
    ev = superstep_events(GPT3, Strategy(dp=2, tp=8, pp=4, global_batch=16, schedule="interleaved", chunks=2), A100)
    compute = next(c for t, c in hovers(superstep_figure(ev)) if t.name == "compute")
    assert any(w.endswith(", chunk 1") for w in compute[:, COL["where"]])


def test_address_bar_is_a_share_link_on_validation_and_search():
    query = {"model": "tiny-gpt", "cluster": "classroom", "dp": "2", "tp": "1", "pp": "1", "b": "1", "B": "4"}
    for page in ("validation", "search"):
        at = open_page(page, query=query)
        assert not at.exception
        params = at.query_params
        assert (params["model"], params["dp"], params["B"]) == ("tiny-gpt", "2", "4"), dict(params)
        at.sidebar.select_slider[0].set_value(4).run()         # d = 4 on a page that evaluates nothing
        assert at.query_params["dp"] == "4"


def test_export_downloads_pass_bytes_and_do_not_rerun():
    at = open_page("export")
    buttons = at.get("download_button")
    assert len(buttons) >= 11
    for button in buttons:
        proto = button.proto
        assert proto.ignore_rerun, proto.label
        if proto.label.endswith(".csv") or proto.label in ("Strategy (JSON)", "Formulas (LaTeX)"):
            assert not proto.deferred_file_id, proto.label       # bytes, stored as a file, not a callable


def test_start_page_gpt3_link_opens_gpt3_whatever_the_session_held():
    """A lecturer's walk (2026-12-03): after loading another model (a search result), Start's "Cost breakdown
    of GPT-3 175B" opened the Cost page on that other model. It now loads the explorer's defaults first."""
    from explorer.io.share import encode
    query = encode(load_model("tiny-gpt"), load_cluster("classroom"), Strategy(dp=2, global_batch=8))
    at = open_page("start", query=query)
    assert at.session_state["model"].name == "tiny-gpt"
    next(b for b in at.button if b.label == "Cost breakdown of GPT-3 175B").click().run()
    assert not at.exception, at.exception
    assert at.session_state["model"].name == "gpt3-175b"
    assert any(t.value.startswith("Cost of one training iteration") for t in at.title)
