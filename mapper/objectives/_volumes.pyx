# cython: language_level=3
"""Compiled volumes between groups of ranks, for the objectives and the regrouping.

* ``level_volumes``, ``group_cuts`` -- :func:`mapper.objectives.qap.evaluate` and
  :func:`mapper.objectives.congestion.uplink_loads` on a hierarchy;
* ``node_hop_bytes`` -- :func:`mapper.objectives.congestion.node_hop_bytes`;
* ``between_groups`` -- :func:`mapper.construction.regroup.quotient_graph`.

Each works on the graph's CSR arrays and the per-PE group ids of one level; the
callers hold the documentation and complexities.
"""

import numpy as np

cimport numpy as cnp
from libc.stdint cimport int32_t, int64_t

cnp.import_array()

def level_volumes(const int64_t[::1] indptr, const int32_t[::1] indices,
                  const double[::1] weights, const int64_t[::1] pi,
                  const int32_t[:, ::1] gid):
    """Volume per hierarchy level of the mapping ``pi`` (rank → PE), each undirected
    edge once at the innermost level whose group holds both ends -- the loop of
    :func:`mapper.objectives.qap.evaluate`.  Edges are summed in the order of
    ``CommGraph.edges`` (u < v, row by row), as ``np.bincount`` there did, so the
    volumes are the same to the last bit.  O(m · levels)."""
    cdef Py_ssize_t n = pi.shape[0], k = gid.shape[1], u, e, i, lev
    cdef int64_t v, pu, pv
    cdef cnp.ndarray[double, ndim=1, mode="c"] vol = np.zeros(k, dtype=np.float64)
    cdef double* V = &vol[0]
    with nogil:
        for u in range(n):
            pu = pi[u]
            for e in range(indptr[u], indptr[u + 1]):
                v = indices[e]
                if v <= u:
                    continue
                pv = pi[v]
                lev = k - 1
                for i in range(k - 1):
                    if gid[pu, i] == gid[pv, i]:
                        lev = i
                        break
                V[lev] += weights[e]
    return vol


def group_cuts(const int64_t[::1] indptr, const int32_t[::1] indices,
               const double[::1] weights, const int64_t[::1] pi,
               const int32_t[:, ::1] gid, Py_ssize_t level, Py_ssize_t groups):
    """Per level-``level`` group, the volume of the edges that leave it under ``pi`` --
    the loop of :func:`mapper.objectives.congestion.uplink_loads`, summed in its order (the
    u-side and v-side sums apart, then added, as its two ``np.bincount``)."""
    cdef Py_ssize_t n = pi.shape[0], u, e
    cdef int64_t v
    cdef int32_t gu, gv
    cdef cnp.ndarray[double, ndim=1, mode="c"] a = np.zeros(groups, dtype=np.float64)
    cdef cnp.ndarray[double, ndim=1, mode="c"] b = np.zeros(groups, dtype=np.float64)
    cdef double* A = &a[0]
    cdef double* B = &b[0]
    with nogil:
        for u in range(n):
            gu = gid[pi[u], level]
            for e in range(indptr[u], indptr[u + 1]):
                v = indices[e]
                if v <= u:
                    continue
                gv = gid[pi[v], level]
                if gu != gv:
                    A[gu] += weights[e]
                    B[gv] += weights[e]
    return a + b


def node_hop_bytes(const int64_t[::1] indptr, const int32_t[::1] indices,
                   const double[::1] weights, const int64_t[::1] pi,
                   const int32_t[:, ::1] gid, const int64_t[::1] levels, Py_ssize_t groups):
    """Per group of ``levels[0]``, Σ weight × 2 per level of ``levels`` at which the
    ends' groups differ, over the edges with an end in it -- the loop of
    :func:`mapper.objectives.congestion.node_hop_bytes`; O(m·L)."""
    cdef Py_ssize_t n = pi.shape[0], u, e, k, nl = levels.shape[0]
    cdef int64_t v
    cdef double hops
    cdef cnp.ndarray[double, ndim=1, mode="c"] out = np.zeros(groups, dtype=np.float64)
    cdef double* O = &out[0]
    if nl == 0:
        return out
    with nogil:
        for u in range(n):
            for e in range(indptr[u], indptr[u + 1]):
                v = indices[e]
                if v <= u:
                    continue
                hops = 0.0
                for k in range(nl):
                    if gid[pi[u], levels[k]] != gid[pi[v], levels[k]]:
                        hops += 2.0
                if hops > 0.0:
                    O[gid[pi[u], levels[0]]] += weights[e] * hops
                    O[gid[pi[v], levels[0]]] += weights[e] * hops
    return out


def between_groups(const int64_t[::1] indptr, const int32_t[::1] indices,
                   const double[::1] weights, const int64_t[::1] group):
    """The edges u < v whose ranks are in different groups, as arrays (group of u,
    group of v, weight) in CSR order -- the loop of
    :func:`mapper.construction.regroup.quotient_graph`."""
    cdef Py_ssize_t n = group.shape[0], u, e, k = 0
    cdef int64_t v
    with nogil:
        for u in range(n):
            for e in range(indptr[u], indptr[u + 1]):
                v = indices[e]
                if v > u and group[u] != group[v]:
                    k += 1
    gu_a = np.empty(k, dtype=np.int64)
    gv_a = np.empty(k, dtype=np.int64)
    w_a = np.empty(k, dtype=np.float64)
    cdef int64_t[::1] gu = gu_a, gv = gv_a
    cdef double[::1] w = w_a
    k = 0
    with nogil:
        for u in range(n):
            for e in range(indptr[u], indptr[u + 1]):
                v = indices[e]
                if v > u and group[u] != group[v]:
                    gu[k] = group[u]
                    gv[k] = group[v]
                    w[k] = weights[e]
                    k += 1
    return gu_a, gv_a, w_a
