"""Rank reordering: the mapping applied by renumbering ranks instead of moving them.

When the launcher places the processes itself (``srun``, or ``mpirun`` without a
rankfile), rank r starts on ``launcher[r]``, not on ``mapping[r]``.  The mapping is
still honoured if the application swaps its communicator for one in which the process
on PE ``mapping[k]`` has rank k (the seed's rank reordering method, §III.C; there
with ``MPI_Dist_graph_create``, here with ``MPI_Comm_split`` whose key is the new
rank: :file:`deploy/librankmap`).

Definition: ``reorder[r]`` is the new rank of the process the launcher started as
rank r, i.e. the k with ``mapping[k] == launcher[r]``.  Both arrays are bijections
onto the same set of PEs, so ``reorder = mapping⁻¹ ∘ launcher`` is a permutation of
0..n-1, and the new rank k runs on ``launcher[reorder⁻¹[k]] == mapping[k]``.

Files (text in, text out; the caller writes them):

* the reorder file: line r holds ``reorder[r]`` (n lines);
* the seed's Dist_graph file (§IV.C): n on the first line, then for every process
  one line "degree neighbour neighbour …" (neighbours ascending);
* the group graph file (``dist_graph.groups``, :func:`group_graph_text`): the seed's
  output proper, the topology graph its Fig. 7 draws and its Fig. 6 hands to
  ``MPI_Dist_graph_create(..., reorder=1)`` — within every group of the machine tree,
  the groups one level down joined by the heaviest edge between them
  (:func:`group_tree`) — with that edge's weight: n on the first line, then for every
  process one line "degree neighbour weight neighbour weight …".

The reorder and Dist_graph functions are O(n) or O(n + m) array operations;
:func:`group_tree` is O(L (n + m) log m) for L levels plus, per group of k children,
O(k²) (Prim).

References
----------
* C. Sudhakar, P. Adhikari, T. Ramesh: Process Assignment in Multi-core Clusters
  Using Job Assignment Algorithm, ICACC 2015 (§III.C, §IV.C, Figs. 6 and 7).
"""

from __future__ import annotations

import numpy as np

from .errors import RankmapError
from .graph import CommGraph
from .io.text_lines import iter_content_lines
from .machine import Hierarchy

#: the largest weight of the group graph file: MPI takes weights as C ints
MAX_WEIGHT = 2**31 - 1


class ReorderError(RankmapError, ValueError):
    """A mapping and a launcher placement that do not cover the same PEs, or a reorder
    file that is not a permutation; messages name the file:line when there is one."""


def rank_reorder(mapping: np.ndarray, launcher: np.ndarray) -> np.ndarray:
    """``reorder[r]``: new rank of the process the launcher started as rank r."""
    mapping = np.asarray(mapping, dtype=np.int64)
    launcher = np.asarray(launcher, dtype=np.int64)
    n = len(mapping)
    if len(launcher) != n:
        raise ReorderError(f"the mapping has {n} ranks, the launcher's placement "
                           f"{len(launcher)}")
    for name, arr in (("mapping", mapping), ("launcher placement", launcher)):
        if len(np.unique(arr)) != n:
            raise ReorderError(f"the {name} puts two ranks on one PE")
    order = np.argsort(mapping)
    pes = mapping[order]
    pos = np.searchsorted(pes, launcher)
    pos = np.minimum(pos, n - 1)
    if n and np.any(pes[pos] != launcher):
        r = int(np.flatnonzero(pes[pos] != launcher)[0])
        raise ReorderError(f"the launcher starts rank {r} on PE {int(launcher[r])}, "
                           f"which the mapping does not use")
    return order[pos].astype(np.int64)


def format_reorder(reorder: np.ndarray) -> str:
    """The reorder file: line r holds the new rank of launcher rank r.  O(n) by
    whole-array operations (:func:`_int_lines`)."""
    return _int_lines(reorder)


def parse_reorder(text: str, n: int | None = None, source: str = "<reorder>") -> np.ndarray:
    """Read a reorder file back and check that it is a permutation (of size ``n``);
    errors name ``source:line``.  A line beyond ``n`` ranks is refused as soon as it is
    read, before the rest of the file is split into lines."""
    values: list[int] = []
    line_of: list[int] = []
    for no, word in iter_content_lines(text):
        if n is not None and len(values) == n:
            raise ReorderError(f"{source}:{no}: more than {n} ranks, the job has {n}",
                               source=source, line=no)
        try:
            values.append(int(word))
        except ValueError:
            raise ReorderError(f"{source}:{no}: expected a rank, got {word!r}",
                               source=source, line=no) from None
        line_of.append(no)
    arr = np.asarray(values, dtype=np.int64)
    if n is not None and len(arr) != n:
        raise ReorderError(f"{source}: {len(arr)} ranks, the job has {n}", source=source)
    bad = np.flatnonzero((arr < 0) | (arr >= len(arr)))
    if len(bad):
        no = line_of[bad[0]]
        raise ReorderError(f"{source}:{no}: rank {int(arr[bad[0]])} out of range "
                           f"0..{len(arr) - 1}", source=source, line=no)
    uniq, first = np.unique(arr, return_index=True)
    if len(uniq) != len(arr):
        is_first = np.zeros(len(arr), dtype=bool)
        is_first[first] = True
        i = int(np.flatnonzero(~is_first)[0])
        no = line_of[i]
        earlier = line_of[int(first[np.searchsorted(uniq, arr[i])])]
        raise ReorderError(f"{source}:{no}: rank {int(arr[i])} again (first on line "
                           f"{earlier})", source=source, line=no)
    return arr


def dist_graph_text(n: int, src: np.ndarray, dst: np.ndarray) -> str:
    """The seed's Dist_graph file for undirected edges ``(src[i], dst[i])``: each edge is
    listed on both endpoints' lines; repeated edges once; neighbours ascending.

    Time O(n + m log m) for m edges (one sort), the text written by whole-array
    operations (:func:`_int_lines`); memory O(n + m)."""
    src = np.asarray(src, dtype=np.int64)
    dst = np.asarray(dst, dtype=np.int64)
    keep = src != dst
    a = np.concatenate([src[keep], dst[keep]])
    b = np.concatenate([dst[keep], src[keep]])
    if len(a) and (min(a.min(), b.min()) < 0 or max(a.max(), b.max()) >= n):
        raise ReorderError(f"an edge names a process outside 0..{n - 1}")
    # the pairs (a, b) once each, ascending: as one key a * n + b (0 <= b < n)
    key = _sorted_distinct(a * n + b)
    a = key // n
    b = key - a * n
    starts = np.r_[0, np.cumsum(np.bincount(a, minlength=n))]
    # line p: its degree, then its neighbours; the degree's word precedes p's
    # neighbours and every earlier line's words
    degree = np.diff(starts)
    words = np.empty(n + len(b), dtype=np.int64)
    at_degree = np.arange(n) + starts[:-1]
    words[at_degree] = degree
    words[a + np.arange(len(b)) + 1] = b  # neighbour j of line a: after a + 1 degrees
    return f"{n}\n" + _int_lines(words, at_degree + degree)


def comm_graph_dist_graph_text(graph: CommGraph) -> str:
    """Dist_graph file of a communication graph: every rank's communication partners
    (in the graph's numbering, i.e. the new ranks when the graph is the job's profile)."""
    u, v, _ = graph.edges()
    return dist_graph_text(graph.n, u, v)


def group_tree(graph: CommGraph, machine: Hierarchy, mapping: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The seed's topology graph (Fig. 7) of a placement, as edges ``(u, v, weight)``.

    Rank k runs on PE ``mapping[k]`` of ``machine``.  Every group of the machine tree
    joins its children (the PEs of a level-0 group, the level-(i-1) groups of a level-i
    group) that hold ranks: two children by one edge between the two ranks with the
    heaviest communication between them (the seed, §IV.C: "the maximum entry in the
    cost matrix between the chosen processes"); more children — the seed's tree is
    binary — by a maximum spanning tree over them (Prim) with those edges.  Ties go to
    the first in PE order, and two children that do not communicate are joined by their
    first ranks with weight 0, so the result is a spanning tree of the ranks and, for
    the mapping :func:`mapper.construction.matching.matching` computes, the very edges
    (each with the same ends first) of :func:`~mapper.construction.matching.matching_tree`,
    which finds them on the dense matrix; this works on the graph's edges and lists
    them level by level, groups in PE order.

    Time O(L (n + m) log m) for L levels plus O(k²) per group of k children (16384
    ranks, 7 edges each: under a second); memory O(n + m).
    """
    mapping = np.asarray(mapping, dtype=np.int64)
    n = graph.n
    if len(mapping) != n:
        raise ReorderError(f"the graph has {n} ranks, the mapping {len(mapping)}")
    if n and (mapping.min() < 0 or mapping.max() >= machine.n
              or len(np.unique(mapping)) != n):
        raise ReorderError(f"the mapping is not one distinct PE of 0..{machine.n - 1} "
                           f"per rank")
    eu, ev, ew = graph.edges()
    heavy = ew > 0
    a = np.concatenate([eu[heavy], ev[heavy]])  # both directions of every edge
    b = np.concatenate([ev[heavy], eu[heavy]])
    w = np.concatenate([ew[heavy], ew[heavy]])
    by_pe = np.argsort(mapping, kind="stable")
    src: list[int] = []
    dst: list[int] = []
    weight: list[float] = []
    for level in range(machine.levels):
        parent = machine.group_ids[mapping, level].astype(np.int64)
        child = (machine.group_ids[mapping, level - 1].astype(np.int64) if level
                 else mapping)
        # children holding ranks, in PE order (group ids grow with the PE), and the first
        # rank (in PE order) of each
        child_sorted = child[by_pe]
        kids, first_at = np.unique(child_sorted, return_index=True)
        first = by_pe[first_at]
        kid_parent = parent[first]
        # the heaviest edge of every ordered pair of sibling children, first in PE order
        cross = (parent[a] == parent[b]) & (child[a] != child[b])
        ca, cb, ra, rb, wc = child[a[cross]], child[b[cross]], a[cross], b[cross], w[cross]
        order = np.lexsort((mapping[rb], mapping[ra], -wc, cb, ca))
        ca, cb, ra, rb, wc = ca[order], cb[order], ra[order], rb[order], wc[order]
        lead = np.ones(len(ca), dtype=bool)
        lead[1:] = (ca[1:] != ca[:-1]) | (cb[1:] != cb[:-1])
        # as rows of the children (positions in kids): child kids[x]'s candidates are
        # at ptr[x]:ptr[x + 1], one per sibling
        pair = (np.searchsorted(kids, ca[lead]), np.searchsorted(kids, cb[lead]),
                wc[lead], ra[lead], rb[lead])
        ptr = np.searchsorted(pair[0], np.arange(len(kids) + 1))
        starts = np.flatnonzero(np.r_[True, kid_parent[1:] != kid_parent[:-1]])
        for lo, hi in zip(starts.tolist(), [*starts[1:].tolist(), len(kids)], strict=True):
            if hi - lo > 1:
                _prim(lo, hi, first, pair, ptr, src, dst, weight)
    return (np.array(src, dtype=np.int64), np.array(dst, dtype=np.int64),
            np.array(weight, dtype=np.float64))


def _prim(lo: int, hi: int, first: np.ndarray, pair: tuple, ptr: np.ndarray,
          src: list[int], dst: list[int], weight: list[float]) -> None:
    """Maximum spanning tree over one group's children (positions lo..hi-1, first ranks
    ``first``), grown from child lo; the order of matching_tree's loops decides ties:
    the child whose best edge comes from the child in the tree longest, then the lowest
    child.  O(k) per child added for k children."""
    k = hi - lo
    _, to, wts, ends_u, ends_v = pair
    in_tree = np.zeros(k, dtype=bool)
    value = np.zeros(k)  # best edge into each child so far: weight, since, endpoints
    since = np.zeros(k, dtype=np.int64)
    end_u = np.full(k, int(first[lo]), dtype=np.int64)  # no edge: the first ranks
    end_v = first[lo:hi].astype(np.int64)

    def relax(t: int, added: int) -> None:
        sl = slice(ptr[lo + t], ptr[lo + t + 1])
        c = to[sl] - lo  # siblings only, each once
        better = ~in_tree[c] & (wts[sl] > value[c])
        c = c[better]
        value[c], since[c] = wts[sl][better], added
        end_u[c], end_v[c] = ends_u[sl][better], ends_v[sl][better]

    in_tree[0] = True
    relax(0, 0)
    for added in range(1, k):
        free = np.where(in_tree, -1.0, value)  # weights are >= 0
        tied = np.flatnonzero(free == free.max())
        c = int(tied[np.argmin(since[tied])])  # argmin: the lowest child of a tie
        src.append(int(end_u[c]))
        dst.append(int(end_v[c]))
        weight.append(float(value[c]))
        in_tree[c] = True
        relax(c, added)


def _sorted_distinct(values: np.ndarray) -> np.ndarray:
    """``numpy.unique(values)`` by a sort: numpy.unique (numpy 2.4) hashes, 1.4 s for
    2^20 int64 against 25 ms to sort them."""
    s = np.sort(values)
    return s[np.r_[True, s[1:] != s[:-1]]] if len(s) else s


def group_graph_text(n: int, src: np.ndarray, dst: np.ndarray, weight: np.ndarray) -> str:
    """The group graph file for undirected weighted edges (:func:`group_tree`).

    Format (``#`` comments, blank lines ignored; librankmap's ``rankmap_dist_graph``
    and :func:`parse_group_graph` read it): the first line holds n, then line i (of n)
    describes process i: its degree d, then d pairs "neighbour weight", neighbours
    ascending.  Every edge is listed on both its ends with the same weight.  Weights are
    the edges' volumes as integers, scaled down when the heaviest is over
    :data:`MAX_WEIGHT` (MPI's weights are ints); a volume that rounds to 0 is 1, and 0
    means the two groups do not communicate (their edge keeps the tree spanning).

    Time O(n + m log m) for m edges (one sort), the text written by whole-array
    operations (:func:`_int_lines`); memory O(n + m).
    """
    src = np.asarray(src, dtype=np.int64)
    dst = np.asarray(dst, dtype=np.int64)
    weight = np.asarray(weight, dtype=np.float64)
    if len(src) and (min(src.min(), dst.min()) < 0 or max(src.max(), dst.max()) >= n):
        raise ReorderError(f"an edge names a process outside 0..{n - 1}")
    if np.any(src == dst):
        raise ReorderError("an edge joins a process to itself")
    if len(weight) and (not np.all(np.isfinite(weight)) or weight.min() < 0):
        raise ReorderError("edge weights must be finite and non-negative")
    top = float(weight.max()) if len(weight) else 0.0
    scaled = np.rint(weight * (MAX_WEIGHT / top if top > MAX_WEIGHT else 1.0))
    iw = np.where(weight > 0, np.clip(scaled, 1, MAX_WEIGHT), 0).astype(np.int64)
    a = np.concatenate([src, dst])
    b = np.concatenate([dst, src])
    ww = np.concatenate([iw, iw])
    order = np.argsort(a * n + b)  # by a, then b (0 <= b < n)
    a, b, ww = a[order], b[order], ww[order]
    if np.any((a[1:] == a[:-1]) & (b[1:] == b[:-1])):
        raise ReorderError("an edge is listed twice")
    starts = np.r_[0, np.cumsum(np.bincount(a, minlength=n))]
    # line p: its degree, then "neighbour weight" per edge; edge e (of line a[e]) comes
    # after a[e] + 1 degrees and the e earlier edges' two words
    degree = np.diff(starts)
    words = np.empty(n + 2 * len(b), dtype=np.int64)
    at_degree = np.arange(n) + 2 * starts[:-1]
    words[at_degree] = degree
    at_edge = a + 2 * np.arange(len(b)) + 1
    words[at_edge] = b
    words[at_edge + 1] = ww
    head = ("# rankmap dist_graph.groups: the groups' topology graph (Sudhakar et al., "
            "ICACC 2015, Fig. 7)\n"
            f"# n; then per process: degree, then 'neighbour weight' pairs\n{n}\n")
    return head + _int_lines(words, at_degree + 2 * degree)


def _int_lines(words: np.ndarray, last: np.ndarray | None = None) -> str:
    """The integers ``words`` in decimal, as :class:`str` writes them, each followed by a
    space, except those at the positions ``last`` (default: all), which end a line
    (``\\n``); not -2^63.  O(total digits) by whole-array operations, in chunks of
    :data:`_CHUNK` words (they stay in cache)."""
    words = np.asarray(words, dtype=np.int64)
    minus = words < 0
    size = np.abs(words)
    top = int(size.max()) if len(size) else 0
    size = size.astype(np.uint32 if top < 2**32 else np.uint64)  # faster division
    ends_line = np.ones(len(words), dtype=bool)
    if last is not None:
        ends_line[:] = False
        ends_line[np.asarray(last, dtype=np.int64)] = True
    width = len(str(top))
    return "".join(_int_chunk(size[i:i + _CHUNK], minus[i:i + _CHUNK],
                              ends_line[i:i + _CHUNK], width)
                   for i in range(0, len(words), _CHUNK))


#: words :func:`_int_lines` writes at a time
_CHUNK = 1 << 16


def _int_chunk(size: np.ndarray, minus: np.ndarray, ends_line: np.ndarray, width: int
               ) -> str:
    """:func:`_int_lines` of some words (magnitudes below 10^width, signs, line ends):
    a row per word, a column per character position — sign, ``width`` digits,
    separator — and the characters a word has, read row by row."""
    char = np.empty((len(size), width + 2), dtype=np.uint8)
    has = np.empty((len(size), width + 2), dtype=bool)
    char[:, 0], has[:, 0] = ord("-"), minus
    rest = size
    for col in range(width, 0, -1):  # the last digit first
        shorter = rest // 10
        char[:, col] = rest - shorter * 10 + ord("0")
        has[:, col] = rest > 0
        rest = shorter
    has[:, width] = True  # 0 has a digit
    char[:, width + 1], has[:, width + 1] = np.where(ends_line, ord("\n"), ord(" ")), True
    return char[has].tobytes().decode("ascii")


def parse_group_graph(text: str, n: int | None = None, source: str = "<dist_graph.groups>"
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Read a group graph file back: ``(degrees, neighbours, weights)``, process i's
    neighbours and weights at ``degrees[:i].sum()`` onwards.

    Checked as librankmap checks it: the process count (``n`` when given), one line per
    process of ``1 + 2 * degree`` integers, neighbours in range and not the process
    itself, weights in 0..MAX_WEIGHT, every edge on both its ends with the same weight
    and once.  Errors name ``source:line``; a line beyond the count is refused as soon
    as it is read.
    """
    lines = iter_content_lines(text)
    first = next(lines, None)
    if first is None:
        raise ReorderError(f"{source}: empty, expected the number of processes",
                           source=source)
    no, body = first
    try:
        count = int(body)
    except ValueError:
        raise ReorderError(f"{source}:{no}: expected the number of processes, got "
                           f"{body!r}", source=source, line=no) from None
    if count < 0:
        raise ReorderError(f"{source}:{no}: {count} processes", source=source, line=no)
    if n is not None and count != n:
        raise ReorderError(f"{source}:{no}: {count} processes, the communicator has {n}",
                           source=source, line=no)
    degrees: list[int] = []
    nbrs: list[int] = []
    wts: list[int] = []
    line_of: list[int] = []
    for no, body in lines:
        if len(degrees) == count:
            raise ReorderError(f"{source}:{no}: more than {count} processes",
                               source=source, line=no)
        try:
            values = [int(x) for x in body.split()]
        except ValueError:
            raise ReorderError(f"{source}:{no}: expected integers", source=source,
                               line=no) from None
        p, d = len(degrees), values[0]
        if not 0 <= d < count or len(values) != 1 + 2 * d:
            raise ReorderError(f"{source}:{no}: process {p}: degree {d} with "
                               f"{len(values) - 1} numbers after it", source=source, line=no)
        for q, wv in zip(values[1::2], values[2::2], strict=True):
            if q == p:
                raise ReorderError(f"{source}:{no}: process {p} lists itself",
                                   source=source, line=no)
            if not 0 <= q < count:
                raise ReorderError(f"{source}:{no}: process {p}: neighbour {q} out of "
                                   f"range 0..{count - 1}", source=source, line=no)
            if not 0 <= wv <= MAX_WEIGHT:
                raise ReorderError(f"{source}:{no}: process {p}: weight {wv} out of range "
                                   f"0..{MAX_WEIGHT}", source=source, line=no)
        degrees.append(d)
        nbrs += values[1::2]
        wts += values[2::2]
        line_of.append(no)
    if len(degrees) != count:
        raise ReorderError(f"{source}: {len(degrees)} process lines, the file says "
                           f"{count}", source=source)
    edges: dict[tuple[int, int], int] = {}
    lo = 0
    for p, d in enumerate(degrees):
        for q, wv in zip(nbrs[lo:lo + d], wts[lo:lo + d], strict=True):
            if (p, q) in edges:
                raise ReorderError(f"{source}:{line_of[p]}: process {p} lists {q} twice",
                                   source=source, line=line_of[p])
            edges[p, q] = wv
        lo += d
    for (p, q), wv in edges.items():
        if edges.get((q, p)) != wv:
            raise ReorderError(f"{source}:{line_of[p]}: process {p} lists {q} (weight "
                               f"{wv}) but process {q} does not list {p} with that weight",
                               source=source, line=line_of[p])
    deg = np.asarray(degrees, dtype=np.int64)
    nb = np.asarray(nbrs, dtype=np.int64)
    wt = np.asarray(wts, dtype=np.int64)
    return deg, nb, wt

