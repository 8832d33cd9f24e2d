"""Hierarchical matching (mapper.construction.matching) against the seed's worked example
and against brute force."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from mapper.construction.matching import (
    aggregate,
    matching,
    matching_trace,
    matching_tree,
    pair_by_assignment,
)
from mapper.model.graph import CommGraph
from mapper.model.machine import Hierarchy
from mapper.objectives.qap import evaluate

# the seed's Table I (Sudhakar et al.)
TABLE_I = np.array([
    [0, 100, 19, 12, 19, 11, 2511, 223],
    [100, 0, 12, 12, 25, 28, 223, 1412],
    [19, 12, 0, 223, 251, 1584, 17, 10],
    [12, 12, 223, 0, 1995, 112, 17, 17],
    [19, 25, 251, 1995, 0, 158, 17, 12],
    [11, 28, 1584, 112, 158, 0, 25, 19],
    [2511, 223, 17, 17, 17, 25, 0, 100],
    [223, 1412, 10, 17, 12, 19, 100, 0]])
TABLE_II = np.array([[0, 646, 72, 65], [646, 0, 69, 66], [72, 69, 0, 744], [65, 66, 744, 0]])
TABLE_III = np.array([[0, 272], [272, 0]])


def _seed_example():
    graph = CommGraph.from_matrix(TABLE_I, directed=False)
    return graph, Hierarchy.homogeneous([2, 2, 2], [1, 2, 3])  # 3-level binary tree


def test_seed_worked_example_tables_and_order():
    graph, machine = _seed_example()
    order, steps = matching_trace(graph, machine)
    assert [g.tolist() for g in steps[0].groups] == [[0, 6], [1, 7], [2, 5], [3, 4]]
    assert np.array_equal(steps[0].matrix, TABLE_II)
    assert [g.tolist() for g in steps[1].groups] == [[0, 1], [2, 3]]
    assert np.array_equal(steps[1].matrix, TABLE_III)
    assert [m.tolist() for m in steps[1].members] == [[0, 6, 1, 7], [2, 5, 3, 4]]
    assert order.tolist() == [0, 6, 1, 7, 2, 5, 3, 4]
    pe = matching(graph, machine)
    assert pe[[0, 6, 1, 7, 2, 5, 3, 4]].tolist() == list(range(8))


def test_fig5_aggregation_by_hand():
    assert np.array_equal(aggregate(TABLE_I, [[0, 6], [1, 7], [2, 5], [3, 4]]), TABLE_II)
    assert np.array_equal(aggregate(TABLE_II, [[0, 1], [2, 3]]), TABLE_III)
    # entry (0, 1) of Table II is C01 + C07 + C61 + C67, as the seed spells out
    assert TABLE_II[0, 1] == 100 + 223 + 223 + 100


def test_seed_topology_graph_edges():
    graph, machine = _seed_example()
    u, v = matching_tree(graph, machine)
    edges = {tuple(sorted(e)) for e in zip(u.tolist(), v.tolist(), strict=True)}
    # pairs, then 0-7 (C07 = 223, first of the tie with C61), 2-4 (251), 1-5 (28)
    assert edges == {(0, 6), (1, 7), (2, 5), (3, 4), (0, 7), (2, 4), (1, 5)}


def _random_graph(rng, n, density=0.6):
    a = rng.integers(1, 100, (n, n)) * (rng.random((n, n)) < density)
    a = np.triu(a, 1)
    return CommGraph.from_matrix(a + a.T, directed=False)


MACHINES = {
    "2x3": Hierarchy.homogeneous([2, 3], [1, 10]),
    "2x4": Hierarchy.homogeneous([2, 4], [1, 10]),
    "3x2": Hierarchy.homogeneous([3, 2], [1, 10]),
    "4x2": Hierarchy.homogeneous([4, 2], [1, 10]),
    "6x2": Hierarchy.homogeneous([6, 2], [1, 10]),
    "uneven 3+2+3": Hierarchy.from_tree([3, 2, 3], [1, 10]),
    "uneven 2+4+2": Hierarchy.from_tree([2, 4, 2], [1, 10]),
    "two nodes 2x2 and 3x1": Hierarchy.from_tree([[2, 2], [3, 1, 1]], [1, 4, 10]),
}


@pytest.mark.parametrize("name", sorted(MACHINES))
def test_result_is_a_bijection(name):
    machine = MACHINES[name]
    for seed in range(5):
        graph = _random_graph(np.random.default_rng(seed), machine.n)
        pe = matching(graph, machine)
        assert sorted(pe.tolist()) == list(range(machine.n))


def _brute_force(graph, machine) -> float:
    u, v, w = graph.edges()
    perms = np.array(list(itertools.permutations(range(graph.n))))
    return float(min((machine.distance(c[:, u], c[:, v]) * w).sum(axis=1).min()
                     for c in np.array_split(perms, max(1, len(perms) // 20000))))


def _max_perfect_matching(w) -> float:
    n = len(w)
    best = 0.0

    def rec(left, acc):
        nonlocal best
        if not left:
            best = max(best, acc)
            return
        a, rest = left[0], left[1:]
        for i, b in enumerate(rest):
            rec(rest[:i] + rest[i + 1:], acc + w[a, b])
    rec(list(range(n)), 0.0)
    return best


def test_pairing_keeps_two_thirds_of_the_best_perfect_matching():
    rng = np.random.default_rng(7)
    # two heavy triangles: the assignment is two 3-cycles, which must be split
    w = np.zeros((6, 6))
    for a, b in [(0, 1), (1, 2), (0, 2), (3, 4), (4, 5), (3, 5)]:
        w[a, b] = w[b, a] = 10
    cases = [w] + [(lambda m: m + m.T)(np.triu(rng.integers(0, 50, (n, n)), 1).astype(float))
                   for n in (4, 6, 8, 10) for _ in range(10)]
    for w in cases:
        pairs = pair_by_assignment(w)
        assert sorted(pairs.ravel().tolist()) == list(range(len(w)))
        kept = w[pairs[:, 0], pairs[:, 1]].sum()
        assert kept >= 2 / 3 * _max_perfect_matching(w) - 1e-9


def test_pairs_under_a_root_are_within_the_proven_gap_of_brute_force():
    """Machine 2 x k: J = d1 * total - (d1 - d0) * (weight inside pairs), so
    J - J* <= (d1 - d0) * M* / 3 by the pairing's 2/3 guarantee."""
    for name in ("2x3", "2x4"):
        machine = MACHINES[name]
        for seed in range(15):
            graph = _random_graph(np.random.default_rng(100 + seed), machine.n)
            j = evaluate(graph, machine, matching(graph, machine)).objective
            best = _brute_force(graph, machine)
            dense = graph.to_csr().toarray()
            bound = (10 - 1) * _max_perfect_matching(dense) / 3
            assert best - 1e-9 <= j <= best + bound + 1e-9


# Measured on these 20 random graphs each (density 0.6, weights 1..99, d = 1:10):
# worst J / J* 1.72 (3x2: a hub taken as the first seed), 1.25 (4x2), 1.20 (uneven
# 3+2+3), 1.29 (uneven 2+4+2); means 1.04, 1.03, 1.07, 1.12.  Growth has no guarantee:
# the assertions are these measurements with a margin.
GROWTH_WORST = {"3x2": 1.8, "4x2": 1.35, "uneven 3+2+3": 1.3, "uneven 2+4+2": 1.4}


@pytest.mark.parametrize("name", sorted(GROWTH_WORST))
def test_growth_levels_against_brute_force(name):
    machine = MACHINES[name]
    ratios = []
    for seed in range(20):
        graph = _random_graph(np.random.default_rng(200 + seed), machine.n)
        j = evaluate(graph, machine, matching(graph, machine)).objective
        ratios.append(j / _brute_force(graph, machine))
    assert min(ratios) >= 1 - 1e-12
    assert max(ratios) <= GROWTH_WORST[name]
    assert np.mean(ratios) <= 1 + (GROWTH_WORST[name] - 1) / 2


def test_growth_finds_planted_groups():
    """Three heavy triangles on a 3 x 3 machine end up one per group."""
    w = np.ones((9, 9))
    for t in range(3):
        block = [3 * t, 3 * t + 1, 3 * t + 2]
        w[np.ix_(block, block)] = 100
    np.fill_diagonal(w, 0)
    perm = np.random.default_rng(3).permutation(9)
    graph = CommGraph.from_matrix(w[np.ix_(perm, perm)], directed=False)
    pe = matching(graph, Hierarchy.homogeneous([3, 3], [1, 10]))
    groups = {frozenset(perm[np.flatnonzero(pe // 3 == g)].tolist()) for g in range(3)}
    assert groups == {frozenset({0, 1, 2}), frozenset({3, 4, 5}), frozenset({6, 7, 8})}


def test_uneven_tree_keeps_the_layout():
    """A heavy pair and a heavy triple on sockets of 2 and 3 PEs land on them."""
    machine = Hierarchy.from_tree([2, 3], [1, 10])
    w = np.ones((5, 5))
    w[np.ix_([1, 3], [1, 3])] = 50
    w[np.ix_([0, 2, 4], [0, 2, 4])] = 50
    np.fill_diagonal(w, 0)
    pe = matching(CommGraph.from_matrix(w, directed=False), machine)
    assert sorted(pe[[1, 3]].tolist()) == [0, 1]
    assert sorted(pe[[0, 2, 4]].tolist()) == [2, 3, 4]


def test_matching_is_an_algorithm_name():
    """``matching`` and ``matching+n10`` run through map_processes; the search only
    improves the construction, and a non-hierarchical machine is refused by name."""
    from mapper import map_processes
    from mapper.model.machine import DistanceMatrix, MachineError

    rng = np.random.default_rng(5)
    w = rng.integers(0, 9, (16, 16)).astype(float)
    w = np.triu(w, 1) + np.triu(w, 1).T
    graph = CommGraph.from_matrix(w, directed=False)
    machine = Hierarchy.homogeneous([2, 2, 4], [1, 10, 100])
    plain = map_processes(graph, machine, "matching")
    assert plain.objective == evaluate(graph, machine, matching(graph, machine)).objective
    polished = map_processes(graph, machine, "matching+n10")
    assert sorted(polished.mapping.tolist()) == list(range(16))
    assert polished.objective <= plain.objective
    with pytest.raises(MachineError, match="matching needs a hierarchical machine"):
        map_processes(graph, DistanceMatrix(np.ones((16, 16)) - np.eye(16)), "matching")
