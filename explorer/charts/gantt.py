"""Gantt figures of timeline events (explorer.timeline): rows = stages or devices, colour = category.

One horizontal-bar trace per category (not per bar), positioned with base=start
and x=duration on a numeric time axis, so tens of thousands of events stay
responsive (px.timeline needs datetimes and draws nothing for seconds).
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from explorer.charts.spec_figure import SpecFigure
from explorer.limits import check_gantt_bars
from explorer.io.projector import time_axis
from explorer.charts.palette import CATEGORY_COLOURS as CATEGORY_COLORS     # one palette for every chart (palette.py)
from explorer.charts.palette import translucent
from explorer.charts.tables import KIND_LABELS, TRACE_LABELS
UNITS = (("s", 1.0), ("ms", 1e3), ("µs", 1e6))
# Start, duration and end come from customdata: with base=start, plotly's %{x} of a horizontal
# bar is where the bar ends, not its length. The micro-batch line is empty on bars of no
# micro-batch (idle/bubble, gradient sync, optimizer: micro_batch = -1).
HOVER = ("%{customdata[0]} · %{customdata[1]}<br>start %{customdata[6]:.4g} {u} · duration %{customdata[7]:.4g} {u}"
         " · end %{customdata[8]:.4g} {u}%{customdata[2]}<br>%{customdata[4]:,.0f} bytes %{customdata[5]}"
         "<extra>%{fullData.name}</extra>")
CUSTOM_COLUMNS = ("kind", "operator", "where", "chunk", "bytes", "level", "start", "duration", "end")


def time_unit(seconds: float) -> tuple:
    """(name, factor) that shows `seconds` with a few digits: s, ms or µs."""
    if seconds >= 10:
        return UNITS[0]
    return UNITS[1] if seconds >= 0.01 else UNITS[2]


PASS_LETTER = {"forward": "F", "backward": "B", "weight": "W"}
BAR_KINDS = {**KIND_LABELS, "host_issue": "issuing kernels"}
"""A communication or host bar's text, as the tables name its kind (the micro-step Gantt showed 'all_reduce' and
'host_issue' on its bars)."""
MAX_LABELLED_BARS = 5000


def _labels(events: pd.DataFrame, label: str | None) -> np.ndarray:
    """Bar text: 'F3' / 'B3' / 'W3' (pass and micro-batch, '.c' for chunk c of the interleaved
    schedule) on computation bars; for micro-steps the operator on computation, the collective
    on communication; nothing on small parts (they would not fit anyway)."""
    label = label or ("micro_batch" if events["micro_batch"].nunique() > 1 else "operator")
    kind = events["kind"].to_numpy(dtype=object)
    computing = events["category"].isin(["compute", "recompute"]).to_numpy()
    text = np.full(len(events), "", dtype=object)
    if label == "micro_batch":
        letter = events["kind"].map(PASS_LETTER).fillna("").to_numpy(dtype=object)
        mb, chunk = events["micro_batch"].to_numpy(), events["chunk"].to_numpy()
        named = letter + mb.astype(str).astype(object)
        if chunk.max(initial=0) > 0:
            named = named + "." + chunk.astype(str).astype(object)
        keep = computing & (mb >= 0) & (letter != "")
        text[keep] = named[keep]
    elif label == "operator":
        ops = events["operator"].to_numpy(dtype=object)
        text[computing] = ops[computing]
        comm = ~computing & (kind != "barrier") & (kind != "idle")
        text[comm] = [BAR_KINDS.get(k, str(k).replace("_", " ")) for k in kind[comm]]
    else:
        text = events[label].astype(str).to_numpy(dtype=object)
    return text


def _where(events: pd.DataFrame) -> np.ndarray:
    """'<br>micro-batch 3' (', chunk 1' when interleaved) for bars of a micro-batch, '' for the others."""
    mb, chunk = events["micro_batch"].to_numpy(), events["chunk"].to_numpy()
    out = np.full(len(events), "", dtype=object)
    has = mb >= 0
    out[has] = "<br>micro-batch " + mb[has].astype(str).astype(object)
    if chunk.max(initial=0) > 0:       # interleaved: say which chunk
        chunked = has & (chunk >= 0)
        out[chunked] = out[chunked] + ", chunk " + chunk[chunked].astype(str).astype(object)
    return out


def _hover_data(events: pd.DataFrame, start: np.ndarray, dur: np.ndarray) -> np.ndarray:
    """customdata rows (CUSTOM_COLUMNS) of the bars, times in the figure's unit."""
    if not len(events):
        return np.zeros((0, len(CUSTOM_COLUMNS)), dtype=object)
    cols = {"kind": events["kind"], "operator": events["operator"], "where": _where(events),
            "chunk": events["chunk"], "bytes": events["bytes"], "level": events["level"],
            "start": start, "duration": dur, "end": start + dur}
    return np.column_stack([np.asarray(cols[c], dtype=object) for c in CUSTOM_COLUMNS])


DECIMATE_ABOVE = 12_000
"""Bars beyond which those narrower than a pixel of a 4K-wide chart (1/SCREEN_PIXELS of the iteration) are left out
(visible): the default Gantt's 5,900 bars are drawn whole (0.9 MB of figure JSON; 0.5 MB with its 2,770 thin bars
left out), a 65,000-event one keeps its 4.5 MB."""
SCREEN_PIXELS = 4000


def visible(events: pd.DataFrame) -> tuple:
    """(the bars to draw, how many were left out): every bar up to DECIMATE_ABOVE; past it those narrower than
    1/SCREEN_PIXELS of the iteration are left out (the title says how many, the CSV has them). The default Gantt's
    5,900 bars used to be cut so too: its 768 recomputation bars and its sends were missing, white gaps that zooming in
    kept white (a lecturer's walk). Merging runs of thin bars saves nothing on real timelines: a pass's thin bars sit
    between wide ones (a review: 0 of 17,266 merged in 23,468 events)."""
    if len(events) <= DECIMATE_ABOVE:
        return events, 0
    end = float(events["end_s"].max())
    keep = events["duration_s"].to_numpy() >= end / SCREEN_PIXELS
    return events[keep], int((~keep).sum())


IDLE_NAME = "idle (waiting, on any stage)"
"""The legend name of the bars of category 'bubble': every stage's waiting, not only the critical stage's, so
not the bubble (explorer/io/glossary.py BUBBLE_MEANING: the critical stage's idle time), which a student counting
grey would otherwise read off the Gantt (issue 30 item 5)."""


ROW_PX = 28
"""A row's height at plotly's default 12 px type: the bar and its label (F3, B3.1) inside it."""
CHROME_PX = 160
"""What the figure spends outside its rows at that type: the title and its note (bars left out), the time axis's
tick labels and title, the margins (120 px when a 300 px figure of 8 stages was drawn at 1920x1080, issue 30).
Classroom mode's larger type sizes the figure again (explorer/io/projector.py rows_height)."""


def gantt_figure(events: pd.DataFrame, title: str = "", label: str | None = None) -> go.Figure:
    """Gantt chart of `events`; bars carry `label` (default: micro-batch, or operator for micro-steps).
    With many bars, those narrower than a pixel are left out (visible; the title says how many)."""
    check_gantt_bars(len(events))        # beyond explorer/limits.py MAX_GANTT_BARS: ExplorerError
    events, hidden = visible(events)
    if hidden:
        title = (f"{title}<br><sup>{hidden:,} bars narrower than 1/{SCREEN_PIXELS} of the iteration not drawn "
                 "(every event is in the CSV export)</sup>")
    end = float(events["end_s"].max()) if len(events) else 0.0
    unit, factor = time_unit(end)
    # Beyond a few thousand bars each is narrower than its label, which plotly would hide
    # anyway (uniformtext): leave the text out and keep the figure small.
    text = _labels(events, label) if len(events) <= MAX_LABELLED_BARS else np.full(len(events), "", dtype=object)
    rows = list(dict.fromkeys(events.sort_values(["stage", "row"], kind="stable")["row"]))
    cats = events["category"].to_numpy()
    start, dur, row = events["start_s"].to_numpy() * factor, events["duration_s"].to_numpy() * factor, \
        events["row"].to_numpy(dtype=object)
    custom = _hover_data(events, start, dur)
    order = [c for c in CATEGORY_COLORS if c in set(cats)] + sorted(set(cats) - set(CATEGORY_COLORS))
    data = []
    for cat in order:
        sel = cats == cat
        # the legend names a category as every chart does (the Timelines page at 1920x1080 listed dp_comm, ep_comm)
        data.append(dict(type="bar", name=IDLE_NAME if cat == "bubble" else TRACE_LABELS.get(cat, cat), meta=cat,
                         orientation="h",
                         base=start[sel], x=dur[sel], y=row[sel], text=text[sel], customdata=custom[sel],
                         marker=dict(color=translucent(CATEGORY_COLORS.get(cat, "#888888")), line=dict(width=0)),
                         textposition="inside", insidetextanchor="middle", textangle=0,
                         hovertemplate=HOVER.replace("{u}", unit)))
    # the whole figure in one call (explorer/charts/breakdown.py _figure: add_trace and update_layout re-walk it)
    return SpecFigure(dict(data=data, layout=dict(
        title=dict(text=title), barmode="overlay", bargap=0.15, legend=dict(title=dict(text="category")),
        uniformtext=dict(minsize=8, mode="hide"), xaxis=dict(time_axis(unit), title=dict(text=f"time ({unit})")),
        # automargin: a micro-step row label ("gpu 0 · host") is wider than plotly's fixed 80 px margin
        yaxis=dict(categoryorder="array", categoryarray=rows, autorange="reversed", automargin=True),
        height=max(300, ROW_PX * len(rows) + CHROME_PX))))


PAGE_PLOT_PX = 1200
"""The width in pixels of a Gantt's plot area on a page at 1920x1080 (the Timelines page's chart, wide layout)."""


def subpixel_note(events: pd.DataFrame, width_px: int = PAGE_PLOT_PX) -> str:
    """A sentence naming the categories whose typical bar is narrower than a pixel when the whole iteration spans
    `width_px`, with their bar length and share of the busy time, or ''. A lecturer's walk counted no orange at all in
    the default Gantt at full width, where TP communication is 12 % of the time: its 12.7 ms bars are 0.7 px wide."""
    if not len(events):
        return ""
    end = float(events["end_s"].max())
    pixel = end / width_px
    busy = events[events["category"] != "bubble"]
    total = float(busy["duration_s"].sum())
    by = busy.groupby("category")["duration_s"].agg(["median", "sum"])
    typical, seconds = by["median"], by["sum"]
    thin = [c for c in by.index if typical[c] < pixel and seconds[c] >= 0.005 * total]
    if not thin or total <= 0:
        return ""
    unit, factor = time_unit(pixel)
    parts = [f"{TRACE_LABELS.get(c, c)} ({typical[c] * factor:.2g} {unit} each, {100 * seconds[c] / total:.0f} % of "
             "the busy time)" for c in sorted(thin, key=lambda c: -seconds[c])]
    named = parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
    return (f"With the whole iteration across the chart a pixel is about {pixel * factor:.2g} {unit}, so the bars of "
            + named + " are narrower than a pixel and barely show: drag across the chart to zoom in "
            "(double-click to zoom out). The Cost page's bar shows each category's share.")


def superstep_figure(events: pd.DataFrame, title: str = "Super-step") -> go.Figure:
    """One iteration: a row per stage, micro-batch numbers on the bars."""
    return gantt_figure(events, title, label="micro_batch")


def microstep_figure(events: pd.DataFrame, title: str = "Micro-steps") -> go.Figure:
    """One layer or operator on its operator-parallel group: a row per device, operator names on the bars."""
    return gantt_figure(events, title, label="operator")
