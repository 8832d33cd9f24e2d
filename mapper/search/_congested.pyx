# cython: language_level=3
"""Compiled loops of :mod:`mapper.search.congested` (J under per-group link caps).

The documentation, complexity and references are in :mod:`mapper.search.congested`;
this file only makes its inner loops fast.  The distance oracle is a hierarchy's
``(gid, dist)`` (see ``mapper/_oracle.pxd``); group ids are global per level, so
``gid[p * k + l]`` indexes the cut array of level l directly.
"""

import numpy as np

cimport numpy as cnp
from libc.stdint cimport int32_t, int64_t, uint64_t
from libc.stdlib cimport free, malloc

from mapper._oracle cimport Graph, Oracle, _make_oracle, _now, _rng_next, _shuffle, _swap_delta

cnp.import_array()


cdef inline double _excess(double c, double cap) noexcept nogil:
    """The violation one group contributes: its cut above its cap, relative to the cap
    (cap 0 counts as 1; an infinite cap, a group without a link, never contributes)."""
    return (c - cap) / (cap if cap > 0 else 1.0) if c > cap else 0.0


cdef inline void _cut_deltas(const Graph* g, const int32_t* gid, int k, const int64_t* lv,
                             int nl, const int64_t* pe, int64_t u, int64_t v,
                             double* du, double* dv) noexcept nogil:
    """Change of the cuts of u's and v's groups at each of the ``nl`` levels ``lv`` when
    u and v exchange PEs: du[i] for u's group, dv[i] for v's (0 where they share it).
    Only those two groups change at a level: an edge {u, y} whose y is in a third
    group is cut before and after, and counts for y's group both times.
    O((deg u + deg v) · nl)."""
    cdef int i
    for i in range(nl):
        du[i] = 0.0
        dv[i] = 0.0
    _mover_deltas(g, gid, k, lv, nl, pe, u, v, du, dv)
    _mover_deltas(g, gid, k, lv, nl, pe, v, u, dv, du)


cdef inline void _mover_deltas(const Graph* g, const int32_t* gid, int k, const int64_t* lv,
                               int nl, const int64_t* pe, int64_t mover, int64_t other,
                               double* dmine, double* dother) noexcept nogil:
    """What ``mover``'s edges add to :func:`_cut_deltas` when it takes ``other``'s PE:
    ``dmine`` for the group it leaves, ``dother`` for the group it joins (the edge to
    ``other`` stays cut: both move).  O(deg(mover) · nl)."""
    cdef int64_t pm = pe[mover], po = pe[other], e, y
    cdef int i
    cdef int32_t gm, go, gy
    cdef double w
    for e in range(g.indptr[mover], g.indptr[mover + 1]):
        y = g.indices[e]
        if y == other:
            continue
        w = g.weights[e]
        for i in range(nl):
            gm = gid[pm * k + lv[i]]
            go = gid[po * k + lv[i]]
            if gm == go:
                continue
            gy = gid[pe[y] * k + lv[i]]
            if gy == gm:      # was inside mover's group, now cut on both sides
                dmine[i] += w
                dother[i] += w
            elif gy == go:    # was cut on both sides, now inside the group it joins
                dmine[i] -= w
                dother[i] -= w
            else:             # cut before and after; moves from one group to the other
                dmine[i] -= w
                dother[i] += w


def cut_deltas(cnp.ndarray[int64_t, ndim=1, mode="c"] indptr,
               cnp.ndarray[int32_t, ndim=1, mode="c"] indices,
               cnp.ndarray[double, ndim=1, mode="c"] weights,
               cnp.ndarray[int64_t, ndim=1, mode="c"] pe,
               cnp.ndarray[int32_t, ndim=2, mode="c"] gid,
               cnp.ndarray[int64_t, ndim=1, mode="c"] levels, int64_t u, int64_t v):
    """(du, dv): per level of ``levels``, the change of the cut of u's group and of v's
    group if u and v exchange PEs (0 where they share the group; for tests)."""
    cdef Graph g
    cdef int nl = levels.shape[0]
    du = np.zeros(nl, dtype=np.float64)
    dv = np.zeros(nl, dtype=np.float64)
    cdef double[::1] a = du
    cdef double[::1] b = dv
    g.indptr = &indptr[0]
    g.indices = &indices[0] if len(indices) else NULL
    g.weights = &weights[0] if len(weights) else NULL
    if nl:
        _cut_deltas(&g, &gid[0, 0], gid.shape[1], &levels[0], nl, &pe[0], u, v, &a[0], &b[0])
    return du, dv


def constrained_search(cnp.ndarray[int64_t, ndim=1, mode="c"] indptr,
                       cnp.ndarray[int32_t, ndim=1, mode="c"] indices,
                       cnp.ndarray[double, ndim=1, mode="c"] weights,
                       cnp.ndarray[int64_t, ndim=1, mode="c"] pe,
                       cnp.ndarray[int32_t, ndim=2, mode="c"] gid,
                       cnp.ndarray[double, ndim=1, mode="c"] dist,
                       cnp.ndarray[int64_t, ndim=1, mode="c"] levels,
                       cnp.ndarray[double, ndim=2, mode="c"] cut,
                       cnp.ndarray[double, ndim=2, mode="c"] caps,
                       cnp.ndarray[int64_t, ndim=1, mode="c"] part_bounds,
                       int part_level, int64_t max_sweeps, uint64_t seed,
                       double time_limit, double eps_j):
    """Lexicographic first-improvement swap search on (violation, J); ``pe`` and ``cut``
    (levels x groups, the current cuts) are updated in place; ``caps`` (levels x groups)
    holds each group's cap on its cut (the level's cap over the group's link weight;
    inf for a group without a link).

    A swap of ranks u, v is taken when it lowers the violation V = Σ over levels and
    groups of (cut − cap)⁺ / cap, or when it lowers J by more than ``eps_j`` and raises
    no group above max(its cut, its cap).  u's partners: the ranks on
    the ``part_level`` groups (PE ranges ``part_bounds``) of u's communication partners,
    outside u's own group.  Returns (violation, J change, moves, sweeps, hit the time
    limit, evaluations)."""
    cdef Graph g
    cdef Oracle o = _make_oracle(gid, dist, None, pe.shape[0])
    cdef int64_t n = pe.shape[0], nparts = part_bounds.shape[0] - 1
    cdef int nl = levels.shape[0], k = gid.shape[1], i
    cdef int64_t G = cut.shape[1]
    cdef const int32_t* gidp = &gid[0, 0]
    cdef const int64_t* lv = &levels[0]
    cdef int64_t* pep = &pe[0]
    cdef double* cutp = &cut[0, 0]
    cdef const double* capp = &caps[0, 0]
    cdef const int64_t* pb = &part_bounds[0]
    cdef int64_t sweep = 0, moves = 0, evals = 0, idx, u, v, e, y, part, p, pu, pv, pu_part
    cdef int64_t moved_in_sweep
    cdef double viol = 0.0, dviol, dj, total_dj = 0.0, cu, cv, nu, nv, kapu, kapv
    cdef double start = _now()
    cdef bint timed_out = False, ok, taken
    cdef uint64_t rng = seed
    cdef int32_t gu, gv
    if nl == 0 or n < 2:
        return 0.0, 0.0, 0, 0, False, 0
    g.indptr = &indptr[0]
    g.indices = &indices[0] if len(indices) else NULL
    g.weights = &weights[0] if len(weights) else NULL
    cdef int64_t* rank_at = <int64_t*>malloc(n * sizeof(int64_t))
    cdef int64_t* order = <int64_t*>malloc(n * sizeof(int64_t))
    cdef int64_t* stamp = <int64_t*>malloc((nparts + 1) * sizeof(int64_t))
    cdef double* du = <double*>malloc(nl * sizeof(double))
    cdef double* dv = <double*>malloc(nl * sizeof(double))
    if not (rank_at and order and stamp and du and dv):
        free(rank_at); free(order); free(stamp); free(du); free(dv)
        raise MemoryError()
    cdef int64_t tick = 0
    try:
        with nogil:
            for u in range(n):
                rank_at[pep[u]] = u
                order[u] = u
            for part in range(nparts + 1):
                stamp[part] = -1
            for i in range(nl):
                for part in range(G):
                    viol += _excess(cutp[i * G + part], capp[i * G + part])
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
                    pu_part = gidp[pep[u] * k + part_level]
                    stamp[pu_part] = tick
                    taken = False
                    for e in range(g.indptr[u], g.indptr[u + 1]):
                        y = g.indices[e]
                        part = gidp[pep[y] * k + part_level]
                        if stamp[part] == tick:
                            continue
                        stamp[part] = tick
                        for p in range(pb[part], pb[part + 1]):
                            v = rank_at[p]
                            evals += 1
                            _cut_deltas(&g, gidp, k, lv, nl, pep, u, v, du, dv)
                            pu = pep[u]
                            pv = pep[v]
                            dviol = 0.0
                            ok = True
                            for i in range(nl):
                                gu = gidp[pu * k + lv[i]]
                                gv = gidp[pv * k + lv[i]]
                                if gu == gv:
                                    continue
                                cu = cutp[i * G + gu]
                                cv = cutp[i * G + gv]
                                kapu = capp[i * G + gu]
                                kapv = capp[i * G + gv]
                                nu = cu + du[i]
                                nv = cv + dv[i]
                                dviol += (_excess(nu, kapu) - _excess(cu, kapu)
                                          + _excess(nv, kapv) - _excess(cv, kapv))
                                # rounding of the sums: a relative 1e-12 of the cap
                                if (du[i] > 1e-12 * (kapu if kapu > 0 else 1.0)
                                        and nu > kapu * (1 + 1e-12)) or \
                                        (dv[i] > 1e-12 * (kapv if kapv > 0 else 1.0)
                                         and nv > kapv * (1 + 1e-12)):
                                    ok = False
                            if dviol < -1e-12:
                                dj = _swap_delta(&g, &o, pep, u, v)
                                taken = True
                            elif ok:
                                dj = _swap_delta(&g, &o, pep, u, v)
                                taken = dj < -eps_j
                            if taken:
                                for i in range(nl):
                                    gu = gidp[pu * k + lv[i]]
                                    gv = gidp[pv * k + lv[i]]
                                    if gu != gv:
                                        cutp[i * G + gu] += du[i]
                                        cutp[i * G + gv] += dv[i]
                                viol += dviol
                                if viol < 0:
                                    viol = 0.0
                                total_dj += dj
                                pep[u] = pv
                                pep[v] = pu
                                rank_at[pv] = u
                                rank_at[pu] = v
                                moves += 1
                                moved_in_sweep += 1
                                break
                        if taken:
                            break
                if moved_in_sweep == 0:
                    break
            # the violation from the cuts themselves, not the running sum of deltas
            viol = 0.0
            for i in range(nl):
                for part in range(G):
                    viol += _excess(cutp[i * G + part], capp[i * G + part])
    finally:
        free(rank_at); free(order); free(stamp); free(du); free(dv)
    return viol, total_dj, moves, sweep, timed_out, evals
