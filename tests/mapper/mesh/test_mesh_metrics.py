"""Partition metrics of mapper.mesh.metrics against hand-computed examples (the seed's
Fig. 1, a 3-PE example with unequal speeds and link costs) and against slow pure-Python
references on random small meshes."""

import itertools

import numpy as np
import pytest

from mapper.mesh import (
    MeshError,
    comm_cost,
    comp_cost,
    edge_cut,
    elapse_time,
    evaluate_partition,
    imbalance,
    max_el_time,
    max_volume,
    mesh_from_graph,
    part_volumes,
    part_weights,
    quotient_graph,
    quotient_objective,
    sum_el_time,
    total_volume,
)
from mapper.model.graph import CommGraph
from mapper.model.machine import Hierarchy


class StandInArch:
    """The three members the metrics use of mapper.mesh.architecture.Architecture."""

    def __init__(self, speeds, e_star):
        self.speeds = np.asarray(speeds, dtype=np.float64)
        self.e = np.asarray(e_star, dtype=np.float64)
        assert np.allclose(self.e, self.e.T) and not self.e.diagonal().any()

    @property
    def cost_per_work(self):
        return 1.0 / self.speeds

    def pair_cost(self, p, q):
        return self.e[np.asarray(p), np.asarray(q)]


def mesh_of(n, edges, w=None, c=None, ew=None):
    u, v = (np.array(x, dtype=np.int64) for x in zip(*edges, strict=True))
    return mesh_from_graph(CommGraph.from_edges(u, v, ew, n=n), w, c)


# -- Fig. 1 of Moulitsas & Karypis ---------------------------------------------------------

U, U1, U2, U3, U4, V1, V2, V3, V4 = range(9)
FIG1_PART = np.array([0, 0, 0, 0, 0, 1, 1, 1, 1])
INTERIOR = [(U, U1), (U, U2), (U, U3), (U, U4), (V1, V2), (V2, V3), (V3, V4)]


@pytest.mark.parametrize("cut_edges, volume, send, recv", [
    # (a): u is adjacent to v1..v4: P0 sends u once, P1 sends v1..v4
    ([(U, V1), (U, V2), (U, V3), (U, V4)], 5, [1, 4], [4, 1]),
    # (b): u_i is adjacent to v_i: four vertices cross each way
    ([(U1, V1), (U2, V2), (U3, V3), (U4, V4)], 8, [4, 4], [4, 4]),
])
def test_fig1_edge_cut_8_but_volume_5_or_8(cut_edges, volume, send, recv):
    edges = INTERIOR + cut_edges
    # "each one of the cut edges would have an edge weight of 2" (c(u) + c(v) = 1 + 1)
    mesh = mesh_of(9, edges, ew=np.full(len(edges), 2.0))
    assert edge_cut(mesh, FIG1_PART) == 8
    assert total_volume(mesh, FIG1_PART) == volume
    s, r = part_volumes(mesh, FIG1_PART, 2)
    assert s.tolist() == send and r.tolist() == recv
    assert max_volume(mesh, FIG1_PART, 2) == volume
    q = quotient_graph(mesh, FIG1_PART, 2)
    assert q.n == 2 and q.m == 1 and q.to_csr()[0, 1] == volume


# -- a hand-computed cost example ----------------------------------------------------------

def three_pe_example():
    """6 vertices on 3 PEs of speeds 1, 2, 1; e*(0,1)=1, e*(1,2)=2, e*(0,2)=5."""
    edges = [(0, 1), (1, 2), (2, 3), (3, 4), (4, 5), (1, 4), (0, 2)]
    mesh = mesh_of(6, edges, w=[1, 2, 3, 4, 5, 6], c=[1, 2, 1, 3, 1, 1])
    part = np.array([0, 0, 1, 1, 2, 2])
    arch = StandInArch([1, 2, 1], [[0, 1, 5], [1, 0, 2], [5, 2, 0]])
    return mesh, part, arch


def test_costs_by_hand():
    mesh, part, arch = three_pe_example()
    # sends (vertex -> distinct other parts of its neighbours):
    #   v0 (c 1) -> P1;  v1 (c 2) -> P1, P2;  v2 (c 1) -> P0;  v3 (c 3) -> P2;
    #   v4 (c 1) -> P1, P0.   v2 touches v0 and v1 of P0 but P0 receives it once.
    # CommCost(P0) = sent 1*1 + 2*1 + 2*5 = 13, received v2: 1*1, v4: 1*5 = 6   -> 19
    # CommCost(P1) = sent v2: 1*1, v3: 3*2 = 7, received v0: 1, v1: 2, v4: 2  -> 12
    # CommCost(P2) = sent v4: 1*2 + 1*5 = 7, received v3: 3*2, v1: 2*5 = 16    -> 23
    # CompCost = w* x W = [1*3, 0.5*7, 1*11]
    assert comm_cost(mesh, part, arch).tolist() == [19, 12, 23]
    assert comp_cost(mesh, part, arch).tolist() == [3, 3.5, 11]
    assert elapse_time(mesh, part, arch).tolist() == [22, 15.5, 34]
    assert sum_el_time(mesh, part, arch) == 71.5
    assert max_el_time(mesh, part, arch) == 34
    send, recv = part_volumes(mesh, part, 3)
    assert send.tolist() == [5, 4, 2] and recv.tolist() == [2, 4, 5]
    assert total_volume(mesh, part) == 11 and max_volume(mesh, part, 3) == 4 + 4  # P1
    assert edge_cut(mesh, part) == 4
    # targets proportional to speed: 21 * [1/4, 1/2, 1/4]; P2 holds 11 of 5.25
    assert imbalance(mesh, part, [5.25, 10.5, 5.25]) == pytest.approx(11 / 5.25 - 1)
    m = evaluate_partition(mesh, part, arch)
    assert m.max_el_time == 34 and m.sum_el_time == 71.5 and m.total_volume == 11
    assert m.imbalance == pytest.approx(11 / 5.25 - 1)
    d = m.to_dict(per_part=True)
    assert d["per_part"]["comm_cost"] == [19, 12, 23] and d["objective"] is None


def test_placement_moves_the_cost_model_and_j():
    mesh, part, arch = three_pe_example()
    # the blocks run on PEs 2, 0, 1: the cost model sees the PE of every vertex
    placement = np.array([2, 0, 1])
    m = evaluate_partition(mesh, part, arch, placement=placement)
    same = evaluate_partition(mesh, placement[part], arch)
    assert m.comm_cost.tolist() == same.comm_cost.tolist()
    assert m.comp_cost.tolist() == same.comp_cost.tolist()
    assert m.total_volume == same.total_volume == 11
    # J: quotient edges {0,1}: 3+1, {0,2}: 2+1, {1,2}: 3+1 on PEs {0, 1} | {2}, 1 and 10
    machine = Hierarchy.from_tree([2, 1], [1, 10])
    assert quotient_objective(mesh, part, machine) == 4 * 1 + 3 * 10 + 4 * 10
    assert evaluate_partition(mesh, part, hierarchy=machine).objective == 74
    # blocks 0, 1, 2 on PEs 1, 2, 0: {0,1} -> {1,2}, {0,2} -> {1,0}, {1,2} -> {2,0}
    assert quotient_objective(mesh, part, machine, [1, 2, 0]) == 4 * 10 + 3 * 1 + 4 * 10
    assert evaluate_partition(mesh, part, hierarchy=machine, placement=[1, 2, 0]).objective == 83


def test_bad_partitions_are_refused_by_name():
    mesh, part, arch = three_pe_example()
    with pytest.raises(MeshError, match="vertex 2 is in part 3, outside 0..2"):
        comm_cost(mesh, np.array([0, 0, 3, 1, 2, 2]), arch)
    with pytest.raises(MeshError, match="shape"):
        edge_cut(mesh, part[:-1])
    with pytest.raises(MeshError, match="targets sum to"):
        imbalance(mesh, part, [1, 1, 1])


# -- brute force on random small meshes ---------------------------------------------------

def random_case(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 25))
    k = int(rng.integers(1, 7))
    pairs = [(a, b) for a, b in itertools.combinations(range(n), 2) if rng.random() < 0.3]
    if not pairs:
        pairs = [(0, 1)]
    ew = rng.integers(1, 5, len(pairs)).astype(float)
    mesh = mesh_of(n, pairs, w=rng.integers(1, 9, n), c=rng.integers(0, 4, n), ew=ew)
    part = rng.integers(0, k, n)
    e = rng.integers(1, 20, (k, k)).astype(float)
    e = np.triu(e, 1) + np.triu(e, 1).T
    arch = StandInArch(rng.integers(1, 4, k), e)
    return mesh, part, k, arch, rng


def reference(mesh, part, k, arch):
    """The paper's definitions, literally, with sets (slow)."""
    g = mesh.graph
    adj = {v: set(g.indices[g.indptr[v]:g.indptr[v + 1]].tolist()) for v in range(mesh.n)}
    c, w = mesh.comm_sizes, mesh.vertex_weights
    cut = sum(x for u, v, x in zip(*g.edges(), strict=True) if part[u] != part[v])
    send, recv, comm, pair = [0.0] * k, [0.0] * k, [0.0] * k, {}
    for i in range(k):
        mine = [v for v in range(mesh.n) if part[v] == i]
        for v in mine:
            for q in {part[x] for x in adj[v]} - {i}:
                send[i] += c[v]
                comm[i] += arch.e[i, q] * c[v]
                key = (min(i, q), max(i, q))
                pair[key] = pair.get(key, 0.0) + c[v]
        external = {x for v in mine for x in adj[v] if part[x] != i}
        for x in external:
            recv[i] += c[x]
            comm[i] += arch.e[i, part[x]] * c[x]
    comp = [sum(w[v] for v in range(mesh.n) if part[v] == i) / arch.speeds[i]
            for i in range(k)]
    return cut, send, recv, comm, comp, pair


@pytest.mark.parametrize("seed", range(40))
def test_every_metric_against_brute_force(seed):
    mesh, part, k, arch, rng = random_case(seed)
    cut, send, recv, comm, comp, pair = reference(mesh, part, k, arch)
    assert edge_cut(mesh, part) == pytest.approx(cut)
    s, r = part_volumes(mesh, part, k)
    assert s == pytest.approx(send) and r == pytest.approx(recv)
    assert total_volume(mesh, part) == pytest.approx(sum(send))
    most = max(a + b for a, b in zip(send, recv, strict=True))
    assert max_volume(mesh, part, k) == pytest.approx(most)
    assert comm_cost(mesh, part, arch) == pytest.approx(comm)
    assert comp_cost(mesh, part, arch) == pytest.approx(comp)
    elt = [a + b for a, b in zip(comp, comm, strict=True)]
    assert elapse_time(mesh, part, arch) == pytest.approx(elt)
    assert sum_el_time(mesh, part, arch) == pytest.approx(sum(elt))
    assert max_el_time(mesh, part, arch) == pytest.approx(max(elt))
    weights = [sum(mesh.vertex_weights[part == i]) for i in range(k)]
    assert part_weights(mesh, part, k) == pytest.approx(weights)
    targets = rng.random(k) + 0.1
    targets *= mesh.total_weight / targets.sum()
    assert imbalance(mesh, part, targets) == pytest.approx(
        max(a / t for a, t in zip(weights, targets, strict=True)) - 1)
    q = quotient_graph(mesh, part, k).to_csr()
    got = {(int(a), int(b)): float(q[a, b]) for a, b in zip(*q.nonzero(), strict=True)
           if a < b}
    assert got == pytest.approx({key: x for key, x in pair.items() if x})
    # J of the quotient graph on a 2-level machine under a random placement
    machine = Hierarchy.from_tree([k // 2, k - k // 2] if k > 1 else [1], [2, 9])
    placement = rng.permutation(k)
    dist = machine.distance
    j = sum(x * float(dist(np.array([placement[a]]), np.array([placement[b]]))[0])
            for (a, b), x in pair.items())
    assert quotient_objective(mesh, part, machine, placement) == pytest.approx(j)
    m = evaluate_partition(mesh, part, arch, hierarchy=machine, placement=placement,
                           targets=targets)
    assert m.objective == pytest.approx(j)
    on_pe = placement[part]
    _, _, _, comm_pe, comp_pe, _ = reference(mesh, on_pe, k, arch)
    assert m.comm_cost == pytest.approx(comm_pe) and m.comp_cost == pytest.approx(comp_pe)
    assert m.edge_cut == pytest.approx(cut) and m.total_volume == pytest.approx(sum(send))


def test_a_3d_grid_is_vectorized():
    """40^3 vertices into 512 cubes: the volume of a cube partition by formula."""
    a, b = 40, 8  # 8 x 8 x 8 cubes of 5^3
    idx = np.arange(a ** 3).reshape(a, a, a)
    u = np.concatenate([idx[:-1].ravel(), idx[:, :-1].ravel(), idx[:, :, :-1].ravel()])
    v = np.concatenate([idx[1:].ravel(), idx[:, 1:].ravel(), idx[:, :, 1:].ravel()])
    mesh = mesh_from_graph(CommGraph.from_edges(u, v, n=a ** 3))
    x, y, z = np.unravel_index(np.arange(a ** 3), (a, a, a))
    s = a // b
    part = (x // s) * b * b + (y // s) * b + z // s
    # cut planes: (b - 1) per axis, a^2 edges each; every cut edge moves 2 vertices
    assert edge_cut(mesh, part) == 3 * (b - 1) * a * a
    assert total_volume(mesh, part) == 2 * 3 * (b - 1) * a * a
    m = evaluate_partition(mesh, part, StandInArch(np.ones(b ** 3), 1 - np.eye(b ** 3)))
    # an inner cube: 6 faces of 25 vertices sent and 6 x 25 received
    assert m.max_volume == 2 * 6 * s * s and m.imbalance == 0
