"""Issue 28 item 1's last part: the band beside a number -- the regime's validated error, or why there is none --
is shown with the timeline's makespan and with each pinned strategy on the Compare page, as on the Cost page."""
from app_util import open_page

from app_pages.text import plain
from explorer import evaluate
from explorer.validation.evidence import band_text, evidence


def test_the_timeline_page_shows_the_makespans_band():
    at = open_page("timeline")
    assert not at.exception
    captions = " ".join(c.value for c in at.caption)
    assert "**Evidence:**" in captions
    makespan = next(m for m in at.metric if m.label == "Timeline makespan")
    assert makespan.help.startswith("Evidence: ")
    band = makespan.help[len("Evidence: "):]            # escaped as the caption is (app_pages/text.plain)
    assert band in captions and ("validated runs" in band or band.startswith("extrapolating"))


def test_each_pinned_strategy_carries_its_band():
    at = open_page("compare")
    next(b for b in at.button if b.label.startswith("Pin the current strategy")).click().run()
    assert not at.exception
    pin = at.session_state["pins"][0]
    band = band_text(evidence(pin.model, pin.strategy, pin.cluster))
    assert any(plain(band) in m.value for m in at.markdown)
    assert evaluate(pin.model, pin.strategy, pin.cluster).iteration_time_s == pin.result.iteration_time_s
