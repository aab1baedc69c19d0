"""app_pages/share_link.py: a shared link is read once per session, and again when its first read was cancelled."""
from streamlit.testing.v1 import AppTest

from app_pages import share_link, state as S
from app_util import APP
from explorer.facade import WorkCancelled


def test_a_link_whose_first_read_is_cancelled_is_read_at_the_next_run(monkeypatch):
    """A newer run or a closed tab cancels the link's first run while it decodes (its strategy's evaluation): the
    next run reads the link again instead of opening the defaults (and writing them into the address bar)."""
    real, calls = share_link.decode, []

    def cancelled_once(params):
        calls.append(dict(params))
        if len(calls) == 1:
            raise WorkCancelled("the session asked for a newer run")
        return real(params)
    monkeypatch.setattr(share_link, "decode", cancelled_once)
    at = AppTest.from_file(APP, default_timeout=120)
    for key, value in {"model": "llama2-7b", "dp": "4", "tp": "2", "pp": "2"}.items():
        at.query_params[key] = value
    at.run()
    assert not at.exception, at.exception
    assert len(calls) == 1 and not at.session_state[S.SHARE_READ]
    at.run()
    assert not at.exception, at.exception
    assert len(calls) == 2 and at.session_state[S.MODEL].name == "llama2-7b"
    assert (at.session_state[S.W_DP], at.session_state[S.W_TP], at.session_state[S.W_PP]) == (4, 2, 2)


def test_a_strategy_with_its_parameter_gather_overlapped_keeps_it_in_the_sidebar_and_the_link():
    """A lecturer's walk: a search result with the ZeRO-1 parameter all-gather under the next forward (87.78 s) came
    back as 87.89 s once loaded, since no control held overlap_param_gather and links left it out. It now has a
    sidebar toggle (and ZeRO-3's prefetch one) and the link key `opg` (`zpf=0` for a prefetch switched off)."""
    from explorer.facade import decode_link, encode_link
    at = AppTest.from_file(APP, default_timeout=120)
    for key, value in {"model": "llama2-7b", "dp": "8", "tp": "1", "pp": "1", "B": "64", "zero": "1",
                       "ov": "1", "opg": "1"}.items():
        at.query_params[key] = value
    at.run()
    assert not at.exception, at.exception
    assert at.session_state[S.W_OVERLAP_PG] is True and at.session_state[S.W_ZERO] == 1
    toggle = next(t for t in at.sidebar.toggle if t.key == S.W_OVERLAP_PG)
    assert toggle.value is True and not toggle.disabled
    at.switch_page("app_pages/cost.py").run()
    assert not at.exception, at.exception
    assert at.session_state[S.W_OVERLAP_PG] is True
    link = dict(at.query_params)
    assert link.get("opg") in ("1", ["1"])                                  # the address written back keeps it
    params = {"model": "llama2-7b", "dp": "8", "zero": "3", "zpf": "0", "B": "64"}
    shared = decode_link(params)
    assert shared.strategy.zero_prefetch is False and not shared.messages
    assert encode_link(shared.model, shared.cluster, shared.strategy)["zpf"] == "0"
