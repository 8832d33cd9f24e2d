# cython: language_level=3
"""Compiled hot loops of the mapper: swap local search and the greedy constructions.

Everything here works on the communication graph's CSR arrays and on one distance
oracle, given as ``(gid, dist, mat)``:

* a hierarchy: per-PE group ids ``gid`` (n x k, row-major) with level distances
  ``dist``, ``mat`` None;
* an explicit n x n matrix: ``mat``, ``gid`` and ``dist`` None;
* nodes on a non-tree network (:class:`mapper.networks.NodeHopMachine`): ``gid`` and
  ``dist`` describe the levels inside the nodes, the last column of ``gid`` being the
  node, and ``mat`` is the N x N between-node cost (``base + per_hop * hops``).  Two
  PEs of one node are at their node-level distance, PEs of nodes a != b at
  ``mat[a, b]``: O(N² + n k) memory, never n x n.

The oracle, the graph view, ``_dist``, the Γ bounds, ``_swap_delta``, the clock and the
random generator are in ``mapper/_oracle.pxd``, shared as inline functions with
:mod:`mapper.search._cycles`.  The Python modules that call these functions
hold the documentation, the complexities and the references; this file only makes their
inner loops fast:

* ``local_search`` -- :mod:`mapper.search.swap` (the gain formula), used by the three
  neighbourhoods :mod:`mapper.search.communication` (N_C^d),
  :mod:`mapper.search.pruned` (N_p) and :mod:`mapper.search.quadratic` (N^2), and by
  the cut refinement of :mod:`mapper.partitioners.exact_sizes`;
* ``greedy_construct`` -- :mod:`mapper.construction.greedy` (Müller-Merbach,
  GreedyAllC);
* ``ohtma_greedy``, ``ohtma_exchange`` -- :mod:`mapper.construction.ohtma` (Li et al.'s
  greedy and its locked best-pair exchange pass);
* ``swap_delta`` -- the same gain, exposed for the tests (and ``visit_order``, the
  order of N_C^d's first pass on a renumbered graph);
* ``induced_rows`` -- :func:`mapper.construction.topdown.induced_subgraph`;
* ``cut_of`` -- :func:`mapper.partitioners.exact_sizes.cut_weight`;
* ``scaled_weights`` -- :func:`mapper.partitioners.weights.metis_weights`;
* ``repair_proposals`` -- :func:`mapper.partitioners.exact_sizes.repair_sizes`;
* ``grow_halves``, ``within_blocks`` -- :func:`mapper.partitioners.exact_sizes.split_blocks_in_two`;
* ``renumbered_csr`` -- the PE-order renumbering of :func:`mapper.search.swap.run`;
* ``between_groups`` -- :func:`mapper.construction.regroup.quotient_graph`;
* ``level_volumes``, ``group_cuts`` -- :func:`mapper.objective.evaluate` and
  :func:`mapper.congestion.uplink_loads` on a hierarchy.
"""

import numpy as np

cimport numpy as cnp
from libc.math cimport INFINITY
from libc.stdint cimport int32_t, int64_t, uint64_t
from libc.string cimport memset
from libc.stdlib cimport free, malloc, qsort

from mapper._oracle cimport (Graph, Oracle, _best_gamma_bound, _dist, _gamma, _gamma_group,
                             _make_oracle, _now, _shuffle, _shuffle_runs, _swap_delta)

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


ctypedef fused index_t:
    int32_t
    int64_t


def induced_rows(const index_t[::1] indptr, const index_t[::1] indices,
                 const double[::1] data, const int64_t[::1] ranks, int64_t[::1] local):
    """CSR arrays of the subgraph induced by ``ranks`` -- the loops of
    :func:`mapper.construction.topdown.induced_subgraph` (documented there).
    ``local`` holds -1 on entry and on return."""
    cdef Py_ssize_t k = ranks.shape[0], i, e, total = 0
    cdef int64_t c, r
    for i in range(k):
        local[ranks[i]] = i
    cdef cnp.ndarray[int64_t, ndim=1, mode="c"] out_ptr = np.empty(k + 1, dtype=np.int64)
    out_ptr[0] = 0
    for i in range(k):
        r = ranks[i]
        for e in range(indptr[r], indptr[r + 1]):
            if local[indices[e]] >= 0:
                total += 1
        out_ptr[i + 1] = total
    cdef cnp.ndarray[int32_t, ndim=1, mode="c"] out_idx = np.empty(total, dtype=np.int32)
    cdef cnp.ndarray[double, ndim=1, mode="c"] out_w = np.empty(total, dtype=np.float64)
    total = 0
    for i in range(k):
        r = ranks[i]
        for e in range(indptr[r], indptr[r + 1]):
            c = local[indices[e]]
            if c >= 0:
                out_idx[total] = <int32_t>c
                out_w[total] = data[e]
                total += 1
    for i in range(k):
        local[ranks[i]] = -1
    return out_ptr, out_idx, out_w


def repair_proposals(const index_t[::1] indptr, const index_t[::1] indices,
                     const double[::1] data, const int64_t[::1] part,
                     const int64_t[::1] cand, const int64_t[::1] excess,
                     int64_t fallback):
    """Per candidate vertex: its connection to its own block, its best underfull target
    (largest connection, ties to the lowest block id; ``fallback`` without an edge into
    one) and that connection -- one round of :func:`mapper.partitioners.exact_sizes.repair_sizes`
    (scipy's per-call cost made its 256 small calls at 2^20 ranks take 0.3 s)."""
    cdef Py_ssize_t c = cand.shape[0], k = excess.shape[0], i, e, t, nt
    own_a = np.zeros(c, dtype=np.float64)
    target_a = np.full(c, fallback, dtype=np.int64)
    best_a = np.zeros(c, dtype=np.float64)
    conn_a = np.zeros(k, dtype=np.float64)
    seen_a = np.zeros(k, dtype=np.uint8)
    touched_a = np.empty(k, dtype=np.int64)
    cdef double[::1] own = own_a, best = best_a, conn = conn_a
    cdef int64_t[::1] target = target_a, touched = touched_a
    cdef cnp.uint8_t[::1] seen = seen_a
    cdef int64_t v, b, tb
    cdef double bv
    for i in range(c):
        v = cand[i]
        nt = 0
        for e in range(indptr[v], indptr[v + 1]):
            b = part[indices[e]]
            if not seen[b]:
                seen[b] = 1
                touched[nt] = b
                nt += 1
            conn[b] += data[e]
        tb, bv = -1, 0.0
        for t in range(nt):
            b = touched[t]
            if excess[b] < 0 and (tb < 0 or conn[b] > bv or (conn[b] == bv and b < tb)):
                tb, bv = b, conn[b]
        if seen[part[v]]:
            own[i] = conn[part[v]]
        if tb >= 0 and bv > 0:
            target[i], best[i] = tb, bv
        for t in range(nt):
            b = touched[t]
            seen[b] = 0
            conn[b] = 0.0
    return own_a, target_a, best_a


def cut_of(const index_t[::1] indptr, const index_t[::1] indices, const double[::1] data,
           const int64_t[::1] part):
    """Weight of the arcs between blocks, each undirected edge once -- the loop of
    :func:`mapper.partitioners.exact_sizes.cut_weight`."""
    cdef Py_ssize_t n = part.shape[0], u, e
    cdef double total = 0.0
    for u in range(n):
        for e in range(indptr[u], indptr[u + 1]):
            if part[indices[e]] != part[u]:
                total += data[e]
    return total / 2.0


def scaled_weights(const double[::1] data, double scale):
    """max(1, rint(w * scale)) as int64 for every w -- the loop of
    :func:`mapper.partitioners.weights.metis_weights` (numpy's four passes and temporaries cost
    0.25 s over Top-Down's splits at 2^20 ranks); ``rint`` rounds half to even, as
    ``np.rint`` does."""
    cdef Py_ssize_t n = data.shape[0], i
    out = np.empty(n, dtype=np.int64)
    cdef int64_t[::1] o = out
    cdef double x
    # adding and removing 2^52 rounds |x| < 2^51 to the nearest integer, half to even,
    # in the default rounding mode, inline (a call to rint per arc cost 0.1 s at 2^20)
    cdef double big = 4503599627370496.0
    with nogil:
        for i in range(n):
            x = data[i] * scale
            if -big < x < big:
                x = (x + big) - big
            o[i] = <int64_t>x if x >= 1.0 else 1
    return out


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


def level_volumes(const int64_t[::1] indptr, const int32_t[::1] indices,
                  const double[::1] weights, const int64_t[::1] pi,
                  const int32_t[:, ::1] gid):
    """Volume per hierarchy level of the mapping ``pi`` (rank → PE), each undirected
    edge once at the innermost level whose group holds both ends -- the loop of
    :func:`mapper.objective.evaluate`.  Edges are summed in the order of
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
    the loop of :func:`mapper.congestion.uplink_loads`, summed in its order (the
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
    :func:`mapper.congestion.node_hop_bytes`; O(m·L)."""
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


def grow_halves(const index_t[::1] indptr, const index_t[::1] indices,
                const double[::1] data, const int64_t[::1] block,
                const int64_t[::1] first, int64_t tries=1):
    """Part ``2 b`` or ``2 b + 1`` of every vertex: block ``b`` of ``block`` split in
    two, part ``2 b`` holding ``first[b]`` of its vertices, grown greedily from a
    pseudo-peripheral vertex, the lowest cut of ``tries`` starts -- the loops of
    :func:`mapper.partitioners.exact_sizes.split_blocks_in_two` (documented there).  Edges between
    blocks are ignored."""
    cdef Py_ssize_t n = block.shape[0], k = first.shape[0], i, e, j, p
    cdef int64_t b, x, w, size, target, best, head, tail, nfront, scan, grown, t
    cdef double score, best_score, cut, best_cut
    cdef cnp.ndarray[int64_t, ndim=1, mode="c"] part = np.empty(n, dtype=np.int64)
    cdef cnp.ndarray[cnp.uint8_t, ndim=1, mode="c"] keep = np.zeros(n, dtype=np.uint8)
    cdef cnp.ndarray[int64_t, ndim=1, mode="c"] starts = np.zeros(k + 1, dtype=np.int64)
    cdef cnp.ndarray[int64_t, ndim=1, mode="c"] members = np.empty(n, dtype=np.int64)
    cdef cnp.ndarray[int64_t, ndim=1, mode="c"] fill = np.empty(k, dtype=np.int64)
    cdef cnp.ndarray[double, ndim=1, mode="c"] conn = np.zeros(n, dtype=np.float64)
    cdef cnp.ndarray[double, ndim=1, mode="c"] inner = np.zeros(n, dtype=np.float64)
    cdef cnp.ndarray[int64_t, ndim=1, mode="c"] front = np.empty(n, dtype=np.int64)
    cdef cnp.ndarray[int64_t, ndim=1, mode="c"] where = np.full(n, -1, dtype=np.int64)
    cdef cnp.ndarray[int64_t, ndim=1, mode="c"] queue = np.empty(n, dtype=np.int64)
    cdef cnp.ndarray[cnp.uint8_t, ndim=1, mode="c"] seen = np.zeros(n, dtype=np.uint8)
    if tries < 1:
        raise ValueError(f"tries must be at least 1, got {tries}")
    for i in range(n):
        if block[i] < 0 or block[i] >= k:
            raise ValueError(f"block {block[i]} of vertex {i} is not in 0..{k - 1}")
        starts[block[i] + 1] += 1
    for b in range(k):
        starts[b + 1] += starts[b]
        fill[b] = starts[b]
    for i in range(n):
        members[fill[block[i]]] = i
        fill[block[i]] += 1
    for i in range(n):
        part[i] = 2 * block[i] + 1
        for e in range(indptr[i], indptr[i + 1]):
            if block[indices[e]] == block[i] and indices[e] != i:
                inner[i] += data[e]
    for b in range(k):
        size = starts[b + 1] - starts[b]
        target = first[b]
        if target < 0 or target > size:
            raise ValueError(f"block {b} has {size} vertices, cannot give {target} to "
                             f"its first part")
        if target == 0:
            continue
        best_cut = INFINITY
        for t in range(min(tries, size)):
            # pseudo-peripheral start: the last vertex a breadth-first search (within
            # the block) from a member reaches; the members are spread over the tries
            x = members[starts[b] + (t * size) // tries]
            head, tail = 0, 1
            queue[0] = x
            seen[x] = 1
            while head < tail:
                x = queue[head]
                head += 1
                for e in range(indptr[x], indptr[x + 1]):
                    w = indices[e]
                    if block[w] == b and not seen[w]:
                        seen[w] = 1
                        queue[tail] = w
                        tail += 1
            for j in range(tail):
                seen[queue[j]] = 0
            # grow: always the frontier vertex whose move lowers the cut most
            nfront = 0
            scan = starts[b]
            grown = 0
            cut = 0.0
            while grown < target:
                if nfront == 0:
                    if grown > 0:
                        # disconnected block: the next member not yet taken
                        while part[members[scan]] == 2 * b:
                            scan += 1
                        x = members[scan]
                    # else x is the pseudo-peripheral vertex
                    score = -inner[x]
                else:
                    best = 0
                    best_score = 2.0 * conn[front[0]] - inner[front[0]]
                    for j in range(1, nfront):
                        score = 2.0 * conn[front[j]] - inner[front[j]]
                        if score > best_score:
                            best_score = score
                            best = j
                    x = front[best]
                    score = best_score
                    nfront -= 1
                    front[best] = front[nfront]
                    where[front[best]] = best
                    where[x] = -1
                part[x] = 2 * b
                cut -= score
                grown += 1
                for e in range(indptr[x], indptr[x + 1]):
                    w = indices[e]
                    if block[w] != b or part[w] == 2 * b:
                        continue
                    if where[w] < 0:
                        where[w] = nfront
                        front[nfront] = w
                        nfront += 1
                    conn[w] += data[e]
            for j in range(nfront):
                where[front[j]] = -1
            for p in range(starts[b], starts[b + 1]):
                x = members[p]
                conn[x] = 0.0
                if cut < best_cut:
                    keep[x] = part[x] == 2 * b
                part[x] = 2 * b + 1
            if cut < best_cut:
                best_cut = cut
        for p in range(starts[b], starts[b + 1]):
            x = members[p]
            if keep[x]:
                part[x] = 2 * b
    return part


def within_blocks(const index_t[::1] indptr, const index_t[::1] indices,
                  const double[::1] data, const int64_t[::1] block):
    """CSR arrays of the graph without its edges between different blocks of
    ``block`` (for :func:`mapper.partitioners.exact_sizes.split_blocks_in_two`'s refinement)."""
    cdef Py_ssize_t n = block.shape[0], i, e, total = 0
    cdef cnp.ndarray[int64_t, ndim=1, mode="c"] out_ptr = np.empty(n + 1, dtype=np.int64)
    cdef cnp.ndarray[int32_t, ndim=1, mode="c"] out_idx = np.empty(indices.shape[0],
                                                                   dtype=np.int32)
    cdef cnp.ndarray[double, ndim=1, mode="c"] out_w = np.empty(indices.shape[0],
                                                                dtype=np.float64)
    out_ptr[0] = 0
    for i in range(n):
        for e in range(indptr[i], indptr[i + 1]):
            if block[indices[e]] == block[i]:
                out_idx[total] = <int32_t>indices[e]
                out_w[total] = data[e]
                total += 1
        out_ptr[i + 1] = total
    return out_ptr, out_idx[:total], out_w[:total]
