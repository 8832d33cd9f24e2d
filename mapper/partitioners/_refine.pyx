# cython: language_level=3
"""Compiled helpers of the partitioners: subgraphs, cuts and size repair.

* ``induced_rows`` -- :func:`mapper.construction.topdown.induced_subgraph`;
* ``cut_of`` -- :func:`mapper.partitioners.exact_sizes.cut_weight`;
* ``scaled_weights`` -- :func:`mapper.partitioners.weights.metis_weights`;
* ``repair_proposals`` -- :func:`mapper.partitioners.exact_sizes.repair_sizes`;
* ``grow_halves``, ``within_blocks`` -- :func:`mapper.partitioners.exact_sizes.split_blocks_in_two`.

On any CSR matrix (int32 or int64 indices); the callers hold the documentation and
complexities.
"""

import numpy as np

cimport numpy as cnp
from libc.math cimport INFINITY
from libc.stdint cimport int32_t, int64_t

cnp.import_array()

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
