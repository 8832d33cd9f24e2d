"""N_C^d: swap ranks that are within distance d in the communication graph.

Schulz, Träff & von Kirchbach, §3.3.  Each pass visits the ranks in a fresh random
order; for rank u, a breadth-first search collects every rank within d hops and each
of them is tried as a swap partner, performing the swap when it lowers J.  The search
ends after a pass without an improving swap, or at the time limit.  N_C^1 = N_C
(communicating pairs only); N_C^n = N^2.

Complexity per pass: Σ_u |ball_d(u)| · O(d_u + d_v) oracle queries; O(n) extra memory.

References
----------
* Schulz, Träff & von Kirchbach, Better Process Mapping and Sparse Quadratic
  Assignment, arXiv:1702.04164v2 (§ numbers follow it); full entry in :mod:`mapper`.
"""

from __future__ import annotations

import numpy as np

from ..model.graph import CommGraph
from ..model.machine import Machine
from .swap import SearchMode, SearchStats, run


def communication_neighborhood(graph: CommGraph, machine: Machine, pe: np.ndarray,
                               depth: int = 10, seed: int = 0,
                               time_limit: float | None = None) -> SearchStats:
    """Improve ``pe`` (rank → PE, int64, modified in place) within N_C^depth."""
    if depth < 1:
        raise ValueError(f"communication neighbourhood depth must be >= 1, got {depth}")
    return run(graph, machine, pe, SearchMode.COMMUNICATION, depth, seed, time_limit)
