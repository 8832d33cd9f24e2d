"""Perfectly balanced partitioning: METIS (pymetis), then an exact size repair.

The sparse-QAP constructions (Schulz, Träff & von Kirchbach, §3.1) need blocks of
exactly the sizes of the machine's groups (the paper uses KaHIP's perfectly balanced
partitioner).  METIS balances only up to a tolerance, so its output is repaired:
vertices move from blocks above their target to blocks below it, best connection gain
first.  Then a size-preserving swap refinement lowers the cut: it is the mapper's own
N_C^2 local search on a two-level machine whose groups are the blocks (distance 0
inside a block, 1 across), so swaps of vertices at most two hops apart in different
blocks are made while they reduce the cut.  Heterogeneous targets (unequal group
sizes) are passed to METIS as target weights (``tpwgts``).

METIS runs in recursive-bisection mode: with exact target weights its k-way mode cut
20-100 % more on the paper's instance types (measured on rgg quotient graphs and 3D
grids).  Large blocks are the exception: where the smallest block has at least
``KWAY_MIN_BLOCK`` vertices (the top splits of jobs of 10^5-10^6 ranks), k-way coarsens
the graph once where recursive bisection re-coarsens it at every bisection level.  At
2^20 ranks its top split into 5-16 blocks cut 1-12 % less on 2D and 3D grids and rgg
and took 0.6 of the time, and the bench's 2^20 plan got 2.9 % lower J.  At
4-6 · 10^4 ranks into 3-6 blocks of 10^4 vertices, though, it cut 5-12 % more on 3D
grids.  So such a split runs both modes (one METIS run more, and the lower cut wins)
while the graph has at most ``_BOTH_MODES_WORK`` vertices + arcs, and k-way alone on
larger ones (bench/README.md has the tables).

Each bisection is the best of up to ``_MAX_NCUTS`` (METIS's ``ncuts``), as many as
about ``_EFFORT_WORK`` arcs of work allow: on periodic grids (tori) many
bisections are nearly equal and one METIS bisection missed the best in about half of
the seeds (8x8x4 torus into 4: cut 140-153 instead of 128; 12x8x6 into 4: 216-248
instead of 192), a miss that neither the repair (METIS was already exact there) nor
the swap refinement nor N_C^10 after Top-Down can undo, because the better cut is a
different orientation of whole planes.

The vertices' own order cut into consecutive blocks of the target sizes is a candidate
too, taken (and refined) when it cuts less than METIS's refined partition.  Rank
order often carries locality METIS cannot see on a coarse graph: the block ids of a
hierarchical multisection (the mesh mode's RMS quotient, where METIS cut 9-30 % more
than the multisection at the top split and plain Top-Down lost up to 5 % J to the
identity), or an NPB-CG process grid whose rows fill nodes (14 % lower J on 12:4:22).
It costs one O(m) cut count per split.  Complexity: one METIS call (two for large
blocks of mid-sized graphs), O(c · m log k) in practice for recursive bisection with
c = ncuts and O(m + k · cut) for k-way, O(r · (n + m)) for r repair rounds (r is small
because METIS is within 0.1 % of the targets), and O(Σ_u d_u²) per refinement pass.

References
----------
* Schulz, Träff & von Kirchbach, Better Process Mapping and Sparse Quadratic
  Assignment, arXiv:1702.04164v2 (§ numbers follow it); full entry in :mod:`mapper`.
* Karypis & Kumar: A Fast and High Quality Multilevel Scheme for Partitioning
  Irregular Graphs.  SIAM J. Sci. Comput. 20(1):359-392 (1998),
  doi:10.1137/S1064827595287997 (METIS, called through pymetis).
* Karypis & Kumar: Multilevel k-way Partitioning Scheme for Irregular Graphs.
  J. Parallel Distrib. Comput. 48(1):96-129 (1998), doi:10.1006/jpdc.1997.1404.
"""

from __future__ import annotations

import logging
import time

import numpy as np
import pymetis
import scipy.sparse as sp

# METIS takes 32-bit integer edge weights; scale volumes into this range.
_METIS_WEIGHT_SCALE = 1 << 20
_METIS_TOTAL_LIMIT = 1 << 30


def metis_weights(weights: np.ndarray) -> np.ndarray:
    """Integer edge weights ≥ 1 that keep the volumes' proportions for METIS."""
    if len(weights) == 0:
        return np.zeros(0, dtype=np.int64)
    from . import _kernels

    wmax = float(weights.max())
    scale = min(_METIS_WEIGHT_SCALE / wmax, _METIS_TOTAL_LIMIT / max(float(weights.sum()), 1.0))
    return _kernels.scaled_weights(np.ascontiguousarray(weights, dtype=np.float64), scale)


def csr_arrays(adj: sp.csr_matrix) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``adj``'s (indptr, indices, data) as the compiled kernels over a block take them:
    the indices in the indptr's integer type, the data as float64 (no copies when
    they already are)."""
    return (adj.indptr, adj.indices.astype(adj.indptr.dtype, copy=False),
            adj.data.astype(np.float64, copy=False))


def balanced_partition(adj: sp.csr_matrix, sizes: np.ndarray, seed: int = 0,
                       time_limit: float | None = None, tries: int = 1,
                       whole: int | None = None, refine: bool = True) -> np.ndarray:
    """Split the graph ``adj`` into ``len(sizes)`` blocks of exactly ``sizes`` vertices.

    ``adj`` is symmetric CSR without self loops; ``sizes`` sum to its vertex count.
    Returns the block of every vertex.  ``time_limit`` (seconds) bounds the cut
    refinement, which then keeps the swaps made so far (METIS and the size repair are
    not interruptible; on a dense graph pass :func:`mapper.dense.sparsify`'s view).
    ``tries`` > 1 runs METIS with that many seeds and keeps the lowest cut (the eco and
    strong presets: 1-4 % lower J measured in ``bench/bench_partitions.py``); no new
    run starts after ``time_limit``.  Where both METIS modes run (tiny graphs; large
    blocks of mid-sized graphs, module docstring) the runs alternate recursive
    bisection and k-way, one seed per pair, at least one pair.  ``whole`` (vertices +
    arcs of the graph a construction splits level by level, of which ``adj`` is one
    block) caps METIS's effort so that one level of splits costs about the same at any
    scale (:func:`metis_effort`).  The vertex order's consecutive blocks replace METIS's
    result when they cut less (module docstring), so the cut is never above theirs.
    ``refine=False`` skips the swap refinement (:func:`refine_cut`) of METIS's and the
    order's blocks: the ``fast`` preset, whose N_C^10 search after Top-Down makes the
    same kind of swaps with the machine's distances (:mod:`mapper.presets`).
    """
    start = time.perf_counter()
    n = adj.shape[0]
    sizes = np.asarray(sizes, dtype=np.int64)
    k = len(sizes)
    if sizes.sum() != n:
        raise ValueError(f"block sizes sum to {sizes.sum()}, graph has {n} vertices")
    if k == 1:
        return np.zeros(n, dtype=np.int64)
    if adj.nnz == 0 or n <= k:
        return np.repeat(np.arange(k), sizes)
    ncuts, runs = metis_effort(n, adj.nnz, k, whole)
    large = int(sizes.min()) >= KWAY_MIN_BLOCK
    # both METIS modes, the same seed for each pair: tiny graphs, and large blocks of
    # graphs that can afford a second run; larger graphs: k-way alone (module docstring)
    both = runs > 1 or (large and n + adj.nnz <= _BOTH_MODES_WORK)
    tries = max(runs, 2 if both else 1, tries)
    best, best_cut = None, np.inf
    for attempt in range(tries):
        left = None if time_limit is None else time_limit - (time.perf_counter() - start)
        if best is not None and left is not None and left <= 0:
            break
        raw = _metis(adj, sizes, seed + 7919 * (attempt // 2 if both else attempt),
                     recursive=attempt % 2 == 0 if both else not large, ncuts=ncuts)
        part = repair_sizes(adj, raw, sizes)
        if refine:
            part = refine_cut(adj, part, sizes, seed,
                              time_limit=None if left is None else max(left, 1e-6))
        cut = cut_weight(adj, part)
        if cut < best_cut:
            best, best_cut = part, cut
    # the vertices' own order, cut into consecutive blocks, is a candidate too
    in_order = np.repeat(np.arange(k), sizes)
    if cut_weight(adj, in_order) < best_cut:
        left = None if time_limit is None else time_limit - (time.perf_counter() - start)
        best = in_order if not refine else refine_cut(
            adj, in_order, sizes, seed, time_limit=None if left is None else max(left, 1e-6))
    return best


def metis_effort(n: int, nnz: int, k: int, whole: int | None = None) -> tuple[int, int]:
    """(bisections METIS tries at every step of its recursive bisection, METIS runs).

    METIS's ``ncuts`` keeps the best of that many bisections at every step of the
    recursion, so one bad bisection (frequent on tori, where many cuts are almost
    equal) no longer spoils the levels below: up to ``_MAX_NCUTS``, as many as about
    ``_EFFORT_WORK`` arcs of work allow (1 on huge graphs).  Blocks of fewer than
    ``_NCUTS_MIN_BLOCK`` vertices get one bisection per step: there the swap
    refinement sees whole blocks, and such splits are the most numerous (2048 per
    Top-Down on 2^17 ranks, where METIS's per-bisection overhead would add 40 %).
    ``whole`` (vertices + arcs of the whole graph when the block is one of many splits
    of a level, as in Top-Down) also caps the bisections at ``_LEVEL_WORK / whole``:
    the blocks of one level add up to the whole graph, so the level's METIS work stays
    within about ``_LEVEL_WORK`` arcs per bisection step.  Without the cap the 8192
    node splits of a 2^20-rank Top-Down took 6.1 s of its 17 s with 8 bisections each;
    with the cap J rose by 0.02 % at 2^17; the periodic stencils of issue 12 item 3, where the
    extra bisections matter, are far below the cap.
    One run, except on tiny graphs where METIS is erratic and a few seeded runs cost
    next to nothing."""
    if n <= _SMALL_GRAPH:
        return 1, _SMALL_GRAPH_TRIES
    if n < _NCUTS_MIN_BLOCK * k:
        return 1, 1
    ncuts = min(_MAX_NCUTS, _EFFORT_WORK // (n + nnz))
    if whole is not None:
        ncuts = min(ncuts, _LEVEL_WORK // max(whole, 1))
    return int(max(1, ncuts)), 1


log = logging.getLogger("rankmap.mapper")

_SMALL_GRAPH = 16
_SMALL_GRAPH_TRIES = 4
_MAX_NCUTS = 8
_NCUTS_MIN_BLOCK = 8
_EFFORT_WORK = 80_000
_LEVEL_WORK = 2_000_000
#: Vertices in the smallest block from which METIS's k-way mode runs (module
#: docstring); the mesh mode's multisection uses the same rule.
KWAY_MIN_BLOCK = 10_000
#: Vertices + arcs up to which such a split also runs the recursive bisection.
_BOTH_MODES_WORK = 2_000_000


def _metis(adj: sp.csr_matrix, sizes: np.ndarray, seed: int, recursive: bool,
           ncuts: int = 1) -> np.ndarray:
    n, k = adj.shape[0], len(sizes)
    opts = pymetis.Options(seed=int(seed), ufactor=1, ncuts=int(ncuts))
    try:
        _, parts = pymetis.part_graph(
            k, pymetis.CSRAdjacency(adj.indptr.astype(np.int64), adj.indices.astype(np.int64)),
            eweights=metis_weights(adj.data), tpwgts=(sizes / n).tolist(),
            recursive=recursive, options=opts)
        return np.asarray(parts, dtype=np.int64)
    except (RuntimeError, ValueError, MemoryError) as exc:
        # METIS refuses some tiny or degenerate inputs: start from blocks, which the
        # size repair and refinement then improve; said in the log, never silently
        log.warning("METIS failed on a %d-vertex, %d-part problem (%s); starting from "
                    "contiguous blocks", n, k, exc)
        return np.repeat(np.arange(k), sizes)


def cut_weight(adj: sp.csr_matrix, part: np.ndarray) -> float:
    """Total weight of edges between different blocks (each edge once), O(m)."""
    # compiled: Top-Down counts the cut of 2 candidates in each of 8192 splits at 2^20
    # ranks, where numpy's per-call cost (scipy's tocoo: 50 us) added up to seconds
    from . import _kernels

    return float(_kernels.cut_of(*csr_arrays(adj), np.ascontiguousarray(part, dtype=np.int64)))


def refine_cut(adj: sp.csr_matrix, part: np.ndarray, sizes: np.ndarray,
               seed: int = 0, time_limit: float | None = None) -> np.ndarray:
    """Lower the cut of an exactly balanced partition by swapping adjacent vertices.

    ``time_limit`` (seconds) stops the swaps; those made so far are kept (every one
    lowers the cut and keeps the sizes)."""
    from . import _kernels  # compiled; imported here so partition stays importable alone
    from .search.swap import SearchMode

    n = len(part)
    k = len(sizes)
    bounds = np.concatenate([[0], np.cumsum(sizes)])
    gid = np.empty((n, 2), dtype=np.int32)
    gid[:, 0] = np.repeat(np.arange(k, dtype=np.int32), sizes)
    gid[:, 1] = 0
    pe = np.empty(n, dtype=np.int64)
    order = np.argsort(part, kind="stable")
    pe[order] = np.arange(n)
    assert np.array_equal(np.diff(bounds), np.bincount(part, minlength=k))
    _kernels.local_search(adj.indptr.astype(np.int64, copy=False),
                          adj.indices.astype(np.int32, copy=False),
                          adj.data.astype(np.float64, copy=False), pe, gid,
                          np.array([0.0, 1.0]), None, int(SearchMode.COMMUNICATION), 2,
                          int(seed), float(time_limit or 0.0),
                          1e-12 * max(float(adj.data.sum()), 1.0))
    return gid[pe, 0].astype(np.int64)


def split_blocks_in_two(adj: sp.csr_matrix, block: np.ndarray, first: np.ndarray,
                        seed: int = 0, time_limit: float | None = None,
                        tries: int = 4) -> np.ndarray:
    """Every block of ``block`` (ids 0..k-1) split in two: part ``2b`` gets exactly
    ``first[b]`` of block b's vertices, part ``2b + 1`` the rest.

    Greedy graph growing (Karypis & Kumar 1998, §4.1 "GGGP"): from a pseudo-peripheral
    vertex of the block (the last one a breadth-first search within it reaches), add
    the frontier vertex whose move lowers the cut most until part ``2b`` is full;
    then the exact-balance swap refinement of :func:`refine_cut` (Kernighan & Lin's
    pairwise exchange, with N_C^2 partners) over all blocks at once, on the graph
    without the edges between blocks (so every swap stays inside a block).  For
    Top-Down's last split of many small nodes into their two sockets, where METIS
    spends about 90 us of fixed cost on each 128-vertex bisection
    (:func:`mapper.construction.topdown._node_halves`).  ``time_limit`` bounds the
    refinement.  Complexity: O(m + Σ_b n_b · f_b) for the growing (f_b: the largest
    frontier of block b, a linear scan picks the best), then :func:`refine_cut`'s.

    Karypis & Kumar, A Fast and High Quality Multilevel Scheme for Partitioning
    Irregular Graphs, SIAM J. Sci. Comput. 20(1):359-392 (1998); Kernighan & Lin, An
    Efficient Heuristic Procedure for Partitioning Graphs, Bell Syst. Tech. J. 49(2)
    (1970), doi:10.1002/j.1538-7305.1970.tb01770.x.
    """
    from . import _kernels

    block = np.ascontiguousarray(block, dtype=np.int64)
    first = np.ascontiguousarray(first, dtype=np.int64)
    indptr, indices, data = csr_arrays(adj)
    part = _kernels.grow_halves(indptr, indices, data, block, first, tries)
    counts = np.bincount(block, minlength=len(first))
    sizes = np.empty(2 * len(first), dtype=np.int64)
    sizes[0::2] = first
    sizes[1::2] = counts - first
    w_ptr, w_idx, w_data = _kernels.within_blocks(indptr, indices, data, block)
    within = sp.csr_matrix((w_data, w_idx, w_ptr), shape=adj.shape)
    return refine_cut(within, part, sizes, seed, time_limit=time_limit)


def repair_sizes(adj: sp.csr_matrix, part: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """Move vertices until block b holds exactly ``sizes[b]`` vertices.

    Each round, every vertex of an overfull block proposes its best underfull target
    (largest connection to it minus connection to its own block); proposals are taken
    best first while the source is still over and the target still under (ties: the
    lowest block id).  A vertex with no edge into any underfull block goes to the one
    with the largest deficit.  O(rounds * (n + arcs of the overfull blocks' vertices)).
    """
    from . import _kernels

    part = np.array(part, dtype=np.int64)
    k = len(sizes)
    indptr, indices, data = csr_arrays(adj)
    for _ in range(64):
        count = np.bincount(part, minlength=k)
        excess = count - sizes
        if not excess.any():
            return part
        over = excess > 0
        under = np.flatnonzero(excess < 0)
        cand = np.flatnonzero(over[part])
        # compiled: scipy's per-call cost (one-hot matrix, product, sort) made the 256
        # small repairs of Top-Down at 2^20 ranks take 0.3 s
        own, target, best_val = _kernels.repair_proposals(
            indptr, indices, data, part, cand, excess, int(under[np.argmin(excess[under])]))
        gain = best_val - own
        moved_any = False
        remaining = int(excess[over].sum())
        for idx in np.argsort(-gain, kind="stable"):
            if remaining == 0:
                break
            v = cand[idx]
            src, dst = part[v], target[idx]
            if excess[src] > 0 and excess[dst] < 0:
                part[v] = dst
                excess[src] -= 1
                excess[dst] += 1
                remaining -= 1
                moved_any = True
        if not moved_any:
            break
    # guaranteed finish: fill deficits from the excess in block order
    count = np.bincount(part, minlength=k)
    excess = count - sizes
    spare = np.concatenate([np.flatnonzero(part == b)[: max(e, 0)] for b, e in enumerate(excess)])
    need = np.repeat(np.arange(k), np.maximum(-excess, 0))
    part[spare] = need
    return part
