"""AppTest of app_pages/validation.py: the page shows every case, its citation and the parity plot."""
import json
from pathlib import Path

from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[1]


def test_validation_page_shows_cases_and_parity_plot():
    at = AppTest.from_file(str(ROOT / "app_pages" / "validation.py"), default_timeout=120).run()
    assert not at.exception
    metrics = {m.label: m.value for m in at.metric}
    assert any("Megatron-LM SC'21 Table 1" in label for label in metrics)
    assert not any("_" in label for label in metrics), "groups by name, not by id (megatron_table1)"
    table = at.dataframe[0].value
    a100 = table[table["case"].str.startswith(("ptdp_", "kor_"))]
    assert len(a100) == 20 and a100["source"].str.contains("Table").all()
    h100 = table[table["case"].str.startswith(("mlm_h100_", "automodel_", "mb_ab_"))]   # dense BF16 and MoE A/B rows
    assert len(h100) == 16 and set(h100["fit"]) == {"fitted", "held out"}
    bridge = table[table["case"].str.startswith("mb_")]             # Megatron-Bridge group (issue 11)
    assert len(bridge) >= 15 and bridge["source"].str.contains("Megatron-Bridge").all()
    assert set(bridge["fit"]) == {"fitted", "held out"}
    assert any("Megatron-Bridge, GB200 NVL72" in label for label in metrics)
    skipped = at.dataframe[1].value
    assert skipped["why"].str.contains("no model preset").any()     # each skipped row says why
    assert any("Megatron-Bridge MoE, DGX H100" in label for label in metrics)      # the MoE rows' own groups
    charts = at.get("plotly_chart")
    assert charts, "the parity plot is drawn"
    spec = json.loads(charts[0].proto.spec)
    names = {trace.get("name") for trace in spec["data"]}
    assert {"Megatron-LM SC'21 Table 1", "Korthikanti et al. Table 4", "predicted = published"} <= names
    ticks = spec["layout"]["yaxis"]["tickvals"]          # decades only: 2 and 5 overlapped 10 and 100 at 1280x720
    assert ticks == sorted(ticks) and len(ticks) <= 8 and spec["layout"]["yaxis"]["ticktext"][0] == f"{ticks[0]:g}"
    bridge_spec = json.loads(charts[1].proto.spec)
    assert "TFLOP/s" in bridge_spec["layout"]["xaxis"]["title"]["text"]
    moe_spec = json.loads(charts[2].proto.spec)                      # MoE rows: tokens/s, a chart of their own
    assert "tokens/s" in moe_spec["layout"]["xaxis"]["title"]["text"]
    assert {"Megatron-Bridge MoE, DGX H100", "Megatron-Bridge MoE, GB200 NVL72"} <= {t.get("name") for t in moe_spec["data"]}
    dense_spec, ab_spec = (json.loads(c.proto.spec) for c in charts[3:5])    # the dense BF16 H100 rows, the A/B runs
    assert "Dense BF16 runs, H100" in {t.get("name") for t in dense_spec["data"]}
    assert "TFLOP/s" in dense_spec["layout"]["xaxis"]["title"]["text"]
    assert {t.get("name") for t in ab_spec["data"]} >= {"Megatron-Bridge MoE A/B runs, DGX H100"}
    assert "Dense BF16 runs, H100" not in {t.get("name") for t in ab_spec["data"]}     # one unit an axis: seconds
    assert any("Megatron-Bridge MoE A/B runs, DGX H100" in label for label in metrics)


def test_validation_page_draws_the_residuals_by_regime_and_the_bands():
    """Issue 28 item 4: a heatmap of the validated error per regime (the bands the Cost page shows), and each
    parity plot shaded with its rows' held-out mean |error|."""
    from explorer.validation.regimes import regimes
    at = AppTest.from_file(str(ROOT / "app_pages" / "validation.py"), default_timeout=120).run()
    assert not at.exception
    charts = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    heat = next(spec for spec in charts if spec["data"][0].get("type") == "heatmap")
    cells = {(y, x): z for y, row in zip(heat["data"][0]["y"], heat["data"][0]["z"])
             for x, z in zip(heat["data"][0]["x"], row) if z is not None}
    for r in regimes():
        assert cells[(r.accelerator, f"{r.precision} · {r.kind}")] == 100 * r.mean_abs_error
    bands = [t["name"] for spec in charts for t in spec["data"] if "mean |error| of the held-out rows" in t.get("name", "")]
    assert len(bands) == 5, "every parity plot has its band"
