"""Slide exports of a lesson: a 16:9 image at 1920x1080 with text >= 24 px, and an offline HTML deck."""
import re
import struct

import pytest

from explorer.lessons import LESSONS, by_slug
from explorer.io.slides import MIN_TEXT_PX, SLIDE_H, SLIDE_W, lesson_deck, slide_figure, slide_image


def _sizes(fig) -> list:
    lay = fig.layout
    sizes = [lay.font.size, lay.title.font.size, lay.legend.font.size]
    sizes += [a.font.size for a in lay.annotations]
    sizes += [ax.tickfont.size for ax in (lay.xaxis, lay.yaxis)]
    return sizes


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda lesson: lesson.slug)
def test_slide_figure_is_16_9_with_large_text_and_a_caption(lesson):
    fig = slide_figure(lesson.figure(), f"Lesson {lesson.number} · caption")
    assert (fig.layout.width, fig.layout.height) == (SLIDE_W, SLIDE_H) == (1920, 1080)
    assert min(_sizes(fig)) >= MIN_TEXT_PX
    assert "caption" in fig.layout.title.subtitle.text, "the caption under the title"
    assert fig.layout.title.subtitle.font.size >= MIN_TEXT_PX
    assert fig.layout.legend.yanchor == "bottom" and fig.layout.legend.yref == "container", "the legend below"
    assert not fig.frames and not fig.layout.updatemenus, "a still picture"


def test_slide_png_is_1920_by_1080_pixels():
    png = slide_image(by_slug("pipeline").figure(), "Lesson 4", "png")
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert struct.unpack(">II", png[16:24]) == (1920, 1080)


@pytest.mark.parametrize("slug", ["pipeline", "zero"])
def test_deck_is_self_contained(slug):
    lesson = by_slug(slug)
    deck = lesson_deck(lesson, lesson.values(), lesson.figure(), lesson.reveal(), "setting")
    assert deck.count("<section>") == 5
    assert '"title":{"text":""' in deck.replace(" ", ""), "the figure's title is the page's heading, shown once"
    assert lesson.formula_text.split()[0] in deck and lesson.reveal().answer_text in deck
    assert "Plotly.newPlot" in deck
    # nothing is fetched: no external script, stylesheet, font or image
    assert not re.search(r"<(script|link|img|iframe)[^>]+(src|href)=['\"]?https?:", deck)
    head = deck.split("<body>")[0]
    assert "@import" not in head and "url(" not in head, "the deck's own style loads nothing"
    # (the browser check with the network off is in tests/test_browser_classroom.py)
