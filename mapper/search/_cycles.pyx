# cython: language_level=3
"""Compiled loops of :mod:`mapper.search.cycles` (3-cycle rotations).

The documentation, complexity and references are in :mod:`mapper.search.cycles`; this
file only makes its inner loops fast.  The distance oracle ``(gid, dist, mat)`` is the
one of :mod:`mapper._kernels` (see :class:`mapper.oracle.KernelOracle`): a hierarchy's
per-PE group ids, an explicit n x n matrix, or a node hop machine (group ids inside the
nodes, N x N between them).  ``_kernels.pyx`` has no ``.pxd``, so its few-line oracle,
clock and random generator are restated here rather than shared.
"""

import numpy as np

cimport numpy as cnp
from libc.stdint cimport int32_t, int64_t, uint64_t
from posix.time cimport CLOCK_MONOTONIC, clock_gettime, timespec

cnp.import_array()


cdef struct Oracle:
    const int32_t* gid    # NULL: explicit matrix
    const double* dist
    const double* mat     # n x n (gid NULL) or, with hop, N x N between nodes
    int k
    int64_t n
    int64_t nodes
    bint hop


cdef struct Graph:
    const int64_t* indptr
    const int32_t* indices
    const double* weights


cdef inline double _dist(const Oracle* o, int64_t p, int64_t q) noexcept nogil:
    cdef int i
    cdef const int32_t* gp
    cdef const int32_t* gq
    if p == q:
        return 0.0
    if o.gid == NULL:
        return o.mat[p * o.n + q]
    gp = o.gid + p * o.k
    gq = o.gid + q * o.k
    if o.hop and gp[o.k - 1] != gq[o.k - 1]:
        return o.mat[gp[o.k - 1] * o.nodes + gq[o.k - 1]]
    for i in range(o.k):
        if gp[i] == gq[i]:
            return o.dist[i]
    return o.dist[o.k - 1]


cdef inline int64_t _group(const Oracle* o, int64_t p) noexcept nogil:
    """Innermost group of PE p (the PE itself for an explicit matrix): PEs of one
    innermost group are at equal distance from every other PE."""
    if o.gid == NULL:
        return p
    return o.gid[p * o.k]


cdef inline double _now() noexcept nogil:
    cdef timespec ts
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return ts.tv_sec + ts.tv_nsec * 1e-9


cdef inline uint64_t _rng_next(uint64_t* s) noexcept nogil:
    # splitmix64, as in _kernels
    s[0] += <uint64_t>0x9E3779B97F4A7C15
    cdef uint64_t z = s[0]
    z = (z ^ (z >> 30)) * <uint64_t>0xBF58476D1CE4E5B9
    z = (z ^ (z >> 27)) * <uint64_t>0x94D049BB133111EB
    return z ^ (z >> 31)


cdef void _shuffle(int64_t* a, int64_t n, uint64_t* s) noexcept nogil:
    cdef int64_t i, j, t
    i = n - 1
    while i > 0:
        j = <int64_t>(_rng_next(s) % <uint64_t>(i + 1))
        t = a[i]
        a[i] = a[j]
        a[j] = t
        i -= 1


cdef inline double _side(const Graph* g, const Oracle* o, const int64_t* pe, int64_t x,
                         int64_t to, int64_t m1, int64_t m2) noexcept nogil:
    """Change of the terms of x's edges to ranks other than m1, m2 when x moves to PE
    ``to``: O(deg x)."""
    cdef int64_t e, y, px = pe[x]
    cdef double s = 0.0
    for e in range(g.indptr[x], g.indptr[x + 1]):
        y = g.indices[e]
        if y != m1 and y != m2:
            s += g.weights[e] * (_dist(o, to, pe[y]) - _dist(o, px, pe[y]))
    return s


cdef inline double _weight(const Graph* g, int64_t x, int64_t y) noexcept nogil:
    """C_xy (0 when not adjacent): O(deg x)."""
    cdef int64_t e
    for e in range(g.indptr[x], g.indptr[x + 1]):
        if g.indices[e] == y:
            return g.weights[e]
    return 0.0


cdef inline double _rotate_delta(const Graph* g, const Oracle* o, const int64_t* pe,
                                 int64_t a, int64_t b, int64_t c, double cab, double cbc,
                                 double cac) noexcept nogil:
    """Change of J when a takes b's PE, b takes c's and c takes a's: O(d_a + d_b + d_c).

    Edges from the three ranks to the others change by the three sides; the edges
    among them (volumes cab, cbc, cac) go from D(pa,pb), D(pb,pc), D(pa,pc) to
    D(pb,pc), D(pc,pa), D(pb,pa) respectively.
    """
    cdef int64_t pa = pe[a], pb = pe[b], pc = pe[c]
    cdef double dab = _dist(o, pa, pb), dbc = _dist(o, pb, pc), dac = _dist(o, pa, pc)
    return (_side(g, o, pe, a, pb, b, c) + _side(g, o, pe, b, pc, a, c)
            + _side(g, o, pe, c, pa, a, b)
            + cab * (dbc - dab) + cbc * (dac - dbc) + cac * (dab - dac))


cdef Oracle _make_oracle(object gid, object dist, object mat, int64_t n) except *:
    cdef Oracle o
    cdef cnp.ndarray[int32_t, ndim=2, mode="c"] gg
    cdef cnp.ndarray[double, ndim=1, mode="c"] d
    cdef cnp.ndarray[double, ndim=2, mode="c"] m
    o.n = n
    o.gid = NULL
    o.dist = NULL
    o.mat = NULL
    o.k = 0
    o.nodes = 0
    o.hop = False
    if gid is None:
        m = mat
        if m.shape[0] != n or m.shape[1] != n:
            raise ValueError(f"distance matrix is {m.shape[0]} x {m.shape[1]}, need {n} x {n}")
        o.mat = &m[0, 0]
        return o
    gg = gid
    d = dist
    if gg.shape[0] != n or gg.shape[1] != d.shape[0] or gg.shape[1] == 0:
        raise ValueError(f"group ids {gg.shape[0]} x {gg.shape[1]} do not fit {n} PEs and "
                         f"{d.shape[0]} level distances")
    o.gid = &gg[0, 0]
    o.dist = &d[0]
    o.k = gg.shape[1]
    if mat is not None:
        m = mat
        if m.shape[0] != m.shape[1] or (n and (np.min(gid[:, o.k - 1]) < 0
                                               or np.max(gid[:, o.k - 1]) >= m.shape[0])):
            raise ValueError(f"node ids (last group-id column) must index the "
                             f"{m.shape[0]} x {m.shape[1]} between-node table")
        o.mat = &m[0, 0]
        o.nodes = m.shape[0]
        o.hop = True
    return o


cdef inline void _set_graph(Graph* g, cnp.ndarray[int64_t, ndim=1, mode="c"] indptr,
                            cnp.ndarray[int32_t, ndim=1, mode="c"] indices,
                            cnp.ndarray[double, ndim=1, mode="c"] weights):
    g.indptr = &indptr[0]
    g.indices = &indices[0] if len(indices) else NULL
    g.weights = &weights[0] if len(weights) else NULL


def rotate_delta(cnp.ndarray[int64_t, ndim=1, mode="c"] indptr,
                 cnp.ndarray[int32_t, ndim=1, mode="c"] indices,
                 cnp.ndarray[double, ndim=1, mode="c"] weights,
                 cnp.ndarray[int64_t, ndim=1, mode="c"] pe,
                 object gid, object dist, object mat, int64_t a, int64_t b, int64_t c):
    """Change of J when a takes b's PE, b takes c's and c takes a's (for tests)."""
    cdef Graph g
    cdef int64_t n = len(pe)
    if not (0 <= a < n and 0 <= b < n and 0 <= c < n) or a == b or b == c or a == c:
        raise ValueError(f"need three distinct ranks in 0..{n - 1}, got {a}, {b}, {c}")
    _set_graph(&g, indptr, indices, weights)
    cdef Oracle o = _make_oracle(gid, dist, mat, n)
    return _rotate_delta(&g, &o, &pe[0], a, b, c, _weight(&g, a, b), _weight(&g, b, c),
                         _weight(&g, a, c))


def cycle_search(cnp.ndarray[int64_t, ndim=1, mode="c"] indptr,
                 cnp.ndarray[int32_t, ndim=1, mode="c"] indices,
                 cnp.ndarray[double, ndim=1, mode="c"] weights,
                 cnp.ndarray[int64_t, ndim=1, mode="c"] pe,
                 object gid, object dist, object mat, int64_t depth, uint64_t seed,
                 double time_limit, int64_t max_passes, double eps):
    """Improve ``pe`` in place by gain-positive 3-cycle rotations (first improvement).

    For each rank u (random order), every neighbour v of u and every rank w within
    ``depth`` hops of u (w != v) is tried in both rotation directions.  Later passes
    visit only ranks next to a moved rank.  ``max_passes`` <= 0: no limit;
    ``time_limit`` <= 0: none.  Returns (gain, moves, passes, timed_out, evaluations).
    """
    cdef int64_t n = len(pe)
    cdef Graph g
    cdef Oracle o = _make_oracle(gid, dist, mat, n)
    cdef int64_t size = max(n, 1)
    cdef cnp.ndarray[int64_t, ndim=1, mode="c"] order = np.arange(size, dtype=np.int64)
    cdef cnp.ndarray[int64_t, ndim=1, mode="c"] ball = np.empty(size, dtype=np.int64)
    cdef cnp.ndarray[int32_t, ndim=1, mode="c"] level = np.zeros(size, dtype=np.int32)
    cdef cnp.ndarray[int64_t, ndim=1, mode="c"] stamp = np.full(size, -1, dtype=np.int64)
    cdef cnp.ndarray[double, ndim=1, mode="c"] wu = np.zeros(size, dtype=np.float64)
    cdef cnp.ndarray[int64_t, ndim=1, mode="c"] wstamp = np.full(size, -1, dtype=np.int64)
    cdef cnp.ndarray[cnp.uint8_t, ndim=1, mode="c"] active = np.ones(size, dtype=np.uint8)
    cdef int64_t* P = &pe[0] if n else NULL
    cdef int64_t* ORD = &order[0]
    cdef int64_t* B = &ball[0]
    cdef int32_t* LEV = &level[0]
    cdef int64_t* ST = &stamp[0]
    cdef double* WU = &wu[0]          # C_u· of the current u, valid where WST == visit
    cdef int64_t* WST = &wstamp[0]
    cdef cnp.uint8_t* ACT = &active[0]
    cdef uint64_t rng = seed * <uint64_t>2654435761 + 12345
    cdef double start = _now(), gain_total = 0.0, delta, cuv, cvw, cuw
    cdef int64_t moves = 0, passes = 0, evals = 0, visit = 0, count, i, j, head, tail
    cdef int64_t u, v, w, x, e, f, a, pu, pv, pw, t, gu, gv, next_check = 1024
    cdef int64_t TRI[3]
    cdef bint timed_out = False, full_pass = True, moved
    if n < 3:
        return 0.0, 0, 0, False, 0
    _set_graph(&g, indptr, indices, weights)
    with nogil:
        while not timed_out and (max_passes <= 0 or passes < max_passes):
            count = 0
            for i in range(n):
                if full_pass or ACT[i]:
                    ORD[count] = i
                    count += 1
                ACT[i] = 0
            if count == 0:
                break
            passes += 1
            full_pass = False
            _shuffle(ORD, count, &rng)
            for i in range(count):
                if timed_out:
                    break
                if time_limit > 0 and (i & 63) == 0 and _now() - start > time_limit:
                    timed_out = True
                    break
                u = ORD[i]
                # the ball of radius depth around u (u itself excluded from B)
                visit += 1
                ST[u] = visit
                LEV[u] = 0
                head = 0
                tail = 0
                x = u
                while True:
                    if LEV[x] < depth:
                        for e in range(g.indptr[x], g.indptr[x + 1]):
                            a = g.indices[e]
                            if ST[a] != visit:
                                ST[a] = visit
                                LEV[a] = LEV[x] + 1
                                B[tail] = a
                                tail += 1
                    if head == tail:
                        break
                    x = B[head]
                    head += 1
                for e in range(g.indptr[u], g.indptr[u + 1]):
                    WU[g.indices[e]] = g.weights[e]
                    WST[g.indices[e]] = visit
                moved = True
                while moved and not timed_out:
                    # after a move u's PE changed: rescan its candidates from the start
                    moved = False
                    for e in range(g.indptr[u], g.indptr[u + 1]):
                        if moved or timed_out:
                            break
                        v = g.indices[e]
                        pu = P[u]
                        pv = P[v]
                        gu = _group(&o, pu)
                        gv = _group(&o, pv)
                        cuv = g.weights[e]
                        for j in range(tail):
                            w = B[j]
                            if w == v:
                                continue
                            pw = P[w]
                            if gu == gv and gv == _group(&o, pw):
                                continue  # one innermost group: no rotation changes J
                            cuw = WU[w] if WST[w] == visit else 0.0
                            cvw = _weight(&g, v, w) if LEV[w] <= 2 else 0.0
                            # u -> pv, v -> pw, w -> pu
                            delta = _rotate_delta(&g, &o, P, u, v, w, cuv, cvw, cuw)
                            evals += 1
                            if delta >= -eps:
                                # the other direction: u -> pw, w -> pv, v -> pu
                                delta = _rotate_delta(&g, &o, P, u, w, v, cuw, cvw, cuv)
                                evals += 1
                                if delta < -eps:
                                    P[u] = pw
                                    P[w] = pv
                                    P[v] = pu
                                    moved = True
                            else:
                                P[u] = pv
                                P[v] = pw
                                P[w] = pu
                                moved = True
                            if moved:
                                gain_total -= delta
                                moves += 1
                                # the three ranks and their neighbours may move again
                                TRI[0] = u
                                TRI[1] = v
                                TRI[2] = w
                                for t in range(3):
                                    x = TRI[t]
                                    ACT[x] = 1
                                    for f in range(g.indptr[x], g.indptr[x + 1]):
                                        ACT[g.indices[f]] = 1
                                break
                            if time_limit > 0 and evals >= next_check:
                                next_check = evals + 1024
                                if _now() - start > time_limit:
                                    timed_out = True
                                    break
    return gain_total, moves, passes, bool(timed_out), evals


cdef inline double _swap_delta(const Graph* g, const Oracle* o, const int64_t* pe,
                               int64_t u, int64_t v) noexcept nogil:
    """Change of J if ranks u and v exchange PEs: O(deg u + deg v) (as in _kernels)."""
    cdef int64_t pu = pe[u], pv = pe[v], e, w, pw
    cdef double delta = 0.0
    for e in range(g.indptr[u], g.indptr[u + 1]):
        w = g.indices[e]
        if w != v:
            pw = pe[w]
            delta += g.weights[e] * (_dist(o, pv, pw) - _dist(o, pu, pw))
    for e in range(g.indptr[v], g.indptr[v + 1]):
        w = g.indices[e]
        if w != u:
            pw = pe[w]
            delta += g.weights[e] * (_dist(o, pu, pw) - _dist(o, pv, pw))
    return delta


def chain_search(cnp.ndarray[int64_t, ndim=1, mode="c"] indptr,
                 cnp.ndarray[int32_t, ndim=1, mode="c"] indices,
                 cnp.ndarray[double, ndim=1, mode="c"] weights,
                 cnp.ndarray[int64_t, ndim=1, mode="c"] pe,
                 object gid, object dist, object mat, int64_t length, uint64_t seed,
                 double time_limit, int64_t max_passes, double eps):
    """Improve ``pe`` in place by ejection chains (cyclic exchanges) of up to
    ``length`` + 1 ranks.

    From u0 on PE p0: the rank x now on p0 (u0 first) swaps with the rank y within two
    hops of x, not yet in the chain and outside p0's innermost group, whose swap lowers
    J most (or raises it least); y lands on p0 and is ejected in turn.
    After ``length`` steps the best prefix is kept if it lowers J, the rest undone.
    Returns (gain, chains kept, passes, timed_out, evaluations).
    """
    cdef int64_t n = len(pe)
    cdef Graph g
    cdef Oracle o = _make_oracle(gid, dist, mat, n)
    cdef int64_t size = max(n, 1)
    cdef cnp.ndarray[int64_t, ndim=1, mode="c"] order = np.arange(size, dtype=np.int64)
    cdef cnp.ndarray[int64_t, ndim=1, mode="c"] seen = np.full(size, -1, dtype=np.int64)
    cdef cnp.ndarray[int64_t, ndim=1, mode="c"] chain = np.zeros(max(length, 1) + 1,
                                                                 dtype=np.int64)
    cdef cnp.ndarray[cnp.uint8_t, ndim=1, mode="c"] active = np.ones(size, dtype=np.uint8)
    cdef int64_t* P = &pe[0] if n else NULL
    cdef int64_t* ORD = &order[0]
    cdef int64_t* SEEN = &seen[0]
    cdef int64_t* CH = &chain[0]
    cdef cnp.uint8_t* ACT = &active[0]
    cdef uint64_t rng = seed * <uint64_t>2654435761 + 12345
    cdef double start = _now(), gain_total = 0.0, delta, best_d, total, best_total
    cdef int64_t kept = 0, passes = 0, evals = 0, visit = 0, count, i, step, steps, best_len
    cdef int64_t u0, x, y, z, e, f, p0, g0, best_y, t, next_check = 1024
    cdef bint timed_out = False, full_pass = True
    if n < 3 or length < 1:
        return 0.0, 0, 0, False, 0
    _set_graph(&g, indptr, indices, weights)
    with nogil:
        while not timed_out and (max_passes <= 0 or passes < max_passes):
            count = 0
            for i in range(n):
                if full_pass or ACT[i]:
                    ORD[count] = i
                    count += 1
                ACT[i] = 0
            if count == 0:
                break
            passes += 1
            full_pass = False
            _shuffle(ORD, count, &rng)
            for i in range(count):
                if timed_out:
                    break
                u0 = ORD[i]
                p0 = P[u0]
                g0 = _group(&o, p0)
                CH[0] = u0
                x = u0
                total = 0.0
                best_total = 0.0
                best_len = 0
                steps = 0
                for step in range(length):
                    # x sits on p0; candidates: x's neighbours and theirs
                    best_y = -1
                    best_d = 0.0
                    visit += 1
                    for e in range(g.indptr[x], g.indptr[x + 1]):
                        z = g.indices[e]
                        for f in range(g.indptr[z] - 1, g.indptr[z + 1]):
                            y = z if f < g.indptr[z] else g.indices[f]
                            if SEEN[y] == visit:
                                continue
                            SEEN[y] = visit
                            # a rank of the chain is not moved twice; a PE of p0's
                            # innermost group would change nothing
                            if _group(&o, P[y]) == g0 or _chain_has(CH, steps + 1, y):
                                continue
                            delta = _swap_delta(&g, &o, P, x, y)
                            evals += 1
                            if best_y < 0 or delta < best_d:
                                best_d = delta
                                best_y = y
                    if best_y < 0:
                        break
                    y = best_y
                    t = P[x]
                    P[x] = P[y]
                    P[y] = t
                    total += best_d
                    steps += 1
                    CH[steps] = y
                    if total < best_total:
                        best_total = total
                        best_len = steps
                    x = y
                # undo the steps after the best prefix, last first
                while steps > best_len:
                    x = CH[steps]       # now on p0
                    y = CH[steps - 1]   # moved away by this step
                    t = P[x]
                    P[x] = P[y]
                    P[y] = t
                    steps -= 1
                if best_len > 0 and best_total < -eps:
                    gain_total -= best_total
                    kept += 1
                    for t in range(best_len + 1):
                        x = CH[t]
                        ACT[x] = 1
                        for f in range(g.indptr[x], g.indptr[x + 1]):
                            ACT[g.indices[f]] = 1
                elif best_len > 0:
                    # a gain within rounding: undo it too, so J cannot drift up
                    while steps > 0:
                        x = CH[steps]
                        y = CH[steps - 1]
                        t = P[x]
                        P[x] = P[y]
                        P[y] = t
                        steps -= 1
                if time_limit > 0 and evals >= next_check:
                    next_check = evals + 1024
                    if _now() - start > time_limit:
                        timed_out = True
    return gain_total, kept, passes, bool(timed_out), evals


cdef inline bint _chain_has(const int64_t* ch, int64_t m, int64_t y) noexcept nogil:
    cdef int64_t i
    for i in range(m):
        if ch[i] == y:
            return True
    return False
