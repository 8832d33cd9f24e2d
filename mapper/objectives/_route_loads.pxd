# cython: language_level=3
"""Per-link loads along routes, shared as inline functions by the compiled link-load
evaluation (:mod:`mapper.objectives._link_load`) and the constrained search on routed
networks (:mod:`mapper.search._routed`).

A route CSR lists the links crossed from job node a to job node b as
``route_links[route_ptr[a * nodes + b]:route_ptr[a * nodes + b + 1]]``
(:mod:`mapper.objectives.link_load` documents the model).
"""

from libc.stdint cimport int32_t, int64_t, uint8_t


cdef inline void _route_add(const int64_t* rptr, const int32_t* rlinks, int64_t pair,
                            double w, double* loads, uint8_t* mark, int32_t* touched,
                            Py_ssize_t* ntouched) noexcept nogil:
    """loads[l] += w on every link l of route ``pair``; with ``mark`` the links are
    recorded once each in ``touched``."""
    cdef int64_t k
    cdef int32_t l
    for k in range(rptr[pair], rptr[pair + 1]):
        l = rlinks[k]
        loads[l] += w
        if mark != NULL and not mark[l]:
            mark[l] = 1
            touched[ntouched[0]] = l
            ntouched[0] += 1


cdef inline void _pair_add(const int64_t* rptr, const int32_t* rlinks, int64_t nodes,
                           bint symmetric, int64_t a, int64_t b, double w, double* loads,
                           uint8_t* mark, int32_t* touched,
                           Py_ssize_t* ntouched) noexcept nogil:
    """The volume ``w`` of one undirected edge between job nodes a and b on its routes."""
    if a == b:
        return
    if symmetric:
        _route_add(rptr, rlinks, a * nodes + b, w, loads, mark, touched, ntouched)
    else:
        _route_add(rptr, rlinks, a * nodes + b, 0.5 * w, loads, mark, touched, ntouched)
        _route_add(rptr, rlinks, b * nodes + a, 0.5 * w, loads, mark, touched, ntouched)


cdef inline void _move_edges(const int64_t* indptr, const int32_t* indices,
                             const double* weights, const int64_t* pi,
                             const int64_t* pe_node, const int64_t* rptr,
                             const int32_t* rlinks, int64_t nodes, bint symmetric,
                             int64_t mover, int64_t other, int64_t src, int64_t dst,
                             double* loads, uint8_t* mark, int32_t* touched,
                             Py_ssize_t* ntouched) noexcept nogil:
    """Move the edges of rank ``mover`` (but the one to ``other``, which trades routes
    with it) from node ``src`` to node ``dst``.  O(deg(mover) · h)."""
    cdef int64_t x, c, e
    for e in range(indptr[mover], indptr[mover + 1]):
        x = indices[e]
        if x == other:
            continue
        c = pe_node[pi[x]]
        _pair_add(rptr, rlinks, nodes, symmetric, src, c, -weights[e], loads, mark,
                  touched, ntouched)
        _pair_add(rptr, rlinks, nodes, symmetric, dst, c, weights[e], loads, mark,
                  touched, ntouched)


cdef inline void _swap_loads(const int64_t* indptr, const int32_t* indices, const double* weights,
                             const int64_t* pi, const int64_t* pe_node, const int64_t* rptr,
                             const int32_t* rlinks, int64_t nodes, bint symmetric,
                             int64_t u, int64_t v, double* loads, uint8_t* mark,
                             int32_t* touched, Py_ssize_t* ntouched) noexcept nogil:
    """Move the edges of ranks u and v from their nodes under ``pi`` to the swapped
    nodes.  The edge u-v itself keeps its links (its two routes trade places)."""
    cdef int64_t a = pe_node[pi[u]], b = pe_node[pi[v]]
    if a == b or u == v:
        return
    _move_edges(indptr, indices, weights, pi, pe_node, rptr, rlinks, nodes, symmetric,
                u, v, a, b, loads, mark, touched, ntouched)
    _move_edges(indptr, indices, weights, pi, pe_node, rptr, rlinks, nodes, symmetric,
                v, u, b, a, loads, mark, touched, ntouched)
