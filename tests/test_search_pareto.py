"""The Pareto front: non-dominated, and every other point dominated by (or equal to) a front point."""
import numpy as np
from hypothesis import given, strategies as st

from explorer.search.pareto import dominated, pareto_front

values = st.lists(st.tuples(st.integers(0, 20), st.integers(0, 20)), min_size=0, max_size=60)


@given(values)
def test_front_is_the_non_dominated_set(points):
    t = np.array([p[0] for p in points], dtype=float)
    m = np.array([p[1] for p in points], dtype=float)
    front = list(pareto_front(t, m))
    for i in front:
        assert not any(dominated(t, m, i, j) for j in range(len(points)))
    for i in set(range(len(points))) - set(front):
        assert any(dominated(t, m, i, j) or (t[i] == t[j] and m[i] == m[j]) for j in front)
    assert list(t[front]) == sorted(t[front])
    assert len({(t[i], m[i]) for i in front}) == len(front)
