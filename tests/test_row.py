"""app_pages/row.py: places side by side in one block, equal columns on a Streamlit without horizontal containers."""
from app_pages.row import side_by_side


class _Parent:
    def __init__(self, horizontal: bool):
        self.horizontal, self.asked = horizontal, []

    def container(self, **kwargs):
        if not self.horizontal:                      # Streamlit before horizontal containers: no such keyword
            raise TypeError("container() got an unexpected keyword argument 'horizontal'")
        self.asked.append(kwargs)
        return "row"

    def columns(self, n):
        return [f"column {i}" for i in range(n)]


def test_one_horizontal_container_given_n_times():
    parent = _Parent(horizontal=True)
    assert side_by_side(parent, 3) == ("row", "row", "row")
    assert parent.asked == [{"horizontal": True, "gap": "small", "wrap": False}]


def test_equal_columns_where_streamlit_has_no_horizontal_container():
    assert side_by_side(_Parent(horizontal=False), 2) == ("column 0", "column 1")
