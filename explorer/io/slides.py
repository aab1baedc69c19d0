"""Slides of a lesson: its figure as a 16:9 image at 1920x1080 with a caption and large type, and a
self-contained HTML deck (plotly.js inlined, formulas as text) that opens without a network.

Text sizes are in CSS pixels of the 1920x1080 slide, so "24 px at 1080p" is what the numbers say.

>>> from explorer.lessons import by_slug
>>> fig = slide_figure(by_slug("pipeline").figure(), "caption")
>>> fig.layout.width, fig.layout.height, fig.layout.font.size >= MIN_TEXT_PX
(1920, 1080, True)
"""
from __future__ import annotations

import html
import re

import plotly.graph_objects as go

from explorer.io.export import figure_image

SLIDE_W, SLIDE_H = 1920, 1080
TEXT_PX = 28            # body text on the slide (>= 24 px at 1080p, readable in a lecture hall)
TITLE_PX = 40
MIN_TEXT_PX = 24


def slide_figure(fig, caption: str = "", title: str | None = None) -> go.Figure:
    """A copy of `fig` laid out as a 1920x1080 slide: large type, legend on top, caption below."""
    out = go.Figure(fig)
    out.update_layout(width=SLIDE_W, height=SLIDE_H, font=dict(size=TEXT_PX),
                      title=dict(text=title if title is not None else (out.layout.title.text or ""),
                                 font=dict(size=TITLE_PX), x=0.02, xanchor="left"),
                      legend=dict(orientation="h", yanchor="bottom", y=1.02, x=0, xanchor="left",
                                  font=dict(size=TEXT_PX), title=dict(font=dict(size=TEXT_PX))),
                      hoverlabel=dict(font_size=TEXT_PX), uniformtext=dict(minsize=MIN_TEXT_PX - 4, mode="hide"),
                      margin=dict(l=140, r=60, t=200, b=200 if caption else 100),
                      updatemenus=[], sliders=[])
    out.frames = []
    out.update_annotations(font_size=TEXT_PX)
    out.update_xaxes(tickfont=dict(size=TEXT_PX), title_font=dict(size=TEXT_PX))
    out.update_yaxes(tickfont=dict(size=TEXT_PX), title_font=dict(size=TEXT_PX))
    if caption:
        out.add_annotation(text=caption, xref="paper", yref="paper", x=0, y=-0.2, xanchor="left", yanchor="top",
                           showarrow=False, align="left", font=dict(size=TEXT_PX))
    return out


def slide_image(fig, caption: str = "", fmt: str = "png", title: str | None = None) -> bytes:
    """The slide as PNG (exactly 1920x1080 pixels) or SVG (kaleido with the system Chromium)."""
    return figure_image(slide_figure(fig, caption, title), fmt, scale=1.0)


def _inline_markdown(text: str) -> str:
    """The lessons' markdown (only **bold**) as HTML, escaped."""
    return re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", html.escape(text))


DECK_CSS = f"""
body {{margin: 0; font-family: 'DejaVu Sans', Arial, sans-serif; background: #fff; color: #111;}}
section {{width: 100vw; min-height: 100vh; box-sizing: border-box; padding: 4vh 5vw; display: none;}}
section.on {{display: block;}}
h1 {{font-size: {TITLE_PX + 8}px; margin: 0 0 3vh 0;}} h2 {{font-size: {TITLE_PX}px; margin: 0 0 2vh 0;}}
p, li, summary {{font-size: {TEXT_PX + 4}px; line-height: 1.45;}}
.formula {{font-family: 'DejaVu Serif', 'Times New Roman', serif; font-size: {TEXT_PX + 12}px; margin: 5vh 0;}}
.source, .hint {{font-size: {MIN_TEXT_PX}px; color: #444;}}
.answer {{font-size: {TEXT_PX + 12}px; font-weight: bold;}}
"""
DECK_JS = """
const slides = document.querySelectorAll('section'); let at = 0;
function show(i) { at = Math.max(0, Math.min(slides.length - 1, i));
  slides.forEach((s, k) => s.classList.toggle('on', k === at));
  window.dispatchEvent(new Event('resize')); }
document.addEventListener('keydown', e => {
  if (['ArrowRight', 'PageDown', ' '].includes(e.key)) show(at + 1);
  if (['ArrowLeft', 'PageUp'].includes(e.key)) show(at - 1); });
document.addEventListener('click', e => { if (!e.target.closest('.plotly, summary')) show(at + 1); });
show(0);
"""


def lesson_deck(lesson, values: dict, fig, reveal, setting: str = "") -> str:
    """The lesson as an HTML deck (title, idea, formula, picture, question): one file, no network.
    Arrow keys or a click go to the next slide."""
    plot = go.Figure(fig)
    plot.update_layout(width=None, height=720, font=dict(size=TEXT_PX - 6), autosize=True)
    figure = plot.to_html(include_plotlyjs=True, full_html=False, config={"responsive": True})
    esc = html.escape
    sections = [
        f"<h1>Lesson {lesson.number}: {esc(lesson.title)}</h1><p>{esc(setting)}</p>"
        f"<p class='hint'>→ / click: next slide · ←: back</p>",
        f"<h2>The idea</h2><p>{_inline_markdown(lesson.text)}</p>",
        f"<h2>The formula</h2><div class='formula'>{esc(lesson.formula_text)}</div>"
        f"<p class='source'>Source: {esc(lesson.source)}</p>",
        f"<h2>{esc(fig.layout.title.text or 'The picture')}</h2>{figure}"
        f"<p class='hint'>{esc(lesson.caption(None, values) if lesson.caption else '')}</p>",
        f"<h2>Predict, then reveal</h2><p>{esc(reveal.question)}</p>"
        f"<details><summary>Reveal the model's answer</summary><p class='answer'>{esc(reveal.answer_text)}</p>"
        f"<p>{esc(reveal.explanation)}</p></details>",
    ]
    body = "\n".join(f"<section>{s}</section>" for s in sections)
    return (f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>Lesson {lesson.number}: "
            f"{esc(lesson.title)}</title><style>{DECK_CSS}</style></head><body>{body}"
            f"<script>{DECK_JS}</script></body></html>\n")
