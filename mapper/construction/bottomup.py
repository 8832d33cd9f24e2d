"""Bottom-Up construction (Schulz, Träff & von Kirchbach, §3.1).

Split the communication graph into perfectly balanced blocks the size of the innermost
groups, contract every block into one vertex (parallel edges add up, internal edges
vanish), and repeat on the contracted graph level by level until the root.  Then walk
back down: the root's blocks go to its child groups, and so on to the PEs.

Heterogeneous trees: a block can only go to a group of the same *shape* (its subtree,
up to the order of siblings).  Where all groups of a level share one shape and one
fan-out, the split is a balanced METIS partition with a count per group, as in the
paper; otherwise blocks are grouped by greedy graph growing that fills each group with
blocks of exactly the shapes it needs, most-connected first.

Complexity: one balanced partition per level (O(m log n) each with METIS) plus
O(m) per contraction; greedy growing is O(N² + M) for N blocks and M block edges.

Dense graphs and budgets: as in Top-Down (:mod:`mapper.construction.topdown`), the
partitions and contractions see the sparsified view of a dense graph, and with a
``time_limit`` no partition starts after it: a level not yet grouped puts every block
under its own group's parent (the blocks keep the machine's order from there up), and
each partition's refinement gets at most half of what is left.

References
----------
* Schulz, Träff & von Kirchbach, Better Process Mapping and Sparse Quadratic
  Assignment, arXiv:1702.04164v2 (§ numbers follow it); full entry in :mod:`mapper`.
* Karypis & Kumar: A Fast and High Quality Multilevel Scheme for Partitioning
  Irregular Graphs.  SIAM J. Sci. Comput. 20(1):359-392 (1998),
  doi:10.1137/S1064827595287997 (METIS, called through pymetis).
"""

from __future__ import annotations

import time
from collections import Counter

import numpy as np
import scipy.sparse as sp

from ..model.graph import CommGraph
from ..model.machine import Hierarchy
from ..partitioners.metis import balanced_partition
from .topdown import Partitioner, partition_view


def _shapes(machine: Hierarchy) -> list[np.ndarray]:
    """Shape code of every group at every level (equal codes: interchangeable subtrees)."""
    codes: list[np.ndarray] = []
    table: dict = {}
    leaf = machine.group_sizes(0)
    codes.append(np.array([table.setdefault(("leaf", int(s)), len(table)) for s in leaf]))
    for level in range(1, machine.levels):
        inner = machine.bounds[level - 1]
        child = np.searchsorted(inner, machine.bounds[level])
        level_codes = []
        for g in range(len(machine.bounds[level]) - 1):
            key = tuple(sorted(codes[level - 1][child[g]:child[g + 1]].tolist()))
            level_codes.append(table.setdefault(key, len(table)))
        codes.append(np.array(level_codes))
    return codes


def _contract(adj: sp.csr_matrix, item: np.ndarray, count: int) -> sp.csr_matrix:
    p = sp.csr_matrix((np.ones(len(item)), (np.arange(len(item)), item)),
                      shape=(len(item), count))
    c = (p.T @ adj @ p).tocsr()
    c.setdiag(0)
    c.eliminate_zeros()
    return c


def _grow(adj: sp.csr_matrix, item_shape: np.ndarray, needs: list[Counter]) -> np.ndarray:
    """Greedy graph growing: group ``g`` gets items whose shapes are ``needs[g]``."""
    n_items = adj.shape[0]
    group = np.full(n_items, -1, dtype=np.int64)
    wdeg = np.asarray(adj.sum(axis=1)).ravel()
    order = np.argsort([-sum(nd.values()) for nd in needs], kind="stable")
    for g in order:
        need = Counter(needs[g])
        conn = np.zeros(n_items)
        first = True
        while sum(need.values()):
            wanted = np.array([need.get(s, 0) > 0 for s in range(item_shape.max() + 1)])
            mask = (group < 0) & wanted[item_shape]
            cand = np.flatnonzero(mask)
            if not len(cand):
                raise RuntimeError("bottom-up: no block of a needed shape is left")
            score = wdeg[cand] if first else conn[cand] + 1e-12 * wdeg[cand]
            it = cand[int(np.argmax(score))]
            group[it] = g
            need[int(item_shape[it])] -= 1
            row = adj.getrow(it)
            conn[row.indices] += row.data
            first = False
    return group


def _parent_groups(machine: Hierarchy, level: int) -> np.ndarray:
    """Index of the level-(level+1) group holding each level-``level`` group."""
    starts = machine.bounds[level][:-1]
    return np.searchsorted(machine.bounds[level + 1], starts, side="right") - 1


def bottom_up(graph: CommGraph, machine: Hierarchy, seed: int = 0,
              time_limit: float | None = None, *,
              partitioner: Partitioner = balanced_partition) -> np.ndarray:
    """Rank → PE mapping built bottom up along ``machine``'s tree.

    ``time_limit`` (seconds): no partition starts after it (module docstring).
    ``partitioner`` makes the balanced splits (as in :func:`mapper.construction.top_down`).
    """
    start = time.perf_counter()

    def left() -> float | None:
        return None if time_limit is None else time_limit - (time.perf_counter() - start)

    def half(t: float | None) -> float | None:
        return None if t is None else t / 2

    adj = partition_view(graph)
    shapes = _shapes(machine)
    sizes0 = machine.group_sizes(0)
    # level 0: ranks into blocks shaped like the innermost groups (block b ~ group b)
    t = left()
    if t is not None and t <= 0:
        block = np.repeat(np.arange(len(sizes0)), sizes0)  # out of time: ranks in order
    else:
        block = partitioner(adj, sizes0, seed, time_limit=half(t))
    item = block
    parents: list[np.ndarray] = []  # parents[i][x]: level-(i+1) item holding level-i item x
    for level in range(1, machine.levels):
        n_items = len(shapes[level - 1])
        child = np.searchsorted(machine.bounds[level - 1], machine.bounds[level])
        fanout = np.diff(child)
        t = left()
        if t is not None and t <= 0:
            # out of time: block g stays with group g, under group g's parent
            parent = _parent_groups(machine, level - 1)
            parents.append(parent)
            item = parent[item]
            continue
        contracted = _contract(adj, item, n_items)
        if len(set(shapes[level - 1].tolist())) == 1 and len(set(fanout.tolist())) == 1:
            parent = partitioner(contracted, fanout, seed + level, time_limit=half(t))
        else:
            needs = [Counter(shapes[level - 1][child[g]:child[g + 1]].tolist())
                     for g in range(len(fanout))]
            parent = _grow(contracted, shapes[level - 1], needs)
        # item g of this level was built for group g, so it has group g's shape
        parents.append(parent)
        item = parent[item]
    # walk down: items of one parent go to the parent's child groups, matched by shape
    assign = np.zeros(1, dtype=np.int64)  # the top item is the root group
    for level in range(machine.levels - 1, 0, -1):
        parent = parents[level - 1]
        item_order = np.lexsort((shapes[level - 1], assign[parent]))
        group_order = np.lexsort((shapes[level - 1], _parent_groups(machine, level - 1)))
        lower = np.empty(len(parent), dtype=np.int64)
        lower[item_order] = group_order
        assign = lower
    pe = np.empty(graph.n, dtype=np.int64)
    pe[np.argsort(assign[block], kind="stable")] = np.arange(graph.n)
    return pe
