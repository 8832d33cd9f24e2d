"""METIS (through pymetis) for both contracts: exact block sizes and weighted targets.

* :func:`balanced_partition` — blocks of exactly the given vertex counts, for the
  sparse-QAP constructions (Top-Down, Bottom-Up; Schulz, Träff & von Kirchbach, §3.1,
  which use KaHIP's perfectly balanced partitioner).  METIS balances only up to a
  tolerance, so its output is repaired and the cut refined
  (:mod:`mapper.partitioners.exact_sizes`).  Heterogeneous targets (unequal group
  sizes) are passed to METIS as target weights (``tpwgts``).
* :func:`metis_split` — the mesh partitioners' contract (:mod:`mapper.mesh.balance`):
  integer vertex and edge weights, blocks whose weights should be ``fractions`` of the
  total, each within ``imbalance`` of its target (METIS's ``ufactor``, in 1/1000; it
  may overshoot, the caller repairs).  ``recursive=True`` is METIS's recursive
  bisection (``METIS_PartGraphRecursive``), otherwise multilevel k-way.

In :func:`balanced_partition`, METIS runs in recursive-bisection mode: with exact target
weights its k-way mode cuts more on the paper's instance types.  Large blocks are the
exception: where the smallest block has at least ``KWAY_MIN_BLOCK`` vertices (the top
splits of jobs of 10^5-10^6 ranks), k-way coarsens the graph once where recursive
bisection re-coarsens it at every bisection level, and cuts less at 2^20 ranks, but
more at a few 10^4.  So such a split runs both modes (one METIS run more, and the lower
cut wins) while the graph has at most ``_BOTH_MODES_WORK`` vertices + arcs, and k-way
alone on larger ones (bench/README.md has the tables).

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

from .exact_sizes import cut_weight, refine_cut, repair_sizes
from .weights import blocks_by_weight, metis_weights


def balanced_partition(adj: sp.csr_matrix, sizes: np.ndarray, seed: int = 0,
                       time_limit: float | None = None, tries: int = 1,
                       whole: int | None = None, refine: bool = True) -> np.ndarray:
    """Split the graph ``adj`` into ``len(sizes)`` blocks of exactly ``sizes`` vertices.

    ``adj`` is symmetric CSR without self loops; ``sizes`` sum to its vertex count.
    Returns the block of every vertex.  ``time_limit`` (seconds) bounds the cut
    refinement, which then keeps the swaps made so far (METIS and the size repair are
    not interruptible; on a dense graph pass :func:`mapper.model.dense.sparsify`'s view).
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
    same kind of swaps with the machine's distances (:mod:`mapper.solve.presets`).
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


def metis_split(adj: sp.csr_matrix, vweights: np.ndarray, fractions: np.ndarray, *,
                imbalance: float, seed: int, recursive: bool) -> np.ndarray:
    """Split with METIS; ``adj`` holds integer edge weights ≥ 1.  Block of every vertex."""
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
        return blocks_by_weight(vweights, fractions)
