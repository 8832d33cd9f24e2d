"""Graph partitioning backends for the mesh partitioners: METIS (pymetis) and KaHIP.

One function per backend, same contract: split a graph with integer vertex and edge
weights into ``len(fractions)`` blocks whose weights should be ``fractions`` of the total,
each within ``imbalance`` of its target, minimising the edge cut.  Neither backend
guarantees the bound exactly (METIS may overshoot, KaHIP's bound is relative to the
*average* block); :mod:`mapper.mesh.balance` repairs what they return.

* METIS through pymetis takes target weights (``tpwgts``) and the imbalance as
  ``ufactor`` (in 1/1000).  ``recursive=True`` is METIS's recursive bisection
  (``METIS_PartGraphRecursive``), otherwise multilevel k-way.
* KaHIP's Python module exposes only ``kaffpa(vwgt, xadj, adjcwgt, adjncy, k,
  imbalance, suppress_output, seed, mode)`` — no target weights.  Equal targets go to
  kaffpa's k-way partitioner directly.  Unequal targets are handled by bisection: for a
  2-way split with targets T_small < T_big an isolated dummy vertex of weight
  ``T_big - T_small`` is added, so that kaffpa's equal halves are the wanted sizes; the
  side holding the dummy is the small side, and kaffpa's imbalance is set to
  ``imbalance * T_small / T_big`` so that the small side's slack is ``imbalance`` of
  *its* target.  More than two unequal targets are split recursively into halves
  (⌊k/2⌋ and ⌈k/2⌉ blocks) that way.  So with unequal targets KaHIP is always recursive
  bisection, never its k-way refinement.

Complexity: both are multilevel partitioners, O(m) per level in practice, O(m log k)
for recursive bisection; the dummy-vertex adaptation adds O(n) per bisection.

References
----------
* Karypis & Kumar, A Fast and High Quality Multilevel Scheme for Partitioning Irregular
  Graphs, SIAM J. Sci. Comput. 20(1):359-392 (1998), doi:10.1137/S1064827595287997.
* Sanders & Schulz, Engineering Multilevel Graph Partitioning Algorithms, ESA 2011,
  LNCS 6942:469-480, doi:10.1007/978-3-642-23719-5_40 (KaHIP's kaffpa;
  https://github.com/KaHIP/KaHIP, PyPI ``kahip``).
"""

from __future__ import annotations

import logging

import numpy as np
import scipy.sparse as sp

from .names import KAHIP, METIS
from .result import BackendUnavailable, PartitionError

log = logging.getLogger("rankmap.mapper")

#: kaffpa's modes by name
KAHIP_MODES = ("fast", "eco", "strong")
_VERTEX_WEIGHT_MAX = 1 << 20
_VERTEX_TOTAL_LIMIT = 1 << 30
_KAHIP_TOTAL_LIMIT = 1 << 26     # with the dummy vertex at most twice this
_KAHIP_MIN_IMBALANCE = 0.003


def integer_vertex_weights(weights: np.ndarray) -> np.ndarray:
    """Integer vertex weights ≥ 1 that keep the proportions of ``weights`` (> 0).

    Equal weights become 1; otherwise the largest weight maps to at most 2^20 and the
    total to at most 2^30, so the 32-bit partitioners cannot overflow.
    """
    w = np.asarray(weights, dtype=np.float64)
    if len(w) == 0 or w.min() == w.max():
        return np.ones(len(w), dtype=np.int64)
    scale = min(_VERTEX_WEIGHT_MAX / float(w.max()), _VERTEX_TOTAL_LIMIT / float(w.sum()))
    return np.maximum(1, np.rint(w * scale)).astype(np.int64)


def _fallback(vweights: np.ndarray, fractions: np.ndarray) -> np.ndarray:
    """Blocks by cumulative weight in vertex order: used when a partitioner refuses."""
    cum = np.cumsum(vweights) - 0.5 * vweights
    edges = np.cumsum(fractions)[:-1] * float(vweights.sum())
    return np.searchsorted(edges, cum, side="right").astype(np.int64)


def metis_split(adj: sp.csr_matrix, vweights: np.ndarray, fractions: np.ndarray, *,
                imbalance: float, seed: int, recursive: bool) -> np.ndarray:
    """Split with METIS; ``adj`` holds integer edge weights ≥ 1.  Block of every vertex."""
    import pymetis

    k = len(fractions)
    n = adj.shape[0]
    if k == 1:
        return np.zeros(n, dtype=np.int64)
    opts = pymetis.Options(seed=int(seed), ufactor=max(1, int(imbalance * 1000)))
    try:
        _, parts = pymetis.part_graph(
            k, pymetis.CSRAdjacency(adj.indptr.astype(np.int64), adj.indices.astype(np.int64)),
            vweights=vweights.astype(np.int64), eweights=adj.data.astype(np.int64),
            tpwgts=(fractions / fractions.sum()).tolist(), recursive=recursive,
            options=opts)
        return np.asarray(parts, dtype=np.int64)
    except (RuntimeError, ValueError, MemoryError) as exc:
        # METIS refuses some tiny or edgeless inputs: the balance repair then works from
        # weight-ordered blocks; said in the log, never silently
        log.warning("METIS failed on a %d-vertex, %d-part split (%s); starting from "
                    "blocks in vertex order", n, k, exc)
        return _fallback(vweights, fractions)


def _kahip():
    try:
        import kahip
    except ImportError:
        raise BackendUnavailable(
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
        return _kaffpa(kahip, adj, vweights, k, imbalance, seed, kmode)
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


def _kaffpa(kahip, adj: sp.csr_matrix, vweights: np.ndarray, k: int, imbalance: float,
            seed: int, kmode: int) -> np.ndarray:
    n = adj.shape[0]
    if n < k:
        return _fallback(vweights, np.full(k, 1.0 / k))
    # kaffpa segfaults with imbalance 0 on some weighted inputs (seen with the dummy
    # vertex); the balance repair closes the last per mille
    _, blocks = kahip.kaffpa(vweights.astype(np.int32), adj.indptr.astype(np.int32),
                             adj.data.astype(np.int32), adj.indices.astype(np.int32),
                             int(k), max(float(imbalance), _KAHIP_MIN_IMBALANCE), True,
                             int(seed), int(kmode))
    return np.asarray(blocks, dtype=np.int64)


def _kahip_bisect(kahip, adj: sp.csr_matrix, vweights: np.ndarray, fractions: np.ndarray,
                  imbalance: float, seed: int, kmode: int) -> np.ndarray:
    total = float(vweights.sum())
    small = int(np.argmin(fractions))
    t_small, t_big = fractions[small] * total, fractions[1 - small] * total
    dummy = int(round(t_big - t_small))
    if dummy < 1:
        return _kaffpa(kahip, adj, vweights, 2, imbalance, seed, kmode)
    n = adj.shape[0]
    # an isolated vertex of weight T_big - T_small: kaffpa's two equal halves are then
    # T_small + dummy and T_big, i.e. the wanted sides
    indptr = np.append(adj.indptr, adj.indptr[-1])
    padded = sp.csr_matrix((adj.data, adj.indices, indptr), shape=(n + 1, n + 1))
    blocks = _kaffpa(kahip, padded, np.append(vweights, dummy), 2,
                     imbalance * t_small / t_big, seed, kmode)
    side_of_dummy = blocks[n]
    # the dummy's side is the small one
    return np.where(blocks[:n] == side_of_dummy, small, 1 - small).astype(np.int64)


def backend_split(backend: str, adj: sp.csr_matrix, vweights: np.ndarray,
                  fractions: np.ndarray, *, imbalance: float, seed: int,
                  recursive: bool = True, kahip_mode: str = "fast") -> np.ndarray:
    """Dispatch to :func:`metis_split` or :func:`kahip_split` by name."""
    if backend == METIS:
        return metis_split(adj, vweights, fractions, imbalance=imbalance, seed=seed,
                           recursive=recursive)
    if backend == KAHIP:
        return kahip_split(adj, vweights, fractions, imbalance=imbalance, seed=seed,
                           mode=kahip_mode)
    raise PartitionError(f"unknown partitioning backend {backend!r}: expected "
                         f"{METIS!r} or {KAHIP!r}")
