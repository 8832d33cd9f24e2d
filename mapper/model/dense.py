"""Dense communication profiles: when placement cannot matter, and a sparse stand-in.

Two functions, one job each:

* :func:`uniform_pattern` — True when every bijection has the same J, so that a solver
  has nothing to gain: the graph has no edge, or it is complete (every pair of ranks
  communicates) with equal weights.  Then J = c · Σ_{p<q} D(p, q) for every mapping π,
  because π only permutes the pairs.  With a relative tolerance ``rtol`` on the
  weights, every J lies within a factor 1 + rtol of every other (the weights lie in
  [c, c (1 + rtol)]).  O(1) when the edge count is not n(n−1)/2, O(m) otherwise.
* :func:`sparsify` — the partitioner's view of a dense graph: every vertex keeps its
  ``k`` heaviest edges, and an edge stays when either endpoint keeps it (a symmetric
  k-nearest-neighbour graph, weights unchanged).  Only the constructions' partition
  calls use it; J and every local-search gain are always evaluated on the full graph.
  This is the "sparsify before partitioning" practice of graph clustering: von Luxburg,
  A tutorial on spectral clustering, Statistics and Computing 17:395-416 (2007),
  doi:10.1007/s11222-007-9033-z, §2.2 (the symmetric k-nearest-neighbour graph), and
  Satuluri, Parthasarathy & Ruan, Local graph sparsification for scalable clustering,
  SIGMOD 2011, doi:10.1145/1989323.1989399 (every node keeps its top-ranked edges; they
  rank by a minhash similarity and keep ⌈d^e⌉ per node, here the rank is the volume
  and the count a fixed k, so that METIS sees O(n k) edges whatever the density).
  O(nnz) time (a per-row ``argpartition`` in padded blocks of rows of similar
  degree), O(nnz) bits plus O(n k) words of memory beyond the input (and
  temporary blocks of at most 2^20 padded entries).
* :func:`search_depth` — the N_C^d depth that keeps one breadth-first ball affordable:
  the compiled search checks the clock only every 256 ranks, and on a dense graph a
  ball of radius d ≥ 2 scans every edge (O(m) per rank), so 256 balls can take longer
  than a whole budget.  The depth is lowered until the balls of a few sample ranks (the
  highest-degree rank and random ones) scan at most ``max_arcs`` arcs.  On a complete
  graph N_C^1 = N_C^d for every d ≥ 1 (every rank is one hop away), so there the
  neighbourhood does not change at all.  O(samples · max_arcs) time, O(n) memory.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from .graph import CommGraph

#: Edges every vertex keeps for the partitioner when the graph is dense.
PARTITION_DEGREE = 32

# Rows at most this many padded entries per argpartition block (bounds the temporary
# arrays at about 30 MB whatever the graph).
_BLOCK_ENTRIES = 1 << 20


def uniform_pattern(graph: CommGraph, rtol: float = 1e-9) -> bool:
    """True when every rank → PE bijection has the same J on ``graph`` (any machine).

    That is the case when the graph has no edge, or has every one of the n(n−1)/2
    edges with weights equal up to the relative tolerance ``rtol`` (J then varies by
    at most that factor between placements).  A graph with one pair missing or one
    weight different is not uniform.
    """
    n, m = graph.n, graph.m
    if m == 0:
        return True
    if m != n * (n - 1) // 2:
        return False
    w = graph.weights
    lo, hi = float(w.min()), float(w.max())
    return hi - lo <= rtol * hi


def sparsify(adj: sp.csr_matrix, k: int = PARTITION_DEGREE) -> sp.csr_matrix:
    """Symmetric CSR keeping, for every vertex, its ``k`` heaviest edges (see module).

    ``adj`` is symmetric without self loops.  Returns ``adj`` itself when no vertex
    has more than ``k`` neighbours.  Ties are broken by position (deterministic).
    """
    if k < 1:
        raise ValueError(f"sparsify needs k >= 1, got {k}")
    deg = np.diff(adj.indptr)
    heavy = np.flatnonzero(deg > k)
    if len(heavy) == 0:
        return adj
    keep = np.ones(adj.nnz, dtype=bool)
    # rows of degree in [2^b, 2^(b+1)) share one padded block width 2^(b+1)
    bucket = np.floor(np.log2(deg[heavy])).astype(np.int64)
    for b in np.unique(bucket).tolist():
        rows = heavy[bucket == b]
        width = 1 << (b + 1)
        step = max(1, _BLOCK_ENTRIES // width)
        for s in range(0, len(rows), step):
            _keep_top(adj, rows[s:s + step], width, k, keep)
    # a kept row has min(degree, k) arcs, in their CSR order (masking keeps the order)
    indptr = np.concatenate([[0], np.cumsum(np.minimum(deg, k))])
    kept = sp.csr_matrix((adj.data[keep], adj.indices[keep], indptr), shape=adj.shape)
    out = kept.maximum(kept.T).tocsr()  # an edge stays when either endpoint keeps it
    out.sort_indices()
    return out


def _keep_top(adj: sp.csr_matrix, rows: np.ndarray, width: int, k: int,
              keep: np.ndarray) -> None:
    """Clear ``keep`` on every arc of ``rows`` that is not among the row's k heaviest."""
    start = adj.indptr[rows]
    deg = adj.indptr[rows + 1] - start
    col = np.arange(width)
    valid = col[None, :] < deg[:, None]
    pos = np.where(valid, start[:, None] + col[None, :], 0)
    w = np.where(valid, adj.data[pos], -np.inf)
    top = np.argpartition(-w, k - 1, axis=1)[:, :k]
    drop = valid.copy()
    np.put_along_axis(drop, top, False, axis=1)
    keep[pos[drop]] = False


def search_depth(graph: CommGraph, depth: int, max_arcs: int, samples: int = 4,
                 seed: int = 0) -> int:
    """The largest d ≤ ``depth`` whose BFS balls scan ≤ ``max_arcs`` arcs (at least 1).

    Measured on the highest-degree rank and ``samples`` random ranks; each ball
    search stops as soon as it passes ``max_arcs``.  A complete graph gives 1 (the
    same neighbourhood as any depth).
    """
    n = graph.n
    if depth <= 1 or n < 2:
        return max(depth, 1)
    if graph.m == n * (n - 1) // 2:
        return 1
    deg = graph.degrees()
    rng = np.random.default_rng(seed)
    starts = np.unique(np.r_[int(np.argmax(deg)), rng.integers(0, n, samples)])
    best = depth
    for s in starts.tolist():
        best = min(best, _affordable_depth(graph, deg, s, best, max_arcs))
        if best == 1:
            break
    return best


def _affordable_depth(graph: CommGraph, deg: np.ndarray, start: int, depth: int,
                      max_arcs: int) -> int:
    """Largest d ≤ depth such that the radius-d ball around ``start`` scans ≤ max_arcs."""
    seen = np.zeros(graph.n, dtype=bool)
    seen[start] = True
    frontier = np.array([start], dtype=np.int64)
    arcs = 0
    for d in range(1, depth + 1):
        # a radius-d search scans the edges of every vertex up to distance d - 1
        arcs += int(deg[frontier].sum())
        if arcs > max_arcs:
            return max(d - 1, 1)
        lo, hi = graph.indptr[frontier], graph.indptr[frontier + 1]
        idx = np.repeat(lo - np.cumsum(np.r_[0, hi - lo])[:-1], hi - lo) + \
            np.arange(int((hi - lo).sum()))
        nxt = np.unique(graph.indices[idx])
        nxt = nxt[~seen[nxt]]
        if len(nxt) == 0:
            return depth  # the whole component is inside: deeper balls cost the same
        seen[nxt] = True
        frontier = nxt.astype(np.int64)
    return depth
