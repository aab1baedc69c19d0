"""Share links: read the URL's parameters once per session, keep the URL in step with the view."""
from __future__ import annotations

from urllib.parse import urlencode, urlsplit

import streamlit as st

from explorer.facade import ExplorerError, WorkCancelled
from explorer.facade import fallback_strategy
from explorer.facade import decode_link as decode, encode_link as encode
from explorer.facade import decode_pins, encode_pins, evaluate

from app_pages import state as S
from app_pages.classroom import param as classroom_param

KNOWN = ("model", "model_spec", "cluster", "cluster_spec", "strategy_spec", "dp", "tp", "pp", "b", "B",
         "sched", "v", "zero", "rc", "sp", "ov", "sg", "dtype", "gd", "splits", "stages")


def read_once() -> None:
    """Before any widget is drawn: apply a shared link (defaults + messages for bad parameters)."""
    ss = st.session_state
    if ss[S.SHARE_READ]:
        return
    ss[S.SHARE_READ] = True
    params = st.query_params.to_dict()
    if PINS_PARAM in params:
        _read_pins(params[PINS_PARAM])
    if not any(key in params for key in KNOWN):
        return
    ss[S.OPENED_LINK] = True
    try:
        shared = decode(params)
    except WorkCancelled:           # a newer run or a closed tab: the next run reads the link again
        ss[S.SHARE_READ] = False
        raise
    ss[S.MODEL], ss[S.CLUSTER] = shared.model, shared.cluster
    try:
        S.apply_strategy(shared.strategy)
    except ExplorerError as err:
        S.apply_strategy(fallback_strategy(shared.model, shared.cluster))
        shared.messages.append(f"{err}; using the default strategy")
    for message in shared.messages:
        S.notify(f"Share link: {message}")
    if not shared.messages:
        S.notify("Opened a shared configuration.")


PINS_PARAM = "pins"              # the Compare page's pins (explorer.io.share_pins)


def _read_pins(text: str) -> None:
    from app_pages.compute import View       # late import: compute imports state, as this module does
    pins, messages = decode_pins(text)
    for label, shared in pins:
        try:
            result = evaluate(shared.model, shared.strategy, shared.cluster)
        except ExplorerError as err:
            messages.append(f"pin “{label}” cannot run ({err}); left out")
            continue
        st.session_state[S.PINS].append(View(shared.model, shared.cluster, shared.strategy, result, label))
    for message in messages:
        S.notify(f"Share link: {message}")


def params(view) -> dict:
    return encode(view.model, view.cluster, view.strategy)


def pins_param() -> dict:
    pins = st.session_state[S.PINS]
    return {PINS_PARAM: encode_pins([(p.label, p.model, p.cluster, p.strategy) for p in pins])} if pins else {}


def _configured(view):
    """The sidebar's strategy on the session's model and cluster, when it is a valid Strategy
    (pages that evaluate nothing, e.g. Validation and Search, or just loaded a search result);
    else `view`."""
    from app_pages.compute import View, candidate   # late import: compute imports state, as this module does
    ss = st.session_state
    try:
        return View(ss[S.MODEL], ss[S.CLUSTER], candidate(), None)
    except ExplorerError:
        return view


def write(view, evaluated: bool = True) -> None:
    """Keep the address bar a share link of the configuration on screen, on every page: the view a
    page evaluated (`evaluated`), or else the configuration the sidebar holds."""
    if not evaluated:
        view = _configured(view)
    if view is None:
        return
    wanted = {**params(view), **pins_param(), **classroom_param()}
    if st.query_params.to_dict() != wanted:
        st.query_params.from_dict(wanted)


def link(view) -> str:
    return here({**params(view), **pins_param()})


def here(params: dict) -> str:
    """This page's address with `params` (and ?classroom=1 when the session is in classroom mode)."""
    base = st.context.url or "http://localhost:8501/"
    return f"{base.split('?')[0]}?{urlencode({**params, **classroom_param()})}"


def link_to(page: str, model, cluster, strategy) -> str:
    """A share link that opens `page` (its url path) on this model, cluster and strategy (in classroom
    mode when the session is)."""
    parts = urlsplit(st.context.url or "http://localhost:8501/")
    query = urlencode({**encode(model, cluster, strategy), **classroom_param()})
    return f"{parts.scheme}://{parts.netloc}/{page}?{query}"
