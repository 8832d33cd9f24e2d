# cython: language_level=3
"""Compiled constrained search on a routed network: the inner loop of
:mod:`mapper.search.routed` (J under the baseline's busiest routed links), documented
there.  The per-link load updates come from ``mapper/objectives/_route_loads.pxd``.
"""

import numpy as np

cimport numpy as cnp
from libc.stdint cimport int32_t, int64_t, uint8_t, uint64_t
from libc.stdlib cimport free, malloc
from libc.string cimport memset

from mapper.model._oracle cimport Graph, Oracle, _make_oracle, _now, _shuffle, _swap_delta
from mapper.objectives._route_loads cimport _swap_loads

cnp.import_array()


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
    :class:`mapper.model.oracle.KernelOracle`, the loads' from :func:`_swap_loads` into a
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
