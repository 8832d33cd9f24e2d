"""Regroup (mapper.construction.regroup): the baseline's node groups kept whole, moved."""

import itertools

import numpy as np
import pytest

from mapper import Hierarchy, evaluate
from mapper.congestion import uplink_loads
from mapper.construction.regroup import coarse_machine, quotient_graph, regroup
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
