"""The mesh's vectorised placement (explorer.strategy.mesh: base_array, max_span_level) equals the rank-by-rank
definition it replaced: every base of a group by itertools.product, and the largest span_level over its pairs
(issue 26 item 6 made a level's units its job allocation, and a 10,000-replica link then cost 10 M calls)."""
import itertools

from hypothesis import given, settings, strategies as st

from explorer.hardware.cluster import Cluster, Device, Level
from explorer.strategy.mesh import AXES, Mesh, group_level, max_span_level, pair_level, span_level

DEVICE = Device("d", {"bf16": 1e12}, 1e9, 1e9)


@st.composite
def meshes(draw):
    sizes = {axis: draw(st.sampled_from((1, 2, 3, 4))) for axis in AXES}
    order = draw(st.permutations(AXES))
    fanout = draw(st.sampled_from((2, 4, 8)))
    allocated = draw(st.sampled_from((0, fanout, max(1, fanout - 2))))
    levels = (Level("node", fanout, 1e9, 1e-6, allocated=allocated), Level("net", 8, 1e8, 1e-5))
    return Mesh.of("-".join(order), **sizes), Cluster("c", DEVICE, levels)


def _bases(mesh, axis, **fixed):
    others = [(name, [fixed[name]] if name in fixed else range(size)) for name, size in mesh.axes if name != axis]
    return [sum(c * mesh.stride(name) for (name, _), c in zip(others, combo))
            for combo in itertools.product(*(values for _, values in others))]


@settings(max_examples=150, deadline=None)
@given(case=meshes(), axis=st.sampled_from(AXES))
def test_the_vectorised_placement_is_the_rank_by_rank_one(case, axis):
    mesh, cluster = case
    assert mesh.bases(axis) == _bases(mesh, axis)
    n, step = mesh.size(axis), mesh.stride(axis)
    if n > 1:
        expected = max(span_level(cluster, b, b + (n - 1) * step) for b in _bases(mesh, axis))
        assert group_level(cluster, mesh, axis) == expected
        expected = max(span_level(cluster, b, b + (n - 1) * step) for b in _bases(mesh, axis))
        assert pair_level(cluster, mesh, axis, 0, n - 1) == expected
    lows = mesh.base_array(axis)
    assert max_span_level(cluster, lows, lows) == 0
