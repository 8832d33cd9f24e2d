"""Small communication graphs with known structure, shared by the mapper tests."""

from __future__ import annotations

import itertools

import numpy as np
import scipy.sparse as sp

from mapper import CommGraph, DistanceMatrix, Hierarchy


def grid_graph(dims: tuple[int, ...], periodic: bool = False) -> CommGraph:
    """Nearest-neighbour stencil on a len(dims)-D grid, unit volumes."""
    idx = np.arange(int(np.prod(dims))).reshape(dims)
    src, dst = [], []
    for ax, size in enumerate(dims):
        if size < 2:
            continue
        src.append(np.take(idx, range(size - 1), axis=ax).ravel())
        dst.append(np.take(idx, range(1, size), axis=ax).ravel())
        if periodic and size > 2:
            src.append(np.take(idx, [size - 1], axis=ax).ravel())
            dst.append(np.take(idx, [0], axis=ax).ravel())
    return CommGraph.from_edges(np.concatenate(src), np.concatenate(dst), n=idx.size)


def random_graph(n: int, density: float, seed: int) -> CommGraph:
    a = sp.random(n, n, density=density, random_state=seed, format="csr") * 10
    a.setdiag(0)
    a.eliminate_zeros()
    return CommGraph.from_matrix(a)


def distance_matrix(machine) -> np.ndarray:
    pes = np.arange(machine.n)
    if isinstance(machine, DistanceMatrix):
        return machine.matrix
    return machine.distance(pes[:, None], pes[None, :])


def brute_force_optimum(graph: CommGraph, machine) -> float:
    """Minimum J over all n! bijections (n <= 8), vectorized."""
    perms = np.array(list(itertools.permutations(range(graph.n))), dtype=np.int64)
    u, v, w = graph.edges()
    d = distance_matrix(machine)
    return float((d[perms[:, u], perms[:, v]] * w).sum(axis=1).min())


SMALL_MACHINES = [
    Hierarchy.parse("2:2:2", "1:10:100"),
    Hierarchy.parse("2:4", "1:5"),
    Hierarchy.from_tree([[3, 2], [2, 1]], [1, 4, 9]),  # uneven: 5 PEs + 3 PEs
]
