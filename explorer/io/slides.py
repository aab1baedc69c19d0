"""Slides of a lesson: its figure as a 16:9 image at 1920x1080 with a caption and large type, and a
self-contained HTML deck (plotly.js inlined, formulas as text) that opens without a network.

Text sizes are in CSS pixels of the 1920x1080 slide, so "24 px at 1080p" is what the numbers say.

>>> from explorer.lessons import by_slug
>>> fig = slide_figure(by_slug("pipeline").figure(), "caption")
>>> fig.layout.width, fig.layout.height, fig.layout.font.size >= MIN_TEXT_PX, fig.layout.title.subtitle.text
(1920, 1080, True, 'caption')
"""
from __future__ import annotations

import html
import re

import plotly.graph_objects as go

from explorer.io.export import figure_image
from explorer.io.projector import projector_layout

SLIDE_W, SLIDE_H = 1920, 1080
TEXT_PX = 28            # body text on the slide (>= 24 px at 1080p, readable in a lecture hall)
TITLE_PX = 40
MIN_TEXT_PX = 24


def slide_figure(fig, caption: str = "", title: str | None = None) -> go.Figure:
    """A copy of `fig` laid out as a 1920x1080 slide: large type, the projector's layout (title once, legend
    below the plot, only the categories drawn: explorer/io/projector.py), the caption under the title
    (plotly's subtitle: a figure's annotations cannot be placed against the slide's edge)."""
    out = go.Figure(fig)
    out.update_layout(width=SLIDE_W, height=SLIDE_H, font=dict(size=TEXT_PX),
                      title=dict(text=title if title is not None else (out.layout.title.text or "")),
                      legend=dict(title=dict(font=dict(size=TEXT_PX))),
                      hoverlabel=dict(font_size=TEXT_PX), uniformtext=dict(minsize=MIN_TEXT_PX - 4, mode="hide"),
                      updatemenus=[], sliders=[])
    out.frames = []
    out.update_annotations(font_size=TEXT_PX)
    projector_layout(out, TEXT_PX, TITLE_PX)          # its axes' ticks and titles at TEXT_PX too
    out.update_layout(margin=dict(l=40, r=60, t=40, b=40))
    if caption:
        out.update_layout(title=dict(subtitle=dict(text=caption, font=dict(size=TEXT_PX))))
    return out


def slide_image(fig, caption: str = "", fmt: str = "png", title: str | None = None) -> bytes:
    """The slide as PNG (exactly 1920x1080 pixels) or SVG (kaleido with the system Chromium)."""
    return figure_image(slide_figure(fig, caption, title), fmt, scale=1.0)


def _inline_markdown(text: str) -> str:
    """The lessons' markdown (only **bold**) as HTML, escaped."""
    return re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", html.escape(text))


# Sizes in vh: the 1080p sizes (TEXT_PX + 4 = 32 px body text at 1080 px) scale with the screen, so a page of
# 150 words fits 1280x720 as it fits 1920x1080 (tests/test_browser_projector.py).
DECK_CSS = f"""
body {{margin: 0; font-family: 'DejaVu Sans', Arial, sans-serif; background: #fff; color: #111;}}
section {{width: 100vw; height: 100vh; box-sizing: border-box; padding: 3vh 5vw; display: none; overflow: hidden;}}
section.on {{display: block;}}
h1 {{font-size: {100 * (TITLE_PX + 8) / SLIDE_H:.2f}vh; margin: 0 0 3vh 0;}}
h2 {{font-size: {100 * TITLE_PX / SLIDE_H:.2f}vh; margin: 0 0 1.5vh 0;}}
p, li, summary {{font-size: {100 * (TEXT_PX + 4) / SLIDE_H:.2f}vh; line-height: 1.4; margin: 1.2vh 0;}}
.formula {{font-family: 'DejaVu Serif', 'Times New Roman', serif; font-size: {100 * (TEXT_PX + 12) / SLIDE_H:.2f}vh;
           margin: 4vh 0; overflow-wrap: anywhere;}}
.source, .hint {{font-size: {100 * MIN_TEXT_PX / SLIDE_H:.2f}vh; color: #444;}}
.answer {{font-size: {100 * (TEXT_PX + 12) / SLIDE_H:.2f}vh; font-weight: bold;}}
"""
DECK_FIGURE_HEIGHT = "66vh"     # the picture's slide: heading, figure and caption within one screen
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
    heading = fig.layout.title.text or "The picture"
    plot.update_layout(width=None, height=None, font=dict(size=TEXT_PX - 8), autosize=True, updatemenus=[],
                       sliders=[])
    plot.frames = []
    projector_layout(plot, TEXT_PX - 8)
    plot.update_layout(title_text="")          # the slide's heading says it: the title once
    figure = plot.to_html(include_plotlyjs=True, full_html=False, config={"responsive": True},
                          default_height=DECK_FIGURE_HEIGHT, default_width="100%")
    esc = html.escape
    sections = [
        f"<h1>Lesson {lesson.number}: {esc(lesson.title)}</h1><p>{esc(setting)}</p>"
        f"<p class='hint'>→ / click: next slide · ←: back</p>",
        f"<h2>The idea</h2><p>{_inline_markdown(lesson.text)}</p>",
        f"<h2>The formula</h2><div class='formula'>{esc(lesson.formula_text)}</div>"
        f"<p class='source'>Source: {esc(lesson.source)}</p>",
        f"<h2>{esc(heading)}</h2>{figure}"
        f"<p class='hint'>{esc(lesson.caption(None, values) if lesson.caption else '')}</p>",
        f"<h2>Predict, then reveal</h2><p>{esc(reveal.question)}</p>"
        f"<details><summary>Reveal the model's answer</summary><p class='answer'>{esc(reveal.answer_text)}</p>"
        f"<p>{esc(reveal.explanation)}</p></details>",
    ]
    body = "\n".join(f"<section>{s}</section>" for s in sections)
    return (f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>Lesson {lesson.number}: "
            f"{esc(lesson.title)}</title><style>{DECK_CSS}</style></head><body>{body}"
            f"<script>{DECK_JS}</script></body></html>\n")
