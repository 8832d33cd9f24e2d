"""N^2: every pair of PEs (Heider 1972; Brandfass et al. 2013).

Pairs are visited in Heider's cyclic order (0,1), (0,2), …, (n-2, n-1) and a swap is
made whenever it lowers J; passes repeat until one makes no improving swap, or the
time limit.  Pairs in the same innermost group are skipped (they cannot change J).

Complexity per pass: O(n²) pairs, each O(d_u + d_v): for small n only.

References
----------
* Schulz, Träff & von Kirchbach, Better Process Mapping and Sparse Quadratic
  Assignment, arXiv:1702.04164v2 (§ numbers follow it); full entry in :mod:`mapper`.
* Heider: A computationally simplified pair-exchange algorithm for the quadratic
  assignment problem.  Technical report, 1972 (DTIC; no DOI).
* Brandfass, Alrutz & Gerhold: Rank reordering for MPI communication optimization.
  Computers & Fluids 80:372-380 (2013), doi:10.1016/j.compfluid.2012.01.019.
"""

from __future__ import annotations

import numpy as np

from ..model.graph import CommGraph
from ..model.machine import Machine
from .swap import SearchMode, SearchStats, run


def quadratic_neighborhood(graph: CommGraph, machine: Machine, pe: np.ndarray, seed: int = 0,
                           time_limit: float | None = None) -> SearchStats:
    """Improve ``pe`` (rank → PE, int64, modified in place) within N^2."""
    return run(graph, machine, pe, SearchMode.QUADRATIC, 0, seed, time_limit)
