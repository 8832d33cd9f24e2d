"""Recursive hierarchical multisection (RMS) of a mesh along the machine; block = PE.

Schulz, Träff & von Kirchbach, §4 "Hierarchy Aware Model Creation": "instead of doing
recursive bipartitioning of the input network, we now perform recursive multisection
along the system hierarchy S.  The approach starts by computing a partition of G into
a_k blocks.  We then proceed recursively and partition each subgraph induced by a block
into a_(k-1) blocks and so forth … This algorithm also assigns consecutive block IDs
recursively during the process to maintain locality."

Here the machine is a :class:`mapper.model.machine.Hierarchy`, whose groups may be uneven and
whose PEs may have speeds: the root's vertex set is split into its child groups with
targets equal to each child's total PE speed (share of the mesh's total weight), each
part recursively into its children's children, down to single PEs.  Because PEs are
numbered depth first, a group's PEs are a consecutive id range and block id = PE id:
the identity mapping is already hierarchy-aware, and every block of a group lies inside
that group's part of the mesh (the nesting is structural: each step only splits the
vertices its parent step gave to the group).  A group with a single child is passed
through without a split.

Balance: as in :mod:`mapper.mesh.rb`, each multisection gets the slack
``((1 + ε) / s)^(1/d) - 1`` above and ``1 - ((1 - ε) / s)^(1/d)`` below its targets
(d = levels still to come, s = how far the group already is above its target), the
backend's split is repaired to them (:mod:`mapper.mesh.balance`), so every PE's block
ends within ε of its speed-proportional target, above and below, when vertices are
light compared with a block's slack.  METIS multisects a group into its children
by its recursive bisection with target weights (``tpwgts``): on the bench meshes this
cut 7 % less than METIS k-way at S = 4:16:k' (up to 27 % less on 3elt, whose blocks are
small) and took less time (bench/mesh/bench_backends.py era, measured while choosing).
With large children it is the other way round: multisecting a 100^3 grid into 4 or 16,
a 2^17-vertex rgg or Delaunay mesh into 4, or a 62 500-vertex grid block into 4
(children of 15 625 to 250 000 vertices), k-way cut 1-18 % less than recursive
bisection in 35-70 % of its time (the 10^6-vertex grid into 16: 0.79 s against 1.86 s);
from about 8000 vertices per child down the two are within a few per cent either way,
and below 2000 recursive bisection wins by up to 2.4x.  So a group whose smallest
child targets at least ``KWAY_MIN_CHILD`` vertices is multisected by k-way.
KaHIP uses kaffpa's k-way when a group's children have equal targets, else bisection
(see :func:`mapper.partitioners.kahip.kahip_split`).

Complexity: one backend call per group with more than one child, on disjoint vertex
sets per level: O(m · levels) in practice plus the repairs; memory O(n + m).

References
----------
* Schulz, Träff & von Kirchbach, Better Process Mapping and Sparse Quadratic
  Assignment, arXiv:1702.04164v2, §4 (RMS based model creation) and §5.2.
* Karypis & Kumar, Multilevel k-way Partitioning Scheme for Irregular Graphs,
  J. Parallel Distrib. Comput. 48(1):96-129 (1998), doi:10.1006/jpdc.1997.1404.
"""

from __future__ import annotations

import time

import numpy as np

from ..construction.topdown import induced_subgraph as induced
from ..model.machine import Hierarchy
from ..partitioners.errors import PartitionError
from ..partitioners.metis import KWAY_MIN_BLOCK
from ..partitioners.weights import integer_vertex_weights
from .balance import check_common, mesh_arrays, split_step, step_delta, step_floor
from .method_names import DEFAULT_BACKEND, RMS
from .result import Partition

#: Vertices per child from which a multisection uses METIS's k-way instead of its
#: recursive bisection (measured: module docstring); the same rule as Top-Down's splits.
KWAY_MIN_CHILD = KWAY_MIN_BLOCK


def pe_targets(hierarchy: Hierarchy, speeds: np.ndarray | None, total: float) -> np.ndarray:
    """Wanted weight of every PE's block: ``total`` shared in proportion to speed."""
    if speeds is None:
        return np.full(hierarchy.n, total / hierarchy.n)
    s = np.asarray(speeds, dtype=np.float64)
    if s.shape != (hierarchy.n,):
        raise PartitionError(f"speeds has {s.size} entries but the machine has "
                             f"{hierarchy.n} PEs")
    if not np.all(np.isfinite(s)) or s.min() <= 0:
        raise PartitionError(f"every PE speed must be a positive finite number, got min "
                             f"{s.min():g}")
    return s * (total / s.sum())


def _child_bounds(hierarchy: Hierarchy, level: int, lo: int, hi: int) -> np.ndarray:
    """PE offsets of the children of the level-``level`` group [lo, hi), with both ends."""
    if level == 0:
        return np.arange(lo, hi + 1)
    inner = hierarchy.bounds[level - 1]
    return inner[(inner >= lo) & (inner <= hi)]


def rms_partition(mesh, hierarchy: Hierarchy, *, speeds: np.ndarray | None = None,
                  epsilon: float = 0.03, seed: int = 0, backend: str = DEFAULT_BACKEND,
                  kahip_mode: str = "fast") -> Partition:
    """Partition ``mesh`` into one block per PE of ``hierarchy``; block id = PE id.

    ``speeds`` (one per PE, > 0; default equal) make the targets speed-proportional.
    """
    t_start = time.perf_counter()
    adj, w = mesh_arrays(mesh)
    k = hierarchy.n
    check_common(len(w), k, epsilon, backend)
    t = pe_targets(hierarchy, speeds, float(w.sum()))
    wi = integer_vertex_weights(w)
    part = np.zeros(len(w), dtype=np.int64)
    local = np.full(len(w), -1, dtype=np.int64)
    seconds = {"setup": time.perf_counter() - t_start}
    # (vertices, level of the group, first PE, end PE, induced subgraph)
    stack = [(np.arange(len(w)), hierarchy.levels - 1, 0, k, adj)]
    while stack:
        idx, level, lo, hi, sub = stack.pop()
        if hi - lo == 1:
            part[idx] = lo
            continue
        cb = _child_bounds(hierarchy, level, lo, hi)
        if len(cb) == 2:               # one child: the same PEs one level down
            stack.append((idx, level - 1, lo, hi, sub))
            continue
        cum_t = np.concatenate([[0.0], np.cumsum(t[lo:hi])])
        child_t = np.diff(cum_t[cb - lo])
        scale = float(w[idx].sum()) / float(child_t.sum())
        delta = step_delta(epsilon, scale, level + 1)
        side_t = scale * child_t
        # large children: METIS's k-way cuts less than its recursive bisection there
        # and takes half the time (module docstring); small ones: recursive
        kway = len(idx) * float(child_t.min() / child_t.sum()) >= KWAY_MIN_CHILD
        side = split_step(sub, w[idx], wi[idx], side_t, (1.0 + delta) * side_t,
                          np.diff(cb), delta, backend=backend, seed=seed,
                          recursive=not kway, kahip_mode=kahip_mode, seconds=seconds,
                          lower=(1.0 - step_floor(epsilon, scale, level + 1)) * side_t)
        t0 = time.perf_counter()
        for c in range(len(cb) - 1):
            sel = np.flatnonzero(side == c)
            a, b = int(cb[c]), int(cb[c + 1])
            stack.append((idx[sel], level - 1, a, b,
                          induced(sub, sel, local[:len(idx)]) if b - a > 1 else None))
        seconds["subgraph"] = seconds.get("subgraph", 0.0) + time.perf_counter() - t0
    seconds["total"] = time.perf_counter() - t_start
    return Partition(part=part, k=k, method=RMS, seconds=seconds)
