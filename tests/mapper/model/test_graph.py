import numpy as np
import pytest
import scipy.sparse as sp

from mapper import CommGraph, GraphError


def test_directed_traffic_is_symmetrized():
    c = np.array([[0, 5, 0], [1, 0, 2], [0, 0, 0]], dtype=float)
    g = CommGraph.from_matrix(c, directed=True)
    a = g.to_csr().toarray()
    assert np.array_equal(a, c + c.T)
    assert g.m == 2 and g.total_volume == 8


def test_undirected_matrix_must_be_symmetric():
    with pytest.raises(GraphError, match="not symmetric"):
        CommGraph.from_matrix(np.array([[0, 1], [2, 0]]), directed=False)


@pytest.mark.parametrize("matrix,msg", [
    (np.array([[0, -1], [0, 0]]), "negative"),
    (np.array([[0, np.nan], [0, 0]]), "NaN"),
    (np.array([[3, 1], [1, 0]]), "self loop"),
])
def test_bad_values(matrix, msg):
    with pytest.raises(GraphError, match=msg):
        CommGraph.from_matrix(matrix)


def test_edge_list_sums_repeats_and_checks_ranges():
    g = CommGraph.from_edges([0, 1, 0], [1, 0, 2], [1.0, 2.0, 4.0], n=3)
    assert g.to_csr()[0, 1] == 3 and g.to_csr()[2, 0] == 4
    with pytest.raises(GraphError, match="only 3 ranks"):
        CommGraph.from_edges([0], [3], n=3)
    with pytest.raises(GraphError, match="self loop"):
        CommGraph.from_edges([1], [1], n=3)


def test_edges_once_and_degrees():
    a = sp.random(30, 30, density=0.2, random_state=0, format="csr")
    a.setdiag(0)
    g = CommGraph.from_matrix(a)
    u, v, w = g.edges()
    assert np.all(u < v) and len(u) == g.m
    assert np.isclose(w.sum(), g.total_volume)
    assert np.allclose(g.weighted_degrees(), np.asarray(g.to_csr().sum(axis=1)).ravel())
