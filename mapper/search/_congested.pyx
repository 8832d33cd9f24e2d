# cython: language_level=3
"""Compiled loops of :mod:`mapper.search.congested` (J under per-group link caps).

The documentation, complexity and references are in :mod:`mapper.search.congested`;
this file only makes its inner loops fast.  The distance oracle is a hierarchy's
``(gid, dist)`` (see ``mapper/model/_oracle.pxd``); group ids are global per level, so
``gid[p * k + l]`` indexes the cut array of level l directly.
"""

import numpy as np

cimport numpy as cnp
from libc.stdint cimport int32_t, int64_t, uint64_t
from libc.stdlib cimport free, malloc

from mapper.model._oracle cimport Graph, Oracle, _make_oracle, _now, _rng_next, _shuffle, _swap_delta

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


cdef inline double _links(const int32_t* gid, int k, const int64_t* lv, int nl,
                          int64_t p, int64_t q) noexcept nogil:
    """Tree links a message from PE p to PE q crosses: two per level of ``lv`` at which
    their groups differ (:func:`mapper.objectives.phase_time.latency_pace`).  O(nl)."""
    cdef int i
    cdef double c = 0.0
    for i in range(nl):
        if gid[p * k + lv[i]] != gid[q * k + lv[i]]:
            c += 2.0
    return c


cdef inline void _touch(int64_t idx, double d, double* delta, char* mark, int64_t* touched,
                        int64_t* nt) noexcept nogil:
    if not mark[idx]:
        mark[idx] = 1
        delta[idx] = 0.0
        touched[nt[0]] = idx
        nt[0] += 1
    delta[idx] += d


cdef inline void _mover_pace(const int32_t* gid, int k, const int64_t* lv, int nl,
                             const int64_t* pe, int64_t n, int64_t c,
                             const int64_t* optr, const int32_t* oidx, const double* ow,
                             const int64_t* iptr, const int32_t* iidx, const double* iw,
                             int64_t mover, int64_t other, int64_t p_from, int64_t p_to,
                             double* delta, char* mark, int64_t* touched,
                             int64_t* nt) noexcept nogil:
    """What ``mover`` going from PE ``p_from`` to ``p_to`` adds to :func:`_pace_deltas`
    in channel c: its own row (its messages leave from ``p_to``) and the rows of the
    ranks whose messages go to it; its edge to ``other`` (which takes ``p_from``) keeps
    its links.  O(deg_c(mover) · nl)."""
    cdef int64_t row = c * n + mover, e, q, r
    cdef double d = 0.0
    for e in range(optr[row], optr[row + 1]):
        q = oidx[e]
        if q != other:
            d += ow[e] * (_links(gid, k, lv, nl, p_to, pe[q])
                          - _links(gid, k, lv, nl, p_from, pe[q]))
    _touch(row, d, delta, mark, touched, nt)
    for e in range(iptr[row], iptr[row + 1]):
        r = iidx[e]
        if r != other:
            _touch(c * n + r, iw[e] * (_links(gid, k, lv, nl, pe[r], p_to)
                                       - _links(gid, k, lv, nl, pe[r], p_from)),
                   delta, mark, touched, nt)


cdef inline int64_t _pace_deltas(const int32_t* gid, int k, const int64_t* lv, int nl,
                                 const int64_t* pe, int64_t n, int64_t nc,
                                 const int64_t* optr, const int32_t* oidx, const double* ow,
                                 const int64_t* iptr, const int32_t* iidx, const double* iw,
                                 int64_t u, int64_t v, double* delta, char* mark,
                                 int64_t* touched) noexcept nogil:
    """The change of every rank's load in each pace channel (row c·n + r) when u and v
    exchange PEs, into ``delta`` at the rows listed in ``touched`` (returns how many):
    u's and v's own rows (their messages now leave from the other PE), and the rows of
    the ranks whose messages go to u or v (``iptr``: the channel's owners of edges to
    a rank).  The u-v edge keeps its links.  O(Σ_c (deg_c u + deg_c v) · nl)."""
    cdef int64_t nt = 0, c
    cdef int64_t pu = pe[u], pv = pe[v]
    for c in range(nc):
        _mover_pace(gid, k, lv, nl, pe, n, c, optr, oidx, ow, iptr, iidx, iw, u, v, pu, pv,
                    delta, mark, touched, &nt)
        _mover_pace(gid, k, lv, nl, pe, n, c, optr, oidx, ow, iptr, iidx, iw, v, u, pv, pu,
                    delta, mark, touched, &nt)
    return nt


def pace_deltas(cnp.ndarray[int64_t, ndim=1, mode="c"] pe,
                cnp.ndarray[int32_t, ndim=2, mode="c"] gid,
                cnp.ndarray[int64_t, ndim=1, mode="c"] levels,
                cnp.ndarray[int64_t, ndim=1, mode="c"] optr,
                cnp.ndarray[int32_t, ndim=1, mode="c"] oidx,
                cnp.ndarray[double, ndim=1, mode="c"] ow,
                cnp.ndarray[int64_t, ndim=1, mode="c"] iptr,
                cnp.ndarray[int32_t, ndim=1, mode="c"] iidx,
                cnp.ndarray[double, ndim=1, mode="c"] iw, int64_t u, int64_t v):
    """Per pace channel row (c·n + r), the change of its load if u and v exchange PEs
    (a dense array; for tests)."""
    cdef int64_t n = pe.shape[0], nc = (optr.shape[0] - 1) // max(n, 1), nt, j
    out = np.zeros(nc * n, dtype=np.float64)
    if nc == 0 or levels.shape[0] == 0:
        return out
    cdef double* delta = <double*>malloc(nc * n * sizeof(double))
    cdef char* mark = <char*>malloc(nc * n * sizeof(char))
    cdef int64_t* touched = <int64_t*>malloc(nc * n * sizeof(int64_t))
    if not (delta and mark and touched):
        free(delta); free(mark); free(touched)
        raise MemoryError()
    cdef double[::1] o = out
    try:
        for j in range(nc * n):
            mark[j] = 0
        nt = _pace_deltas(&gid[0, 0], gid.shape[1], &levels[0], levels.shape[0], &pe[0],
                          n, nc, &optr[0], &oidx[0] if len(oidx) else NULL,
                          &ow[0] if len(ow) else NULL, &iptr[0],
                          &iidx[0] if len(iidx) else NULL, &iw[0] if len(iw) else NULL,
                          u, v, delta, mark, touched)
        for j in range(nt):
            o[touched[j]] = delta[touched[j]]
    finally:
        free(delta); free(mark); free(touched)
    return out


def constrained_search(cnp.ndarray[int64_t, ndim=1, mode="c"] indptr,
                       cnp.ndarray[int32_t, ndim=1, mode="c"] indices,
                       cnp.ndarray[double, ndim=1, mode="c"] weights,
                       cnp.ndarray[int64_t, ndim=1, mode="c"] pe,
                       cnp.ndarray[int32_t, ndim=2, mode="c"] gid,
                       cnp.ndarray[double, ndim=1, mode="c"] dist,
                       cnp.ndarray[int64_t, ndim=1, mode="c"] levels,
                       cnp.ndarray[int64_t, ndim=1, mode="c"] s_indptr,
                       cnp.ndarray[int32_t, ndim=1, mode="c"] s_indices,
                       cnp.ndarray[double, ndim=1, mode="c"] s_weights,
                       cnp.ndarray[double, ndim=2, mode="c"] cut,
                       cnp.ndarray[double, ndim=2, mode="c"] caps,
                       cnp.ndarray[int64_t, ndim=1, mode="c"] optr,
                       cnp.ndarray[int32_t, ndim=1, mode="c"] oidx,
                       cnp.ndarray[double, ndim=1, mode="c"] ow,
                       cnp.ndarray[int64_t, ndim=1, mode="c"] iptr,
                       cnp.ndarray[int32_t, ndim=1, mode="c"] iidx,
                       cnp.ndarray[double, ndim=1, mode="c"] iw,
                       cnp.ndarray[double, ndim=1, mode="c"] pace_load,
                       cnp.ndarray[double, ndim=1, mode="c"] pace_cap,
                       cnp.ndarray[int64_t, ndim=1, mode="c"] part_bounds,
                       int part_level, int64_t max_sweeps, uint64_t seed,
                       double time_limit, double eps_j):
    """Lexicographic first-improvement swap search on (violation, J); ``pe``, ``cut``
    and ``pace_load`` are updated in place.

    J is the graph (``indptr``, ``indices``, ``weights``)'s.  The caps are on K
    *constraint graphs* stacked in ``s_*`` (rows g·n + r: graph g's edges of rank r;
    the first is usually J's graph, the others a profile's phases): ``cut`` (K·levels x
    groups; row g·nl + i: graph g at level i) holds their current group cuts and
    ``caps`` (same shape) each group's cap on its cut (the level's cap over the group's
    link weight; inf for a group without a link).  And on C *pace channels* (rows
    c·n + r; ``o*``: the channel's edges owned by rank r, ``i*``: the edges owned by
    others that end at r): ``pace_load`` holds every rank's Σ weight × links crossed
    in each channel, ``pace_cap`` each channel's cap.

    A swap of ranks u, v is taken when it lowers the violation V = Σ over graphs,
    levels and groups of (cut − cap)⁺ / cap + Σ over channels and ranks of
    (load − cap)⁺ / cap, or when it lowers J by more than ``eps_j`` and raises no
    group or rank above max(its value, its cap).  u's partners: the ranks on the
    ``part_level`` groups (PE ranges ``part_bounds``) of u's communication partners,
    outside u's own group.  Returns (violation, J change, moves, sweeps, hit the time
    limit, evaluations)."""
    cdef Graph g
    cdef Oracle o = _make_oracle(gid, dist, None, pe.shape[0])
    cdef int64_t n = pe.shape[0], nparts = part_bounds.shape[0] - 1
    cdef int nl = levels.shape[0], k = gid.shape[1], i, row
    cdef int64_t G = cut.shape[1], K = cut.shape[0] // max(levels.shape[0], 1), gk
    cdef int64_t nc = pace_cap.shape[0], nt = 0, j, t
    cdef const int32_t* gidp = &gid[0, 0]
    cdef const int64_t* lv = &levels[0]
    cdef int64_t* pep = &pe[0]
    cdef double* cutp = &cut[0, 0]
    cdef const double* capp = &caps[0, 0]
    cdef const int64_t* pb = &part_bounds[0]
    cdef double* loadp = &pace_load[0] if nc else NULL
    cdef const double* pcap = &pace_cap[0] if nc else NULL
    cdef const int64_t* optrp = &optr[0]
    cdef const int32_t* oidxp = &oidx[0] if len(oidx) else NULL
    cdef const double* owp = &ow[0] if len(ow) else NULL
    cdef const int64_t* iptrp = &iptr[0]
    cdef const int32_t* iidxp = &iidx[0] if len(iidx) else NULL
    cdef const double* iwp = &iw[0] if len(iw) else NULL
    cdef int64_t sweep = 0, moves = 0, evals = 0, idx, u, v, e, y, part, p, pu, pv, pu_part
    cdef int64_t moved_in_sweep
    cdef double viol = 0.0, dviol, dj, total_dj = 0.0, cu, cv, nu, nv, kapu, kapv, kap
    cdef double start = _now()
    cdef bint timed_out = False, ok, taken
    cdef uint64_t rng = seed
    cdef int32_t gu, gv
    if nl == 0 or n < 2:
        return 0.0, 0.0, 0, 0, False, 0
    if cut.shape[0] != K * nl or caps.shape[0] != cut.shape[0] or caps.shape[1] != G:
        raise ValueError("cut and caps must both be (graphs x levels) x groups")
    if s_indptr.shape[0] != K * n + 1:
        raise ValueError("the constraint graphs' indptr must have graphs x n + 1 entries")
    if (pace_load.shape[0] != nc * n or optr.shape[0] != nc * n + 1
            or iptr.shape[0] != nc * n + 1):
        raise ValueError("pace channels: loads and row pointers must cover channels x n rows")
    g.indptr = &indptr[0]
    g.indices = &indices[0] if len(indices) else NULL
    g.weights = &weights[0] if len(weights) else NULL
    cdef Graph* sg = <Graph*>malloc(max(K, 1) * sizeof(Graph))
    cdef int64_t* rank_at = <int64_t*>malloc(n * sizeof(int64_t))
    cdef int64_t* order = <int64_t*>malloc(n * sizeof(int64_t))
    cdef int64_t* stamp = <int64_t*>malloc((nparts + 1) * sizeof(int64_t))
    cdef double* du = <double*>malloc(max(K, 1) * nl * sizeof(double))
    cdef double* dv = <double*>malloc(max(K, 1) * nl * sizeof(double))
    cdef double* delta = <double*>malloc(max(nc * n, 1) * sizeof(double))
    cdef char* mark = <char*>malloc(max(nc * n, 1) * sizeof(char))
    cdef int64_t* touched = <int64_t*>malloc(max(nc * n, 1) * sizeof(int64_t))
    if not (sg and rank_at and order and stamp and du and dv and delta and mark and touched):
        free(sg); free(rank_at); free(order); free(stamp); free(du); free(dv)
        free(delta); free(mark); free(touched)
        raise MemoryError()
    for gk in range(K):
        sg[gk].indptr = &s_indptr[gk * n]
        sg[gk].indices = &s_indices[0] if len(s_indices) else NULL
        sg[gk].weights = &s_weights[0] if len(s_weights) else NULL
    cdef int64_t tick = 0
    try:
        with nogil:
            for u in range(n):
                rank_at[pep[u]] = u
                order[u] = u
            for j in range(nc * n):
                mark[j] = 0
            for part in range(nparts + 1):
                stamp[part] = -1
            for j in range(K * nl * G):
                viol += _excess(cutp[j], capp[j])
            for j in range(nc * n):
                viol += _excess(loadp[j], pcap[j // n])
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
                            pu = pep[u]
                            pv = pep[v]
                            dviol = 0.0
                            ok = True
                            for gk in range(K):
                                _cut_deltas(&sg[gk], gidp, k, lv, nl, pep, u, v,
                                            du + gk * nl, dv + gk * nl)
                                for i in range(nl):
                                    gu = gidp[pu * k + lv[i]]
                                    gv = gidp[pv * k + lv[i]]
                                    if gu == gv:
                                        continue
                                    row = gk * nl + i
                                    cu = cutp[row * G + gu]
                                    cv = cutp[row * G + gv]
                                    kapu = capp[row * G + gu]
                                    kapv = capp[row * G + gv]
                                    nu = cu + du[row]
                                    nv = cv + dv[row]
                                    dviol += (_excess(nu, kapu) - _excess(cu, kapu)
                                              + _excess(nv, kapv) - _excess(cv, kapv))
                                    # rounding of the sums: a relative 1e-12 of the cap
                                    if (du[row] > 1e-12 * (kapu if kapu > 0 else 1.0)
                                            and nu > kapu * (1 + 1e-12)) or \
                                            (dv[row] > 1e-12 * (kapv if kapv > 0 else 1.0)
                                             and nv > kapv * (1 + 1e-12)):
                                        ok = False
                            if nc:
                                nt = _pace_deltas(gidp, k, lv, nl, pep, n, nc, optrp, oidxp,
                                                  owp, iptrp, iidxp, iwp, u, v, delta, mark,
                                                  touched)
                                for j in range(nt):
                                    t = touched[j]
                                    kap = pcap[t // n]
                                    nu = loadp[t] + delta[t]
                                    dviol += _excess(nu, kap) - _excess(loadp[t], kap)
                                    if (delta[t] > 1e-12 * (kap if kap > 0 else 1.0)
                                            and nu > kap * (1 + 1e-12)):
                                        ok = False
                            if dviol < -1e-12:
                                dj = _swap_delta(&g, &o, pep, u, v)
                                taken = True
                            elif ok:
                                dj = _swap_delta(&g, &o, pep, u, v)
                                taken = dj < -eps_j
                            for j in range(nt):
                                t = touched[j]
                                if taken:
                                    loadp[t] += delta[t]
                                mark[t] = 0
                            nt = 0
                            if taken:
                                for gk in range(K):
                                    for i in range(nl):
                                        gu = gidp[pu * k + lv[i]]
                                        gv = gidp[pv * k + lv[i]]
                                        if gu != gv:
                                            row = gk * nl + i
                                            cutp[row * G + gu] += du[row]
                                            cutp[row * G + gv] += dv[row]
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
            # the violation from the cuts and loads themselves, not the running sum
            viol = 0.0
            for j in range(K * nl * G):
                viol += _excess(cutp[j], capp[j])
            for j in range(nc * n):
                viol += _excess(loadp[j], pcap[j // n])
    finally:
        free(sg); free(rank_at); free(order); free(stamp); free(du); free(dv)
        free(delta); free(mark); free(touched)
    return viol, total_dj, moves, sweep, timed_out, evals
