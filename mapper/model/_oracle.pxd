# cython: language_level=3
"""The distance oracle, the CSR graph view and the loop helpers that the compiled
searches and constructions use (``mapper/search/_swap.pyx``, ``_cycles.pyx``,
``_congested.pyx``, ``_routed.pyx``; ``mapper/construction/_greedy.pyx``).

The oracle ``(gid, dist, mat)`` has three cases: a hierarchy (per-PE group ids ``gid``,
n x k row-major, with level distances ``dist``, ``mat`` None); an explicit n x n matrix
(``mat``, ``gid`` and ``dist`` None); nodes on a non-tree network
(:class:`mapper.model.networks.NodeHopMachine`: ``gid`` and ``dist`` describe the levels
inside the nodes, the last column of ``gid`` being the node, and ``mat`` is the N x N
between-node cost ``base + per_hop * hops``; O(N² + n k) memory, never n x n).  The
documentation,
complexities and references of the searches are in the Python modules that call them.

Everything here is a struct or a ``cdef inline`` function with its body: a module that
cimports it compiles its own copy, so the hot loops call ``_dist`` and the Γ bounds
exactly as if they were written in the module (inlined, nogil, no exception check).
A cdef function exported by one .pyx would instead be called through a pointer table,
which the compiler cannot inline.  Only the build reads this file: nothing imports a
``mapper.model._oracle`` module at run time, so the wheel needs no copy of it.
"""

cimport numpy as cnp
from libc.stdint cimport int32_t, int64_t, uint64_t
from posix.time cimport CLOCK_MONOTONIC, clock_gettime, timespec


cdef struct Oracle:
    const int32_t* gid    # NULL: explicit matrix
    const double* dist
    const double* mat     # n x n (gid NULL) or, with hop, N x N between nodes
    int k
    int64_t n
    int64_t nodes         # hop: N
    bint hop              # node hop machine: gid/dist inside nodes, mat between them


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


cdef inline Oracle _make_oracle(object gid, object dist, object mat, int64_t n) except *:
    """The oracle over the caller's arrays (they must outlive it); see the three cases
    in this file's docstring.  Shapes are checked, O(n)."""
    cdef Oracle o
    cdef cnp.ndarray[int32_t, ndim=2, mode="c"] g
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
    g = gid
    d = dist
    if g.shape[0] != n or g.shape[1] != d.shape[0] or g.shape[1] == 0:
        raise ValueError(f"group ids {g.shape[0]} x {g.shape[1]} do not fit {n} PEs and "
                         f"{d.shape[0]} level distances")
    o.gid = &g[0, 0]
    o.dist = &d[0]
    o.k = g.shape[1]
    if mat is not None:
        m = mat
        # ndarray methods: a .pxd cannot import the numpy Python module
        if m.shape[0] != m.shape[1] or (n and (gid[:, o.k - 1].min() < 0
                                               or gid[:, o.k - 1].max() >= m.shape[0])):
            raise ValueError(f"node ids (last group-id column) must index the "
                             f"{m.shape[0]} x {m.shape[1]} between-node table")
        o.mat = &m[0, 0]
        o.nodes = m.shape[0]
        o.hop = True
    return o


cdef inline double _now() noexcept nogil:
    cdef timespec ts
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return ts.tv_sec + ts.tv_nsec * 1e-9


cdef inline uint64_t _rng_next(uint64_t* s) noexcept nogil:
    # splitmix64: small, seedable, good enough to shuffle visiting orders
    s[0] += <uint64_t>0x9E3779B97F4A7C15
    cdef uint64_t z = s[0]
    z = (z ^ (z >> 30)) * <uint64_t>0xBF58476D1CE4E5B9
    z = (z ^ (z >> 27)) * <uint64_t>0x94D049BB133111EB
    return z ^ (z >> 31)


cdef inline void _shuffle(int64_t* a, int64_t n, uint64_t* s) noexcept nogil:
    cdef int64_t i, j, t
    i = n - 1
    while i > 0:
        j = <int64_t>(_rng_next(s) % <uint64_t>(i + 1))
        t = a[i]
        a[i] = a[j]
        a[j] = t
        i -= 1


cdef inline void _shuffle_runs(int64_t* a, int64_t n, int64_t chunk, uint64_t* rng,
                               int64_t* runs, int64_t* tmp) noexcept nogil:
    """``a`` cut into runs of ``chunk`` consecutive entries, the runs in random order
    and each run shuffled: a random visiting order that reads the (PE-order
    renumbered) graph a run at a time, from cache, instead of at random.  ``runs``
    holds n // chunk + 1 entries, ``tmp`` n."""
    cdef int64_t nruns = (n + chunk - 1) // chunk, r, start, length, i, pos = 0
    for r in range(nruns):
        runs[r] = r
    _shuffle(runs, nruns, rng)
    for r in range(nruns):
        start = runs[r] * chunk
        length = chunk if start + chunk <= n else n - start
        for i in range(length):
            tmp[pos + i] = a[start + i]
        _shuffle(tmp + pos, length, rng)
        pos += length
    for i in range(n):
        a[i] = tmp[i]


cdef inline double _swap_delta(const Graph* g, const Oracle* o, const int64_t* pe,
                               int64_t u, int64_t v) noexcept nogil:
    """Change of J if ranks u and v exchange their PEs: O(deg u + deg v)."""
    cdef int64_t pu = pe[u]
    cdef int64_t pv = pe[v]
    cdef int64_t e, w, pw
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


cdef inline double _gamma(const Graph* g, const Oracle* o, const int64_t* pe, int64_t u,
                          int64_t p) noexcept nogil:
    """Volume-weighted distance from PE p to the PEs of u's neighbours: O(deg u)."""
    cdef int64_t e
    cdef double s = 0.0
    for e in range(g.indptr[u], g.indptr[u + 1]):
        s += g.weights[e] * _dist(o, p, pe[g.indices[e]])
    return s


cdef inline double _gamma_group(const Graph* g, const Oracle* o, const int64_t* pe, int64_t u,
                                int64_t p) noexcept nogil:
    """Like _gamma, but a neighbour on p itself counts as inside p's innermost group.

    The value is then the same for every PE of p's innermost group, so it can be
    memoised per group, and Γ_u(π(u)) minus it bounds u's side of the swap gain from
    above (see local_search in mapper/search/_swap.pyx).
    """
    cdef int64_t e, q
    cdef int i
    cdef double s = 0.0
    cdef const int32_t* gp
    cdef const int32_t* gq
    if o.gid == NULL:
        return _gamma(g, o, pe, u, p)
    gp = o.gid + p * o.k
    for e in range(g.indptr[u], g.indptr[u + 1]):
        q = pe[g.indices[e]]
        gq = o.gid + q * o.k
        if o.hop and gp[o.k - 1] != gq[o.k - 1]:
            s += g.weights[e] * o.mat[gp[o.k - 1] * o.nodes + gq[o.k - 1]]
            continue
        for i in range(o.k):
            if gp[i] == gq[i]:
                s += g.weights[e] * o.dist[i]
                break
    return s


cdef inline double _gamma_from_level(const Graph* g, const Oracle* o, const int64_t* pe,
                                     int64_t u, int64_t p, int level) noexcept nogil:
    """Γ_u at a PE that shares p's groups from ``level`` up but no lower group with any
    of u's neighbours: each neighbour counts at its first shared level >= ``level``.

    Hierarchies only, like its one caller _best_gamma_bound (both searches call that
    only when ``not o.hop``): no node-hop test in this loop."""
    cdef int64_t e
    cdef int i
    cdef double s = 0.0
    cdef const int32_t* gp = o.gid + p * o.k
    cdef const int32_t* gq
    for e in range(g.indptr[u], g.indptr[u + 1]):
        gq = o.gid + pe[g.indices[e]] * o.k
        for i in range(level, o.k):
            if gp[i] == gq[i]:
                s += g.weights[e] * o.dist[i]
                break
    return s


cdef inline double _best_gamma_bound(const Graph* g, const Oracle* o, const int64_t* pe,
                                     int64_t u) noexcept nogil:
    """Lower bound on Γ_u over all PEs, O(deg(u)² k²): hierarchies only (on a node
    hop machine a node holding none of u's neighbours may be closer to all of them).

    Any PE's innermost group either holds one of u's neighbours (exact value), or its
    first group holding one is the level-L group of some neighbour, L >= 1 (value with
    every neighbour counted from level L up), or it shares only the root with all of
    them.  The minimum over these candidates is at most the minimum over all PEs.
    """
    cdef int64_t e
    cdef int level
    cdef double best, vol = 0.0, val
    for e in range(g.indptr[u], g.indptr[u + 1]):
        vol += g.weights[e]
    best = vol * o.dist[o.k - 1]
    for e in range(g.indptr[u], g.indptr[u + 1]):
        val = _gamma_group(g, o, pe, u, pe[g.indices[e]])
        if val < best:
            best = val
        for level in range(1, o.k - 1):
            val = _gamma_from_level(g, o, pe, u, pe[g.indices[e]], level)
            if val < best:
                best = val
    return best
