# cython: language_level=3
"""Compiled loops of :mod:`mapper.search.cycles` (3-cycle rotations).

The documentation, complexity and references are in :mod:`mapper.search.cycles`; this
file only makes its inner loops fast.  The distance oracle ``(gid, dist, mat)`` is the
one of ``mapper/model/_oracle.pxd`` (see :class:`mapper.model.oracle.KernelOracle`): a hierarchy's
per-PE group ids, an explicit n x n matrix, or a node hop machine (group ids inside the
nodes, N x N between them).  The oracle, ``_dist``, the swap gain, the Γ bounds, the
clock and the random generator are the inline functions of ``mapper/model/_oracle.pxd``,
shared with ``_swap.pyx``.
"""

import numpy as np

cimport numpy as cnp
from libc.stdint cimport int32_t, int64_t, uint64_t

from mapper.model._oracle cimport (Graph, Oracle, _best_gamma_bound, _dist, _gamma, _gamma_group,
                             _make_oracle, _now, _rng_next, _shuffle, _shuffle_runs,
                             _swap_delta)

cnp.import_array()


cdef inline int64_t _group(const Oracle* o, int64_t p) noexcept nogil:
    """Innermost group of PE p (the PE itself for an explicit matrix): PEs of one
    innermost group are at equal distance from every other PE."""
    if o.gid == NULL:
        return p
    return o.gid[p * o.k]


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
                 double time_limit, int64_t max_passes, double eps, int64_t max_work=0,
                 int64_t cap=0, int64_t chunk=1):
    """Improve ``pe`` in place by gain-positive 3-cycle rotations (first improvement).

    For each rank u (random order), every neighbour v of u and every rank w within
    ``depth`` hops of u (w != v) is tried in both rotation directions.  Later passes
    visit only ranks next to a moved rank.  ``max_passes`` <= 0: no limit;
    ``time_limit`` <= 0: none.  ``max_work`` (<= 0: none) stops it before the next rank
    once this many work units are spent (adjacency entries scanned, an O(d) gain
    counted as d: a deterministic stand-in for time; on a power-law graph one hub's
    candidates alone are O(d^4)).  ``cap`` (<= 0: none; else >= ``max_work``) also
    stops it inside a rank's candidates once this many units are spent, so the work
    stays below ``cap`` + one ball (2m arcs) + two rotation gains (6 d_max) whatever
    the degrees.  ``chunk`` > 1: a pass visits runs of ``chunk``
    consecutive ranks in random order, each run shuffled (for a graph renumbered in PE
    order: its rows are then read a run at a time, from cache).
    Returns (gain, moves, passes, timed_out, evaluations, work spent).
    """
    cdef int64_t n = len(pe)
    cdef Graph g
    cdef Oracle o = _make_oracle(gid, dist, mat, n)
    cdef int64_t size = max(n, 1)
    cdef cnp.ndarray[int64_t, ndim=1, mode="c"] order = np.arange(size, dtype=np.int64)
    # chunk > 1: passes visit runs of chunk consecutive ranks (_shuffle_runs)
    cdef cnp.ndarray[int64_t, ndim=1, mode="c"] runs = np.empty(
        size // max(chunk, 1) + 1 if chunk > 1 else 1, dtype=np.int64)
    cdef cnp.ndarray[int64_t, ndim=1, mode="c"] tmp = np.empty(
        size if chunk > 1 else 1, dtype=np.int64)
    cdef cnp.ndarray[int64_t, ndim=1, mode="c"] ball = np.empty(size, dtype=np.int64)
    cdef cnp.ndarray[int32_t, ndim=1, mode="c"] level = np.zeros(size, dtype=np.int32)
    cdef cnp.ndarray[int64_t, ndim=1, mode="c"] stamp = np.full(size, -1, dtype=np.int64)
    cdef cnp.ndarray[double, ndim=1, mode="c"] wu = np.zeros(size, dtype=np.float64)
    cdef cnp.ndarray[int64_t, ndim=1, mode="c"] wstamp = np.full(size, -1, dtype=np.int64)
    cdef cnp.ndarray[cnp.uint8_t, ndim=1, mode="c"] active = np.ones(size, dtype=np.uint8)
    cdef int64_t* P = &pe[0] if n else NULL
    cdef int64_t* ORD = &order[0]
    cdef int64_t* RUNS = &runs[0]
    cdef int64_t* TMP = &tmp[0]
    cdef int64_t* B = &ball[0]
    cdef int32_t* LEV = &level[0]
    cdef int64_t* ST = &stamp[0]
    cdef double* WU = &wu[0]          # C_u· of the current u, valid where WST == visit
    cdef int64_t* WST = &wstamp[0]
    cdef cnp.uint8_t* ACT = &active[0]
    cdef uint64_t rng = seed * <uint64_t>2654435761 + 12345
    cdef double start = _now(), gain_total = 0.0, delta, cuv, cvw, cuw
    cdef int64_t moves = 0, passes = 0, evals = 0, visit = 0, count, i, j, head, tail
    cdef int64_t u, v, w, x, e, f, a, pu, pv, pw, t, gu, gv, next_check = 1024, spent = 0
    cdef int64_t duv
    cdef int64_t TRI[3]
    cdef bint timed_out = False, full_pass = True, moved, capped = False
    if n < 3:
        return 0.0, 0, 0, False, 0, 0
    _set_graph(&g, indptr, indices, weights)
    with nogil:
        while (not timed_out and not capped and (max_passes <= 0 or passes < max_passes)
               and (max_work <= 0 or spent < max_work)):
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
            if chunk > 1:
                _shuffle_runs(ORD, count, chunk, &rng, RUNS, TMP)
            else:
                _shuffle(ORD, count, &rng)
            for i in range(count):
                if timed_out or capped:
                    break
                if time_limit > 0 and (i & 63) == 0 and _now() - start > time_limit:
                    timed_out = True
                    break
                if max_work > 0 and spent >= max_work:
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
                        spent += g.indptr[x + 1] - g.indptr[x]
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
                while moved and not timed_out and not capped:
                    # after a move u's PE changed: rescan its candidates from the start
                    moved = False
                    for e in range(g.indptr[u], g.indptr[u + 1]):
                        if moved or timed_out or capped:
                            break
                        v = g.indices[e]
                        pu = P[u]
                        pv = P[v]
                        gu = _group(&o, pu)
                        gv = _group(&o, pv)
                        cuv = g.weights[e]
                        duv = g.indptr[u + 1] - g.indptr[u] + g.indptr[v + 1] - g.indptr[v]
                        for j in range(tail):
                            if cap > 0 and spent >= cap:
                                capped = True  # a hub's candidates: O(d_u · |ball| · d)
                                break
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
                            spent += duv + g.indptr[w + 1] - g.indptr[w]
                            if delta >= -eps:
                                # the other direction: u -> pw, w -> pv, v -> pu
                                delta = _rotate_delta(&g, &o, P, u, w, v, cuw, cvw, cuv)
                                evals += 1
                                spent += duv + g.indptr[w + 1] - g.indptr[w]
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
    return gain_total, moves, passes, bool(timed_out), evals, spent


def chain_search(cnp.ndarray[int64_t, ndim=1, mode="c"] indptr,
                 cnp.ndarray[int32_t, ndim=1, mode="c"] indices,
                 cnp.ndarray[double, ndim=1, mode="c"] weights,
                 cnp.ndarray[int64_t, ndim=1, mode="c"] pe,
                 object gid, object dist, object mat, int64_t length, uint64_t seed,
                 double time_limit, int64_t max_passes, double eps, int64_t max_work=0,
                 int64_t cap=0, int64_t chunk=1):
    """Improve ``pe`` in place by ejection chains (cyclic exchanges) of up to
    ``length`` + 1 ranks.

    From u0 on PE p0: the rank x now on p0 (u0 first) swaps with the rank y within two
    hops of x, not yet in the chain and outside p0's innermost group, whose swap lowers
    J most (or raises it least); y lands on p0 and is ejected in turn.
    After ``length`` steps the best prefix is kept if it lowers J, the rest undone.
    ``max_work`` (<= 0: none), ``cap`` and ``chunk`` as in cycle_search; a chain
    stopped by ``cap`` keeps its best prefix of completed steps when it lowers J (so
    the work stays below ``cap`` + one swap gain and one adjacency row, 3 d_max + 1).
    Returns (gain, chains kept, passes, timed_out, evaluations, work spent).
    """
    cdef int64_t n = len(pe)
    cdef Graph g
    cdef Oracle o = _make_oracle(gid, dist, mat, n)
    cdef int64_t size = max(n, 1)
    cdef cnp.ndarray[int64_t, ndim=1, mode="c"] order = np.arange(size, dtype=np.int64)
    # chunk > 1: passes visit runs of chunk consecutive ranks (_shuffle_runs)
    cdef cnp.ndarray[int64_t, ndim=1, mode="c"] runs = np.empty(
        size // max(chunk, 1) + 1 if chunk > 1 else 1, dtype=np.int64)
    cdef cnp.ndarray[int64_t, ndim=1, mode="c"] tmp = np.empty(
        size if chunk > 1 else 1, dtype=np.int64)
    cdef cnp.ndarray[int64_t, ndim=1, mode="c"] seen = np.full(size, -1, dtype=np.int64)
    cdef cnp.ndarray[int64_t, ndim=1, mode="c"] chain = np.zeros(max(length, 1) + 1,
                                                                 dtype=np.int64)
    cdef cnp.ndarray[cnp.uint8_t, ndim=1, mode="c"] active = np.ones(size, dtype=np.uint8)
    cdef int64_t* P = &pe[0] if n else NULL
    cdef int64_t* ORD = &order[0]
    cdef int64_t* RUNS = &runs[0]
    cdef int64_t* TMP = &tmp[0]
    cdef int64_t* SEEN = &seen[0]
    cdef int64_t* CH = &chain[0]
    cdef cnp.uint8_t* ACT = &active[0]
    cdef uint64_t rng = seed * <uint64_t>2654435761 + 12345
    cdef double start = _now(), gain_total = 0.0, delta, best_d, total, best_total
    cdef int64_t kept = 0, passes = 0, evals = 0, visit = 0, count, i, step, steps, best_len
    cdef int64_t u0, x, y, z, e, f, p0, g0, best_y, t, next_check = 1024, spent = 0
    cdef bint timed_out = False, full_pass = True, capped = False
    if n < 3 or length < 1:
        return 0.0, 0, 0, False, 0, 0
    _set_graph(&g, indptr, indices, weights)
    with nogil:
        while (not timed_out and not capped and (max_passes <= 0 or passes < max_passes)
               and (max_work <= 0 or spent < max_work)):
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
            if chunk > 1:
                _shuffle_runs(ORD, count, chunk, &rng, RUNS, TMP)
            else:
                _shuffle(ORD, count, &rng)
            for i in range(count):
                if timed_out or capped or (max_work > 0 and spent >= max_work):
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
                        if cap > 0 and spent >= cap:
                            capped = True
                            break
                        z = g.indices[e]
                        spent += 1 + g.indptr[z + 1] - g.indptr[z]
                        for f in range(g.indptr[z] - 1, g.indptr[z + 1]):
                            if cap > 0 and spent >= cap:
                                capped = True
                                break
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
                            spent += (g.indptr[x + 1] - g.indptr[x]
                                      + g.indptr[y + 1] - g.indptr[y])
                            if best_y < 0 or delta < best_d:
                                best_d = delta
                                best_y = y
                    if capped or best_y < 0:
                        break  # (a step cut by the cap is not made)
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
    return gain_total, kept, passes, bool(timed_out), evals, spent


cdef inline bint _chain_has(const int64_t* ch, int64_t m, int64_t y) noexcept nogil:
    cdef int64_t i
    for i in range(m):
        if ch[i] == y:
            return True
    return False


cdef inline void _touch(int64_t x, int64_t mark, int64_t* tst, int64_t* tl,
                        int64_t* nt) noexcept nogil:
    # remember x once per round: the ranks whose PE a rejected round must restore
    if tst[x] != mark:
        tst[x] = mark
        tl[nt[0]] = x
        nt[0] += 1


cdef inline void _activate(const Graph* g, int64_t x, int64_t mark, int64_t* ast,
                           int64_t* nxt, int64_t* nn) noexcept nogil:
    # x and its neighbours go on the next pass's work list (once each)
    cdef int64_t e, y
    if ast[x] != mark:
        ast[x] = mark
        nxt[nn[0]] = x
        nn[0] += 1
    for e in range(g.indptr[x], g.indptr[x + 1]):
        y = g.indices[e]
        if ast[y] != mark:
            ast[y] = mark
            nxt[nn[0]] = y
            nn[0] += 1


def iterated_search(cnp.ndarray[int64_t, ndim=1, mode="c"] indptr,
                    cnp.ndarray[int32_t, ndim=1, mode="c"] indices,
                    cnp.ndarray[double, ndim=1, mode="c"] weights,
                    cnp.ndarray[int64_t, ndim=1, mode="c"] pe,
                    object gid, object dist, object mat, int64_t rounds,
                    int64_t patience, int64_t patch, int64_t depth, int64_t max_work,
                    uint64_t seed, double time_limit, double eps, int64_t cap=0):
    """Iterated local search with localized N_C^depth repairs; ``pe`` improved in place.

    Each round permutes the PEs of a breadth-first patch of ``patch`` ranks around a
    random rank, then searches N_C^depth from the patch and its neighbours only: a
    pass visits its work list in random order, tries every rank v within ``depth``
    hops of u (pair skipped when u's side cannot gain, bounded per innermost group),
    makes each improving swap, and puts the two ranks and their neighbours on the next
    pass's list.  The round's change of J is the perturbation's (edges at the patch)
    plus the swaps' gains; it is kept when negative, otherwise the touched ranks get
    their PEs back.  Stops after ``rounds`` rounds, ``patience`` rounds in a row
    without improvement, or ``time_limit`` seconds (<= 0: none).
    ``max_work`` (<= 0: none) stops it before a round once this many work units are
    spent: adjacency entries scanned, candidate pairs looked at, O(d) gains counted as
    d (a deterministic stand-in for time).  ``cap`` (<= 0: none; else >= ``max_work``)
    also stops a round's repair once this many units are spent (before the next rank
    and before the next candidate pair); the cut round is then kept or undone by its
    exact change of J like any other.  Work spent then stays below ``cap`` plus the
    largest single step: the kick (patch + 2m) or one rank's Γ, bound and ball
    (d_u (1 + d_u k) + 2m + n); see :mod:`mapper.search.iterated`.
    Returns (gain, rounds done, improvements, timed_out, swap gain evaluations, work,
    cut: a round was stopped by ``cap``).
    """
    cdef int64_t n = len(pe)
    cdef Graph g
    cdef Oracle o = _make_oracle(gid, dist, mat, n)
    cdef int64_t size = max(n, 1)
    cdef int64_t nkeys = n if gid is None or n == 0 else int(np.max(gid[:, 0])) + 1
    cdef cnp.ndarray[int64_t, ndim=1, mode="c"] best = pe.copy() if n else np.zeros(1, np.int64)
    cdef cnp.ndarray[int64_t, ndim=1, mode="c"] plist = np.empty(size, dtype=np.int64)
    cdef cnp.ndarray[int64_t, ndim=1, mode="c"] pes = np.empty(size, dtype=np.int64)
    cdef cnp.ndarray[int64_t, ndim=1, mode="c"] pstamp = np.full(size, -1, dtype=np.int64)
    cdef cnp.ndarray[int64_t, ndim=1, mode="c"] touched = np.empty(size, dtype=np.int64)
    cdef cnp.ndarray[int64_t, ndim=1, mode="c"] tstamp = np.full(size, -1, dtype=np.int64)
    cdef cnp.ndarray[int64_t, ndim=1, mode="c"] work = np.empty(size, dtype=np.int64)
    cdef cnp.ndarray[int64_t, ndim=1, mode="c"] nextw = np.empty(size, dtype=np.int64)
    cdef cnp.ndarray[int64_t, ndim=1, mode="c"] astamp = np.full(size, -1, dtype=np.int64)
    cdef cnp.ndarray[int64_t, ndim=1, mode="c"] ball = np.empty(size, dtype=np.int64)
    cdef cnp.ndarray[int64_t, ndim=1, mode="c"] bstamp = np.full(size, -1, dtype=np.int64)
    cdef cnp.ndarray[int32_t, ndim=1, mode="c"] level = np.zeros(size, dtype=np.int32)
    cdef cnp.ndarray[double, ndim=1, mode="c"] memo = np.zeros(max(nkeys, 1), dtype=np.float64)
    cdef cnp.ndarray[int64_t, ndim=1, mode="c"] mstamp = np.full(max(nkeys, 1), -1,
                                                                 dtype=np.int64)
    cdef int64_t* P = &pe[0] if n else NULL
    cdef int64_t* BEST = &best[0]
    cdef int64_t* PL = &plist[0]
    cdef int64_t* PP = &pes[0]
    cdef int64_t* PST = &pstamp[0]
    cdef int64_t* TL = &touched[0]
    cdef int64_t* TST = &tstamp[0]
    cdef int64_t* W = &work[0]
    cdef int64_t* NX = &nextw[0]
    cdef int64_t* AST = &astamp[0]
    cdef int64_t* B = &ball[0]
    cdef int64_t* BST = &bstamp[0]
    cdef int32_t* LEV = &level[0]
    cdef double* MEMO = &memo[0]
    cdef int64_t* MST = &mstamp[0]
    cdef uint64_t rng = seed * <uint64_t>2654435761 + 12345
    cdef double start = _now(), gain_total = 0.0, change, delta, gu
    cdef int64_t done = 0, improved = 0, idle = 0, evals = 0, next_check = 1024, spent = 0
    cdef int64_t du
    cdef int64_t cnt, head, tail, i, j, e, a, x, y, u, v, t, nt, nw, nn, key, ku
    cdef int64_t amark = 0, bmark = 0, mmark = 0
    cdef bint timed_out = False, cut = False
    if n < 2 or patch < 2 or rounds < 1:
        return 0.0, 0, 0, False, 0, 0, False
    if patch > n:
        patch = n
    _set_graph(&g, indptr, indices, weights)
    with nogil:
        while (done < rounds and idle < patience and not cut
               and (max_work <= 0 or spent < max_work)):
            if time_limit > 0 and _now() - start > time_limit:
                timed_out = True
                break
            # the patch: breadth-first from a random rank, CSR order
            x = <int64_t>(_rng_next(&rng) % <uint64_t>n)
            PST[x] = done
            PL[0] = x
            cnt = 1
            head = 0
            while head < cnt and cnt < patch:
                a = PL[head]
                head += 1
                for e in range(g.indptr[a], g.indptr[a + 1]):
                    y = g.indices[e]
                    if PST[y] != done:
                        PST[y] = done
                        PL[cnt] = y
                        cnt += 1
                        if cnt == patch:
                            break
            # the kick: the patch's PEs in random order; BEST still holds the old ones
            for i in range(cnt):
                PP[i] = P[PL[i]]
            _shuffle(PP, cnt, &rng)
            nt = 0
            for i in range(cnt):
                P[PL[i]] = PP[i]
                _touch(PL[i], done, TST, TL, &nt)
            # its change of J: edges with an end in the patch (inside ones once)
            change = 0.0
            for i in range(cnt):
                x = PL[i]
                for e in range(g.indptr[x], g.indptr[x + 1]):
                    y = g.indices[e]
                    if PST[y] == done:
                        if x < y:
                            change += g.weights[e] * (_dist(&o, P[x], P[y])
                                                      - _dist(&o, BEST[x], BEST[y]))
                    else:
                        change += g.weights[e] * (_dist(&o, P[x], P[y])
                                                  - _dist(&o, BEST[x], P[y]))
            for i in range(cnt):
                spent += 1 + g.indptr[PL[i] + 1] - g.indptr[PL[i]]
            # the repair: N_C^depth from the patch and its neighbours only
            amark += 1
            nn = 0
            for i in range(cnt):
                _activate(&g, PL[i], amark, AST, NX, &nn)
            while nn > 0 and not timed_out and not cut:
                for i in range(nn):
                    W[i] = NX[i]
                nw = nn
                nn = 0
                amark += 1
                _shuffle(W, nw, &rng)
                for i in range(nw):
                    if timed_out or cut:
                        break
                    if cap > 0 and spent >= cap:
                        cut = True  # one round of a hub graph: a whole N_C^d search
                        break
                    u = W[i]
                    du = g.indptr[u + 1] - g.indptr[u]
                    gu = _gamma(&g, &o, P, u, P[u])
                    spent += du * (1 + du * o.k)  # Γ and the bound
                    if (o.gid != NULL and not o.hop
                            and gu - _best_gamma_bound(&g, &o, P, u) <= eps):
                        # u sits in its best group: no swap gains on its side, and
                        # one gaining on the partner's is seen from there
                        continue
                    # the ball around u, written out as in cycle_search: one shared
                    # inline helper made GCC compile cycle_search's rotation loop to
                    # 2.5 % more instructions (callgrind, same results)
                    bmark += 1
                    BST[u] = bmark
                    LEV[u] = 0
                    head = 0
                    tail = 0
                    x = u
                    while True:
                        if LEV[x] < depth:
                            spent += g.indptr[x + 1] - g.indptr[x]
                            for e in range(g.indptr[x], g.indptr[x + 1]):
                                a = g.indices[e]
                                if BST[a] != bmark:
                                    BST[a] = bmark
                                    LEV[a] = LEV[x] + 1
                                    B[tail] = a
                                    tail += 1
                        if head == tail:
                            break
                        x = B[head]
                        head += 1
                    mmark += 1
                    ku = _group(&o, P[u])
                    spent += tail
                    for j in range(tail):
                        if cap > 0 and spent >= cap:
                            cut = True
                            break
                        v = B[j]
                        key = _group(&o, P[v])
                        if key == ku and o.gid != NULL:
                            continue  # one innermost group: the swap cannot change J
                        if MST[key] != mmark:
                            MST[key] = mmark
                            MEMO[key] = _gamma_group(&g, &o, P, u, P[v])
                            spent += du
                        if gu - MEMO[key] <= eps:
                            continue  # u's side cannot gain; v's is tried from v
                        delta = _swap_delta(&g, &o, P, u, v)
                        evals += 1
                        spent += du + g.indptr[v + 1] - g.indptr[v]
                        if delta < -eps:
                            t = P[u]
                            P[u] = P[v]
                            P[v] = t
                            change += delta
                            _touch(u, done, TST, TL, &nt)
                            _touch(v, done, TST, TL, &nt)
                            _activate(&g, u, amark, AST, NX, &nn)
                            _activate(&g, v, amark, AST, NX, &nn)
                            gu = _gamma(&g, &o, P, u, P[u])
                            ku = _group(&o, P[u])
                            mmark += 1  # u's bounds moved with it
                        if time_limit > 0 and evals >= next_check:
                            next_check = evals + 1024
                            if _now() - start > time_limit:
                                timed_out = True
                                break
            done += 1
            if change < -eps:
                gain_total -= change
                improved += 1
                idle = 0
                for i in range(nt):
                    BEST[TL[i]] = P[TL[i]]
            else:
                idle += 1
                for i in range(nt):
                    P[TL[i]] = BEST[TL[i]]
    return gain_total, done, improved, bool(timed_out), evals, spent, bool(cut)
