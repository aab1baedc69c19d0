"""A timeline's events as a page shows them in a table: times in the unit of their Gantt's axis, words for ids.

The events (explorer.timeline.events) keep seconds and ids, as the CSV export and the Chrome trace hold them. A
lecturer's walk read the micro-step table's seconds at Streamlit's four decimals -- 0.0001 and 0.0000 for a layer's
operators -- under headers clipped to 'start_' and 'durati'; the table now says 31.25 µs, as the Gantt's axis does.

>>> import pandas as pd
>>> events = pd.DataFrame({"start_s": [0.0, 3.1e-5], "end_s": [3.1e-5, 9.0e-5], "duration_s": [3.1e-5, 5.9e-5],
...                        "category": ["compute", "op_comm"], "micro_batch": [0, 0], "bytes": [0.0, 4096.0]})
>>> readable_events(events).columns.tolist()
['start (µs)', 'end (µs)', 'duration (µs)', 'category', 'micro-batch', 'bytes']
>>> readable_events(events)["duration (µs)"].round(1).tolist(), readable_events(events)["category"].tolist()
([31.0, 59.0], ['compute', 'TP / operator comm'])

The first rows of a 20.9 s timeline read in its Gantt's seconds, not in the unit of their own latest end:

>>> readable_events(events, end_s=20.9).columns[0]
'start (s)'
"""
from __future__ import annotations

import pandas as pd

from explorer.charts.gantt import time_unit
from explorer.charts.tables import KIND_LABELS, TRACE_LABELS

TIME_COLUMNS = ("start_s", "end_s", "duration_s")
WORD_COLUMNS = {"micro_batch": "micro-batch", "level": "machine level", "hidden": "hidden under compute"}


def readable_events(events: pd.DataFrame, end_s: float | None = None) -> pd.DataFrame:
    """`events` with its times in s, ms or µs (the Gantt's unit for its latest end, gantt.time_unit: `end_s`, the
    whole timeline's end where `events` are its first rows, else their own latest), their unit in the column
    names, categories and collective kinds in words."""
    end = end_s if end_s is not None else float(events["end_s"].max()) if "end_s" in events and len(events) else 0.0
    unit, factor = time_unit(end)
    out = events.copy()
    names = {}
    for column in TIME_COLUMNS:
        if column in out:
            out[column] = out[column] * factor
            names[column] = f"{column[:-2]} ({unit})"
    if "category" in out:
        out["category"] = out["category"].map(lambda c: TRACE_LABELS.get(c, c))
    if "kind" in out:
        out["kind"] = out["kind"].map(lambda k: KIND_LABELS.get(k, k))
    return out.rename(columns={**names, **WORD_COLUMNS})
