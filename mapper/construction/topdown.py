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

References
----------
* Schulz, Träff & von Kirchbach, Better Process Mapping and Sparse Quadratic
  Assignment, arXiv:1702.04164v2 (§ numbers follow it); full entry in :mod:`mapper`.
* Karypis & Kumar: A Fast and High Quality Multilevel Scheme for Partitioning
  Irregular Graphs.  SIAM J. Sci. Comput. 20(1):359-392 (1998),
  doi:10.1137/S1064827595287997 (METIS, called through pymetis).
"""

from __future__ import annotations

import numpy as np

from ..graph import CommGraph
from ..machine import Hierarchy
from ..partition import balanced_partition


def top_down(graph: CommGraph, machine: Hierarchy, seed: int = 0) -> np.ndarray:
    """Rank → PE mapping built top down along ``machine``'s tree."""
    adj = graph.to_csr()
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
        sub = adj[ranks][:, ranks].tocsr()
        part = balanced_partition(sub, sizes, seed)
        order = np.argsort(part, kind="stable")
        split = np.cumsum(sizes)[:-1]
        for c, members in enumerate(np.split(ranks[order], split)):
            stack.append((members, level - 1, first + c))
    return pe
