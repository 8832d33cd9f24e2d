"""Gain-positive pair exchange with O(deg u + deg v) gains (Schulz et al., §3.2).

Swapping the PEs of ranks u and v changes only the terms of edges at u and v, so the
change of J is

    Δ = Σ_{w ∈ N(u)\\{v}} C_uw (D(π(v), π(w)) − D(π(u), π(w)))
      + Σ_{w ∈ N(v)\\{u}} C_vw (D(π(u), π(w)) − D(π(v), π(w)))

evaluated in O(d_u + d_v) oracle queries (the edge {u, v} itself keeps its length).
This is the paper's node-contribution bookkeeping written as a difference.  Swaps of
two PEs in the same innermost group are skipped (they cannot change J: Brandfass et
al.'s pruning).  The loops run compiled in ``mapper._swap.local_search``.

References
----------
* Schulz, Träff & von Kirchbach, Better Process Mapping and Sparse Quadratic
  Assignment, arXiv:1702.04164v2 (§ numbers follow it); full entry in :mod:`mapper`.
* Brandfass, Alrutz & Gerhold: Rank reordering for MPI communication optimization.
  Computers & Fluids 80:372-380 (2013), doi:10.1016/j.compfluid.2012.01.019.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

import numpy as np

from ..model.graph import CommGraph
from ..model.machine import Machine
from ..model.oracle import KernelOracle
from . import _swap


class SearchMode(IntEnum):
    """The search space of one local search run (the kernel's ``mode`` argument)."""

    COMMUNICATION = 0  # N_C^d: ranks within d hops in the communication graph
    PRUNED = 1         # N_p: PE pairs inside consecutive index blocks
    QUADRATIC = 2      # N^2: all PE pairs


# Relative tolerance below which a gain counts as zero, so that rounding cannot make
# local search cycle through equal-cost swaps.
_REL_EPS = 1e-12


@dataclass(frozen=True)
class SearchStats:
    """What a local search run did."""

    gain: float
    swaps: int
    passes: int
    hit_time_limit: bool
    evaluations: int = 0


# Above this many ranks the graph is renumbered in PE order before searching: ranks
# that the construction put close together then sit close together in memory, which
# makes the breadth-first balls and oracle look-ups cache friendly (3x on 2^17 ranks).
_RENUMBER_ABOVE = 4096

# There, N_C^d's passes also visit the ranks a run of this many consecutive (new) ids
# at a time, runs and ranks within a run in random order: a uniformly shuffled order
# read the graph, the PEs and the group ids at random and spent most of a pass on
# cache misses (N_C^10 after Top-Down at 2^20 ranks: 2.9 s shuffled, 1.2 s in order).
_VISIT_RUN = 1024


def run(graph: CommGraph, machine: Machine, pe: np.ndarray, mode: SearchMode, param: int,
        seed: int, time_limit: float | None) -> SearchStats:
    """Improve ``pe`` in place with the compiled kernel (see module docstring)."""
    if not (pe.dtype == np.int64 and pe.flags.c_contiguous):
        raise TypeError("pe must be a C-contiguous int64 array (it is modified in place)")
    scale = max(graph.total_volume, 1.0) * float(np.max(_max_distance(machine), initial=1.0))
    renumbered = graph.n > _RENUMBER_ABOVE
    if renumbered:
        rank_at = np.empty_like(pe)
        rank_at[pe] = np.arange(len(pe))  # new id i = the rank on PE i
        # compiled: scipy's row and column selection plus sort took 0.35 s at 2^20
        indptr, indices, weights = _swap.renumbered_csr(
            graph.indptr, graph.indices, graph.weights, rank_at, pe)
        work = np.arange(len(pe), dtype=np.int64)
    else:
        indptr, indices, weights, work = graph.indptr, graph.indices, graph.weights, pe
    gain, swaps, passes, timed_out, evals = _swap.local_search(
        indptr, indices, weights, work, *KernelOracle.of(machine).args(),
        int(SearchMode(mode)), int(param), int(seed) & 0xFFFFFFFFFFFFFFFF, float(time_limit or 0.0),
        _REL_EPS * scale, _VISIT_RUN if renumbered else 1)
    if renumbered:
        pe[rank_at] = work
    return SearchStats(float(gain), int(swaps), int(passes), bool(timed_out), int(evals))


def _max_distance(machine: Machine) -> float:
    # a node hop machine's ``distances`` are only its inside-node levels; the largest
    # distance is between nodes
    between = getattr(machine, "between", None)
    if between is not None:
        return float(max(machine.distances.max(), between.max()))
    dist = getattr(machine, "distances", None)
    return float(dist.max()) if dist is not None else float(machine.matrix.max())


def swap_delta(graph: CommGraph, machine: Machine, pe: np.ndarray, u: int, v: int) -> float:
    """Change of J if ranks u and v exchange PEs (compiled; used by tests)."""
    return float(_swap.swap_delta(graph.indptr, graph.indices, graph.weights,
                                     np.ascontiguousarray(pe, dtype=np.int64),
                                     *KernelOracle.of(machine).args(), u, v))
