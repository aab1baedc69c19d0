"""Drag-and-drop columns (streamlit-sortables) and the per-layer table, kept in step with state.

The sortables front end keeps its own copy of the items after the first draw,
so a widget is remounted under a new key (kind_drag_<version>) whenever the
columns it should show differ from what it is known to show, the order inside a column included (after a
drop the columns are drawn again with their layers in model order); the key in use is in
session_state[DRAG_KEYS][kind] (tests set a drag result through it).
"""
from __future__ import annotations

import streamlit as st
from streamlit_sortables import sort_items

from explorer.facade import ExplorerError

from app_pages import compute as C
from app_pages import state as S

STYLE = """
.sortable-component {background-color: transparent; font-size: 12px;}
.sortable-container {min-width: 90px; background-color: #F0F2F6;}
.sortable-container-header {font-weight: 600; padding: 4px 6px;}
.sortable-item {padding: 1px 6px; margin: 2px; background-color: #4C78A8; color: white;}
"""
STATE_KEYS = {"layer_splits": S.LAYER_SPLITS, "stage_map": S.STAGE_MAP}


def _model_order(text) -> tuple:
    """A layer item's place in the model ('L9' before 'L10'; layer_choices.item)."""
    return len(str(text)), str(text)


def _norm(columns) -> tuple:
    """Columns up to the order of items inside a column (which carries no meaning)."""
    if not columns:
        return ()
    return tuple((c["header"], tuple(sorted(c["items"], key=_model_order))) for c in columns)


def _exact(columns) -> tuple:
    """Columns as the front end shows them, the order of the items inside each column included."""
    return tuple((c["header"], tuple(c["items"])) for c in columns or ())


def _sorted(columns) -> list:
    """The columns with each one's layers in model order (a drop puts a layer wherever the pointer was)."""
    return [{**c, "items": sorted(c["items"], key=_model_order)} for c in columns]


def _key(kind: str, shows) -> str:
    ss = st.session_state
    if ss[S.DRAG_SHOWN].get(kind) != shows:
        ss[S.DRAG_VERSION][kind] += 1
        ss[S.DRAG_SHOWN][kind] = shows
    key = f"{kind}_drag_{ss[S.DRAG_VERSION][kind]}"
    ss[S.DRAG_KEYS][kind] = key
    return key


def _cells(table) -> tuple:
    """The table's cells as text, row by row (the editor's key: a new table, a new editor). Column by column in plain
    Python: DataFrame.astype(str) took 8x as long (0.44 against 0.05 ms for 48 layers), on every Strategy page run."""
    return tuple(zip(*([str(v) for v in table[c].tolist()] for c in table.columns)))


def _sortable(slot, kind: str, columns: list):
    with slot.container():
        return sort_items(columns, multi_containers=True, key=_key(kind, _exact(columns)), custom_style=STYLE)


def _editor(slot, table, **kwargs):
    with slot.container():
        return st.data_editor(table, key=_key("table", _cells(table)), hide_index=True, **kwargs)


def sortable(kind: str, what: str, columns: list, apply) -> None:
    """Draw the columns; when the user moved an item, apply(new columns). If that raises
    ExplorerError the last valid choice is kept, the reason shown, and the columns redrawn."""
    slot = st.empty()
    value = _sortable(slot, kind, columns)
    if not value or _exact(value) == _exact(columns):
        return
    st.session_state[S.DRAG_SHOWN][kind] = _exact(value)      # what the front end shows now
    if _norm(value) == _norm(columns):         # a layer moved within its column: nothing changes but the order
        _sortable(slot, kind, columns)         # shown again in model order (remounted: a new key)
        return
    if not _try(what, apply, value):
        _sortable(slot, kind, columns)
    elif _exact(value) != _exact(_sorted(value)):
        _sortable(slot, kind, _sorted(value))  # the layers of each column back in model order (issue 30)


def editor(table, what: str, apply, **kwargs) -> None:
    """st.data_editor of the per-layer table; an edit goes to apply(edited table) like a drag."""
    slot = st.empty()
    edited = _editor(slot, table, **kwargs)
    if _cells(edited) == _cells(table):
        return
    st.session_state[S.DRAG_SHOWN]["table"] = _cells(edited)
    if not _try(what, apply, edited):
        _editor(slot, table, **kwargs)


def _try(what: str, apply, value) -> bool:
    try:
        apply(value)
    except ExplorerError as err:
        st.session_state[S.CHOICE_MESSAGE] = f"{what} refused, the last valid choice is kept: {err}"
        return False
    st.session_state[S.CHOICE_MESSAGE] = ""
    return True


def apply_choices(**changes) -> None:
    """Use new per-layer choices if the strategy still runs with them (ExplorerError if not)."""
    ss = st.session_state
    try:
        base = C.candidate()
    except ExplorerError:
        base = ss[S.LAST_VALID].strategy
    C.ensure_fits(base.with_(**changes))
    for name, value in changes.items():
        ss[STATE_KEYS[name]] = tuple(value)
