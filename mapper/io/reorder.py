"""Rank reordering: the mapping applied by renumbering ranks instead of moving them.

When the launcher places the processes itself (``srun``, or ``mpirun`` without a
rankfile), rank r starts on ``launcher[r]``, not on ``mapping[r]``.  The mapping is
still honoured if the application swaps its communicator for one in which the process
on PE ``mapping[k]`` has rank k (the seed's rank reordering method, §III.C; there
with ``MPI_Dist_graph_create``, here with ``MPI_Comm_split`` whose key is the new
rank: :file:`slurm_plugin/userlib/librankmap`).

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

The reorder and Dist_graph functions are O(n log n) or O(n + m log m) array
operations, their texts written by whole-array operations too (no Python loop per
line); :func:`group_tree` is O(L (n + m) + (n + m) log(n + m)) for L levels plus, per
group of k children, O(k²) (Prim, run on all groups of a level at once).

References
----------
* C. Sudhakar, P. Adhikari, T. Ramesh: Process Assignment in Multi-core Clusters
  Using Job Assignment Algorithm, ICACC 2015 (§III.C, §IV.C, Figs. 6 and 7).
"""

from __future__ import annotations

import numpy as np

from ..errors import RankmapError
from ..model.graph import CommGraph
from ..model.machine import Hierarchy
from .text_lines import iter_content_lines

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
        if not _all_distinct(arr):
            raise ReorderError(f"the {name} puts two ranks on one PE")
    if n and min(mapping.min(), launcher.min()) >= 0 and \
            max(mapping.max(), launcher.max()) < 4 * n + 1024:
        # PEs numbered about densely: a table of the new rank on every PE
        new_rank = np.full(max(mapping.max(), launcher.max()) + 1, -1, dtype=np.int64)
        new_rank[mapping] = np.arange(n)
        reorder = new_rank[launcher]
        unused = reorder < 0
    else:
        order = np.argsort(mapping)
        pes = mapping[order]
        pos = np.minimum(np.searchsorted(pes, launcher), max(n - 1, 0))
        reorder = order[pos].astype(np.int64)
        unused = pes[pos] != launcher if n else np.zeros(0, dtype=bool)
    if np.any(unused):
        r = int(np.flatnonzero(unused)[0])
        raise ReorderError(f"the launcher starts rank {r} on PE {int(launcher[r])}, "
                           f"which the mapping does not use")
    return reorder


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

    Time O(L (n + m) + (n + m) log(n + m)) for L levels (a sort of each level's edges)
    plus O(k²) per group of k children (Prim), by whole-array operations: Prim runs on
    all groups of a level at once, one step per child added, the groups in batches of
    similar k (k in (2^(j-1), 2^j], so a batch's padding at most doubles its work);
    2^20 ranks of a 3D stencil in 5 levels of up to 64 children: about 2 s.  Memory
    O(n + m).
    """
    mapping = np.asarray(mapping, dtype=np.int64)
    n = graph.n
    if len(mapping) != n:
        raise ReorderError(f"the graph has {n} ranks, the mapping {len(mapping)}")
    if n and (mapping.min() < 0 or mapping.max() >= machine.n
              or not _all_distinct(mapping)):
        raise ReorderError(f"the mapping is not one distinct PE of 0..{machine.n - 1} "
                           f"per rank")
    # the graph's arcs (both directions of every edge: a symmetric CSR), by rank
    ra = np.repeat(np.arange(n, dtype=np.int64), np.diff(graph.indptr))
    rb = graph.indices.astype(np.int64)
    keep = (graph.weights > 0) & (ra != rb)
    ra, rb, wa = (ra, rb, graph.weights) if keep.all() else \
        (ra[keep], rb[keep], graph.weights[keep])
    # the level whose group an arc joins two children of: the number of levels whose
    # groups differ at its ends (groups nest: once equal, equal above; one root)
    rank_group = machine.group_ids[mapping]
    joins_at = np.zeros(len(ra), dtype=np.int64)
    differ = np.arange(len(ra))
    for level in range(machine.levels - 1):
        group = rank_group[:, level]
        differ = differ[group[ra[differ]] != group[rb[differ]]]
        joins_at[differ] += 1
    by_pe = np.argsort(mapping)  # distinct PEs: any sort
    out: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    for level in range(machine.levels):
        parent = rank_group[:, level]
        child = rank_group[:, level - 1] if level else mapping
        # children holding ranks, in PE order (group ids grow with the PE): position
        # (in that order) of every rank's child, and the first rank (in PE order) of each
        child_sorted = child[by_pe]
        new_kid = np.ones(n, dtype=bool)
        new_kid[1:] = child_sorted[1:] != child_sorted[:-1]
        first = by_pe[new_kid]
        kid_of = np.empty(n, dtype=np.int64)
        kid_of[by_pe] = np.cumsum(new_kid) - 1
        kid_parent = parent[first]
        starts = np.flatnonzero(np.r_[True, kid_parent[1:] != kid_parent[:-1]])
        sizes = np.diff(np.r_[starts, len(first)])
        many = sizes > 1
        if not np.any(many):
            continue
        # this level's arcs (from ra's child to its sibling rb's) and, of every ordered
        # pair of sibling children, the heaviest, first in PE order; child x's
        # candidates at beg[x]:beg[x] + count[x], one per sibling
        at = np.flatnonzero(joins_at == level)
        ca, cb, wc = ra[at], rb[at], wa[at]
        if len(first) == n:  # a rank per child: the arcs are the pairs, by rank
            count = np.bincount(ca, minlength=n)
            beg, count = (np.cumsum(count) - count)[first], count[first]
        else:
            pick = _heaviest_per_pair(kid_of[ca] * len(first) + kid_of[cb], wc,
                                      mapping[ca] * machine.n + mapping[cb])
            ca, cb, wc = ca[pick], cb[pick], wc[pick]
            count = np.bincount(kid_of[ca], minlength=len(first))
            beg = np.cumsum(count) - count
        out.append(_prim(starts[many], sizes[many], first, beg, count,
                         (kid_of[cb], wc, ca, cb)))
    if not out:
        return (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64),
                np.zeros(0, dtype=np.float64))
    u, v, wt = (np.concatenate(part) for part in zip(*out, strict=True))
    return u, v, wt


def _heaviest_per_pair(pair: np.ndarray, weight: np.ndarray, tie: np.ndarray
                       ) -> np.ndarray:
    """Per distinct ``pair`` key, the index of its heaviest entry, of a tie the one with
    the lowest ``tie`` key (the pair of ranks: one entry, or alike ones); ascending by
    pair.  One sort, O(m log m)."""
    if not len(pair):
        return np.zeros(0, dtype=np.int64)
    order = np.argsort(pair)  # entries of one pair and tie key are alike
    pair, weight, tie = pair[order], weight[order], tie[order]
    lead = np.flatnonzero(np.r_[True, pair[1:] != pair[:-1]])
    count = np.diff(np.r_[lead, len(pair)])
    heaviest = weight == np.repeat(np.maximum.reduceat(weight, lead), count)
    tie = np.where(heaviest, tie, np.iinfo(np.int64).max)
    chosen = np.flatnonzero(tie == np.repeat(np.minimum.reduceat(tie, lead), count))
    group = np.repeat(np.arange(len(lead)), count)[chosen]  # more than one: equal keys
    return order[chosen[np.r_[True, group[1:] != group[:-1]]]]


def _prim(lo: np.ndarray, k: np.ndarray, first: np.ndarray, beg: np.ndarray,
          count: np.ndarray, cand: tuple) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Maximum spanning trees over the children of a level's groups (group g: children
    at positions lo[g]..lo[g]+k[g]-1, first ranks ``first``; child x's candidate edges,
    one per sibling, at beg[x]:beg[x]+count[x] of ``cand`` = (sibling, weight, end in x,
    end in the sibling)), each grown from its first child; the order of matching_tree's
    loops decides ties: the child whose best edge comes from the child in the tree
    longest, then the lowest child.  The edges ``(u, v, weight)``, group by group, each
    group's in the order Prim adds them.

    The groups are handled in batches of k in (2^(j-1), 2^j], each batch as a matrix of
    one row per group, largest groups first, so that the groups still growing after s
    steps are the first rows: step s adds one child to each of them (a row's best, by
    whole-array max/argmin over the matrix) and relaxes its candidate edges.  A
    batch of G groups of up to K children costs K steps of O(G K); O(k²) per group."""
    at = np.r_[0, np.cumsum(k - 1)]  # group g's edges: at[g]:at[g + 1]
    out = (np.empty(at[-1], dtype=np.int64), np.empty(at[-1], dtype=np.int64),
           np.empty(at[-1], dtype=np.float64))
    batch = np.frexp(k - 1)[1]  # j with 2^(j-1) < k <= 2^j
    for j in np.unique(batch).tolist():
        sel = np.flatnonzero(batch == j)
        sel = sel[np.argsort(-k[sel], kind="stable")]
        _prim_batch(lo[sel], k[sel], at[sel], first, beg, count, cand, out)
    return out


def _prim_batch(lo: np.ndarray, k: np.ndarray, at: np.ndarray, first: np.ndarray,
                beg: np.ndarray, count: np.ndarray, cand: tuple, out: tuple) -> None:
    """:func:`_prim` on groups of k children (k non-increasing), their edges written at
    ``at`` onwards into ``out``."""
    to, wts, ends_u, ends_v = cand
    g, width = len(k), int(k[0])
    # per group (row) and child (column), as flat cells row * width + column: the best
    # edge into the child so far, its weight (-1: in the tree, or no such child), since
    # (when its end in the tree was added) and candidate (-1: none, then the edge of
    # the group's first child's first rank and the child's)
    value = np.where(np.arange(width) < k[:, None], 0.0, -1.0)
    value[:, 0] = -1.0
    since = np.zeros((g, width), dtype=np.min_scalar_type(-width - 1))  # small: fast
    edge = np.full(g * width, -1, dtype=np.int64)
    flat_value, flat_since = value.reshape(-1), since.reshape(-1)
    cell_of = np.arange(g) * width - lo  # + child position: the cell in that row

    def relax(rows: np.ndarray, kid: np.ndarray, added: int) -> None:
        start, many = beg[kid], count[kid]
        idx = np.arange(int(many.sum())) + np.repeat(start - np.cumsum(many) + many, many)
        cell = np.repeat(cell_of[rows], many) + to[idx]  # siblings only, each once
        now = flat_value[cell]
        better = (now >= 0) & (wts[idx] > now)
        cell, idx = cell[better], idx[better]
        flat_value[cell], flat_since[cell], edge[cell] = wts[idx], added, idx

    relax(np.arange(g), lo, 0)
    for added in range(1, width):
        grow = int(np.count_nonzero(k > added))  # the first rows
        free = value[:grow]
        best = free.max(axis=1)
        # the tie's child in the tree longest, then the lowest (argmin: the first)
        c = np.argmin(np.where(free == best[:, None], since[:grow], width), axis=1)
        kid = lo[:grow] + c
        cell = cell_of[:grow] + kid
        pos = at[:grow] + added - 1
        e = edge[cell]
        u, v = first[lo[:grow]], first[kid]
        found = e >= 0
        u[found], v[found] = ends_u[e[found]], ends_v[e[found]]
        out[0][pos], out[1][pos], out[2][pos] = u, v, best
        flat_value[cell] = -1.0
        relax(np.arange(grow), kid, added)


def _sorted_distinct(values: np.ndarray) -> np.ndarray:
    """``numpy.unique(values)`` by a sort: numpy.unique (numpy 2.4) hashes, 1.4 s for
    2^20 int64 against 25 ms to sort them."""
    s = np.sort(values)
    return s[np.r_[True, s[1:] != s[:-1]]] if len(s) else s


def _all_distinct(values: np.ndarray) -> bool:
    """No value twice (a sort, as :func:`_sorted_distinct`)."""
    s = np.sort(values)
    return not np.any(s[1:] == s[:-1])


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

