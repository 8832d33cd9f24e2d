"""Perfectly balanced partitioning with KaHIP's KaFFPa, then an exact size repair.

Same contract as :func:`mapper.partition.balanced_partition` (blocks of exactly the
requested sizes), with KaFFPa (Sanders & Schulz) instead of METIS as the multilevel
partitioner.  KaHIP is optional (PyPI ``kahip``); without it :class:`KahipMissing`
says how to install it.

Exact sizes.  KaFFPa's Python binding takes one imbalance ε for every block and no
target weights.  ``perfect=False`` (the default) asks for a small ε: the blocks come
back within one or two vertices of the target and are repaired exactly by
:func:`mapper.partition.repair_sizes`.  ``perfect=True`` passes ε = 0, which switches
on KaHIP's perfectly balanced refinement: exact sizes, but 4-30 s on a 512-vertex
quotient graph here (against 0.01-0.2 s with a small ε), so it is for measurements,
not budgets.  Unequal sizes are split by recursive bisection: the size list is cut
into two halves of totals a ≥ b, one isolated dummy vertex of weight a − b is added,
and KaFFPa bisects the graph into two halves of weight a; the half holding the dummy
gets the smaller side's targets (padding with an isolated vertex: it adds no cut).
The size list is cut nearest its middle where the two totals differ or the two
halves hold the same sizes, so that KaFFPa's two halves are never interchangeable
targets of different shapes.  A range of equal sizes is split k-way in one call.  Finally the swap
refinement :func:`mapper.partition.refine_cut` lowers the cut, as for METIS.

Complexity: KaFFPa is a multilevel partitioner, near-linear in m per call in
practice (fast < eco < strong: strong adds flow-based refinement and more V-cycles);
unequal sizes add ⌈log2 k⌉ levels of bisection calls, O(m) each level; repair and
refinement as in :mod:`mapper.partition`.

References
----------
* Sanders & Schulz: Engineering Multilevel Graph Partitioning Algorithms.  ESA 2011,
  LNCS 6942, 469-480, doi:10.1007/978-3-642-23719-5_40 (KaFFPa).
* Sanders & Schulz: Think Locally, Act Globally: Highly Balanced Graph Partitioning.
  SEA 2013, LNCS 7933, 164-175, doi:10.1007/978-3-642-38527-8_16 (ε = 0).
* Schulz, Träff & von Kirchbach, Better Process Mapping and Sparse Quadratic
  Assignment, arXiv:1702.04164v2 (Top-Down uses KaHIP's perfectly balanced
  partitioner); full entry in :mod:`mapper`.
"""

from __future__ import annotations

import time

import numpy as np
import scipy.sparse as sp

from .errors import RankmapError
from .partition import metis_weights, refine_cut, repair_sizes

#: KaFFPa preconfigurations (kahip.FAST, ECO, STRONG)
MODES = {"fast": 0, "eco": 1, "strong": 2}
# ε asked of KaFFPa when perfect=False: blocks within a vertex or two of the target
_EPSILON = 0.001


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
                    time_limit: float | None = None, mode: str = "eco",
                    perfect: bool = False) -> np.ndarray:
    """Split ``adj`` into ``len(sizes)`` blocks of exactly ``sizes`` vertices with KaFFPa.

    ``adj`` is symmetric CSR without self loops; ``sizes`` sum to its vertex count.
    ``mode`` is KaFFPa's preconfiguration (``fast``, ``eco``, ``strong``); ``perfect``
    asks KaFFPa for ε = 0 (slow, see module).  Returns the block of every vertex.
    ``time_limit`` (seconds) bounds the cut refinement (KaFFPa itself is not
    interruptible).  Deterministic for a given ``seed``.
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
    eps = 0.0 if perfect else _EPSILON
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
            local = _kaffpa(kahip, sub, np.ones(len(verts), np.int32), hi - lo, eps,
                            seed, MODES[mode])
            part[verts] = lo + repair_sizes(sub, local, want)
            continue
        mid = _split_point(want) + lo
        a, b = int(want[:mid - lo].sum()), int(want[mid - lo:].sum())
        local = _bisect(kahip, sub, a, b, eps, seed, MODES[mode])
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


def _bisect(kahip, adj: sp.csr_matrix, a: int, b: int, eps: float, seed: int,
            mode: int) -> np.ndarray:
    """Two blocks of about ``a`` (block 0) and ``b`` (block 1) vertices.

    A dummy isolated vertex of weight |a − b| pads the smaller side, so that KaFFPa's
    equal halves are the unequal targets; its block is the smaller side's."""
    n = adj.shape[0]
    if a == b:
        return _kaffpa(kahip, adj, np.ones(n, np.int32), 2, eps, seed, mode)
    padded = sp.csr_matrix((adj.data, adj.indices, np.r_[adj.indptr, adj.indptr[-1]]),
                           shape=(n + 1, n + 1))
    vwgt = np.ones(n + 1, np.int32)
    vwgt[n] = abs(a - b)
    parts = _kaffpa(kahip, padded, vwgt, 2, eps, seed, mode)
    small_side = parts[n]  # the dummy's block takes the smaller target
    real = parts[:n]
    small = 1 if a > b else 0
    return np.where(real == small_side, small, 1 - small)
