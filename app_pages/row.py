"""Controls and figures side by side in one block.

`st.columns(n)` sends n + 1 blocks to the browser, each a message the serving interpreter builds, hashes and hands
to its event loop; a horizontal container is one, its children stretching to equal shares: the same places as equal
columns for controls (checked in Chromium: the sidebar's pairs, the Timelines page's layer and operator). Metrics
take their own widths in it, so a row of metrics stays in columns. Under a class's load the sidebar's
five pairs of columns alone were 6 % of the serving interpreter's time (py-spy, docs/benchmarks-classroom.md).
"""


def side_by_side(parent, n: int) -> tuple:
    """`n` places in `parent` (st, st.sidebar or a container), filled in order, left to right: one horizontal
    container given n times; equal columns on a Streamlit without horizontal containers (requirements: >= 1.40)."""
    try:
        row = parent.container(horizontal=True, gap="small", wrap=False)
    except TypeError:
        return tuple(parent.columns(n))
    return (row,) * n
