"""Node hop matrices of the network generators against hand-drawn small instances,
and the machine that combines them with the per-node hierarchy."""

from collections import deque

import numpy as np
import pytest
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import shortest_path

from mapper.model.graph import CommGraph
from mapper.model.machine import DistanceMatrix, Hierarchy, MachineError
from mapper.model.networks import (
    NodeHopMachine,
    dragonfly_hops,
    mesh_hops,
    restrict_hops,
    tianhe3_hops,
    torus_hops,
)
from mapper.objectives.hop_bytes import has_hops, hop_bytes
from mapper.objectives.qap import evaluate


def test_mesh_3x3_by_hand():
    # 0 1 2
    # 3 4 5
    # 6 7 8
    h = mesh_hops([3, 3])
    assert h[0].tolist() == [0, 1, 2, 1, 2, 3, 2, 3, 4]
    assert h[4].tolist() == [2, 1, 2, 1, 0, 1, 2, 1, 2]
    assert h[2, 6] == 4 and h[1, 7] == 2


def test_torus_4x4_wraps():
    h = torus_hops([4, 4])
    # node 0 = (0,0): (0,3) is one hop over the wrap link, (3,3) two, (2,2) four
    assert h[0, 3] == 1 and h[0, 12] == 1 and h[0, 15] == 2 and h[0, 10] == 4
    assert h[0].tolist() == [0, 1, 2, 1, 1, 2, 3, 2, 2, 3, 4, 3, 1, 2, 3, 2]
    assert h.max() == 4


@pytest.mark.parametrize("dims, wrap", [((3, 4, 2), False), ((3, 4, 2), True), ((5,), True),
                                        ((2, 3), False)])
def test_grids_match_breadth_first_search_on_the_link_graph(dims, wrap):
    n = int(np.prod(dims))
    coords = np.array(np.unravel_index(np.arange(n), dims)).T
    src, dst = [], []
    for a in range(n):
        for axis, length in enumerate(dims):
            c = coords[a].copy()
            c[axis] += 1
            if c[axis] == length:
                if not wrap or length < 3:
                    continue
                c[axis] = 0
            src.append(a)
            dst.append(int(np.ravel_multi_index(c, dims)))
    adj = csr_matrix((np.ones(len(src)), (src, dst)), shape=(n, n))
    expected = shortest_path(adj, directed=False, unweighted=True)
    got = torus_hops(dims) if wrap else mesh_hops(dims)
    assert np.array_equal(got, expected.astype(np.int64))


def test_tianhe3_2x2_chips_of_2_nodes_by_hand():
    # chips: (row 0: c0 c1), (row 1: c2 c3); nodes 2k, 2k+1 in chip k
    h = tianhe3_hops(2, 2, 2, hops=(1, 3, 4))
    expected = np.array([
        [0, 1, 3, 3, 3, 3, 4, 4],
        [1, 0, 3, 3, 3, 3, 4, 4],
        [3, 3, 0, 1, 4, 4, 3, 3],
        [3, 3, 1, 0, 4, 4, 3, 3],
        [3, 3, 4, 4, 0, 1, 3, 3],
        [3, 3, 4, 4, 1, 0, 3, 3],
        [4, 4, 3, 3, 3, 3, 0, 1],
        [4, 4, 3, 3, 3, 3, 1, 0]])
    assert np.array_equal(h, expected)
    assert tianhe3_hops(1, 3, 1).tolist() == [[0, 2, 2], [2, 0, 2], [2, 2, 0]]
    with pytest.raises(MachineError, match="same chip <= same row"):
        tianhe3_hops(2, 2, 1, hops=(3, 2, 4))


def dragonfly_links(groups: int, routers: int, nodes: int
                    ) -> tuple[int, list[tuple[int, int, bool]]]:
    """The dragonfly as a graph: vertex ``v < n`` is node slot v, ``n + r`` is global
    router r (= group * routers + local); links (a, b, is_global): each node to its
    router, every two routers of a group (local), and for every two groups one global
    link between the routers the module's docstring names for them."""
    n = groups * routers * nodes
    links = [(v, n + v // nodes, False) for v in range(n)]
    for g in range(groups):
        base = n + g * routers
        links += [(base + a, base + b, False) for a in range(routers)
                  for b in range(a + 1, routers)]
    for g in range(groups):
        for h in range(g + 1, groups):
            at_g = ((h - g - 1) % groups) % routers   # g's router holding the g-h link
            at_h = ((g - h - 1) % groups) % routers
            links.append((n + g * routers + at_g, n + h * routers + at_h, True))
    return n, links


def minimal_route_hops(groups: int, routers: int, nodes: int) -> np.ndarray:
    """Links on the shortest node-to-node route that crosses at most one global link
    (minimal routing), by breadth-first search over (vertex, global links used)."""
    n, links = dragonfly_links(groups, routers, nodes)
    adj: dict[int, list[tuple[int, bool]]] = {}
    for a, b, is_global in links:
        adj.setdefault(a, []).append((b, is_global))
        adj.setdefault(b, []).append((a, is_global))
    hops = np.full((n, n), -1, dtype=np.int64)
    for src in range(n):
        seen = {(src, 0): 0}
        queue = deque([(src, 0)])
        while queue:
            v, used = queue.popleft()
            if v < n and hops[src, v] < 0:  # BFS: the first visit is the shortest
                hops[src, v] = seen[(v, used)]
            for w, is_global in adj[v]:
                state = (w, used + is_global)
                if state[1] <= 1 and state not in seen:
                    seen[state] = seen[(v, used)] + 1
                    queue.append(state)
    assert (hops >= 0).all()
    return hops


@pytest.mark.parametrize("groups, routers, nodes", [
    (1, 1, 1), (1, 3, 2), (2, 1, 1), (2, 2, 1), (2, 2, 2), (3, 2, 1), (3, 3, 3),
    (4, 2, 2), (5, 3, 2), (5, 2, 3), (7, 3, 1), (9, 4, 2)])
def test_dragonfly_matches_breadth_first_search_on_its_links(groups, routers, nodes):
    """The whole matrix: terminal links counted (same router 2), a global link is one
    link; shapes with spare routers (no global link) and routers holding several."""
    h = dragonfly_hops(groups, routers, nodes)
    assert h.dtype == np.int64
    assert np.array_equal(h, minimal_route_hops(groups, routers, nodes))


def test_dragonfly_3_groups_of_2_routers_by_hand():
    # group 0 = routers/nodes 0,1; group 1 = 2,3; group 2 = 4,5.  Global links:
    # g0-g1 on routers 0 and 3, g0-g2 on 1 and 4, g1-g2 on 2 and 5.  Node 0 to node 3:
    # node -> router 0 -> (global) router 3 -> node, 3 links; node 1 to node 2 adds a
    # local link at each end, 5
    h = dragonfly_hops(3, 2, 1)
    expected = np.array([
        [0, 3, 4, 3, 4, 5],
        [3, 0, 5, 4, 3, 4],
        [4, 5, 0, 3, 4, 3],
        [3, 4, 3, 0, 5, 4],
        [4, 3, 4, 5, 0, 3],
        [5, 4, 3, 4, 3, 0]])
    assert np.array_equal(h, expected)


def test_dragonfly_nodes_sharing_a_router_are_two_links_apart():
    h = dragonfly_hops(2, 2, 2)
    assert h[0, 1] == 2 and h[0, 2] == 3
    # group 0's link to group 1 is on router 0, group 1's on router 2 (nodes 4, 5)
    assert h[0, 4] == 3 and h[2, 4] == 4 and h[2, 6] == 5
    assert np.array_equal(h, h.T)
    assert dragonfly_hops(2, 2, 1)[0, 2] == 3  # issue 29: was 4


def test_restrict_hops_picks_the_slots_in_order():
    h = mesh_hops([3, 3])
    sub = restrict_hops(h, [8, 0, 4])
    assert sub.tolist() == [[0, 4, 2], [4, 0, 2], [2, 2, 0]]
    with pytest.raises(MachineError, match="slot 4 is given to more than one node"):
        restrict_hops(h, [4, 1, 4])
    with pytest.raises(MachineError, match="0..8"):
        restrict_hops(h, [9])


def _machine(per_hop=100.0, base=5.0):
    node = Hierarchy.homogeneous([2, 2], [1, 10])   # 2 sockets of 2 cores
    return NodeHopMachine(torus_hops([3]), node, per_hop=per_hop, base=base)


def test_node_hop_machine_combines_inner_levels_and_hops():
    m = _machine()
    assert m.n == 12 and m.node_count == 3
    # PE 0: same socket 1, other socket 10, other nodes base + 100 per hop (1 hop each)
    assert m.distance(0, np.arange(12)).tolist() == [0, 1, 10, 10] + [105] * 8
    assert m.hop_count(0, 11) == 1 and m.hop_count(0, 3) == 0
    dense = m.rows(np.arange(12))
    assert np.array_equal(dense, m.distance(np.arange(12)[:, None], np.arange(12)[None, :]))
    assert np.array_equal(dense, m.dense().matrix)
    assert np.allclose(m.total_distances(), dense.sum(axis=1))


def test_node_hop_machine_with_uneven_nodes_and_its_memory():
    nodes = [Hierarchy.homogeneous([2, 2], [1, 10]), Hierarchy.homogeneous([3, 1], [1, 10])]
    m = NodeHopMachine(np.array([[0, 2], [2, 0]]), nodes, per_hop=7)
    assert m.n == 7
    assert m.distance(4, np.arange(7)).tolist() == [14, 14, 14, 14, 0, 1, 1]
    dense = m.rows(np.arange(7))
    assert np.allclose(m.total_distances(), dense.sum(axis=1))
    # nothing n x n is stored: at most N² hop entries and n x levels group ids
    big = NodeHopMachine(torus_hops([4, 4]), Hierarchy.homogeneous([32, 2], [1, 2]))
    arrays = [v for v in vars(big).values() if isinstance(v, np.ndarray)]
    assert max(a.size for a in arrays) <= max(16 * 16, big.n * 2) < big.n ** 2


def test_bad_hop_matrices_are_named():
    node = Hierarchy.homogeneous([2], [1])
    with pytest.raises(MachineError, match=r"not symmetric: \[0, 1\] = 1 but \[1, 0\] = 2"):
        NodeHopMachine(np.array([[0, 1], [2, 0]]), node)
    with pytest.raises(MachineError, match="zero diagonal"):
        NodeHopMachine(np.array([[1, 1], [1, 0]]), node)
    with pytest.raises(MachineError, match="non-negative"):
        NodeHopMachine(np.array([[0, -1], [-1, 0]]), node)
    with pytest.raises(MachineError, match="3 nodes but 2"):
        NodeHopMachine(torus_hops([3]), [node, node])


def test_hop_bytes_by_hand_and_evaluate_on_a_node_hop_machine():
    m = _machine()
    # ranks 0-1 talk 5 (same node), 1-4 talk 2 (one hop), 0-8 talk 3 (one hop)
    g = CommGraph.from_edges([0, 1, 0], [1, 4, 8], [5.0, 2.0, 3.0], n=12)
    pe = np.arange(12)
    hb = hop_bytes(g, m, pe)
    assert (hb.total, hb.max_hops, hb.mean_hops_per_byte) == (5.0, 1.0, 0.5)
    ev = evaluate(g, m, pe)
    assert ev.objective == 5 * 1 + 2 * 105 + 3 * 105
    assert {t.distance: t.volume for t in ev.traffic} == {1.0: 5.0, 105.0: 5.0}
    dm = DistanceMatrix(torus_hops([4]).astype(float))
    g4 = CommGraph.from_edges([0, 1], [2, 3], [1.0, 4.0], n=4)
    assert hop_bytes(g4, dm, np.arange(4)).total == 1 * 2 + 4 * 2
    assert has_hops(m) and has_hops(dm) and not has_hops(Hierarchy.homogeneous([4], [1]))
