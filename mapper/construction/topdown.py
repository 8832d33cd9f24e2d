"""Top-Down construction (Schulz, Träff & von Kirchbach, §3.1).

Partition the communication graph into as many perfectly balanced blocks as the root
has children, each block exactly the size of its child group; recurse into every
block with the child's own children, down to the innermost groups, whose PEs are all
equivalent and take the block's ranks in any order.  Heterogeneous trees need no
special case: the targets of each split are the child group sizes, equal or not.
Siblings in a tree are equidistant, so which block goes to which sibling only matters
through the sizes.

Complexity: one balanced partition per inner tree node; with METIS that is
O(m log n) per tree level in practice, O(m · k) memory traffic for the subgraphs.
On whole-machine jobs the nodes' two-way splits (sockets), each a single METIS
bisection there, are made for all nodes of a switch at once by greedy growing and
swap refinement (:func:`_node_halves`, :func:`mapper.partitioners.exact_sizes.split_blocks_in_two`),
O(m) per switch instead of one METIS call per node (8192 at 2^20 ranks).

Dense graphs and budgets.  The partitions see :func:`mapper.model.dense.sparsify`'s view of
the graph (each rank's ``PARTITION_DEGREE`` heaviest edges, O(nnz) once) when its mean
degree exceeds that many edges, so a 4096-rank all-to-all gives METIS 0.14 M edges
instead of 8.4 M; the caller evaluates J on the full graph.  With a ``time_limit`` the
clock is checked before every partition call, and each partition's refinement gets at
most half of what is left; once it has run out, every group still to split takes its
block's ranks in their current order (a complete bijection whose upper levels are
already partitioned), at O(n) for the rest.

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
from collections.abc import Callable

import numpy as np
import scipy.sparse as sp

from ..model.dense import PARTITION_DEGREE, sparsify
from ..model.graph import CommGraph
from ..model.machine import Hierarchy
from ..partitioners.exact_sizes import csr_arrays, split_blocks_in_two
from ..partitioners.metis import balanced_partition, metis_effort

#: ``partitioner(adj, sizes, seed, time_limit=...) -> block of every vertex``: the
#: signature of :func:`mapper.partitioners.metis.balanced_partition`, which any replacement
#: (e.g. a KaHIP binding) must keep: blocks of exactly ``sizes`` vertices.
Partitioner = Callable[..., np.ndarray]


def partition_view(graph: CommGraph) -> sp.csr_matrix:
    """The CSR matrix the partitions see: sparsified when the mean degree exceeds
    ``PARTITION_DEGREE`` (see module docstring), else the graph itself."""
    adj = graph.to_csr()
    return sparsify(adj, PARTITION_DEGREE) if adj.nnz > PARTITION_DEGREE * graph.n else adj


def induced_subgraph(adj: sp.csr_matrix, ranks: np.ndarray, local: np.ndarray
                     ) -> sp.csr_matrix:
    """``adj[ranks][:, ranks]``: the same CSR arrays (each row's entries in their
    order in ``adj``), in O(Σ degrees of ``ranks``), two compiled passes.

    scipy's column selection allocates and scans an array over all of ``adj``'s
    columns on every call, O(n) per block: Top-Down splits 8192 blocks at 2^20 ranks
    and spent seconds there (and 1.6 s in the numpy version of these passes).
    ``local`` is scratch of length n holding -1; it is restored before returning.
    """
    from ..partitioners import _refine  # compiled; imported here so the module imports alone

    indptr, indices, data = _refine.induced_rows(*csr_arrays(adj), ranks, local)
    return sp.csr_matrix((data, indices, indptr), shape=(len(ranks), len(ranks)))


def top_down(graph: CommGraph, machine: Hierarchy, seed: int = 0,
             time_limit: float | None = None, *,
             partitioner: Partitioner = balanced_partition,
             halve_nodes: bool = False) -> np.ndarray:
    """Rank → PE mapping built top down along ``machine``'s tree.

    ``time_limit`` (seconds): no partition starts after it; groups not yet split keep
    their ranks in order (module docstring).  ``partitioner`` splits each group
    (:data:`Partitioner`; default METIS + repair + refinement).
    ``halve_nodes``: where every node splits into two innermost groups and METIS
    would make that split with one bisection (large jobs), the nodes of a switch are
    halved together after the switch's split (:func:`_node_halves`).
    """
    start = time.perf_counter()
    adj = partition_view(graph)
    whole = adj.shape[0] + adj.nnz
    local = np.full(graph.n, -1, dtype=np.int64)  # scratch for induced_subgraph
    pe = np.empty(graph.n, dtype=np.int64)
    top = machine.levels - 1
    # explicit stack: (ranks, level, group index at that level)
    stack = [(np.arange(graph.n, dtype=np.int64), top, 0)]
    while stack:
        ranks, level, group = stack.pop()
        lo, hi = machine.bounds[level][group], machine.bounds[level][group + 1]
        if level == 0 or len(ranks) == 1:
            pe[ranks] = np.arange(lo, hi)
            continue
        inner = machine.bounds[level - 1]
        first = int(np.searchsorted(inner, lo))
        last = int(np.searchsorted(inner, hi))
        sizes = np.diff(inner[first:last + 1])
        if len(sizes) == 1:
            stack.append((ranks, level - 1, first))
            continue
        left = None if time_limit is None else time_limit - (time.perf_counter() - start)
        if left is not None and left <= 0:
            pe[ranks] = np.arange(lo, hi)  # out of time: this block in its current order
            continue
        sub = induced_subgraph(adj, ranks, local)
        fine = (_node_halves(machine, level, lo, hi, len(sizes), sub, whole)
                if halve_nodes else None)
        if fine is not None:
            budget = None if left is None else left / 2
            nodes = np.asarray(partitioner(sub, sizes, seed, time_limit=budget),
                               dtype=np.int64)
            part = split_blocks_in_two(sub, nodes, np.diff(fine)[0::2], seed,
                                       time_limit=budget)
            order = np.argsort(part, kind="stable")
            blocks = np.split(ranks[order], np.cumsum(np.diff(fine))[:-1])
            for c, members in enumerate(blocks):
                pe[members] = np.arange(fine[c], fine[c + 1])
            continue
        # half of what is left at most, so that one refinement cannot starve the rest
        part = np.asarray(partitioner(sub, sizes, seed,
                                      time_limit=None if left is None else left / 2),
                          dtype=np.int64)
        order = np.argsort(part, kind="stable")
        split = np.cumsum(sizes)[:-1]
        for c, members in enumerate(np.split(ranks[order], split)):
            stack.append((members, level - 1, first + c))
    return pe


def _node_halves(machine: Hierarchy, level: int, lo: int, hi: int, k: int,
                sub: sp.csr_matrix, whole: int) -> np.ndarray | None:
    """Bounds of the innermost groups under the level-2 group ``[lo, hi)`` when each
    of its ``k`` nodes has exactly two innermost groups (sockets) and METIS would make
    a node's split with a single bisection (:func:`mapper.partitioners.metis.metis_effort` at
    the graph's size: only large jobs); else None.  Top-Down then splits the group
    into its nodes with the partitioner and every node into its two groups with
    :func:`mapper.partitioners.exact_sizes.split_blocks_in_two`, one call for all k nodes.

    Why: METIS's recursive bisection has a fixed cost per bisection that dominates
    on small blocks (the many leaf calls of a job of 2^20 ranks); the greedy growing
    with swap refinement costs a fraction of it.  Its cut at that level is larger, but
    the level is the cheapest of the tree, and J after ``fast`` is within a tenth of a
    percent either way (bench/README.md).  Small jobs get several METIS bisections per
    node split, whose quality matters there, and keep them.  Batching all nodes of the
    job into one call at the end was slower (the whole graph read in random order).
    "Node" and "socket" are levels 1 and 0, whatever they stand for on the machine.
    """
    if level != 2:
        return None
    inner, nodes = machine.bounds[0], machine.bounds[1]
    a, b = int(np.searchsorted(nodes, lo)), int(np.searchsorted(nodes, hi))
    per_node = np.diff(np.searchsorted(inner, nodes[a:b + 1]))
    if np.any(per_node != 2):
        return None
    if metis_effort((hi - lo) // k, sub.nnz // k, 2, whole) != (1, 1):
        return None
    return inner[int(np.searchsorted(inner, lo)):int(np.searchsorted(inner, hi)) + 1]
