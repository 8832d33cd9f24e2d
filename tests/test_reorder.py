"""Rank reordering (mapper.reorder): permutation, composition, files."""

from __future__ import annotations

import time
import tracemalloc

import numpy as np
import pytest

from mapper.construction.matching import matching_tree
from mapper.graph import CommGraph
from mapper.machine import Hierarchy
from mapper.reorder import (
    ReorderError,
    comm_graph_dist_graph_text,
    dist_graph_text,
    format_reorder,
    parse_reorder,
    rank_reorder,
)
from slurm_plugin.allocation import Allocation
from slurm_plugin.distribution import Distribution, slurm_placement
from slurm_plugin.layout import build_layout
from slurm_plugin.topology import NodeShape, SwitchTree


def test_hand_example():
    # mapping: rank k -> PE; launcher (block): rank r starts on PE r
    mapping = np.array([2, 0, 3, 1])
    reorder = rank_reorder(mapping, np.arange(4))
    # PE 0 holds launcher rank 0, which must become rank 1 (mapping[1] == 0), ...
    assert reorder.tolist() == [1, 3, 0, 2]
    # a cyclic launcher over two nodes of two PEs: ranks 0..3 on PEs 0, 2, 1, 3
    assert rank_reorder(mapping, np.array([0, 2, 1, 3])).tolist() == [1, 0, 3, 2]


def test_permutation_and_composition_on_random_cases():
    rng = np.random.default_rng(5)
    for _ in range(50):
        n = int(rng.integers(1, 200))
        pes = rng.choice(3 * n, n, replace=False)  # a job using some of a node's PEs
        mapping, launcher = rng.permutation(pes), rng.permutation(pes)
        reorder = rank_reorder(mapping, launcher)
        assert sorted(reorder.tolist()) == list(range(n))
        # the process started as r becomes rank reorder[r] and stays on launcher[r]
        pe_of_new = np.empty(n, dtype=np.int64)
        pe_of_new[reorder] = launcher
        assert np.array_equal(pe_of_new, mapping)


@pytest.mark.parametrize("nodes", ["block", "cyclic"])
def test_composition_with_slurm_placements(nodes):
    layout = build_layout(Allocation("1", ("a", "b", "c"), (4, 4, 2), 1), NodeShape(2, 2),
                          SwitchTree(), [1, 10, 100])
    launcher = slurm_placement(layout, Distribution(nodes, "cyclic"))
    mapping = np.random.default_rng(1).permutation(layout.n)
    reorder = rank_reorder(mapping, launcher)
    assert np.array_equal(mapping[reorder], launcher)


def test_mismatched_placements_are_refused():
    with pytest.raises(ReorderError, match="3 ranks, the launcher's placement 2"):
        rank_reorder(np.arange(3), np.arange(2))
    with pytest.raises(ReorderError, match="mapping puts two ranks on one PE"):
        rank_reorder(np.array([0, 0, 1]), np.arange(3))
    with pytest.raises(ReorderError, match="rank 2 on PE 7, which the mapping does not"):
        rank_reorder(np.arange(3), np.array([1, 0, 7]))


def test_reorder_file_round_trip_and_errors():
    reorder = np.array([1, 3, 0, 2])
    text = format_reorder(reorder)
    assert text == "1\n3\n0\n2\n"
    assert parse_reorder(text, 4).tolist() == [1, 3, 0, 2]
    assert parse_reorder("# header\n1\n\n0\n", 2, "r").tolist() == [1, 0]
    for bad, n, msg in [("1\nx\n", None, "r:2: expected a rank, got 'x'"),
                        ("1\n0\n", 3, "r: 2 ranks, the job has 3"),
                        ("1\n0\n\n# c\n2\n", 2, "r:5: more than 2 ranks, the job has 2"),
                        ("0\n2\n", None, "r:2: rank 2 out of range 0..1"),
                        ("1\n# c\n0\n1\n", None, "r:4: rank 1 again (first on line 1)")]:
        with pytest.raises(ReorderError) as exc:
            parse_reorder(bad, n, "r")
        assert str(exc.value) == msg


def test_a_huge_reorder_file_stops_at_the_first_rank_too_many():
    """Issue 28: every line was split before the count was compared with the job's."""
    text = "1\n0\n" * 2_500_000
    tracemalloc.start()
    start = time.process_time()
    try:
        with pytest.raises(ReorderError, match=r"^big:5: more than 4 ranks, the job has 4"):
            parse_reorder(text, 4, "big")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 50 << 20, f"{peak} bytes at the peak"
    assert time.process_time() - start < 2


# the seed's Dist_graph file for its example (§IV.C), the garbled lines read as the
# neighbours the text explains: pairs 0-6, 1-7, 2-5, 3-4 and the edges 0-7, 2-4, 1-5
SEED_DIST_GRAPH = "8\n2 6 7\n2 5 7\n2 4 5\n1 4\n2 2 3\n2 1 2\n1 0\n2 0 1\n"


def test_seed_dist_graph_file():
    from test_matching import TABLE_I

    graph = CommGraph.from_matrix(TABLE_I, directed=False)
    u, v = matching_tree(graph, Hierarchy.homogeneous([2, 2, 2], [1, 2, 3]))
    assert dist_graph_text(8, u, v) == SEED_DIST_GRAPH


def test_dist_graph_of_a_comm_graph():
    # a path 0-1-2 and an isolated rank 3; repeated and self edges collapse
    assert dist_graph_text(4, np.array([0, 1, 1, 2]), np.array([1, 2, 0, 2])) == \
        "4\n1 1\n2 0 2\n1 1\n0\n"
    g = CommGraph.from_edges([0, 1, 2], [1, 2, 0], [5.0, 1.0, 2.0], n=4)
    assert comm_graph_dist_graph_text(g) == "4\n2 1 2\n2 0 2\n2 0 1\n0\n"
    with pytest.raises(ReorderError, match="outside 0..1"):
        dist_graph_text(2, np.array([0]), np.array([2]))
