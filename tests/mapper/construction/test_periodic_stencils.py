"""Issue 12 item 3: periodic stencils (tori) against Slurm's block placement.

The solver alone (``topdown+n10``, no baseline guard) must beat block strictly wherever
block is not optimal — shown by a placement built without the solver (the best nested
box tiling, tests/helpers/grid_tilings.py) or found by N_C^10 from block — and never lose to
block otherwise.  J is recomputed here from the edge list and per-level group ids
derived from the machine tree, without mapper.objectives.qap.  Before the fix (one METIS
recursive bisection per split) the solver lost to block on these tori: 1.100 × block's
J on 8x8x4 over 16 nodes x 2 x 8, 1.156 × on 12x8x6 over 24 nodes x 2 x 12.
"""

from __future__ import annotations

import numpy as np
import pytest

from mapper import CommGraph, Hierarchy, map_processes
from mapper.construction import top_down
from mapper.partitioners.metis import balanced_partition
from mapper.search import communication_neighborhood
from tests.helpers.grid_tilings import box_tiling, grid_edges, group_ids, objective

DISTANCES = [1.0, 10.0, 100.0, 1000.0]  # rankmap's defaults: socket, node, leaf, spine


def homogeneous(cores: int, sockets: int, nodes: int, leaves: int):
    return [[[cores] * sockets] * nodes] * leaves, [cores, sockets, nodes, leaves]


MACHINES = {
    "16n x 2x8 / 4 leaves": homogeneous(8, 2, 4, 4),
    "24n x 2x12 / 4 leaves": homogeneous(12, 2, 6, 4),
    "15n x 2x6 / 3 leaves": homogeneous(6, 2, 5, 3),
    "9n x 3x5 / 3 leaves": homogeneous(5, 3, 3, 3),
    "4n x 2x16 + 8n x 2x8": ([[[16, 16]] * 4, [[8, 8]] * 8], None),
    "3n x 2x10 + 5n x 2x6": ([[[10, 10]] * 3, [[6, 6]] * 5], None),
    "2n x 2x9 + 5n x 2x6": ([[[9, 9]] * 2, [[6, 6]] * 5], None),
}
GRIDS = {
    256: [(16, 16), (32, 8), (8, 8, 4), (4, 4, 4, 4)],
    576: [(24, 24), (12, 8, 6), (6, 4, 4, 6)],
    180: [(15, 12), (6, 6, 5), (9, 5, 4), (5, 3, 3, 4)],
    135: [(15, 9), (5, 9, 3), (3, 3, 5, 3)],
    120: [(12, 10), (6, 5, 4), (5, 3, 2, 4)],
    96: [(12, 8), (6, 4, 4), (4, 3, 2, 4)],
}
CASES = [(m, dims) for m, (tree, _) in MACHINES.items()
         for dims in GRIDS[Hierarchy.from_tree(tree, DISTANCES).n]]


def tree_group_ids(tree) -> np.ndarray:
    """Per-PE group at each level of a nested-list tree (innermost first, root last),
    by walking the tree: PEs are numbered leaf by leaf, left to right."""
    rows: list[list[int]] = []
    counters: dict[int, int] = {}

    def walk(node, path: list[int]) -> None:
        if not isinstance(node, list):
            for _ in range(node):
                rows.append(list(path))
            return
        for child in node:
            depth = len(path) + 1
            counters[depth] = counters.get(depth, -1) + 1
            walk(child, path + [counters[depth]])

    walk(tree, [])
    deep = np.array(rows)  # columns: root's children ... innermost groups
    return np.concatenate([deep[:, ::-1], np.zeros((len(rows), 1), dtype=int)], axis=1)


def test_tree_group_ids_by_hand():
    gid = tree_group_ids([[[2, 1]], [[1, 1]]])
    # PE: 0 1 | 2 || 3 | 4   (innermost groups 0,0,1,2,3; nodes 0,0,0,1,1; leaves 0,0,0,1,1)
    assert gid.tolist() == [[0, 0, 0, 0], [0, 0, 0, 0], [1, 0, 0, 0], [2, 1, 1, 0],
                            [3, 1, 1, 0]]


def test_box_tiling_by_hand():
    """8x8x4 torus on 16 nodes x 2 x 8 under 4 leaves: leaves hold 2x8x4 slabs (cut
    128 = 4 leaves x 2 faces x 32 / 2), nodes 2x2x4 (cut 16 x 32 / 2 = 256), sockets
    2x2x2 (cut 32 x 24 / 2 = 384); 768 edges.  J = 768 + 9·384 + 90·256 + 900·128."""
    u, v = grid_edges((8, 8, 4), True)
    assert len(u) == 768
    pe = box_tiling((8, 8, 4), True, [8, 2, 4, 4], DISTANCES)
    j = objective(u, v, np.ones(len(u)), group_ids([8, 2, 4, 4], pe), DISTANCES)
    assert j == 768 + 9 * 384 + 90 * 256 + 900 * 128
    block = objective(u, v, np.ones(len(u)), group_ids([8, 2, 4, 4], np.arange(256)),
                      DISTANCES)
    assert block == 148224  # the block J: 1 x 4 x 4 nodes cut 320


@pytest.mark.parametrize("algorithm", ["topdown+n10", "fast"])
@pytest.mark.parametrize("periodic", [True, False], ids=["torus", "open"])
@pytest.mark.parametrize("machine_name, dims", CASES,
                         ids=[f"{'x'.join(map(str, d))}-{m}" for m, d in CASES])
def test_topdown_n10_beats_block_unless_block_is_optimal(machine_name, dims, periodic,
                                                         algorithm):
    """Also for ``fast``, whose Top-Down splits are not swap-refined (eco and strong
    run ``fast``'s start too and keep only improvements)."""
    tree, fanouts = MACHINES[machine_name]
    machine = Hierarchy.from_tree(tree, DISTANCES)
    n = machine.n
    gid = tree_group_ids(tree)
    u, v = grid_edges(dims, periodic)
    w = np.ones(len(u))
    graph = CommGraph.from_edges(u, v, w, n=n)

    def j_of(pe: np.ndarray) -> float:
        return objective(u, v, w, gid[pe], DISTANCES)

    block = j_of(np.arange(n))
    result = map_processes(graph, machine, algorithm, seed=0)
    ours = j_of(result.mapping)
    assert ours == pytest.approx(result.objective)
    # evidence that block is not optimal: a placement built without Top-Down
    references = []
    if fanouts is not None:
        tiled = box_tiling(dims, periodic, fanouts, DISTANCES)
        if tiled is not None:
            references.append(j_of(tiled))
    polished = np.arange(n)
    communication_neighborhood(graph, machine, polished, 10, 0)
    references.append(j_of(polished))
    if min(references) < block - 1e-9:
        assert ours < block - 1e-9, (ours / block, min(references) / block)
    else:
        assert ours <= block + 1e-9, ours / block


@pytest.mark.parametrize("dims, k, optimum", [
    ((12, 8, 6), 4, 192),  # two x-cuts per 3-slab, 2 planes of 48 each, 4 slabs / 2
    ((8, 8, 4), 4, 128),
    ((12, 8, 6), 3, 144),
    ((16, 16), 4, 64),
])
def test_partition_of_a_torus_finds_the_best_slabs(dims, k, optimum):
    """METIS alone found these cuts in about half of its seeds (148-153 instead of
    128 on 8x8x4, 216-248 instead of 192 on 12x8x6)."""
    u, v = grid_edges(dims, True)
    graph = CommGraph.from_edges(u, v, np.ones(len(u)), n=int(np.prod(dims)))
    adj = graph.to_csr()
    n = adj.shape[0]
    for seed in range(4):
        part = balanced_partition(adj, np.full(k, n // k), seed)
        assert np.bincount(part, minlength=k).tolist() == [n // k] * k
        cut = float(np.sum(part[u] != part[v]))
        assert cut == optimum, (seed, cut)


def test_top_down_uses_the_given_partitioner():
    """The ``partitioner`` keyword replaces every split (the KaHIP hook): a partitioner
    that cuts in index order makes Top-Down return block."""
    calls = []

    def in_order(adj, sizes, seed=0, time_limit=None):
        calls.append(len(sizes))
        return np.repeat(np.arange(len(sizes)), sizes)

    tree, _ = homogeneous(4, 2, 3, 2)
    machine = Hierarchy.from_tree(tree, DISTANCES)
    u, v = grid_edges((6, 8), True)
    graph = CommGraph.from_edges(u, v, np.ones(len(u)), n=48)
    pe = top_down(graph, machine, 0, partitioner=in_order)
    assert pe.tolist() == list(range(48))
    assert sorted(calls) == [2] * 7 + [3] * 2  # root and 6 nodes in 2, 2 leaves in 3
