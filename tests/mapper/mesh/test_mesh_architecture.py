"""The architecture graph of Moulitsas & Karypis §2.2 (mapper.mesh.architecture): e* of
directly linked pairs, QPL of the others on trees and link graphs, speeds, the Fig. 2
machines."""

import itertools

import numpy as np
import pytest

from mapper.mesh.architecture import (
    FIG2_MACHINES,
    METACOMPUTER_LINK,
    architecture_from_hierarchy,
    architecture_from_links,
    architecture_from_matrix,
    fig2_1d_array,
    fig2_2d_array,
    fig2_cluster,
    fig2_metacomputer,
)
from mapper.model.machine import Hierarchy, MachineError


def all_pairs(arch):
    p, q = np.meshgrid(np.arange(arch.P), np.arange(arch.P), indexing="ij")
    return arch.pair_cost(p, q)


def brute_qpl(n, links):
    """e* by enumerating every simple path (tiny graphs only): the direct cost for linked
    pairs, else the smallest sum of squared link costs over all simple paths."""
    cost = {}
    for u, v, c in links:
        cost[u, v] = cost[v, u] = c
    out = np.zeros((n, n))
    for s, t in itertools.permutations(range(n), 2):
        if (s, t) in cost:
            out[s, t] = cost[s, t]
            continue
        best = np.inf
        others = [x for x in range(n) if x not in (s, t)]
        for r in range(len(others) + 1):
            for mid in itertools.permutations(others, r):
                path = (s, *mid, t)
                if all(e in cost for e in zip(path, path[1:], strict=False)):
                    best = min(best, sum(cost[e] ** 2 for e in zip(path, path[1:],
                                                                    strict=False)))
        out[s, t] = best
    return out


# -- link graphs -----------------------------------------------------------------------------

def test_1d_array_costs_1_2_3_by_hand():
    a = architecture_from_links(4, [0, 1, 2], [1, 2, 3], [1, 2, 3])
    assert a.pair_cost(0, 3) == 1 + 4 + 9
    assert a.pair_cost(3, 0) == 14
    assert list(a.pair_cost([0, 0, 1, 2, 1], [1, 2, 3, 3, 1])) == [1, 1 + 4, 4 + 9, 3, 0]


def test_qpl_takes_the_cheapest_path_under_squared_costs_and_direct_links_stay_linear():
    # 0-3 not linked: via 1 costs 1 and 5 (linear 6, squared 26), via 2 costs 3.5 and 3.5
    # (linear 7, squared 24.5): the QPL is 24.5, not the square sum of the linear-shortest
    # path; 0-1 is linked at 1 although nothing is cheaper.
    a = architecture_from_links(4, [0, 1, 0, 2], [1, 3, 2, 3], [1, 5, 3.5, 3.5])
    assert a.pair_cost(0, 3) == 24.5
    assert a.pair_cost(1, 3) == 5  # directly linked: its cost, although 1 + 12.25·2 > 5
    tri = architecture_from_links(3, [0, 1, 0], [1, 2, 2], [1, 1, 3])
    assert tri.pair_cost(0, 2) == 3  # direct link, not the QPL 2 of 0-1-2


def test_link_graph_against_brute_force_on_random_small_graphs():
    rng = np.random.default_rng(5)
    for n in (5, 6, 7):
        edges = [(i, i + 1) for i in range(n - 1)]  # connected spine
        edges += [(u, v) for u, v in itertools.combinations(range(n), 2)
                  if v > u + 1 and rng.random() < 0.35]
        links = [(u, v, float(rng.integers(1, 6))) for u, v in edges]
        u, v, c = (np.array(x) for x in zip(*links, strict=True))
        a = architecture_from_links(n, u, v, c)
        want = brute_qpl(n, links)
        assert np.array_equal(all_pairs(a), want)
        assert np.array_equal(a.dense_costs(), want)


def test_rows_are_computed_only_for_the_sources_asked():
    a = fig2_1d_array()
    assert a.pair_cost([3, 3, 7], [20, 9, 30]).tolist() == [17, 6, 23]
    assert sorted(a._links.rows) == [3, 7]


@pytest.mark.parametrize("args,msg", [
    ((3, [0], [1], [1.0]), "2 disconnected parts"),
    ((3, [0, 1], [1, 1], [1, 1]), "joins PE 1 to itself"),
    ((3, [0, 1, 1], [1, 0, 2], [1, 1, 1]), "PEs 0 and 1 are linked more than once"),
    ((3, [0, 1], [1, 2], [1, 0]), "positive"),
    ((3, [0, 1], [1, 3], [1, 1]), r"0\.\.2"),
    ((3, [0, 1], [1, 2], [1]), "2 sources, 2 targets, 1 costs"),
])
def test_link_graph_errors(args, msg):
    with pytest.raises(MachineError, match=msg):
        architecture_from_links(*args)


# -- trees ------------------------------------------------------------------------------------

def small_tree():
    # leaf switch A: node n0 (2 sockets x 2 PEs: 0-3), node n1 (1 socket: 4-5);
    # leaf switch B: node n2 (1 socket: 6-7)
    return Hierarchy.from_tree([[[2, 2], [2]], [[2]]], [1, 2, 10, 100],
                               ("socket", "node", "leaf switch", "root"))


def test_tree_link_model_by_hand():
    a = architecture_from_hierarchy(small_tree(), [1, 2, 10, 100])
    assert a.pair_cost(0, 1) == 1  # same socket: direct
    assert a.pair_cost(0, 2) == 2  # same node: direct
    assert a.pair_cost(0, 4) == 2 * 10**2  # n0 -> A -> n1
    assert a.pair_cost(0, 6) == 2 * (10**2 + 100**2)  # n0 -> A -> root -> B -> n2
    assert a.pair_cost(5, 5) == 0


def test_tree_uplink_costs_by_hand():
    # node uplinks n0, n1, n2 = 10, 20, 10; switch uplinks A = 100, B = 0 (a pad)
    a = architecture_from_hierarchy(small_tree(), [1, 2, 10, 100],
                                    uplink_costs=[None, [10, 20, 10], [100, 0], None])
    assert a.pair_cost(0, 4) == 10**2 + 20**2
    assert a.pair_cost(4, 6) == 20**2 + 100**2 + 10**2 + 0
    assert a.pair_cost(0, 2) == 2


def test_tree_without_a_node_level_equals_the_hierarchy_distances():
    h = Hierarchy.homogeneous([2, 3, 2], [1, 10, 100])
    a = architecture_from_hierarchy(h, h.distances)
    p, q = np.meshgrid(np.arange(h.n), np.arange(h.n), indexing="ij")
    assert np.array_equal(all_pairs(a), h.distance(p, q))
    # node_level 0: the level-0 groups are nodes, everything above goes through switches
    b = architecture_from_hierarchy(h, [1, 10, 100], node_level=0)
    assert b.pair_cost(0, 2) == 2 * 10**2 and b.pair_cost(0, 6) == 2 * (10**2 + 100**2)


def test_dense_costs_equal_pair_cost_on_every_pair_in_blocks():
    # 2048 PEs: dense_costs works in blocks of 512 rows
    h = Hierarchy.homogeneous([4, 8, 64], [1, 5, 50], ("socket", "node", "root"))
    rng = np.random.default_rng(1)
    a = architecture_from_hierarchy(h, [1, 5, 50], rng.uniform(0.5, 2, h.n),
                                    uplink_costs=[None, rng.uniform(40, 60, 64), None])
    dense = a.dense_costs()
    assert np.array_equal(dense, all_pairs(a))
    assert np.array_equal(dense, dense.T) and not np.diag(dense).any()


@pytest.mark.parametrize("kwargs,msg", [
    (dict(link_costs=[1, 2, 10]), "4 levels, got 3 costs"),
    (dict(link_costs=[1, 2, -10, 100]), "non-negative"),
    (dict(link_costs=[1, 2, 10, 100], uplink_costs=[None, [1, 2], None, None]),
     r"uplink_costs\[1\]: level 1 has 3 groups, got 2"),
    (dict(link_costs=[1, 2, 10, 100], uplink_costs=[[1, 1, 1, 1], None, None, None]),
     r"uplink_costs\[0\]: level 0 is inside a node"),
    (dict(link_costs=[1, 2, 10, 100], uplink_costs=[None, None, None, [1]]),
     "the root has no uplink"),
    (dict(link_costs=[1, 2, 10, 100], node_level=4), "node_level"),
    (dict(link_costs=[1, 2, 10, 100], speeds=np.ones(7)), "expected 8 values"),
    (dict(link_costs=[1, 2, 10, 100], speeds=[1, 1, 1, 0, 1, 1, 1, 1]), "positive"),
])
def test_tree_errors(kwargs, msg):
    with pytest.raises(MachineError, match=msg):
        architecture_from_hierarchy(small_tree(), **kwargs)


# -- speeds and the matrix model ----------------------------------------------------------------

def test_speeds_give_the_cost_per_work_and_are_copied():
    s = np.array([1.0, 2.0, 4.0, 0.5])
    a = architecture_from_matrix(np.array([[0, 1, 2, 3], [1, 0, 1, 2], [2, 1, 0, 1],
                                           [3, 2, 1, 0]]), s)
    assert list(a.cost_per_work) == [1.0, 0.5, 0.25, 2.0]
    s[0] = 99
    assert a.speeds[0] == 1.0
    assert a.pair_cost([0, 3], [3, 3]).tolist() == [3, 0]
    assert a.dense_costs()[1, 3] == 2
    with pytest.raises(MachineError, match="symmetric"):
        architecture_from_matrix([[0, 1], [2, 0]])
    with pytest.raises(MachineError, match="PE ids"):
        a.pair_cost(0, 4)


# -- Fig. 2 ----------------------------------------------------------------------------------------

def test_fig2_machines_sizes_and_values():
    assert set(FIG2_MACHINES) == {"Arch32_1", "Arch32_2", "Arch32_3", "Arch32_4"}
    for make in FIG2_MACHINES.values():
        a = make()
        assert a.P == 32 and np.all(a.speeds == 1)
        assert np.array_equal(a.dense_costs(), all_pairs(a))
    one = fig2_1d_array()
    assert len(one._links.keys) // 2 == 31
    assert (one.pair_cost(0, 1), one.pair_cost(0, 31), one.pair_cost(5, 9)) == (1, 31, 4)
    two = fig2_2d_array()
    assert len(two._links.keys) // 2 == 4 * 7 + 3 * 8
    assert (two.pair_cost(0, 8), two.pair_cost(0, 31), two.pair_cost(9, 10)) == (1, 10, 1)
    cl = fig2_cluster()
    assert (cl.pair_cost(0, 3), cl.pair_cost(0, 4), cl.pair_cost(1, 31)) == (1, 10, 10)
    assert np.count_nonzero(cl.dense_costs() == 10) == 32 * 28
    meta = fig2_metacomputer()
    a, b = METACOMPUTER_LINK
    assert meta.pair_cost(a, b) == 10
    assert meta.pair_cost(0, 15) == 6  # inside one site: Manhattan distance
    assert meta.pair_cost(0, 16) == 3 + 100
    assert meta.pair_cost(15, 31) == 3 + 100 + 6
    half_fast = np.repeat([2.0, 1.0], 16)
    assert list(fig2_cluster(half_fast).cost_per_work[[0, 31]]) == [0.5, 1.0]
