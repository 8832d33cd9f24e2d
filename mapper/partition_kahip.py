"""Perfectly balanced partitioning with KaHIP's KaFFPa, then an exact size repair.

Same contract as :func:`mapper.partition.balanced_partition` (blocks of exactly the
requested sizes), with KaFFPa (Sanders & Schulz) instead of METIS as the multilevel
partitioner.  KaHIP is optional (PyPI ``kahip``); without it :class:`KahipMissing`
says how to install it.

Exact sizes.  KaFFPa's Python binding takes one imbalance ε for every block and no
target weights.  A range of equal sizes is split k-way in one call with a small ε
(``EPSILON``): the blocks come back within a vertex or two of the target.  Unequal
sizes are split by recursive bisection: the size list is cut into two halves of
totals a and b, and one isolated dummy vertex of weight |a − b| (it adds no cut) pads
the smaller side, so that KaFFPa's two equal halves are the unequal targets; the half
holding the dummy gets the smaller side's sizes.  Every vertex weighs 2 there and ε
is 1/(2 · 2 max(a, b)), so that KaFFPa's bound (rounded up) leaves less than one
vertex of slack and the dummy cannot land on either side (with unit weights a
dummy of weight 1 could).  The list is cut nearest its middle where the totals
differ or the halves hold the same sizes, so that the two halves are never
interchangeable targets of different shapes (a 9-clique must not get targets 5 + 4).
KaFFPa does not always meet its bound, so :func:`mapper.partition.repair_sizes` makes
every split exact, and the swap refinement :func:`mapper.partition.refine_cut` lowers
the final cut, as after METIS.  KaFFPa's own ε = 0 (its perfectly balanced
refinement, Sanders & Schulz 2013) is not used: splitting a 512-vertex quotient graph
8 ways took 22-131 s here (0.02-1 s with a small ε) for a cut 0.99-1.01 times METIS's
after repair and refinement (``bench/bench_partitions.py --perfect``).  The mesh
partitioners' KaHIP backend (:mod:`mapper.mesh.backends`) pads the same way but with
unit weights and halves at k // 2, the two cases above; hence this module's own
bisection.

Complexity: KaFFPa is a multilevel partitioner, near-linear in m per call in
practice (fast < eco < strong: strong adds flow-based refinement and more V-cycles);
unequal sizes add ⌈log2 k⌉ levels of bisection calls, O(m) each level; repair and
refinement as in :mod:`mapper.partition`.

References
----------
* Sanders & Schulz: Engineering Multilevel Graph Partitioning Algorithms.  ESA 2011,
  LNCS 6942, 469-480, doi:10.1007/978-3-642-23719-5_40 (KaFFPa).
* Sanders & Schulz: Think Locally, Act Globally: Highly Balanced Graph Partitioning.
  SEA 2013, LNCS 7933, 164-175 (KaFFPa's ε = 0 mode).
* Schulz, Träff & von Kirchbach, Better Process Mapping and Sparse Quadratic
  Assignment, arXiv:1702.04164v2 (Top-Down uses KaHIP's perfectly balanced
  partitioner); full entry in :mod:`mapper`.
"""

from __future__ import annotations

import time

import numpy as np
import scipy.sparse as sp

from .errors import RankmapError
from .partition import cut_weight, metis_weights, refine_cut, repair_sizes

#: KaFFPa preconfigurations (kahip.FAST, ECO, STRONG)
MODES = {"fast": 0, "eco": 1, "strong": 2}
#: ε of KaFFPa's k-way splits: blocks within a vertex or two of the target
EPSILON = 0.001
_SMALL_GRAPH = 16
_SMALL_GRAPH_TRIES = 4


class KahipMissing(RankmapError, RuntimeError):
    """KaHIP (PyPI ``kahip``) is not installed."""


def kahip_available() -> bool:
    """True when the ``kahip`` module imports."""
    try:
        import kahip  # noqa: F401
    except ImportError:
        return False
    return True


def kahip_partition(adj: sp.csr_matrix, sizes: np.ndarray, seed: int = 0,
                    time_limit: float | None = None, mode: str = "eco") -> np.ndarray:
    """Split ``adj`` into ``len(sizes)`` blocks of exactly ``sizes`` vertices with KaFFPa.

    ``adj`` is symmetric CSR without self loops; ``sizes`` sum to its vertex count.
    ``mode`` is KaFFPa's preconfiguration (``fast``, ``eco``, ``strong``).  Returns the
    block of every vertex.  ``time_limit`` (seconds) bounds the cut refinement (KaFFPa
    itself is not interruptible).  Deterministic for a given ``seed``.
    """
    start = time.perf_counter()
    if mode not in MODES:
        raise ValueError(f"unknown KaFFPa mode {mode!r}: expected one of {', '.join(MODES)}")
    n = adj.shape[0]
    sizes = np.asarray(sizes, dtype=np.int64)
    k = len(sizes)
    if sizes.sum() != n:
        raise ValueError(f"block sizes sum to {sizes.sum()}, graph has {n} vertices")
    if k == 1:
        return np.zeros(n, dtype=np.int64)
    if adj.nnz == 0 or n <= k:
        return np.repeat(np.arange(k), sizes)
    try:
        import kahip
    except ImportError as exc:
        raise KahipMissing(f"the KaHIP partitioner needs the kahip package ({exc}); "
                           f"pip install kahip") from exc
    if n <= _SMALL_GRAPH:
        # KaFFPa is erratic on tiny graphs, as METIS is: a few seeds cost next to nothing
        runs = [_partition(kahip, adj, sizes, seed + 7919 * t, mode, start, time_limit)
                for t in range(_SMALL_GRAPH_TRIES)]
        return min(runs, key=lambda p: cut_weight(adj, p))
    return _partition(kahip, adj, sizes, seed, mode, start, time_limit)


def _partition(kahip, adj: sp.csr_matrix, sizes: np.ndarray, seed: int, mode: str,
               start: float, time_limit: float | None) -> np.ndarray:
    """One KaFFPa split of ``adj`` into exactly ``sizes``, repaired and refined."""
    n, k = adj.shape[0], len(sizes)
    weights = metis_weights(adj.data).astype(np.int32)
    csr = sp.csr_matrix((weights, adj.indices, adj.indptr), shape=adj.shape)
    part = np.empty(n, dtype=np.int64)
    # explicit stack of (vertices, first block, last block + 1)
    stack = [(np.arange(n, dtype=np.int64), 0, k)]
    while stack:
        verts, lo, hi = stack.pop()
        if hi - lo == 1:
            part[verts] = lo
            continue
        sub = csr[verts][:, verts].tocsr()
        want = sizes[lo:hi]
        if np.all(want == want[0]):
            local = _kaffpa(kahip, sub, np.ones(len(verts), np.int32), hi - lo, EPSILON,
                            seed, MODES[mode])
            part[verts] = lo + repair_sizes(sub, local, want)
            continue
        mid = _split_point(want) + lo
        a, b = int(want[:mid - lo].sum()), int(want[mid - lo:].sum())
        local = _bisect(kahip, sub, a, b, seed, MODES[mode])
        local = repair_sizes(sub, local, np.array([a, b]))
        stack.append((verts[local == 0], lo, mid))
        stack.append((verts[local == 1], mid, hi))
    left = None if time_limit is None else time_limit - (time.perf_counter() - start)
    return refine_cut(adj, part, sizes, seed,
                      time_limit=None if left is None else max(left, 1e-6))


def _split_point(want: np.ndarray) -> int:
    """Where to cut the size list ``want`` for one bisection: nearest the middle, but
    never where both halves have equal totals and different sizes (KaFFPa's two
    halves would then be interchangeable, and the half with the wrong sizes may get a
    block it cannot split well, e.g. a 9-clique for targets 5 + 4)."""
    k = len(want)
    for mid in sorted(range(1, k), key=lambda i: (abs(2 * i - k), i)):
        left, right = want[:mid], want[mid:]
        if left.sum() != right.sum() or np.array_equal(np.sort(left), np.sort(right)):
            return mid
    return k // 2


def _kaffpa(kahip, adj: sp.csr_matrix, vwgt: np.ndarray, k: int, eps: float, seed: int,
            mode: int) -> np.ndarray:
    """One KaFFPa call on the integer-weighted CSR ``adj``."""
    _, parts = kahip.kaffpa(vwgt.astype(np.int32), adj.indptr.astype(np.int32),
                            adj.data.astype(np.int32), adj.indices.astype(np.int32),
                            int(k), float(eps), True, int(seed), int(mode))
    return np.asarray(parts, dtype=np.int64)


def _bisect(kahip, adj: sp.csr_matrix, a: int, b: int, seed: int, mode: int) -> np.ndarray:
    """Two blocks of about ``a`` (block 0) and ``b`` (block 1) vertices (module
    docstring: weights 2, a dummy of weight 2|a − b| on the smaller side)."""
    n = adj.shape[0]
    big = max(a, b)
    pad = int(a != b)
    padded = sp.csr_matrix((adj.data, adj.indices, np.r_[adj.indptr, [adj.indptr[-1]] * pad]),
                           shape=(n + pad, n + pad))
    vwgt = np.full(n + pad, 2, np.int32)
    if pad:
        vwgt[n] = 2 * abs(a - b)
    parts = _kaffpa(kahip, padded, vwgt, 2, 1.0 / (4 * big), seed, mode)
    if not pad:
        return parts
    small = 1 if a > b else 0
    return np.where(parts[:n] == parts[n], small, 1 - small)
