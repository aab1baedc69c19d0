"""Every page run under a work budget that stops when its session no longer wants the result (issue 31).

A long library call (a first compile, an explanation, a search) checks `explorer.limits.spend()` in its
loops; `stop_requested` tells it whether Streamlit holds a STOP for this session (the browser tab closed
or navigated away: WebsocketSessionManager.disconnect_session calls request_script_stop) or a newer rerun
(the student changed a widget again), so the thread stops within one loop step instead of finishing work
nobody will see. Streamlit itself only stops a script at its next st.* call.
"""
from __future__ import annotations

from streamlit.runtime.scriptrunner import get_script_run_ctx

PREEMPTING = ("STOP", "RERUN")


def stop_requested() -> bool:
    """True once this session's script run should end: a STOP or a (whole-script) RERUN request is
    pending. Reads ScriptRequests' state without consuming it (Streamlit handles it at its next yield)."""
    requests = getattr(get_script_run_ctx(), "script_requests", None)
    state = getattr(requests, "_state", None)          # streamlit 1.67: ScriptRequests._state
    if getattr(state, "name", "") == "RERUN" and getattr(getattr(requests, "_rerun_data", None),
                                                          "fragment_id_queue", None):
        return False        # only a fragment's rerun (a worker job's progress poll, app_pages/jobs.py) waits
    return getattr(state, "name", "") in PREEMPTING
