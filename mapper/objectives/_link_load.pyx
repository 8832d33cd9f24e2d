# cython: language_level=3
"""Compiled loops of :mod:`mapper.objectives.link_load`: per-link loads of a mapping under a routed
network, their update for a swap of two ranks, and a max-tree over the loads.

The network is given as its route CSR: the links crossed from job node a to job node b
are ``route_links[route_ptr[a * nodes + b]:route_ptr[a * nodes + b + 1]]``.  With
``symmetric`` the route from b to a crosses the same links and an edge's whole volume
goes on the route a -> b; without, half of it goes each way (the graph holds only the
total of both directions).  :mod:`mapper.objectives.link_load` holds the documentation, the
complexities and the references.  The route helpers are inline functions in
``_route_loads.pxd``, shared with :mod:`mapper.search._routed`.
"""

import numpy as np

cimport numpy as cnp
from libc.stdint cimport int32_t, int64_t, uint8_t, uint64_t
from libc.stdlib cimport free, malloc
from libc.string cimport memset

from mapper.objectives._route_loads cimport _pair_add, _route_add, _swap_loads

cnp.import_array()


def link_loads(const int64_t[::1] indptr, const int32_t[::1] indices,
               const double[::1] weights, const int64_t[::1] pi,
               const int64_t[::1] pe_node, const int64_t[::1] route_ptr,
               const int32_t[::1] route_links, int64_t nodes, Py_ssize_t links,
               bint symmetric):
    """Load per link of mapping ``pi``: every edge u < v once, on its route(s)."""
    cdef Py_ssize_t n = pi.shape[0], u, e
    cdef int64_t v, a
    cdef cnp.ndarray[double, ndim=1, mode="c"] out = np.zeros(links, dtype=np.float64)
    cdef double* L = &out[0] if links else NULL
    cdef Py_ssize_t dummy = 0
    if not links or route_links.shape[0] == 0:
        return out
    with nogil:
        for u in range(n):
            a = pe_node[pi[u]]
            for e in range(indptr[u], indptr[u + 1]):
                v = indices[e]
                if v > u:
                    _pair_add(&route_ptr[0], &route_links[0], nodes, symmetric, a,
                              pe_node[pi[v]], weights[e], L, NULL, NULL, &dummy)
    return out


def swap_delta(const int64_t[::1] indptr, const int32_t[::1] indices,
               const double[::1] weights, const int64_t[::1] pi,
               const int64_t[::1] pe_node, const int64_t[::1] route_ptr,
               const int32_t[::1] route_links, int64_t nodes, bint symmetric,
               double[::1] loads, int64_t u, int64_t v):
    """``loads`` (of mapping ``pi``) updated in place to those of ``pi`` with ranks u
    and v swapped; ``pi`` is not changed."""
    cdef Py_ssize_t dummy = 0
    if route_links.shape[0] == 0 or loads.shape[0] == 0:
        return
    with nogil:
        _swap_loads(&indptr[0], &indices[0], &weights[0], &pi[0], &pe_node[0],
                    &route_ptr[0], &route_links[0], nodes, symmetric, u, v, &loads[0],
                    NULL, NULL, &dummy)


cdef class LoadTracker:
    """Loads of a mapping, kept up to date under swaps, with a max-tree over the
    congestions ``load / capacity``: a swap costs O(t log L) for t distinct touched
    links, the global maximum O(1), a level's maximum O(log L)."""

    cdef const int64_t[::1] indptr
    cdef const int32_t[::1] indices
    cdef const double[::1] weights
    cdef int64_t[::1] pi
    cdef const int64_t[::1] pe_node
    cdef const int64_t[::1] route_ptr
    cdef const int32_t[::1] route_links
    cdef const double[::1] inv_cap
    cdef double[::1] _loads
    cdef double[::1] tree
    cdef int64_t nodes
    cdef Py_ssize_t links, size
    cdef bint symmetric
    cdef uint8_t* mark
    cdef int32_t* touched
    cdef object _pi_arr, _loads_arr

    def __cinit__(self):
        self.mark = NULL
        self.touched = NULL

    def __init__(self, const int64_t[::1] indptr, const int32_t[::1] indices,
                 const double[::1] weights, cnp.ndarray pi, const int64_t[::1] pe_node,
                 const int64_t[::1] route_ptr, const int32_t[::1] route_links,
                 int64_t nodes, const double[::1] capacity, bint symmetric):
        self.indptr, self.indices, self.weights = indptr, indices, weights
        self._pi_arr = np.array(pi, dtype=np.int64, copy=True)
        self.pi = self._pi_arr
        self.pe_node, self.route_ptr, self.route_links = pe_node, route_ptr, route_links
        self.nodes, self.symmetric = nodes, symmetric
        self.links = capacity.shape[0]
        self.inv_cap = 1.0 / np.asarray(capacity)
        self._loads_arr = link_loads(indptr, indices, weights, self.pi, pe_node, route_ptr,
                                     route_links, nodes, self.links, symmetric)
        self._loads = self._loads_arr
        self.size = 1
        while self.size < max(self.links, 1):
            self.size *= 2
        self.tree = np.zeros(2 * self.size, dtype=np.float64)
        self.mark = <uint8_t*>malloc(max(self.links, 1))
        self.touched = <int32_t*>malloc(max(self.links, 1) * sizeof(int32_t))
        if self.mark == NULL or self.touched == NULL:
            raise MemoryError()
        memset(self.mark, 0, max(self.links, 1))
        cdef Py_ssize_t i
        for i in range(self.links):
            self.tree[self.size + i] = self._loads[i] * self.inv_cap[i]
        for i in range(self.size - 1, 0, -1):
            self.tree[i] = max(self.tree[2 * i], self.tree[2 * i + 1])

    def __dealloc__(self):
        free(self.mark)
        free(self.touched)

    cdef void _refresh(self, Py_ssize_t count) noexcept nogil:
        """Leaves of the touched links from their loads, then their ancestors."""
        cdef Py_ssize_t k, i
        cdef int32_t l
        cdef double x
        for k in range(count):
            l = self.touched[k]
            self.mark[l] = 0
            i = self.size + l
            self.tree[i] = self._loads[l] * self.inv_cap[l]
            i >>= 1
            while i >= 1:
                x = max(self.tree[2 * i], self.tree[2 * i + 1])
                if self.tree[i] == x:
                    break  # this ancestor and those above are unchanged
                self.tree[i] = x
                i >>= 1

    def swap(self, int64_t u, int64_t v):
        """Swap ranks u and v: loads, max-tree and mapping; returns the new maximum
        congestion."""
        cdef Py_ssize_t count = 0
        cdef int64_t t
        if self.links == 0 or self.route_links.shape[0] == 0:
            t = self.pi[u]
            self.pi[u] = self.pi[v]
            self.pi[v] = t
            return self.max_congestion()
        with nogil:
            _swap_loads(&self.indptr[0], &self.indices[0], &self.weights[0], &self.pi[0],
                        &self.pe_node[0], &self.route_ptr[0], &self.route_links[0],
                        self.nodes, self.symmetric, u, v, &self._loads[0], self.mark,
                        self.touched, &count)
            self._refresh(count)
            t = self.pi[u]
            self.pi[u] = self.pi[v]
            self.pi[v] = t
        return self.tree[1]

    def max_congestion(self):
        """max over links of load / capacity: O(1)."""
        return self.tree[1] if self.links else 0.0

    def range_max(self, Py_ssize_t lo, Py_ssize_t hi):
        """max of load / capacity over links lo..hi-1 (0.0 when empty): O(log L)."""
        cdef double best = 0.0
        lo += self.size
        hi += self.size
        while lo < hi:
            if lo & 1:
                best = max(best, self.tree[lo])
                lo += 1
            if hi & 1:
                hi -= 1
                best = max(best, self.tree[hi])
            lo >>= 1
            hi >>= 1
        return best

    @property
    def loads(self):
        """The loads per link (a copy)."""
        return np.array(self._loads_arr, copy=True)

    @property
    def mapping(self):
        """The current mapping rank -> PE (a copy)."""
        return np.array(self._pi_arr, copy=True)
