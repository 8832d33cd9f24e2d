"""Greedy constructions: Müller-Merbach and GreedyAllC.

* Müller-Merbach (1970), as summarised by Schulz, Träff & von Kirchbach §2: start with the
  rank of largest total volume on the PE of smallest total distance; then repeatedly
  take the unassigned rank with the largest volume to assigned ranks and put it on the
  free PE with the smallest distance sum to assigned PEs.  The two choices are not
  linked.  O(n² k) time (k = hierarchy levels; the oracle answers in O(k)), O(n) memory.
* GreedyAllC (Glantz, Meyerhenke & Noe 2015, as described in the same §2): the same
  rank choice, but the PE is the free one minimizing Σ_{v assigned} C_uv · D(p, π(v)) —
  distance scaled by the rank's actual communication.  A rank without assigned
  neighbours falls back to the Müller-Merbach PE rule.  O(n (n + m) k) time.

Both loops are compiled (``mapper/construction/_greedy.pyx``).

Dense graphs: a GreedyAllC step scans every neighbour of the rank for every free PE
(O(n d)), and the kernel reads the clock only every 64 steps, so on an all-to-all
profile 64 steps alone can exceed a budget.  When the mean degree exceeds
``mapper.model.dense.PARTITION_DEGREE`` GreedyAllC therefore chooses with the sparsified
view (:func:`mapper.model.dense.sparsify`: each rank's heaviest edges; the ranks' total
volumes stay those of the full graph), O(n² c k) for c kept edges per rank; the
caller evaluates J on the full graph.  Müller-Merbach's steps are O(n + d) and use
the full graph.

References
----------
* Schulz, Träff & von Kirchbach, Better Process Mapping and Sparse Quadratic
  Assignment, arXiv:1702.04164v2 (§ numbers follow it); full entry in :mod:`mapper`.
* Müller-Merbach: Optimale Reihenfolgen.  Ökonometrie und Unternehmensforschung 15,
  Springer (1970); a book, followed here as summarised in the paper above, §2.
* Glantz, Meyerhenke & Noe: Algorithms for Mapping Parallel Processes onto Grid and
  Torus Architectures.  PDP 2015, pp. 236-243; arXiv:1411.0921 (GreedyAllC).
"""

from __future__ import annotations

import numpy as np

from ..model.dense import PARTITION_DEGREE, sparsify
from ..model.graph import CommGraph
from ..model.machine import Machine
from ..model.oracle import KernelOracle, total_distances
from . import _greedy


def _run_greedy(graph: CommGraph, machine: Machine, linked: bool,
            time_limit: float | None) -> tuple[np.ndarray, bool]:
    volume = np.ascontiguousarray(graph.weighted_degrees(), dtype=np.float64)
    if linked and len(graph.indices) > PARTITION_DEGREE * graph.n:
        adj = sparsify(graph.to_csr(), PARTITION_DEGREE)
        indptr, indices, weights = (adj.indptr.astype(np.int64),
                                    adj.indices.astype(np.int32),
                                    adj.data.astype(np.float64))
    else:
        indptr, indices, weights = graph.indptr, graph.indices, graph.weights
    pe, timed_out = _greedy.greedy_construct(
        indptr, indices, weights, volume,
        np.ascontiguousarray(total_distances(machine), dtype=np.float64),
        *KernelOracle.of(machine).args(), linked, float(time_limit or 0.0))
    return pe, timed_out


def muller_merbach(graph: CommGraph, machine: Machine,
                   time_limit: float | None = None) -> tuple[np.ndarray, bool]:
    """Müller-Merbach greedy; returns (rank → PE, hit time limit)."""
    return _run_greedy(graph, machine, False, time_limit)


def greedy_allc(graph: CommGraph, machine: Machine,
                time_limit: float | None = None) -> tuple[np.ndarray, bool]:
    """GreedyAllC; returns (rank → PE, hit time limit)."""
    return _run_greedy(graph, machine, True, time_limit)
