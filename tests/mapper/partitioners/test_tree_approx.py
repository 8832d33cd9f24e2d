"""The tree approximation of a non-tree network (mapper.partitioners.tree_approx): a valid
Hierarchy over every PE, level distances = mean hops (hand-computed and brute force),
and placements translated back to the real machine keep their hop-bytes."""

from itertools import combinations

import numpy as np
import pytest

from mapper.model.graph import CommGraph
from mapper.model.machine import Hierarchy, MachineError
from mapper.model.networks import NodeHopMachine, tianhe3_hops, torus_hops
from mapper.objectives.hop_bytes import hop_bytes
from mapper.partitioners.tree_approx import _bisect, machine_pes, tree_approximation
from mapper.solve.api import map_processes

NODE = Hierarchy.homogeneous([2, 2], [0.0, 0.0])  # 4 PEs per node, no hop inside


def _pos(order):
    pos = np.empty(len(order), dtype=np.int64)
    pos[order] = np.arange(len(order))
    return pos


@pytest.mark.parametrize("hops", [torus_hops([4]), torus_hops([2, 2])])
def test_ring_and_2x2_torus_by_hand(hops):
    # ring 0-1-2-3-0 and the 2x2 torus: every node has two 1-hop neighbours and one at
    # 2 hops.  Any balanced bisection into 1-hop pairs gives: pairs level = 1 hop;
    # root level = the 4 cross pairs, two at 1 hop and two at 2 → 1.5
    tree, order = tree_approximation(hops, NODE)
    assert tree.levels == 4
    assert tree.distances.tolist() == [0.0, 0.0, 1.0, 1.5]
    assert [len(b) - 1 for b in tree.bounds] == [8, 4, 2, 1]
    pairs = order.reshape(2, 2)
    assert hops[pairs[0, 0], pairs[0, 1]] == 1 and hops[pairs[1, 0], pairs[1, 1]] == 1


def test_base_and_per_hop_scale_the_means():
    tree, _ = tree_approximation(torus_hops([4]), NODE, base=10.0, per_hop=2.0)
    assert tree.distances.tolist() == [0.0, 0.0, 12.0, 13.0]


def test_network_levels_never_below_the_node():
    # the node's own outer distance (5) is above every mean hop count: the network
    # levels are raised to it (distances must not decrease outwards)
    node = Hierarchy.homogeneous([2, 2], [1.0, 5.0])
    tree, _ = tree_approximation(torus_hops([4]), node)
    assert tree.distances.tolist() == [1.0, 5.0, 5.0, 5.0]


def _brute_force_level_means(tree, order, hops, pes_per_node):
    """Mean hops per level over the pairs of distinct nodes, by a loop over pairs."""
    pos = _pos(order)
    sums, counts = {}, {}
    for a, b in combinations(range(len(order)), 2):
        lv = int(tree.level_of(pos[a] * pes_per_node, pos[b] * pes_per_node))
        sums[lv] = sums.get(lv, 0.0) + hops[a, b]
        counts[lv] = counts.get(lv, 0) + 1
    return {lv: sums[lv] / counts[lv] for lv in sums}


@pytest.mark.parametrize("name,hops", [
    ("torus4x4", torus_hops([4, 4])),
    ("tianhe3-4x4x2", tianhe3_hops(4, 4, 2)),
    ("tianhe3-3x2x2", tianhe3_hops(3, 2, 2)),   # 12 nodes: uneven groups
    ("torus5x3", torus_hops([5, 3])),           # 15 nodes
])
def test_valid_hierarchy_and_level_means(name, hops):
    count = len(hops)
    tree, order = tree_approximation(hops, NODE)
    assert sorted(order.tolist()) == list(range(count))
    assert tree.n == 4 * count
    # every PE in exactly one group per level, the node levels copied from NODE
    for lv, b in enumerate(tree.bounds):
        sizes = np.diff(b)
        assert sizes.sum() == tree.n and sizes.min() >= 1
        if lv < NODE.levels:  # sockets of 2 PEs, nodes of 4
            assert sizes.tolist() == ([2] * 2 * count if lv == 0 else [4] * count)
    assert len(tree.bounds[NODE.levels - 1]) - 1 == count  # the node level: one per node
    depth = tree.levels - NODE.levels
    assert depth == int(np.ceil(np.log2(count)))
    # documented distances: the running maximum of the node's distances and the mean
    # hops of each network level, level by level
    means = _brute_force_level_means(tree, order, hops, 4)
    assert set(means) == set(range(NODE.levels, tree.levels))
    expect = np.maximum.accumulate(
        np.concatenate([NODE.distances, [means[lv] for lv in range(NODE.levels, tree.levels)]]))
    np.testing.assert_allclose(tree.distances, expect)
    pes = machine_pes(order, np.full(count, 4))
    assert sorted(pes.tolist()) == list(range(tree.n))
    np.testing.assert_array_equal(pes // 4, np.repeat(order, 4))


def test_tianhe3_pairs_are_chips_and_quads_share_a_row():
    # 2 nodes per chip: the best first level is the chips themselves (1 hop); groups of
    # 2 chips are best in one row or column (2 hops across)
    tree, order = tree_approximation(tianhe3_hops(4, 4, 2), NODE)
    chip = order // 2
    assert np.all(chip[0::2] == chip[1::2])
    assert tree.distances[NODE.levels:NODE.levels + 2].tolist() == [1.0, 2.0]


def test_root_bisection_is_optimal_on_small_instances():
    # brute force over all balanced splits of the group: the kept split has the least
    # hop sum inside its halves (4x4 torus: slabs, 96; Tianhe-3 2x2 chips: 2 chips, 10)
    for hops in (torus_hops([4, 4]).astype(float), tianhe3_hops(2, 2, 2).astype(float)):
        n = len(hops)
        first = _bisect(hops, 64, 0)
        got = 0.5 * (hops[np.ix_(first, first)].sum() + hops[np.ix_(~first, ~first)].sum())
        best = min(0.5 * (hops[np.ix_(s, s)].sum() + hops[np.ix_(r, r)].sum())
                   for c in combinations(range(n), n // 2)
                   for s, r in [(list(c), sorted(set(range(n)) - set(c)))])
        assert first.sum() == n // 2 and got == best


def _brute_force_hop_bytes(graph, tree_mapping, order, pes_per_node, hops):
    u, v, w = graph.edges()
    total = 0.0
    for a, b, vol in zip(u, v, w, strict=True):
        na = order[tree_mapping[a] // pes_per_node]
        nb = order[tree_mapping[b] // pes_per_node]
        total += vol * hops[na, nb]
    return total


@pytest.mark.parametrize("hops", [torus_hops([4, 4]), tianhe3_hops(4, 4, 2)])
def test_placement_mapped_back_keeps_hop_bytes(hops):
    count = len(hops)
    real = NodeHopMachine(hops, NODE)
    tree, order = tree_approximation(hops, NODE)
    pes = machine_pes(order, real.node_sizes)
    rng = np.random.default_rng(3)
    n = real.n
    u = rng.integers(0, n, 300)
    v = rng.integers(0, n, 300)
    keep = u != v
    graph = CommGraph.from_edges(u[keep], v[keep], rng.uniform(1, 9, keep.sum()), n=n)
    for tree_mapping in (rng.permutation(n), map_processes(graph, tree, "topdown").mapping):
        direct = hop_bytes(graph, real, pes[tree_mapping]).total
        assert direct == pytest.approx(
            _brute_force_hop_bytes(graph, tree_mapping, order, 4, hops))
    assert count * 4 == n


def test_per_node_hierarchies_of_different_sizes():
    small = Hierarchy.homogeneous([2, 1], [0.0, 0.0])
    big = Hierarchy.homogeneous([3, 1], [0.0, 0.0])
    nodes = [small, big, small, big, big]
    tree, order = tree_approximation(torus_hops([5]), nodes)
    sizes = np.array([t.n for t in nodes])
    assert tree.n == sizes.sum()
    np.testing.assert_array_equal(np.diff(tree.bounds[NODE.levels - 1]), sizes[order])
    pes = machine_pes(order, sizes)
    assert sorted(pes.tolist()) == list(range(tree.n))
    real = NodeHopMachine(torus_hops([5]), nodes)
    # tree PE p sits on tree node k = real node order[k]
    tree_node = np.repeat(np.arange(5), sizes[order])
    np.testing.assert_array_equal(real.pe_node[pes], order[tree_node])


def test_single_node_is_the_node_itself():
    tree, order = tree_approximation(np.zeros((1, 1)), NODE)
    assert order.tolist() == [0] and tree.levels == NODE.levels and tree.n == 4


@pytest.mark.parametrize("hops,nodes", [
    (np.zeros((2, 3)), NODE),
    (np.array([[0, 1], [2, 0]]), NODE),
    (torus_hops([4]), [NODE] * 3),
])
def test_bad_input_is_a_machine_error(hops, nodes):
    with pytest.raises(MachineError):
        tree_approximation(hops, nodes)
