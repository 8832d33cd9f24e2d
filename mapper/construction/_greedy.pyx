# cython: language_level=3
"""Compiled greedy constructions.

* ``greedy_construct`` -- :mod:`mapper.construction.greedy` (Müller-Merbach,
  GreedyAllC);
* ``ohtma_greedy``, ``ohtma_exchange`` -- :mod:`mapper.construction.ohtma` (Li et al.'s
  greedy and its locked best-pair exchange pass).

The construction modules hold the documentation, complexities and references; the
distance oracle is ``mapper/model/_oracle.pxd``'s.
"""

import numpy as np

cimport numpy as cnp
from libc.math cimport INFINITY
from libc.stdint cimport int32_t, int64_t
from libc.stdlib cimport free
from libc.string cimport memset

from mapper.model._oracle cimport Graph, Oracle, _dist, _gamma, _make_oracle, _now

cnp.import_array()

cdef void _dist_row_add(const Oracle* o, int64_t p, double coef, double* out) noexcept nogil:
    """out[q] += coef * D(p, q) for every PE q: O(n) look-ups (O(n k) for a hierarchy)."""
    cdef int64_t q, a, b
    cdef const double* row
    if o.gid == NULL:
        row = o.mat + p * o.n
        for q in range(o.n):
            if q != p:
                out[q] += coef * row[q]
    elif o.hop:
        # one row of the between-node table, the own node's PEs by their levels
        a = o.gid[p * o.k + o.k - 1]
        row = o.mat + a * o.nodes
        for q in range(o.n):
            b = o.gid[q * o.k + o.k - 1]
            if b != a:
                out[q] += coef * row[b]
            elif q != p:
                out[q] += coef * _dist(o, p, q)
    else:
        for q in range(o.n):
            if q != p:
                out[q] += coef * _dist(o, p, q)


cdef void _fill_free_in_order(int64_t* P, cnp.uint8_t* U, int64_t n) noexcept nogil:
    """The ranks not yet placed (P[r] < 0) onto the free PEs (not U[q]), both in order:
    what a greedy construction cut short by its time limit leaves.  O(n)."""
    cdef int64_t r, q = 0
    for r in range(n):
        if P[r] < 0:
            while U[q]:
                q += 1
            P[r] = q
            U[q] = 1


def greedy_construct(cnp.ndarray[int64_t, ndim=1, mode="c"] indptr,
                     cnp.ndarray[int32_t, ndim=1, mode="c"] indices,
                     cnp.ndarray[double, ndim=1, mode="c"] weights,
                     cnp.ndarray[double, ndim=1, mode="c"] volume,
                     cnp.ndarray[double, ndim=1, mode="c"] pe_total_distance,
                     object gid, object dist, object mat, bint linked,
                     double time_limit):
    """Müller-Merbach greedy (``linked=False``) or GreedyAllC (``linked=True``).

    Both pick next the unassigned rank with the largest volume to assigned ranks (ties:
    largest total volume).  Müller-Merbach puts it on the free PE with the smallest
    distance sum to assigned PEs (ties: smallest total distance); GreedyAllC on the free
    PE minimizing sum over assigned neighbours v of C_uv * D(p, pi(v)).  O(n^2 k) and
    O(n (n + m) k) time; O(n) memory.  Returns (pe, timed_out); on time-out the rest of
    the ranks take the remaining PEs in order.
    """
    cdef int64_t n = len(volume)
    cdef Graph g
    cdef Oracle o = _make_oracle(gid, dist, mat, n)
    cdef cnp.ndarray[int64_t, ndim=1, mode="c"] pe = np.full(n, -1, dtype=np.int64)
    cdef cnp.ndarray[double, ndim=1, mode="c"] comm = np.zeros(n, dtype=np.float64)
    cdef cnp.ndarray[double, ndim=1, mode="c"] dsum = np.zeros(n, dtype=np.float64)
    cdef cnp.ndarray[cnp.uint8_t, ndim=1, mode="c"] used = np.zeros(n, dtype=np.uint8)
    cdef int64_t* P = &pe[0] if n else NULL
    cdef double* CM = &comm[0] if n else NULL
    cdef double* DS = &dsum[0] if n else NULL
    cdef cnp.uint8_t* U = &used[0] if n else NULL
    cdef const double* VOL = &volume[0] if n else NULL
    cdef const double* TD = &pe_total_distance[0] if n else NULL
    cdef int64_t step, u, p, q, e, w, best_u, best_p
    cdef double best, cost, start = _now()
    cdef bint timed_out = False, has_assigned_nb
    if n == 0:
        return pe, False
    g.indptr = &indptr[0]
    g.indices = &indices[0]
    g.weights = &weights[0]
    with nogil:
        for step in range(n):
            if time_limit > 0 and (step & 63) == 0 and _now() - start > time_limit:
                timed_out = True
                break
            best_u = -1
            for u in range(n):
                if P[u] < 0 and (best_u < 0 or CM[u] > CM[best_u]
                                 or (CM[u] == CM[best_u] and VOL[u] > VOL[best_u])):
                    best_u = u
            u = best_u
            best_p = -1
            has_assigned_nb = False
            if linked:
                for e in range(g.indptr[u], g.indptr[u + 1]):
                    if P[g.indices[e]] >= 0:
                        has_assigned_nb = True
                        break
            if has_assigned_nb:
                best = 0.0
                for p in range(n):
                    if U[p]:
                        continue
                    cost = 0.0
                    for e in range(g.indptr[u], g.indptr[u + 1]):
                        w = g.indices[e]
                        if P[w] >= 0:
                            cost += g.weights[e] * _dist(&o, p, P[w])
                    if best_p < 0 or cost < best or (cost == best and DS[p] < DS[best_p]):
                        best = cost
                        best_p = p
            else:
                for p in range(n):
                    if not U[p] and (best_p < 0 or DS[p] < DS[best_p]
                                     or (DS[p] == DS[best_p] and TD[p] < TD[best_p])):
                        best_p = p
            p = best_p
            P[u] = p
            U[p] = 1
            for e in range(g.indptr[u], g.indptr[u + 1]):
                CM[g.indices[e]] += g.weights[e]
            for q in range(n):
                if not U[q]:
                    DS[q] += _dist(&o, q, p)
        if timed_out:
            _fill_free_in_order(P, U, n)
    return pe, bool(timed_out)


def ohtma_greedy(cnp.ndarray[int64_t, ndim=1, mode="c"] indptr,
                 cnp.ndarray[int32_t, ndim=1, mode="c"] indices,
                 cnp.ndarray[double, ndim=1, mode="c"] weights,
                 cnp.ndarray[double, ndim=1, mode="c"] volume,
                 cnp.ndarray[double, ndim=1, mode="c"] pe_total_distance,
                 object gid, object dist, object mat, double time_limit=0.0):
    """OHTMA's greedy (lines 1-21): the free rank of largest blended comm_p onto the free
    PE of smallest blended hops_n, lowest index on ties.  The sums over the selected
    sets grow by one CSR row and one distance row a step: O(n² + m) look-ups, O(n)
    memory.  Returns (rank → PE, timed_out); past ``time_limit`` seconds (0: none) the
    ranks left take the PEs left in order, as in :func:`greedy_construct`."""
    cdef int64_t n = len(volume)
    cdef Oracle o = _make_oracle(gid, dist, mat, n)
    cdef cnp.ndarray[int64_t, ndim=1, mode="c"] pe = np.full(n, -1, dtype=np.int64)
    cdef cnp.ndarray[double, ndim=1, mode="c"] comm_sel = np.zeros(max(n, 1))
    cdef cnp.ndarray[double, ndim=1, mode="c"] hops_sel = np.zeros(max(n, 1))
    cdef cnp.ndarray[cnp.uint8_t, ndim=1, mode="c"] used = np.zeros(max(n, 1), dtype=np.uint8)
    cdef int64_t* P = &pe[0] if n else NULL
    cdef double* CS = &comm_sel[0]
    cdef double* HS = &hops_sel[0]
    cdef cnp.uint8_t* U = &used[0]
    cdef const double* VOL = &volume[0] if n else NULL
    cdef const double* TD = &pe_total_distance[0] if n else NULL
    cdef const int64_t* IP = &indptr[0]
    cdef const int32_t* IX = &indices[0] if len(indices) else NULL
    cdef const double* W = &weights[0] if len(weights) else NULL
    cdef int64_t k, x, p, q, e
    cdef double div, val, best, start = _now()
    cdef bint timed_out = False
    with nogil:
        for k in range(n):
            if time_limit > 0 and (k & 63) == 0 and _now() - start > time_limit:
                timed_out = True
                break
            div = <double>(1 + k)
            # the same expressions as comm_sel + (volume - comm_sel) / (1 + k) in numpy,
            # so ties break alike
            p = -1
            best = 0.0
            for x in range(n):
                if P[x] < 0:
                    val = CS[x] + (VOL[x] - CS[x]) / div
                    if p < 0 or val > best:
                        best = val
                        p = x
            q = -1
            for x in range(n):
                if not U[x]:
                    val = HS[x] + (TD[x] - HS[x]) / div
                    if q < 0 or val < best:
                        best = val
                        q = x
            P[p] = q
            U[q] = 1
            for e in range(IP[p], IP[p + 1]):
                CS[IX[e]] += W[e]
            _dist_row_add(&o, q, 1.0, HS)
        if timed_out:
            _fill_free_in_order(P, U, n)
    return pe, bool(timed_out)


cdef double _ohtma_row(const Graph* g, const Oracle* o, const int64_t* F, int64_t c,
                       const double* SD, const cnp.uint8_t* LOCK, double* GC, double* DC,
                       double* out, int64_t* arg) noexcept nogil:
    """out[i] = gain of exchanging ranks c and i, for every rank i (-inf where i is
    locked or i == c); returns the largest, its rank in arg[0] (lowest on ties, -1 when
    every entry is -inf).

    gain(c, i) = S_c(f_c) - S_c(f_i) + S_i(f_i) - S_i(f_c) - 2 A_ci B(f_c, f_i) with
    S_x(q) = Σ_l A_xl B(q, f_l) and SD[x] = S_x(f_x).  S_c at every PE is the sum of
    deg(c) distance rows (GC), S_i(f_c) for every i one pass over the edges with the
    distance row of f_c (DC): O((deg c + 1) n + m) look-ups, nothing n x n.
    """
    cdef int64_t n = o.n, e, i, l
    cdef double s, best = -INFINITY
    memset(GC, 0, n * sizeof(double))
    memset(DC, 0, n * sizeof(double))
    for e in range(g.indptr[c], g.indptr[c + 1]):
        _dist_row_add(o, F[g.indices[e]], g.weights[e], GC)
    _dist_row_add(o, F[c], 1.0, DC)
    for i in range(n):
        if LOCK[i] or i == c:
            out[i] = -INFINITY
            continue
        s = 0.0
        for e in range(g.indptr[i], g.indptr[i + 1]):
            s += g.weights[e] * DC[F[g.indices[e]]]
        out[i] = SD[c] - GC[F[i]] + SD[i] - s
    for e in range(g.indptr[c], g.indptr[c + 1]):
        l = g.indices[e]
        if l != c and not LOCK[l]:
            out[l] -= 2.0 * g.weights[e] * DC[F[l]]
    arg[0] = -1
    for i in range(n):
        if out[i] > best:
            best = out[i]
            arg[0] = i
    return best


def ohtma_exchange(cnp.ndarray[int64_t, ndim=1, mode="c"] indptr,
                   cnp.ndarray[int32_t, ndim=1, mode="c"] indices,
                   cnp.ndarray[double, ndim=1, mode="c"] weights,
                   cnp.ndarray[int64_t, ndim=1, mode="c"] pe,
                   object gid, object dist, object mat, int64_t loop, double time_limit):
    """OHTMA's exchange pass (lines 20-39) without the backtracking: ``loop`` times, the
    pair of unlocked ranks whose exchange lowers J most (even when negative), exchanged
    and locked.  ``pe`` is not modified.

    Every unlocked rank keeps its best partner and gain (exact, or an upper bound when
    marked dirty).  An exchange of m and n' changes gain(i, j) only when i or j is in
    K = N(m) ∪ N(n') ∪ {m, n'}; by symmetry the |K| rows recomputed for K also give
    every other row its new values in the columns K, and a row whose best partner was
    in K keeps its old best as an upper bound until it reaches the top.  A step costs
    O(|K| (d n + m)) look-ups plus the recomputed dirty rows, the start n rows; memory
    O(n).  Returns (pairs (s x 2), gains (s), timed_out) for the s exchanges made.
    """
    cdef int64_t n = len(pe)
    cdef Graph g
    cdef Oracle o = _make_oracle(gid, dist, mat, n)
    loop = max(0, min(loop, n // 2))
    cdef cnp.ndarray[int64_t, ndim=2, mode="c"] pairs = np.zeros((max(loop, 1), 2),
                                                                 dtype=np.int64)
    cdef cnp.ndarray[double, ndim=1, mode="c"] gains = np.zeros(max(loop, 1))
    cdef int64_t size = max(n, 1)
    cdef cnp.ndarray[int64_t, ndim=1, mode="c"] f = np.array(pe, dtype=np.int64)
    cdef cnp.ndarray[double, ndim=1, mode="c"] sd = np.zeros(size)
    cdef cnp.ndarray[double, ndim=1, mode="c"] best = np.full(size, -np.inf)
    cdef cnp.ndarray[int64_t, ndim=1, mode="c"] arg = np.full(size, -1, dtype=np.int64)
    cdef cnp.ndarray[cnp.uint8_t, ndim=1, mode="c"] dirty = np.zeros(size, dtype=np.uint8)
    cdef cnp.ndarray[cnp.uint8_t, ndim=1, mode="c"] locked = np.zeros(size, dtype=np.uint8)
    cdef cnp.ndarray[double, ndim=1, mode="c"] row = np.zeros(size)
    cdef cnp.ndarray[double, ndim=1, mode="c"] gc = np.zeros(size)
    cdef cnp.ndarray[double, ndim=1, mode="c"] dc = np.zeros(size)
    cdef cnp.ndarray[double, ndim=1, mode="c"] colbest = np.zeros(size)
    cdef cnp.ndarray[int64_t, ndim=1, mode="c"] colarg = np.zeros(size, dtype=np.int64)
    cdef cnp.ndarray[int64_t, ndim=1, mode="c"] kstamp = np.full(size, -1, dtype=np.int64)
    cdef cnp.ndarray[int64_t, ndim=1, mode="c"] klist = np.zeros(size, dtype=np.int64)
    cdef int64_t* F = &f[0] if n else NULL
    cdef double* SD = &sd[0]
    cdef double* BEST = &best[0]
    cdef int64_t* ARG = &arg[0]
    cdef cnp.uint8_t* DIRTY = &dirty[0]
    cdef cnp.uint8_t* LOCK = &locked[0]
    cdef double* ROW = &row[0]
    cdef double* GC = &gc[0]
    cdef double* DC = &dc[0]
    cdef double* CB = &colbest[0]
    cdef int64_t* CA = &colarg[0]
    cdef int64_t* KST = &kstamp[0]
    cdef int64_t* KL = &klist[0]
    cdef int64_t* PAIRS = &pairs[0, 0]
    cdef double* GAINS = &gains[0]
    cdef int64_t steps = 0, i, j, x, c, e, t, kn, epoch = 0
    cdef double v, start = _now()
    cdef bint timed_out = False
    if n < 2 or loop == 0:
        return pairs[:0], gains[:0], False
    g.indptr = &indptr[0]
    g.indices = &indices[0]
    g.weights = &weights[0]
    with nogil:
        for x in range(n):
            SD[x] = _gamma(&g, &o, F, x, F[x])
        for c in range(n):
            if time_limit > 0 and (c & 63) == 0 and _now() - start > time_limit:
                timed_out = True
                break
            BEST[c] = _ohtma_row(&g, &o, F, c, SD, LOCK, GC, DC, ROW, &ARG[c])
        while steps < loop and not timed_out:
            if time_limit > 0 and _now() - start > time_limit:
                timed_out = True
                break
            # select: the top row, recomputed while it only holds an upper bound
            while True:
                i = -1
                v = -INFINITY
                for x in range(n):
                    if BEST[x] > v:
                        v = BEST[x]
                        i = x
                if i < 0 or not DIRTY[i]:
                    break
                BEST[i] = _ohtma_row(&g, &o, F, i, SD, LOCK, GC, DC, ROW, &ARG[i])
                DIRTY[i] = 0
            if i < 0:
                break  # no free pair left
            j = ARG[i]
            PAIRS[2 * steps] = i
            PAIRS[2 * steps + 1] = j
            GAINS[steps] = v
            steps += 1
            # exchange and lock
            t = F[i]
            F[i] = F[j]
            F[j] = t
            LOCK[i] = 1
            LOCK[j] = 1
            BEST[i] = -INFINITY
            BEST[j] = -INFINITY
            DIRTY[i] = 0
            DIRTY[j] = 0
            epoch += 1
            KST[i] = epoch
            KST[j] = epoch
            KL[0] = i
            KL[1] = j
            kn = 2
            for t in range(2):
                for e in range(g.indptr[KL[t]], g.indptr[KL[t] + 1]):
                    c = g.indices[e]
                    if KST[c] != epoch:
                        KST[c] = epoch
                        KL[kn] = c
                        kn += 1
            for x in range(kn):
                SD[KL[x]] = _gamma(&g, &o, F, KL[x], F[KL[x]])
            for x in range(n):
                CB[x] = -INFINITY
                CA[x] = -1
            # rows in K: exact again; their entries are the other rows' columns K
            for t in range(kn):
                c = KL[t]
                if LOCK[c]:
                    continue
                BEST[c] = _ohtma_row(&g, &o, F, c, SD, LOCK, GC, DC, ROW, &ARG[c])
                DIRTY[c] = 0
                for x in range(n):
                    if ROW[x] > CB[x] or (ROW[x] == CB[x] and CA[x] >= 0 and c < CA[x]):
                        CB[x] = ROW[x]
                        CA[x] = c
            for x in range(n):
                if LOCK[x] or KST[x] == epoch:
                    continue
                # the old best stays an upper bound of the columns outside K
                if not DIRTY[x] and ARG[x] >= 0 and KST[ARG[x]] == epoch:
                    DIRTY[x] = 1
                if CB[x] > BEST[x]:
                    # above every other column: the exact maximum
                    BEST[x] = CB[x]
                    ARG[x] = CA[x]
                    DIRTY[x] = 0
    return pairs[:steps].copy(), gains[:steps].copy(), bool(timed_out)
