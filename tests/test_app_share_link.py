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
