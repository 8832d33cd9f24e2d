# cython: language_level=3
"""Compiled loops of :mod:`mapper.link_load`: per-link loads of a mapping under a routed
network, their update for a swap of two ranks, and a max-tree over the loads.

The network is given as its route CSR: the links crossed from job node a to job node b
are ``route_links[route_ptr[a * nodes + b]:route_ptr[a * nodes + b + 1]]``.  With
``symmetric`` the route from b to a crosses the same links and an edge's whole volume
goes on the route a -> b; without, half of it goes each way (the graph holds only the
total of both directions).  :mod:`mapper.link_load` holds the documentation, the
complexities and the references; :func:`constrained_search` is the inner loop of
:mod:`mapper.search.routed` (J under the baseline's busiest routed links), documented
there.
"""

import numpy as np

cimport numpy as cnp
from libc.stdint cimport int32_t, int64_t, uint8_t, uint64_t
from libc.stdlib cimport free, malloc
from libc.string cimport memset

from mapper._oracle cimport Graph, Oracle, _make_oracle, _now, _shuffle, _swap_delta

cnp.import_array()


cdef inline void _route_add(const int64_t* rptr, const int32_t* rlinks, int64_t pair,
                            double w, double* loads, uint8_t* mark, int32_t* touched,
                            Py_ssize_t* ntouched) noexcept nogil:
    """loads[l] += w on every link l of route ``pair``; with ``mark`` the links are
    recorded once each in ``touched``."""
    cdef int64_t k
    cdef int32_t l
    for k in range(rptr[pair], rptr[pair + 1]):
        l = rlinks[k]
        loads[l] += w
        if mark != NULL and not mark[l]:
            mark[l] = 1
            touched[ntouched[0]] = l
            ntouched[0] += 1


cdef inline void _pair_add(const int64_t* rptr, const int32_t* rlinks, int64_t nodes,
                           bint symmetric, int64_t a, int64_t b, double w, double* loads,
                           uint8_t* mark, int32_t* touched,
                           Py_ssize_t* ntouched) noexcept nogil:
    """The volume ``w`` of one undirected edge between job nodes a and b on its routes."""
    if a == b:
        return
    if symmetric:
        _route_add(rptr, rlinks, a * nodes + b, w, loads, mark, touched, ntouched)
    else:
        _route_add(rptr, rlinks, a * nodes + b, 0.5 * w, loads, mark, touched, ntouched)
        _route_add(rptr, rlinks, b * nodes + a, 0.5 * w, loads, mark, touched, ntouched)


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


cdef void _swap_loads(const int64_t* indptr, const int32_t* indices, const double* weights,
                      const int64_t* pi, const int64_t* pe_node, const int64_t* rptr,
                      const int32_t* rlinks, int64_t nodes, bint symmetric,
                      int64_t u, int64_t v, double* loads, uint8_t* mark,
                      int32_t* touched, Py_ssize_t* ntouched) noexcept nogil:
    """Move the edges of ranks u and v from their nodes under ``pi`` to the swapped
    nodes.  The edge u-v itself keeps its links (its two routes trade places)."""
    cdef int64_t a = pe_node[pi[u]], b = pe_node[pi[v]]
    if a == b or u == v:
        return
    _move_edges(indptr, indices, weights, pi, pe_node, rptr, rlinks, nodes, symmetric,
                u, v, a, b, loads, mark, touched, ntouched)
    _move_edges(indptr, indices, weights, pi, pe_node, rptr, rlinks, nodes, symmetric,
                v, u, b, a, loads, mark, touched, ntouched)


cdef inline void _move_edges(const int64_t* indptr, const int32_t* indices,
                             const double* weights, const int64_t* pi,
                             const int64_t* pe_node, const int64_t* rptr,
                             const int32_t* rlinks, int64_t nodes, bint symmetric,
                             int64_t mover, int64_t other, int64_t src, int64_t dst,
                             double* loads, uint8_t* mark, int32_t* touched,
                             Py_ssize_t* ntouched) noexcept nogil:
    """Move the edges of rank ``mover`` (but the one to ``other``, which trades routes
    with it) from node ``src`` to node ``dst``.  O(deg(mover) · h)."""
    cdef int64_t x, c, e
    for e in range(indptr[mover], indptr[mover + 1]):
        x = indices[e]
        if x == other:
            continue
        c = pe_node[pi[x]]
        _pair_add(rptr, rlinks, nodes, symmetric, src, c, -weights[e], loads, mark,
                  touched, ntouched)
        _pair_add(rptr, rlinks, nodes, symmetric, dst, c, weights[e], loads, mark,
                  touched, ntouched)


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


cdef inline bint _crosses_over(const int64_t* indptr, const int32_t* indices,
                               const int64_t* pi, const int64_t* pe_node,
                               const int64_t* rptr, const int32_t* rlinks, int64_t nodes,
                               bint symmetric, int64_t r, const double* loads,
                               const double* inv_cap, const double* kap) noexcept nogil:
    """Whether a route of some edge of rank r crosses a link above its cap.  A swap
    lowers the violation only by taking load off such a link, and it takes load only
    off the routes of the two ranks' edges: when neither rank's routes cross one, the
    swap cannot lower V.  O(deg r · h), stops at the first such link."""
    cdef int64_t a = pe_node[pi[r]], c, e, k, pair
    cdef int32_t l
    cdef int side
    for e in range(indptr[r], indptr[r + 1]):
        c = pe_node[pi[indices[e]]]
        if c == a:
            continue
        for side in range(1 if symmetric else 2):
            pair = a * nodes + c if side == 0 else c * nodes + a
            for k in range(rptr[pair], rptr[pair + 1]):
                l = rlinks[k]
                if loads[l] * inv_cap[l] > kap[l]:
                    return True
    return False


cdef inline double _excess(double c, double cap) noexcept nogil:
    """The violation one link contributes: its congestion above its level's cap,
    relative to the cap (a cap of 0 counts as 1)."""
    return (c - cap) / (cap if cap > 0 else 1.0) if c > cap else 0.0


def constrained_search(cnp.ndarray[int64_t, ndim=1, mode="c"] indptr,
                       cnp.ndarray[int32_t, ndim=1, mode="c"] indices,
                       cnp.ndarray[double, ndim=1, mode="c"] weights,
                       cnp.ndarray[int64_t, ndim=1, mode="c"] pe,
                       object gid, object dist, object mat,
                       const int64_t[::1] pe_node, const int64_t[::1] node_bounds,
                       const int64_t[::1] route_ptr, const int32_t[::1] route_links,
                       int64_t nodes, bint symmetric, double[::1] loads,
                       const double[::1] inv_cap, const double[::1] kap,
                       int64_t max_sweeps, uint64_t seed, double time_limit, double eps_j):
    """Lexicographic first-improvement swap search on (violation, J) over routed links
    (:mod:`mapper.search.routed`).  ``pe`` and ``loads`` (the loads of ``pe``) are
    updated in place; ``kap`` is each link's cap on its congestion load × ``inv_cap``
    (its level's cap).  J's change comes from the oracle ``(gid, dist, mat)`` of
    :class:`mapper.oracle.KernelOracle`, the loads' from :func:`_swap_loads` into a
    scratch array that is zero outside the links a swap touches.

    A swap of u and v is taken when it lowers V = Σ_links (c − kap)⁺ / kap, or lowers
    J by more than ``eps_j`` and raises no link above max(its congestion, its cap);
    while V is 0, or when neither rank's routes cross a link above its cap (then the
    swap cannot lower V), the cheaper J test runs first.  u's partners: the PEs ``node_bounds[x]:node_bounds[x + 1]`` of the job nodes x of
    u's communication partners, but u's own node.  Returns (violation, J change,
    moves, sweeps, hit the time limit, evaluations)."""
    cdef Graph g
    cdef Oracle o = _make_oracle(gid, dist, mat, pe.shape[0])
    cdef int64_t n = pe.shape[0], links = loads.shape[0]
    cdef int64_t sweep = 0, moves = 0, evals = 0, idx, u, v, e, y, part, p, pu, pv, t
    cdef int64_t moved_in_sweep, tick = 0
    cdef Py_ssize_t count
    cdef int32_t l
    cdef double viol = 0.0, dviol, dj, total_dj = 0.0, old, new, k
    cdef double start = _now()
    cdef bint timed_out = False, ok, taken, u_crosses, j_only
    cdef uint64_t rng = seed
    if n < 2 or links == 0 or route_links.shape[0] == 0:
        return 0.0, 0.0, 0, 0, False, 0
    g.indptr = &indptr[0]
    g.indices = &indices[0] if len(indices) else NULL
    g.weights = &weights[0] if len(weights) else NULL
    cdef int64_t* pep = &pe[0]
    cdef double* L = &loads[0]
    cdef const double* ic = &inv_cap[0]
    cdef const double* kp = &kap[0]
    cdef const int64_t* pn = &pe_node[0]
    cdef const int64_t* nb = &node_bounds[0]
    cdef int64_t* rank_at = <int64_t*>malloc(n * sizeof(int64_t))
    cdef int64_t* order = <int64_t*>malloc(n * sizeof(int64_t))
    cdef int64_t* stamp = <int64_t*>malloc((nodes + 1) * sizeof(int64_t))
    cdef double* dl = <double*>malloc(links * sizeof(double))
    cdef uint8_t* mark = <uint8_t*>malloc(links)
    cdef int32_t* touched = <int32_t*>malloc(links * sizeof(int32_t))
    if not (rank_at and order and stamp and dl and mark and touched):
        free(rank_at); free(order); free(stamp); free(dl); free(mark); free(touched)
        raise MemoryError()
    try:
        with nogil:
            memset(mark, 0, links)
            for l in range(links):
                dl[l] = 0.0
                viol += _excess(L[l] * ic[l], kp[l])
            for u in range(n):
                rank_at[pep[u]] = u
                order[u] = u
            for part in range(nodes + 1):
                stamp[part] = -1
            while sweep < max_sweeps and not timed_out:
                sweep += 1
                moved_in_sweep = 0
                _shuffle(order, n, &rng)
                for idx in range(n):
                    u = order[idx]
                    if (idx & 63) == 0 and time_limit > 0 and _now() - start > time_limit:
                        timed_out = True
                        break
                    tick += 1
                    stamp[pn[pep[u]]] = tick
                    taken = False
                    # the loads change only when u's swap is taken, and u's turn then ends
                    u_crosses = viol > 1e-12 and _crosses_over(
                        g.indptr, g.indices, pep, pn, &route_ptr[0], &route_links[0],
                        nodes, symmetric, u, L, ic, kp)
                    for e in range(g.indptr[u], g.indptr[u + 1]):
                        y = g.indices[e]
                        part = pn[pep[y]]
                        if stamp[part] == tick:
                            continue
                        stamp[part] = tick
                        for p in range(nb[part], nb[part + 1]):
                            v = rank_at[p]
                            evals += 1
                            # the clock every 16 evaluations, not every 64 ranks: a rank
                            # of a dense profile has O(n) candidates of O(n·h) each
                            if ((evals & 15) == 0 and time_limit > 0
                                    and _now() - start > time_limit):
                                timed_out = True
                                break
                            # no swap can lower V (≥ 0) by more than 1e-12 when V is
                            # 0, nor one whose ranks' routes cross no link above its
                            # cap: only a lower J can then be taken, the cheaper test
                            j_only = viol <= 1e-12 or not (u_crosses or _crosses_over(
                                g.indptr, g.indices, pep, pn, &route_ptr[0],
                                &route_links[0], nodes, symmetric, v, L, ic, kp))
                            if j_only:
                                dj = _swap_delta(&g, &o, pep, u, v)
                                if dj >= -eps_j:
                                    continue
                            count = 0
                            _swap_loads(g.indptr, g.indices, g.weights, pep, pn,
                                        &route_ptr[0], &route_links[0], nodes, symmetric,
                                        u, v, dl, mark, touched, &count)
                            dviol = 0.0
                            ok = True
                            for t in range(count):
                                l = touched[t]
                                k = kp[l]
                                old = L[l] * ic[l]
                                new = (L[l] + dl[l]) * ic[l]
                                dviol += _excess(new, k) - _excess(old, k)
                                # rounding of the sums: a relative 1e-12 of the cap
                                if (new - old > 1e-12 * (k if k > 0 else 1.0)
                                        and new > k * (1 + 1e-12)):
                                    ok = False
                            if j_only:
                                taken = ok  # dj < -eps_j already
                            elif dviol < -1e-12:
                                dj = _swap_delta(&g, &o, pep, u, v)
                                taken = True
                            elif ok:
                                dj = _swap_delta(&g, &o, pep, u, v)
                                taken = dj < -eps_j
                            for t in range(count):
                                l = touched[t]
                                if taken:
                                    L[l] += dl[l]
                                dl[l] = 0.0
                                mark[l] = 0
                            if taken:
                                viol += dviol
                                if viol < 0:
                                    viol = 0.0
                                total_dj += dj
                                pu = pep[u]
                                pv = pep[v]
                                pep[u] = pv
                                pep[v] = pu
                                rank_at[pv] = u
                                rank_at[pu] = v
                                moves += 1
                                moved_in_sweep += 1
                                break
                        if taken or timed_out:
                            break
                    if timed_out:
                        break
                if moved_in_sweep == 0:
                    break
            # the violation from the loads themselves, not the running sum of deltas
            viol = 0.0
            for l in range(links):
                viol += _excess(L[l] * ic[l], kp[l])
    finally:
        free(rank_at); free(order); free(stamp); free(dl); free(mark); free(touched)
    return viol, total_dj, moves, sweep, timed_out, evals
