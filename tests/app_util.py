"""Shared helpers of the AppTest tests (tests/test_app_*.py)."""
from __future__ import annotations

import json
from pathlib import Path

from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[1]
APP = str(ROOT / "app.py")


def open_page(page: str | None = None, query: dict | None = None, timeout: float = 120) -> AppTest:
    """The app run once (default page), then switched to `page` (e.g. 'strategy') and run again."""
    at = AppTest.from_file(APP, default_timeout=timeout)
    for key, value in (query or {}).items():
        at.query_params[key] = value
    at.run()
    assert not at.exception, at.exception
    if page:
        at.switch_page(f"app_pages/{page}.py").run()
        assert not at.exception, at.exception
    return at


def metric(at: AppTest, label: str) -> str:
    """The value of the first metric whose label starts with `label`."""
    return next(m.value for m in at.metric if m.label.startswith(label))


def chart_specs(at: AppTest) -> list:
    """The plotly figures on the page, as JSON dicts."""
    return [json.loads(chart.proto.spec) for chart in at.get("plotly_chart")]


def errors(at: AppTest) -> list:
    return [e.value for e in at.error]
