import numpy as np
import pytest

from mapper import DistanceMatrix, Hierarchy, MachineError


def test_homogeneous_levels_follow_the_paper():
    h = Hierarchy.parse("4:16:8", "1:10:100")
    assert h.n == 512 and h.levels == 3
    # p, q at level i when they first share a group of a1*...*ai PEs
    assert h.distance(0, 3) == 1 and h.distance(0, 4) == 10
    assert h.distance(0, 63) == 10 and h.distance(0, 64) == 100
    assert h.distance(5, 5) == 0
    p = np.arange(512)
    expected = np.where(p // 4 == 0, 1, np.where(p // 64 == 0, 10, 100))
    expected[0] = 0
    assert np.array_equal(h.distance(np.zeros(512, dtype=int), p), expected)


def test_oracle_stores_no_square_matrix():
    h = Hierarchy.parse("4:16:128", "1:10:100")
    assert h.group_ids.size == h.n * h.levels


def test_uneven_tree_groups_and_distances():
    # switch A: 3 nodes of 2x24 cores; switch B: 5 nodes of 2x16 cores
    tree = [[[24, 24]] * 3, [[16, 16]] * 5]
    h = Hierarchy.from_tree(tree, [1, 10, 100, 1000], ["socket", "node", "switch", "root"])
    assert h.n == 3 * 48 + 5 * 32
    assert list(h.group_sizes(1)) == [48] * 3 + [32] * 5
    assert list(h.group_sizes(2)) == [144, 160]
    assert h.distance(0, 23) == 1 and h.distance(0, 24) == 10
    assert h.distance(0, 48) == 100 and h.distance(0, 144) == 1000
    assert h.distance(144, 159) == 1 and h.distance(144, 160) == 10
    assert not h.is_homogeneous


@pytest.mark.parametrize("hier,dist,msg", [
    ("4:x", "1:2", "expected integers"),
    ("4:4", "1", "2 levels"),
    ("4:0", "1:2", "positive"),
    ("4:4", "10:1", "must not decrease"),
])
def test_bad_hierarchy_strings(hier, dist, msg):
    with pytest.raises(MachineError, match=msg):
        Hierarchy.parse(hier, dist)


def test_uneven_depth_tree_is_rejected():
    with pytest.raises(MachineError, match="depth"):
        Hierarchy.from_tree([[2, 2], 3], [1, 10, 100])


def test_distance_matrix_validation():
    with pytest.raises(MachineError, match="symmetric"):
        DistanceMatrix(np.array([[0, 1], [2, 0]]))
    with pytest.raises(MachineError, match="diagonal"):
        DistanceMatrix(np.array([[1, 1], [1, 0]]))
