"""KaHIP's KaFFPa for both contracts: exact block sizes and weighted targets.

* :func:`kahip_partition` — the contract of
  :func:`mapper.partitioners.metis.balanced_partition` (blocks of exactly the requested
  sizes), with KaFFPa (Sanders & Schulz) instead of METIS as the multilevel
  partitioner; an optional backend for experiments (``bench/bench_partitions.py``).
* :func:`kahip_split` — the mesh partitioners' contract (as
  :func:`mapper.partitioners.metis.metis_split`): integer vertex and edge weights,
  blocks whose weights should be ``fractions`` of the total, each within ``imbalance``
  of its target; :mod:`mapper.mesh.balance` repairs what it returns.

KaHIP is optional (PyPI ``kahip``); without it :class:`~.errors.KahipMissing` says how
to install it.  KaHIP's Python module exposes only ``kaffpa(vwgt, xadj, adjcwgt,
adjncy, k, imbalance, suppress_output, seed, mode)`` — one imbalance for every block,
no target weights — so both contracts pad bisections with a dummy vertex, each its own
way (below).

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
KaFFPa does not always meet its bound, so
:func:`mapper.partitioners.exact_sizes.repair_sizes` makes every split exact, and the
swap refinement :func:`mapper.partitioners.exact_sizes.refine_cut` lowers the final
cut, as after METIS.  KaFFPa's own ε = 0 (its perfectly balanced
refinement, Sanders & Schulz 2013) is not used: splitting a 512-vertex quotient graph
8 ways took 22-131 s here (0.02-1 s with a small ε) for a cut 0.99-1.01 times METIS's
after repair and refinement (``bench/bench_partitions.py --perfect``).

Weighted targets (:func:`kahip_split`).  Equal targets go to kaffpa's k-way
partitioner directly.  Unequal targets are handled by bisection: for a 2-way split
with targets T_small < T_big an isolated dummy vertex of weight ``T_big - T_small`` is
added, so that kaffpa's equal halves are the wanted sizes; the side holding the dummy
is the small side, and kaffpa's imbalance is set to ``imbalance * T_small / T_big`` so
that the small side's slack is ``imbalance`` of *its* target.  More than two unequal
targets are split recursively into halves (⌊k/2⌋ and ⌈k/2⌉ blocks) that way.  So with
unequal targets KaHIP is always recursive bisection, never its k-way refinement.  The
padding differs from the exact sizes' (the vertices' own weights, halves at k // 2:
the two cases above); hence the two bisections of this module.

Complexity: KaFFPa is a multilevel partitioner, near-linear in m per call in
practice (fast < eco < strong: strong adds flow-based refinement and more V-cycles);
unequal sizes add ⌈log2 k⌉ levels of bisection calls, O(m) each level; repair and
refinement as in :mod:`mapper.partitioners.exact_sizes`.

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

from .errors import KahipMissing, PartitionError
from .exact_sizes import cut_weight, refine_cut, repair_sizes
from .weights import blocks_by_weight, metis_weights

#: KaFFPa preconfigurations (kahip.FAST, ECO, STRONG)
MODES = {"fast": 0, "eco": 1, "strong": 2}
#: the same, by name, for the mesh partitioners' ``kahip_mode``
KAHIP_MODES = ("fast", "eco", "strong")
#: ε of KaFFPa's k-way splits: blocks within a vertex or two of the target
EPSILON = 0.001
_SMALL_GRAPH = 16
_SMALL_GRAPH_TRIES = 4
_KAHIP_TOTAL_LIMIT = 1 << 26     # with the dummy vertex at most twice this
_KAHIP_MIN_IMBALANCE = 0.003


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


def _kahip():
    try:
        import kahip
    except ImportError:
        raise KahipMissing(
            "backend 'kahip' needs the KaHIP Python module: pip install kahip "
            "(or use backend 'metis')") from None
    return kahip


def kahip_split(adj: sp.csr_matrix, vweights: np.ndarray, fractions: np.ndarray, *,
                imbalance: float, seed: int, mode: str = "fast") -> np.ndarray:
    """Split with KaHIP's kaffpa (see the module docstring for unequal targets)."""
    kahip = _kahip()
    if mode not in KAHIP_MODES:
        raise PartitionError(f"KaHIP mode {mode!r}: expected one of {', '.join(KAHIP_MODES)}")
    kmode = {"fast": kahip.FAST, "eco": kahip.ECO, "strong": kahip.STRONG}[mode]
    k = len(fractions)
    n = adj.shape[0]
    if k == 1 or n == 0:
        return np.zeros(n, dtype=np.int64)
    fractions = np.asarray(fractions, dtype=np.float64) / float(np.sum(fractions))
    vweights = _kahip_weights(vweights)
    if np.allclose(fractions, fractions[0], rtol=1e-9, atol=0):
        return _kaffpa_weighted(kahip, adj, vweights, k, imbalance, seed, kmode)
    if k == 2:
        return _kahip_bisect(kahip, adj, vweights, fractions, imbalance, seed, kmode)
    # unequal targets, k > 2: halves of the block range, each split again
    half = k // 2
    side = _kahip_bisect(kahip, adj, vweights,
                         np.array([fractions[:half].sum(), fractions[half:].sum()]),
                         imbalance, seed, kmode)
    part = np.empty(n, dtype=np.int64)
    for s, (lo, hi) in enumerate(((0, half), (half, k))):
        idx = np.flatnonzero(side == s)
        sub = kahip_split(adj[idx][:, idx], vweights[idx], fractions[lo:hi],
                          imbalance=imbalance, seed=seed, mode=mode)
        part[idx] = sub + lo
    return part


def _kahip_weights(vweights: np.ndarray) -> np.ndarray:
    """Vertex weights small enough for kaffpa's 32-bit sums, dummy vertex included."""
    total = float(vweights.sum())
    if total <= _KAHIP_TOTAL_LIMIT:
        return vweights
    # kaffpa crashes (not an error: a segfault) when the weights approach 2^31
    return np.maximum(1, np.rint(vweights * (_KAHIP_TOTAL_LIMIT / total))).astype(np.int64)


def _kaffpa_weighted(kahip, adj: sp.csr_matrix, vweights: np.ndarray, k: int,
                     imbalance: float, seed: int, kmode: int) -> np.ndarray:
    """One kaffpa call of :func:`kahip_split`: blocks by weight where there are fewer
    vertices than blocks, and never an imbalance below ``_KAHIP_MIN_IMBALANCE``."""
    n = adj.shape[0]
    if n < k:
        return blocks_by_weight(vweights, np.full(k, 1.0 / k))
    # kaffpa segfaults with imbalance 0 on some weighted inputs (seen with the dummy
    # vertex); the balance repair closes the last per mille
    return _kaffpa(kahip, adj, vweights, k, max(float(imbalance), _KAHIP_MIN_IMBALANCE),
                   seed, kmode)


def _kahip_bisect(kahip, adj: sp.csr_matrix, vweights: np.ndarray, fractions: np.ndarray,
                  imbalance: float, seed: int, kmode: int) -> np.ndarray:
    total = float(vweights.sum())
    small = int(np.argmin(fractions))
    t_small, t_big = fractions[small] * total, fractions[1 - small] * total
    dummy = int(round(t_big - t_small))
    if dummy < 1:
        return _kaffpa_weighted(kahip, adj, vweights, 2, imbalance, seed, kmode)
    n = adj.shape[0]
    # an isolated vertex of weight T_big - T_small: kaffpa's two equal halves are then
    # T_small + dummy and T_big, i.e. the wanted sides
    indptr = np.append(adj.indptr, adj.indptr[-1])
    padded = sp.csr_matrix((adj.data, adj.indices, indptr), shape=(n + 1, n + 1))
    blocks = _kaffpa_weighted(kahip, padded, np.append(vweights, dummy), 2,
                              imbalance * t_small / t_big, seed, kmode)
    side_of_dummy = blocks[n]
    # the dummy's side is the small one
    return np.where(blocks[:n] == side_of_dummy, small, 1 - small).astype(np.int64)
