# cython: language_level=3
"""Compiled corrector of the architecture-aware partitioners (mapper.mesh.archaware).

Moulitsas & Karypis, Architecture Aware Partitioning Algorithms, ICA3PP 2008, LNCS 5022,
pp. 42-53, doi:10.1007/978-3-540-69501-1_6, §3 (CommCost, ElapseTime) and §4 (randomized
greedy refinement).  The algorithm, its acceptance rule and its complexity are described
in mapper/mesh/archaware.py; this file holds only the loops that must run at C speed.

State shared by the functions (all arrays owned by the caller):

* ``slot_part[xadj[v] : xadj[v] + nslot[v]]`` / ``slot_cnt[...]``: the distinct parts of
  v's neighbours and how many neighbours v has in each (capacity deg(v), so it never
  overflows);
* ``W[p]``: vertex weight of part p; ``Fc[p]``: CommCost of part p (the paper's formula,
  sends + receives, each weighted by e*).

The e* of a pair (x, y) comes either from a dense P x P matrix (dense variants) or from
the allowed-pair CSR ``qptr/qadj/qcost`` (sparse variants: the predictor's communicating
pairs, each row sorted); a pair absent from the CSR is forbidden.
"""

import numpy as np

cimport numpy as cnp
from libc.math cimport fabs

cnp.import_array()

ctypedef cnp.int64_t i64
ctypedef cnp.int32_t i32


cdef inline double _pair_cost(i64 x, i64 y, int dense, const double[:, ::1] dmat,
                              const i64[::1] qptr, const i32[::1] qadj,
                              const double[::1] qcost) noexcept nogil:
    """e*(x, y); -1.0 when the pair is not allowed (sparse variants)."""
    cdef i64 lo, hi, mid
    if x == y:
        return 0.0
    if dense:
        return dmat[x, y]
    lo = qptr[x]
    hi = qptr[x + 1]
    while lo < hi:  # binary search in x's sorted row
        mid = (lo + hi) >> 1
        if qadj[mid] < y:
            lo = mid + 1
        else:
            hi = mid
    if lo < qptr[x + 1] and qadj[lo] == y:
        return qcost[lo]
    return -1.0


cdef inline i32 _count(i64 w, i64 q, const i64[::1] xadj, i32[::1] nslot,
                       i32[::1] slot_part, i32[::1] slot_cnt) noexcept nogil:
    """Number of w's neighbours in part q."""
    cdef i64 s, base = xadj[w]
    for s in range(base, base + nslot[w]):
        if slot_part[s] == q:
            return slot_cnt[s]
    return 0


cdef inline void _slot_add(i64 w, i64 q, int delta, const i64[::1] xadj, i32[::1] nslot,
                           i32[::1] slot_part, i32[::1] slot_cnt) noexcept nogil:
    """Add ``delta`` (+1 / -1) to w's neighbour count in part q; drop empty slots."""
    cdef i64 s, base = xadj[w], last
    for s in range(base, base + nslot[w]):
        if slot_part[s] == q:
            slot_cnt[s] += delta
            if slot_cnt[s] == 0:
                last = base + nslot[w] - 1
                slot_part[s] = slot_part[last]
                slot_cnt[s] = slot_cnt[last]
                nslot[w] -= 1
            return
    # delta is +1 here: q is a new neighbouring part of w
    s = base + nslot[w]
    slot_part[s] = <i32>q
    slot_cnt[s] = 1
    nslot[w] += 1


def init_state(const i64[::1] xadj, const i32[::1] adjncy, const double[::1] cs,
               const i64[::1] part, int dense, const double[:, ::1] dmat,
               const i64[::1] qptr, const i32[::1] qadj, const double[::1] qcost,
               i32[::1] nslot, i32[::1] slot_part, i32[::1] slot_cnt, double[::1] Fc):
    """Fill the neighbour-part slots and CommCost from scratch; O(sum deg * slots).

    Returns the number of communicating (vertex, part) incidences whose pair had no e*
    (always 0 for a sparse pair set built from ``part`` itself).
    """
    cdef i64 n = xadj.shape[0] - 1
    cdef i64 v, j, w, s, p, q
    cdef double e
    cdef i64 missing = 0
    with nogil:
        for v in range(n):
            nslot[v] = 0
        for p in range(Fc.shape[0]):
            Fc[p] = 0.0
        for v in range(n):
            for j in range(xadj[v], xadj[v + 1]):
                w = adjncy[j]
                if w != v:
                    _slot_add(v, part[w], 1, xadj, nslot, slot_part, slot_cnt)
            p = part[v]
            for s in range(xadj[v], xadj[v] + nslot[v]):
                q = slot_part[s]
                if q != p:
                    e = _pair_cost(p, q, dense, dmat, qptr, qadj, qcost)
                    if e < 0.0:
                        missing += 1
                        continue
                    # v is sent to q once: p's send and q's receive, both at e*(p, q)
                    Fc[p] += e * cs[v]
                    Fc[q] += e * cs[v]
    return missing


cdef inline void _touch(i64 p, double d, double[::1] delta, i32[::1] mark,
                        i64[::1] touched, i64* ntouched) noexcept nogil:
    if not mark[p]:
        mark[p] = 1
        delta[p] = 0.0
        touched[ntouched[0]] = p
        ntouched[0] += 1
    delta[p] += d


def refine_pass(const i64[::1] xadj, const i32[::1] adjncy, const double[::1] vw,
                const double[::1] cs, i64[::1] part, const double[::1] wstar, int elt,
                int dense, const double[:, ::1] dmat, const i64[::1] qptr,
                const i32[::1] qadj, const double[::1] qcost,
                const double[::1] upper, const double[::1] lower, const i64[::1] order,
                i32[::1] nslot, i32[::1] slot_part, i32[::1] slot_cnt,
                double[::1] W, double[::1] Fc, double rtol):
    """One randomized greedy pass over ``order``; returns the number of moves made.

    Acceptance rule (see mapper.mesh.archaware): a move of v from a to b is feasible when
    W[b] + w(v) <= upper[b], W[a] - w(v) >= lower[a] and (sparse) every part adjacent to
    v other than b already communicates with b; it is accepted when it strictly lowers
    the largest objective value among the parts whose value it changes.  Of v's feasible
    targets the one with the largest such gain is taken (ties: smaller total change).
    """
    cdef i64 P = W.shape[0]
    cdef i64 nord = order.shape[0]
    cdef i64 maxdeg = 0, v, i, j, s, t, w, a, b, r, q, best_b, ntouched
    cdef i64 cbase, nb
    cdef double wv, cv, e, ea, eb, old_s, new_s, val, gain, best_gain, total, best_total
    cdef double obj
    cdef bint ok
    cdef i64 moves = 0
    for v in range(xadj.shape[0] - 1):
        if xadj[v + 1] - xadj[v] > maxdeg:
            maxdeg = xadj[v + 1] - xadj[v]
    cdef double[::1] delta = np.zeros(P, dtype=np.float64)
    cdef i32[::1] mark = np.zeros(P, dtype=np.int32)
    cdef i64[::1] touched = np.zeros(4 * maxdeg + 8, dtype=np.int64)
    cdef i32[::1] cnt_a = np.zeros(maxdeg + 1, dtype=np.int32)
    with nogil:
        for i in range(nord):
            v = order[i]
            a = part[v]
            cbase = xadj[v]
            nb = nslot[v]
            # interior vertices (no neighbour outside a) are never moved
            ok = False
            for s in range(cbase, cbase + nb):
                if slot_part[s] != a:
                    ok = True
                    break
            if not ok:
                continue
            wv = vw[v]
            cv = cs[v]
            if W[a] - wv < lower[a]:
                continue
            # neighbours' counts in a do not depend on the target
            for j in range(xadj[v], xadj[v + 1]):
                w = adjncy[j]
                cnt_a[j - xadj[v]] = _count(w, a, xadj, nslot, slot_part, slot_cnt)
            best_b = -1
            best_gain = 0.0
            best_total = 0.0
            for t in range(cbase, cbase + nb):
                b = slot_part[t]
                if b == a or W[b] + wv > upper[b]:
                    continue
                ntouched = 0
                ok = True
                # v's own sends: from a to its neighbouring parts, then from b
                for s in range(cbase, cbase + nb):
                    q = slot_part[s]
                    if q != a:
                        ea = _pair_cost(a, q, dense, dmat, qptr, qadj, qcost)
                        _touch(a, -ea * cv, delta, mark, touched, &ntouched)
                        _touch(q, -ea * cv, delta, mark, touched, &ntouched)
                    if q != b:
                        eb = _pair_cost(b, q, dense, dmat, qptr, qadj, qcost)
                        if eb < 0.0:  # sparse: b and q never communicated
                            ok = False
                            break
                        _touch(b, eb * cv, delta, mark, touched, &ntouched)
                        _touch(q, eb * cv, delta, mark, touched, &ntouched)
                if ok:
                    # neighbours w of v: w stops sending to a / starts sending to b
                    for j in range(xadj[v], xadj[v + 1]):
                        w = adjncy[j]
                        if w == v:
                            continue
                        r = part[w]
                        if r != a and cnt_a[j - xadj[v]] == 1:
                            e = _pair_cost(r, a, dense, dmat, qptr, qadj, qcost)
                            _touch(r, -e * cs[w], delta, mark, touched, &ntouched)
                            _touch(a, -e * cs[w], delta, mark, touched, &ntouched)
                        if r != b and _count(w, b, xadj, nslot, slot_part, slot_cnt) == 0:
                            e = _pair_cost(r, b, dense, dmat, qptr, qadj, qcost)
                            _touch(r, e * cs[w], delta, mark, touched, &ntouched)
                            _touch(b, e * cs[w], delta, mark, touched, &ntouched)
                    if elt:
                        _touch(a, -wstar[a] * wv, delta, mark, touched, &ntouched)
                        _touch(b, wstar[b] * wv, delta, mark, touched, &ntouched)
                    old_s = -1.0
                    new_s = -1.0
                    total = 0.0
                    for s in range(ntouched):
                        q = touched[s]
                        obj = Fc[q] + (wstar[q] * W[q] if elt else 0.0)
                        # parts whose value does not change are not "affected"
                        if fabs(delta[q]) > rtol * (obj + 1e-300):
                            if obj > old_s:
                                old_s = obj
                            val = obj + delta[q]
                            if val > new_s:
                                new_s = val
                            total += delta[q]
                    gain = old_s - new_s
                    if old_s >= 0.0 and gain > rtol * old_s:
                        if best_b < 0 or gain > best_gain or (gain == best_gain and total < best_total):
                            best_b = b
                            best_gain = gain
                            best_total = total
                for s in range(ntouched):
                    mark[touched[s]] = 0
            if best_b < 0:
                continue
            # apply the move: recompute the chosen target's deltas into Fc directly
            b = best_b
            for s in range(cbase, cbase + nb):
                q = slot_part[s]
                if q != a:
                    ea = _pair_cost(a, q, dense, dmat, qptr, qadj, qcost)
                    Fc[a] -= ea * cv
                    Fc[q] -= ea * cv
                if q != b:
                    eb = _pair_cost(b, q, dense, dmat, qptr, qadj, qcost)
                    Fc[b] += eb * cv
                    Fc[q] += eb * cv
            for j in range(xadj[v], xadj[v + 1]):
                w = adjncy[j]
                if w == v:
                    continue
                r = part[w]
                if r != a and cnt_a[j - xadj[v]] == 1:
                    e = _pair_cost(r, a, dense, dmat, qptr, qadj, qcost)
                    Fc[r] -= e * cs[w]
                    Fc[a] -= e * cs[w]
                if r != b and _count(w, b, xadj, nslot, slot_part, slot_cnt) == 0:
                    e = _pair_cost(r, b, dense, dmat, qptr, qadj, qcost)
                    Fc[r] += e * cs[w]
                    Fc[b] += e * cs[w]
                _slot_add(w, a, -1, xadj, nslot, slot_part, slot_cnt)
                _slot_add(w, b, 1, xadj, nslot, slot_part, slot_cnt)
            W[a] -= wv
            W[b] += wv
            part[v] = b
            moves += 1
    return moves
