"""Recursive bisection (RB) of a mesh into k blocks, block ids in bisection order.

Schulz, Träff & von Kirchbach, §4 "Hierarchy Aware Model Creation": a p-block part is
split into two sides V1, V2 that are then partitioned recursively into ⌊p/2⌋ and ⌈p/2⌉
blocks; "after the first bisection steps the first consecutive block IDs are assigned
to the left hand side block and the remaining IDs to the right hand side block".  Here
the blocks' wanted weights ``targets`` need not be equal (they are proportional to the
PEs' speeds): each side's target is the sum of its blocks' targets, which is what the
paper's ⌊p/2⌋·⌈c(V)/p⌉ bound becomes with unequal blocks.

Balance: every block ends between (1 - ε) and (1 + ε) of its target.  Each bisection
gets the slack ``((1 + ε) / s)^(1/d) - 1`` above and ``1 - ((1 - ε) / s)^(1/d)`` below
its sides' targets, where d is the number of bisection levels still to come and s how
far the current side already is above its target, so the slack left over by earlier
steps is passed down and the product over all levels stays within 1 ± ε.  The
backend's split is repaired to those bounds (:mod:`mapper.mesh.balance`; without the
lower one a 1 % block next to a 99 % one ended nearly empty, inside the large side's
tolerance).  The guarantee needs the vertices to be light compared with a block's
slack: a block whose ε·target is below its heaviest vertex can end up to one vertex
weight outside.

Complexity: O(log k) levels, each a backend call on disjoint vertex sets, so
O(m log k) in practice plus the repairs; memory O(n + m).

References
----------
* Schulz, Träff & von Kirchbach, Better Process Mapping and Sparse Quadratic
  Assignment, arXiv:1702.04164v2, §4 (RB based model creation).
* Karypis & Kumar, SIAM J. Sci. Comput. 20(1):359-392 (1998),
  doi:10.1137/S1064827595287997 (METIS, the default backend).
"""

from __future__ import annotations

import math
import time

import numpy as np

from ..construction.topdown import induced_subgraph as induced
from ..partitioners.errors import PartitionError
from ..partitioners.weights import integer_vertex_weights
from .balance import check_common, mesh_arrays, split_step, step_delta, step_floor
from .method_names import DEFAULT_BACKEND, RB
from .result import Partition


def rb_partition(mesh, targets: np.ndarray, *, epsilon: float = 0.03, seed: int = 0,
                 backend: str = DEFAULT_BACKEND, kahip_mode: str = "fast") -> Partition:
    """Partition ``mesh`` into ``len(targets)`` blocks by recursive bisection.

    ``targets`` are the wanted block weights (any positive scale: only their
    proportions matter; they are scaled to the mesh's total vertex weight).  Block ids
    follow the bisection order: the first ⌊k/2⌋ ids lie on the left of the first cut.
    """
    t_start = time.perf_counter()
    targets = np.asarray(targets, dtype=np.float64)
    if targets.ndim != 1 or len(targets) == 0:
        raise PartitionError("targets must be a non-empty 1-D array (one per block)")
    if not np.all(np.isfinite(targets)) or targets.min() <= 0:
        raise PartitionError("every block target must be a positive finite number, got "
                             f"min {targets.min():g}")
    k = len(targets)
    adj, w = mesh_arrays(mesh)
    check_common(len(w), k, epsilon, backend)
    wi = integer_vertex_weights(w)
    t = targets * (w.sum() / targets.sum())
    part = np.zeros(len(w), dtype=np.int64)
    local = np.full(len(w), -1, dtype=np.int64)
    seconds = {"setup": time.perf_counter() - t_start}
    stack = [(np.arange(len(w)), 0, k, adj)]
    while stack:
        idx, lo, hi, sub = stack.pop()
        p = hi - lo
        if p == 1:
            part[idx] = lo
            continue
        mid = lo + p // 2
        scale = float(w[idx].sum()) / float(t[lo:hi].sum())
        delta = step_delta(epsilon, scale, math.ceil(math.log2(p)))
        side_t = scale * np.array([t[lo:mid].sum(), t[mid:hi].sum()])
        side = split_step(sub, w[idx], wi[idx], side_t, (1.0 + delta) * side_t,
                          np.array([mid - lo, hi - mid]), delta, backend=backend,
                          seed=seed, recursive=True, kahip_mode=kahip_mode,
                          seconds=seconds,
                          lower=(1.0 - step_floor(epsilon, scale, math.ceil(math.log2(p))))
                          * side_t)
        t0 = time.perf_counter()
        for s, (a, b) in enumerate(((lo, mid), (mid, hi))):
            sel = np.flatnonzero(side == s)
            stack.append((idx[sel], a, b, induced(sub, sel, local[:len(idx)])
                          if b - a > 1 else None))
        seconds["subgraph"] = seconds.get("subgraph", 0.0) + time.perf_counter() - t0
    seconds["total"] = time.perf_counter() - t_start
    return Partition(part=part, k=k, method=RB, seconds=seconds)
