# cython: language_level=3
"""Compiled swap local search: the inner loops of :mod:`mapper.search.swap`.

* ``local_search`` -- :mod:`mapper.search.swap` (the gain formula), used by the three
  neighbourhoods :mod:`mapper.search.communication` (N_C^d),
  :mod:`mapper.search.pruned` (N_p) and :mod:`mapper.search.quadratic` (N^2), and by
  the cut refinement of :mod:`mapper.partitioners.exact_sizes`;
* ``swap_delta`` -- the same gain, exposed for the tests (and ``visit_order``, the
  order of N_C^d's first pass on a renumbered graph);
* ``renumbered_csr`` -- the PE-order renumbering of :func:`mapper.search.swap.run`.

Their callers hold the documentation, complexities and references; the distance oracle
is ``mapper/model/_oracle.pxd``'s.
"""

import numpy as np

cimport numpy as cnp
from libc.stdint cimport int32_t, int64_t, uint64_t
from libc.stdlib cimport free, malloc, qsort

from mapper.model._oracle cimport Graph, Oracle, _best_gamma_bound, _gamma, _gamma_group, _make_oracle, _now, _shuffle, _shuffle_runs, _swap_delta

cnp.import_array()

# Search spaces of local_search; mapper.search.swap.SearchMode names them for Python
# callers (a test checks both agree through search_modes()).
cdef enum:
    MODE_COMMUNICATION = 0   # N_C^d: pairs within d hops in the communication graph
    MODE_PRUNED = 1          # N_p: pairs inside consecutive blocks of PE indices
    MODE_QUADRATIC = 2       # N^2: all pairs


def search_modes():
    """The mode numbers ``local_search`` understands, by name."""
    return {"COMMUNICATION": MODE_COMMUNICATION, "PRUNED": MODE_PRUNED,
            "QUADRATIC": MODE_QUADRATIC}


cdef inline bint _equivalent(const Oracle* o, int64_t p, int64_t q) noexcept nogil:
    """True when swapping the ranks on PEs p and q cannot change J.

    In a hierarchy two PEs of the same innermost group are at equal distance from every
    other PE (the pruning of Brandfass et al.).  An explicit matrix gives no such
    guarantee.
    """
    if p == q:
        return True
    if o.gid == NULL:
        return False
    # also true on a node hop machine: one innermost group lies inside one node
    return o.gid[p * o.k] == o.gid[q * o.k]


def swap_delta(cnp.ndarray[int64_t, ndim=1, mode="c"] indptr,
               cnp.ndarray[int32_t, ndim=1, mode="c"] indices,
               cnp.ndarray[double, ndim=1, mode="c"] weights,
               cnp.ndarray[int64_t, ndim=1, mode="c"] pe,
               object gid, object dist, object mat, int64_t u, int64_t v):
    """Change of J if ranks u and v swap PEs (exposed for tests)."""
    cdef Graph g
    g.indptr = &indptr[0]
    g.indices = &indices[0]
    g.weights = &weights[0]
    cdef Oracle o = _make_oracle(gid, dist, mat, len(pe))
    return _swap_delta(&g, &o, &pe[0], u, v)


cdef void _mark_ball(const Graph* g, int64_t src, int64_t radius, cnp.uint8_t* act,
                     int64_t* q, int32_t* dep, int64_t* st, int64_t* visit) noexcept nogil:
    """Set act[] for every vertex within ``radius`` hops of src (BFS)."""
    cdef int64_t head = 0, tail = 1, a, e, w
    q[0] = src
    dep[src] = 0
    st[src] = visit[0]
    act[src] = 1
    while head < tail:
        a = q[head]
        head += 1
        if dep[a] >= radius:
            continue
        for e in range(g.indptr[a], g.indptr[a + 1]):
            w = g.indices[e]
            if st[w] != visit[0]:
                st[w] = visit[0]
                dep[w] = dep[a] + 1
                act[w] = 1
                q[tail] = w
                tail += 1
    visit[0] += 1


def local_search(cnp.ndarray[int64_t, ndim=1, mode="c"] indptr,
                 cnp.ndarray[int32_t, ndim=1, mode="c"] indices,
                 cnp.ndarray[double, ndim=1, mode="c"] weights,
                 cnp.ndarray[int64_t, ndim=1, mode="c"] pe,
                 object gid, object dist, object mat,
                 int mode, int64_t param, uint64_t seed, double time_limit,
                 double eps, int64_t chunk=1):
    """Improve ``pe`` (rank → PE, modified in place) by gain-positive swaps.

    mode MODE_COMMUNICATION (0): N_C^d, ranks within communication-graph distance
    ``param`` (BFS balls).
    A first pass visits all ranks in random order (with ``chunk`` > 1: runs of
    ``chunk`` consecutive ranks in random order, each run shuffled, see
    :func:`mapper.search.swap.run`); later passes visit only the ranks
    that took part in a swap or neighbour one since they were last visited, until none
    is left.  Like the paper's reference code, which re-activates only the pairs of the
    two swapped ranks, this does not re-test every pair whose gain a distant swap may
    have changed: exact local optimality in N_C^d would cost repeated full passes of
    n·|ball| pairs for a fraction of a percent.  Pair
    (u, v) is fully evaluated only when u alone would gain from moving to v's PE
    (Γ_u(π(u)) > Γ_u(π(v)), memoised per innermost group); any improving swap has a
    side that gains, and the pair is examined from both sides, so nothing is lost.
    mode MODE_PRUNED (1): N_p, all pairs of PEs inside consecutive PE index blocks of
    size ``param``.
    mode MODE_QUADRATIC (2): N^2, all PE pairs in Heider's cyclic order.  These two repeat
    full
    passes until one makes no improving swap.  Every mode stops at ``time_limit``
    seconds (<= 0: none).  Returns (total gain, swaps, passes, timed_out, full
    gain evaluations).
    """
    cdef int64_t n = len(pe)
    cdef Graph g
    cdef Oracle o = _make_oracle(gid, dist, mat, n)
    cdef int64_t nkeys = n if gid is None or n == 0 else int(np.max(gid[:, 0])) + 1
    cdef cnp.ndarray[int64_t, ndim=1, mode="c"] order = np.arange(n, dtype=np.int64)
    cdef cnp.ndarray[int64_t, ndim=1, mode="c"] rank_of = np.empty(n, dtype=np.int64)
    cdef cnp.ndarray[int64_t, ndim=1, mode="c"] queue = np.empty(max(n, 1), dtype=np.int64)
    cdef cnp.ndarray[int64_t, ndim=1, mode="c"] stamp = np.full(max(n, 1), -1, dtype=np.int64)
    cdef cnp.ndarray[cnp.uint8_t, ndim=1, mode="c"] active = np.ones(max(n, 1), dtype=np.uint8)
    cdef cnp.ndarray[int64_t, ndim=1, mode="c"] queue2 = np.empty(max(n, 1), dtype=np.int64)
    cdef cnp.ndarray[int64_t, ndim=1, mode="c"] runs = np.empty(
        max(n // max(chunk, 1) + 1, 1) if chunk > 1 else 1, dtype=np.int64)
    cdef cnp.ndarray[int64_t, ndim=1, mode="c"] tmp = np.empty(
        max(n, 1) if chunk > 1 else 1, dtype=np.int64)
    cdef int64_t* RUNS = &runs[0]
    cdef int64_t* TMP = &tmp[0]
    cdef cnp.ndarray[int32_t, ndim=1, mode="c"] depth2 = np.empty(max(n, 1), dtype=np.int32)
    cdef cnp.ndarray[int64_t, ndim=1, mode="c"] stamp2 = np.full(max(n, 1), -1, dtype=np.int64)
    cdef int64_t* Q2 = &queue2[0]
    cdef int32_t* DEP2 = &depth2[0]
    cdef int64_t* ST2 = &stamp2[0]
    cdef int64_t visit2 = 0
    cdef cnp.ndarray[double, ndim=1, mode="c"] memo = np.zeros(max(nkeys, 1), dtype=np.float64)
    cdef cnp.ndarray[int64_t, ndim=1, mode="c"] memo_stamp = np.full(max(nkeys, 1), -1,
                                                                     dtype=np.int64)
    cdef int64_t* P = &pe[0] if n else NULL
    cdef int64_t* R = &rank_of[0]
    cdef int64_t* Q = &queue[0]
    cdef int64_t* ST = &stamp[0]
    cdef int64_t* ORD = &order[0]
    cdef cnp.uint8_t* ACT = &active[0]
    cdef double* MEMO = &memo[0]
    cdef int64_t* MST = &memo_stamp[0]
    # Innermost groups holding none of u's neighbours share one bound per level-1 group:
    # every neighbour is then at a level >= 1 distance that is the same for all of them.
    cdef bint by_node = gid is not None and n > 0 and gid.shape[1] >= 2
    cdef int64_t nnodes = int(np.max(gid[:, 1])) + 1 if by_node else 1
    cdef cnp.ndarray[double, ndim=1, mode="c"] memo1 = np.zeros(nnodes, dtype=np.float64)
    cdef cnp.ndarray[int64_t, ndim=1, mode="c"] memo1_stamp = np.full(nnodes, -1, dtype=np.int64)
    cdef cnp.ndarray[int64_t, ndim=1, mode="c"] nb_stamp = np.full(max(nkeys, 1), -1,
                                                                   dtype=np.int64)
    cdef double* MEMO1 = &memo1[0]
    cdef int64_t* MST1 = &memo1_stamp[0]
    cdef int64_t* NBS = &nb_stamp[0]
    cdef uint64_t rng = seed * <uint64_t>2654435761 + 12345
    cdef double start = _now()
    cdef double gain_total = 0.0, delta, gu, gv
    cdef int64_t swaps = 0, passes = 0, evals = 0
    cdef bint improved = True, timed_out = False, full_pass = True
    cdef int64_t i, j, a, b, u, v, head, tail, e, w, lo, hi, t, visit = 0, memo_epoch = 0
    cdef int64_t blk, count, key, depth, level_end, pu0
    if mode != MODE_COMMUNICATION and mode != MODE_PRUNED and mode != MODE_QUADRATIC:
        raise ValueError(f"unknown local search mode {mode}")
    if n < 2:
        return 0.0, 0, 0, False, 0
    g.indptr = &indptr[0]
    g.indices = &indices[0]
    g.weights = &weights[0]
    for i in range(n):
        R[P[i]] = i
    with nogil:
        if mode == MODE_COMMUNICATION:
            while not timed_out:
                passes += 1
                count = 0
                for i in range(n):
                    if full_pass or ACT[i]:
                        ORD[count] = i
                        count += 1
                if count == 0:
                    break
                for i in range(count):
                    ACT[ORD[i]] = 0
                if chunk > 1:
                    _shuffle_runs(ORD, count, chunk, &rng, RUNS, TMP)
                else:
                    _shuffle(ORD, count, &rng)
                for i in range(count):
                    if timed_out:
                        break
                    # here, not after the rank: the ranks that cannot gain `continue`,
                    # and from a local optimum (Slurm's block placement of a stencil)
                    # that is all of them, a whole pass (0.9 s at 2^20) without a check
                    if (i & 255) == 0 and time_limit > 0 and _now() - start > time_limit:
                        timed_out = True
                        break
                    u = ORD[i]
                    gu = _gamma(&g, &o, P, u, P[u])
                    if (o.gid != NULL and not o.hop
                            and gu - _best_gamma_bound(&g, &o, P, u) <= eps):
                        # u sits in its best group: it cannot gain from any swap, and a
                        # swap that gains on its partner's side is seen from there
                        continue
                    # BFS ball of radius param around u, one level at a time
                    head = 0
                    tail = 1
                    Q[0] = u
                    ST[u] = visit
                    depth = 0
                    while head < tail and depth < param:
                        level_end = tail
                        while head < level_end:
                            a = Q[head]
                            head += 1
                            for e in range(g.indptr[a], g.indptr[a + 1]):
                                w = g.indices[e]
                                if ST[w] != visit:
                                    ST[w] = visit
                                    Q[tail] = w
                                    tail += 1
                        depth += 1
                    visit += 1
                    memo_epoch += 1
                    if by_node:
                        for e in range(g.indptr[u], g.indptr[u + 1]):
                            NBS[o.gid[P[g.indices[e]] * o.k]] = memo_epoch
                    pu0 = P[u] if o.gid == NULL else o.gid[P[u] * o.k]
                    for j in range(1, tail):
                        v = Q[j]
                        key = P[v] if o.gid == NULL else o.gid[P[v] * o.k]
                        if key == pu0 and o.gid != NULL:
                            continue  # same innermost group: the swap cannot change J
                        if by_node and NBS[key] != memo_epoch:
                            key = o.gid[P[v] * o.k + 1]
                            if MST1[key] != memo_epoch:
                                MST1[key] = memo_epoch
                                MEMO1[key] = _gamma_group(&g, &o, P, u, P[v])
                            if gu - MEMO1[key] <= eps:
                                continue
                        else:
                            if MST[key] != memo_epoch:
                                MST[key] = memo_epoch
                                MEMO[key] = _gamma_group(&g, &o, P, u, P[v])
                            if gu - MEMO[key] <= eps:
                                continue
                        delta = _swap_delta(&g, &o, P, u, v)
                        evals += 1
                        if delta < -eps:
                            t = P[u]
                            P[u] = P[v]
                            P[v] = t
                            R[P[u]] = u
                            R[P[v]] = v
                            gain_total -= delta
                            swaps += 1
                            # re-examine the swapped ranks and their neighbours, whose
                            # own contributions changed
                            _mark_ball(&g, u, 1, ACT, Q2, DEP2, ST2, &visit2)
                            _mark_ball(&g, v, 1, ACT, Q2, DEP2, ST2, &visit2)
                            memo_epoch += 1
                            if by_node:
                                for e in range(g.indptr[u], g.indptr[u + 1]):
                                    NBS[o.gid[P[g.indices[e]] * o.k]] = memo_epoch
                            gu = _gamma(&g, &o, P, u, P[u])
                            pu0 = P[u] if o.gid == NULL else o.gid[P[u] * o.k]
                        if (evals & 1023) == 0 and time_limit > 0 and _now() - start > time_limit:
                            timed_out = True
                            break
                full_pass = False
        else:
            while improved and not timed_out:
                improved = False
                passes += 1
                blk = param if mode == MODE_PRUNED else n
                if blk < 2:
                    blk = 2
                lo = 0
                while lo < n and not timed_out:
                    hi = lo + blk
                    if hi > n:
                        hi = n
                    for a in range(lo, hi):
                        if timed_out:
                            break
                        # per row too: pairs of equivalent PEs are skipped before the
                        # check below, and on a one-level machine that is every pair
                        if time_limit > 0 and ((a - lo) & 15) == 0 and _now() - start > time_limit:
                            timed_out = True
                            break
                        for b in range(a + 1, hi):
                            if _equivalent(&o, a, b):
                                continue
                            u = R[a]
                            v = R[b]
                            delta = _swap_delta(&g, &o, P, u, v)
                            evals += 1
                            if delta < -eps:
                                P[u] = b
                                P[v] = a
                                R[a] = v
                                R[b] = u
                                gain_total -= delta
                                swaps += 1
                                improved = True
                            if (evals & 4095) == 0 and time_limit > 0 and _now() - start > time_limit:
                                timed_out = True
                                break
                    lo = hi
    return gain_total, swaps, passes, bool(timed_out), evals


cdef struct _Arc:
    int32_t col
    double w


cdef int _arc_cmp(const void* a, const void* b) noexcept nogil:
    cdef int32_t x = (<const _Arc*>a).col, y = (<const _Arc*>b).col
    return (x > y) - (x < y)


def renumbered_csr(const int64_t[::1] indptr, const int32_t[::1] indices,
                   const double[::1] data, const int64_t[::1] rank_at,
                   const int64_t[::1] new_id):
    """CSR arrays of the graph with vertex ``rank_at[i]`` renumbered ``i`` (``new_id``
    is the inverse permutation), each row's columns sorted: ``a[rank_at][:, rank_at]``
    with sorted indices, for :func:`mapper.search.swap.run` (a CommGraph's dtypes).
    O(m + Σ d log d)."""
    cdef Py_ssize_t n = rank_at.shape[0], i, j, e, d, pos = 0
    cdef int64_t r
    cdef cnp.ndarray[int64_t, ndim=1, mode="c"] out_ptr = np.empty(n + 1, dtype=np.int64)
    cdef Py_ssize_t m = indices.shape[0]
    cdef cnp.ndarray[int32_t, ndim=1, mode="c"] out_idx = np.empty(m, dtype=np.int32)
    cdef cnp.ndarray[double, ndim=1, mode="c"] out_w = np.empty(m, dtype=np.float64)
    cdef Py_ssize_t widest = 0
    for i in range(n):
        r = rank_at[i]
        if indptr[r + 1] - indptr[r] > widest:
            widest = indptr[r + 1] - indptr[r]
    cdef _Arc* buf = <_Arc*>malloc(max(widest, 1) * sizeof(_Arc))
    if buf == NULL:
        raise MemoryError()
    cdef _Arc key
    try:
        with nogil:
            out_ptr[0] = 0
            for i in range(n):
                r = rank_at[i]
                d = 0
                for e in range(indptr[r], indptr[r + 1]):
                    key.col = <int32_t>new_id[indices[e]]
                    key.w = data[e]
                    # insertion sort while short; qsort below for wide rows
                    if widest <= 32:
                        j = d
                        while j > 0 and buf[j - 1].col > key.col:
                            buf[j] = buf[j - 1]
                            j -= 1
                        buf[j] = key
                    else:
                        buf[d] = key
                    d += 1
                if widest > 32 and d > 1:
                    qsort(buf, d, sizeof(_Arc), _arc_cmp)
                for j in range(d):
                    out_idx[pos] = buf[j].col
                    out_w[pos] = buf[j].w
                    pos += 1
                out_ptr[i + 1] = pos
    finally:
        free(buf)
    return out_ptr, out_idx, out_w


def visit_order(int64_t n, int64_t chunk, uint64_t seed):
    """The first pass's order of ranks 0..n-1 with runs of ``chunk`` (exposed for the
    tests; local_search draws it from its own generator state)."""
    cdef uint64_t rng = seed * <uint64_t>2654435761 + 12345
    cdef cnp.ndarray[int64_t, ndim=1, mode="c"] a = np.arange(n, dtype=np.int64)
    cdef cnp.ndarray[int64_t, ndim=1, mode="c"] runs = np.empty(n // max(chunk, 1) + 1,
                                                                dtype=np.int64)
    cdef cnp.ndarray[int64_t, ndim=1, mode="c"] tmp = np.empty(max(n, 1), dtype=np.int64)
    if n > 0:
        _shuffle_runs(&a[0], n, max(chunk, 1), &rng, &runs[0], &tmp[0])
    return a
