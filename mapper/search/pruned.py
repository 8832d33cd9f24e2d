"""N_p: Brandfass et al.'s pruned pair-exchange neighbourhood.

Brandfass, Alrutz & Gerhold (2013), as described by Schulz, Träff & von Kirchbach §2:
the PE indices are cut into consecutive blocks of ``block`` PEs and only pairs inside a
block are tried; pairs in the same innermost group (which cannot change J) are skipped.
Passes repeat until one makes no improving swap, or the time limit.

Complexity per pass: O(n · block) pairs, each O(d_u + d_v).

References
----------
* Schulz, Träff & von Kirchbach, Better Process Mapping and Sparse Quadratic
  Assignment, arXiv:1702.04164v2 (§ numbers follow it); full entry in :mod:`mapper`.
* Brandfass, Alrutz & Gerhold: Rank reordering for MPI communication optimization.
  Computers & Fluids 80:372-380 (2013), doi:10.1016/j.compfluid.2012.01.019.
"""

from __future__ import annotations

import numpy as np

from ..model.graph import CommGraph
from ..model.machine import Machine
from .swap import SearchMode, SearchStats, run

DEFAULT_BLOCK = 64


def pruned_neighborhood(graph: CommGraph, machine: Machine, pe: np.ndarray,
                        block: int = DEFAULT_BLOCK, seed: int = 0,
                        time_limit: float | None = None) -> SearchStats:
    """Improve ``pe`` (rank → PE, int64, modified in place) within N_p."""
    if block < 2:
        raise ValueError(f"pruned neighbourhood block size must be >= 2, got {block}")
    return run(graph, machine, pe, SearchMode.PRUNED, block, seed, time_limit)
