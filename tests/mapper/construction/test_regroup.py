"""Regroup (mapper.construction.regroup): the baseline's node groups kept whole, moved."""

import itertools

import numpy as np
import pytest

from mapper import CommGraph, Hierarchy, evaluate
from mapper.construction.regroup import (
    coarse_machine,
    quotient_graph,
    rank_order_prior,
    regroup,
)
from mapper.objectives.congestion import uplink_loads
from tests.helpers.mapper_cases import random_graph


def _group_sets(machine, mapping, level):
    gid = machine.group_ids[np.asarray(mapping), level]
    return sorted(tuple(np.flatnonzero(gid == g)) for g in np.unique(gid))


def _exhaustive(quotient, coarse, start):
    """The J-optimal group → slot permutation, by trying them all."""
    return min((np.array(p) for p in itertools.permutations(range(coarse.n))),
               key=lambda p: evaluate(quotient, coarse, p).objective)


@pytest.mark.parametrize("seed", range(3))
def test_regroup_is_the_best_arrangement_of_whole_groups(seed):
    machine = Hierarchy.parse("2:2:3", "1:10:100")  # 6 nodes of 2 PEs, 3 leaves of 2
    graph = random_graph(12, 0.35, seed)
    baseline = np.random.default_rng(seed).permutation(12)
    pe = regroup(graph, machine, baseline, 0, _exhaustive)
    assert sorted(pe) == list(range(12))
    # same rank sets on the nodes, so the same node links
    assert _group_sets(machine, pe, 0) == _group_sets(machine, baseline, 0)
    assert (uplink_loads(graph, machine, pe, [0])[0].volume
            == pytest.approx(uplink_loads(graph, machine, baseline, [0])[0].volume))
    # and the best J over every arrangement of the baseline's node groups
    gid = machine.group_ids[baseline, 0]
    offset = baseline - 2 * gid
    best = min(evaluate(graph, machine, np.array(p)[gid] * 2 + offset).objective
               for p in itertools.permutations(range(6)))
    assert evaluate(graph, machine, pe).objective == pytest.approx(best)


def test_quotient_and_coarse_machine():
    machine = Hierarchy.parse("2:2:2", "1:10:100")
    coarse = coarse_machine(machine, 0)
    assert coarse.n == 4 and list(coarse.distances) == [10, 100]
    assert list(coarse.group_sizes(0)) == [2, 2]
    from mapper import CommGraph

    graph = CommGraph.from_edges([0, 0, 2, 4], [1, 2, 6, 5], [5.0, 3.0, 2.0, 7.0], n=8)
    q = quotient_graph(graph, np.array([0, 0, 1, 1, 2, 2, 3, 3]), 4)
    u, v, w = q.edges()
    # volume between groups, each undirected edge once (edges inside a group dropped)
    assert {(int(a), int(b)): float(x) for a, b, x in zip(u, v, w, strict=True)} == \
        {(0, 1): 3.0, (1, 3): 2.0}


def test_uneven_groups_are_not_regrouped():
    machine = Hierarchy.from_tree([[2, 3], [2, 2]], [1, 10, 100])
    graph = random_graph(9, 0.4, 0)
    assert regroup(graph, machine, np.arange(9), 0, _exhaustive) is None


@pytest.mark.parametrize("groups", [1, 2, 5, 8, 13])
def test_rank_order_prior_pairs_groups_powers_of_two_apart_in_rank_order(groups):
    rng = np.random.default_rng(groups)
    first_rank = rng.permutation(groups) * 4  # groups numbered apart from rank order
    prior = rank_order_prior(first_rank, 0.5).toarray()
    order = np.argsort(first_rank)  # order[i]: the group i-th in rank order
    want = np.zeros((groups, groups))
    step = 1
    while step < groups:
        for i in range(groups):
            if i ^ step < groups:
                want[order[i], order[i ^ step]] = 0.5
        step *= 2
    assert np.array_equal(prior, want)


def test_rank_order_keeps_rank_neighbours_together_where_volume_leaves_it_free():
    """Every pair of ranks exchanges the same volume, so every arrangement of the nodes
    costs the same; with the rank-order term the nodes next in rank order (ranks 0-1
    and 2-3, 4-5 and 6-7) share a leaf, and the nodes keep their rank sets."""
    machine = Hierarchy.parse("2:2:2", "1:10:100")  # 4 nodes of 2 PEs, leaves of 2
    a, b = np.triu_indices(8, 1)
    graph = CommGraph.from_edges(a, b, np.ones(len(a)), n=8)
    for seed in range(4):
        nodes = np.random.default_rng(seed).permutation(4)
        baseline = nodes[np.arange(8) // 2] * 2 + np.arange(8) % 2
        pe = regroup(graph, machine, baseline, 0, _exhaustive, rank_order=0.01)
        assert _group_sets(machine, pe, 0) == _group_sets(machine, baseline, 0)
        leaf = machine.group_ids[pe, 1]
        assert leaf[0] == leaf[2] and leaf[4] == leaf[6]


def test_rank_order_links_by_hand():
    from mapper.solve.candidates import rank_order_links
    machine = Hierarchy.parse("2:2:2", "1:10:100")  # 4 nodes of 2 PEs, leaves of 2
    # in order: partners 1 apart share the node, 2 apart the leaf (2 links), 4 apart
    # cross the root (4 links)
    assert rank_order_links(machine, np.arange(8), (0, 1)) == 0 + 2 + 4
    # nodes in the order 0, 2, 3, 1: ranks 2 apart and 4 apart cross the root
    assert rank_order_links(machine, np.array([0, 1, 4, 5, 6, 7, 2, 3]), (0, 1)) == 0 + 4 + 4
    # 6 ranks: the steps among the first 4 only
    assert rank_order_links(Hierarchy.parse("2:3", "1:10"), np.arange(6), (0,)) == 0 + 2
