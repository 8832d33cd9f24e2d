"""A tree (:class:`~mapper.model.machine.Hierarchy`) that approximates a non-tree network.

The tree algorithms (Top-Down, Bottom-Up, matching) need a hierarchy; a torus, a mesh
or the Tianhe-3 layout has none.  :func:`tree_approximation` builds one from the node
hop matrix alone (no coordinates), by recursive balanced bisection of the nodes.

Each bisection of a group of s nodes into ``ceil(s/2)`` and ``floor(s/2)`` nodes
starts from two splits and keeps the better one:

1. *Farthest-point split* — two far-apart nodes a, b by two farthest-point sweeps
   (from the group's first node to its farthest node a, from a to its farthest b;
   ties to the lowest index), FastMap's pivot choice; the nodes sorted by
   ``hops[x, a] - hops[x, b]`` (stable), the ``ceil(s/2)`` nearest a form the first
   half.  On a torus this cuts balls around a and b.
2. *Near-pairs split* — a balanced METIS bisection (:func:`mapper.partitioners.metis.
   balanced_partition`) of the graph of the pairs within t hops, t the smallest hop
   count whose pairs connect the group, weighted ``t + 1 - hops``: a torus's or mesh's
   links (t = 1), Tianhe-3's chip and row/column pairs (t = 2, its 1-hop pairs are
   only the chips).  This is the network-graph bisection of Hoefler & Snir, on the
   hop matrix instead of a link list; on a torus it cuts slabs.

Both are refined by greedy pair swaps between the halves that lower the sum of the hop
counts *inside* the halves (equivalently, raise the hops across the cut), the
Kernighan–Lin swap gain on the dense distance matrix: swapping x ∈ A with y ∈ B
changes that sum by ``(H_B(x) - H_A(x)) + (H_A(y) - H_B(y)) - 2·hops[x, y]`` where
``H_P(x)`` is the hop sum from x to part P.  The best swap is applied while it is
negative, at most ``max_swaps`` times per split.  The refined split with the smaller
inside sum wins (the farthest-point one on ties).

Halves are recursed into until every group is one node; ``depth = ceil(log2 N)``
rounds, groups of one node are carried down unchanged (a group may have one child:
Hierarchy allows uneven groups).  The nodes are balanced by count, not by PEs.

The tree: the node's own levels (socket, core, …; its outermost level is the node)
innermost, then one level per bisection round, the root last.  The distance of a
network level is ``base + per_hop × mean hops`` over the pairs of distinct nodes whose
smallest common group is that level (the tree's best constant for those pairs in the
least-squares sense), raised where needed to the distance of the level inside it —
a Hierarchy needs distances that do not decrease outwards, and an outer mean can fall
below an inner one, or below the node's own outermost distance.  A level with no pair
(never, for balanced bisection of N ≥ 2 nodes, but kept safe) takes the inner level's
distance.

``order[i]`` is the real node at tree position i: the tree's PEs run node by node in
``order``, each node's PEs in their own order, so tree PE p is real PE
``machine_pes(order, node_sizes)[p]``.

Complexity: O(N² · (max_swaps + t + log N)) time for N nodes, plus METIS on the
near-pairs graphs (each swap step costs O(|A|·|B|) and the groups of one round hold N
nodes together; finding t costs one O(s²) connectivity test per distinct hop count up
to t; the level means are one O(N²) pass per round); measured 0.2 s for an 8×4×4 torus
(128 nodes), 12 s for 16×16×16 (4096 nodes).  O(N²) memory (the reordered hop
matrix and the level of every node pair) — never PEs².

This is not Schulz, Träff & von Kirchbach's setting (their Top-Down assumes the machine
*is* a tree); it follows the idea of Hoefler & Snir's recursive-bisection mapping for
arbitrary networks, which bisects the network graph recursively (with METIS on its
links) and the application graph alongside.  Here the network is bisected once,
up front, on the hop matrix (Tianhe-3's 1-hop pairs are only the chip pairs, so the
link graph alone would not bisect it), and Top-Down then bisects the application along
the resulting tree.

References
----------
* T. Hoefler, M. Snir, Generic topology mapping strategies for large-scale parallel
  architectures, ICS 2011, doi:10.1145/1995896.1995909 (recursive bisection mapping,
  LibTopoMap).
* B. W. Kernighan, S. Lin, An efficient heuristic procedure for partitioning graphs,
  Bell Syst. Tech. J. 49(2):291-307 (1970), doi:10.1002/j.1538-7305.1970.tb01770.x
  (the pair-swap gain; here greedy best swap, no tentative moves).
* C. Faloutsos, K.-I. Lin, FastMap, SIGMOD 1995, doi:10.1145/223784.223812 (the
  farthest-point pivot pair).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from ..model.machine import Hierarchy, MachineError
from .metis import balanced_partition

#: Default bound on the pair swaps of one bisection (see the module docstring).
DEFAULT_MAX_SWAPS = 64


def _intra(d: np.ndarray, in_a: np.ndarray) -> float:
    """Sum of the hop counts inside the two halves (each pair once)."""
    return 0.5 * (d[np.ix_(in_a, in_a)].sum() + d[np.ix_(~in_a, ~in_a)].sum())


def _farthest_split(d: np.ndarray) -> np.ndarray:
    """First half = the ``ceil(s/2)`` nodes nearest a relative to b (a, b: the
    farthest-point pivot pair)."""
    s = len(d)
    a = int(np.argmax(d[0]))
    b = int(np.argmax(d[a]))
    in_a = np.zeros(s, dtype=bool)
    in_a[np.argsort(d[:, a] - d[:, b], kind="stable")[: s - s // 2]] = True
    return in_a


def _link_split(d: np.ndarray, seed: int) -> np.ndarray:
    """First half from a balanced METIS bisection of the near-pairs graph: the pairs
    within t hops, t the smallest hop count that connects the group, weighted
    ``t + 1 - hops`` (a torus's links; Tianhe-3's chip and row/column pairs)."""
    s = len(d)
    for t in np.unique(d[d > 0]):
        near = (d > 0) & (d <= t)
        if connected_components(sp.csr_matrix(near), directed=False)[0] == 1:
            break
    adj = sp.csr_matrix(np.where(near, t + 1 - d, 0.0))
    part = balanced_partition(adj, np.array([s - s // 2, s // 2]), seed)
    return part == 0


def _refine(d: np.ndarray, in_a: np.ndarray, max_swaps: int) -> np.ndarray:
    """Greedy best pair swaps while they lower the hops inside the halves."""
    in_a = in_a.copy()
    to_a = d[:, in_a].sum(axis=1)
    to_b = d[:, ~in_a].sum(axis=1)
    for _ in range(max_swaps):
        xs, ys = np.flatnonzero(in_a), np.flatnonzero(~in_a)
        gain = ((to_b[xs] - to_a[xs])[:, None] + (to_a[ys] - to_b[ys])[None, :]
                - 2.0 * d[np.ix_(xs, ys)])
        best = int(np.argmin(gain))
        # strict decrease with a margin: float sums must not make the loop cycle
        if gain.flat[best] >= -1e-9:
            break
        x, y = xs[best // len(ys)], ys[best % len(ys)]
        in_a[x], in_a[y] = False, True
        to_a += d[:, y] - d[:, x]
        to_b += d[:, x] - d[:, y]
    return in_a


def _bisect(d: np.ndarray, max_swaps: int, seed: int) -> np.ndarray:
    """Boolean mask of the first half (``ceil(s/2)`` nodes) of the group whose hop
    matrix is ``d`` (s × s, s ≥ 2): both initial splits refined, the one with fewer
    hops inside its halves kept (the farthest-point split on ties)."""
    best = None
    for start in (_farthest_split(d), _link_split(d, seed)):
        cand = _refine(d, start, max_swaps)
        cost = _intra(d, cand)
        if best is None or cost < best[0] - 1e-9:
            best = (cost, cand)
    return best[1]


def _node_trees(node: Hierarchy | Sequence[Hierarchy], count: int) -> list[Hierarchy]:
    trees = [node] * count if isinstance(node, Hierarchy) else list(node)
    if len(trees) != count:
        raise MachineError(f"hop matrix has {count} nodes but {len(trees)} node "
                           f"hierarchies were given")
    for i, t in enumerate(trees):
        if t.levels != trees[0].levels or not np.array_equal(t.distances, trees[0].distances):
            raise MachineError(f"node {i}: every node needs the same levels and "
                               f"distances as node 0 ({trees[0].describe()})")
    return trees


def machine_pes(order: np.ndarray, node_sizes: Sequence[int] | np.ndarray) -> np.ndarray:
    """``pes[p]`` = the real machine's PE behind tree PE p (``node_sizes`` in real node
    order, PEs numbered node by node as :class:`~mapper.model.networks.NodeHopMachine` does).
    A mapping rank → tree PE becomes rank → real PE as ``pes[mapping]``.  O(n)."""
    sizes = np.asarray(node_sizes, dtype=np.int64)
    order = np.asarray(order, dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    tree_sizes = sizes[order]
    offset = np.arange(tree_sizes.sum()) - np.repeat(np.cumsum(tree_sizes) - tree_sizes,
                                                     tree_sizes)
    return np.repeat(starts[order], tree_sizes) + offset


def tree_approximation(hops: np.ndarray, node: Hierarchy | Sequence[Hierarchy], *,
                       base: float = 0.0, per_hop: float = 1.0,
                       max_swaps: int = DEFAULT_MAX_SWAPS,
                       seed: int = 0) -> tuple[Hierarchy, np.ndarray]:
    """The tree approximating ``hops`` (N × N node hop matrix) with ``node`` (one
    Hierarchy for every node, or one per node in real order) inside each node.

    Returns ``(hierarchy, order)``: ``order[i]`` is the real node at tree position i
    (see the module docstring; :func:`machine_pes` turns it into PEs).  ``base`` and
    ``per_hop`` are those of the :class:`~mapper.model.networks.NodeHopMachine` being
    approximated: a network level's distance is ``base + per_hop × mean hops``.
    """
    h = np.asarray(hops, dtype=np.float64)
    if h.ndim != 2 or h.shape[0] != h.shape[1] or h.shape[0] == 0:
        raise MachineError(f"hop matrix must be square and non-empty, got shape {h.shape}")
    if not np.array_equal(h, h.T):
        raise MachineError("hop matrix is not symmetric")
    if max_swaps < 0:
        raise MachineError(f"max_swaps must be non-negative, got {max_swaps}")
    count = h.shape[0]
    trees = _node_trees(node, count)

    # bisection rounds: groups[r] lists the round-r groups (arrays of real nodes) in
    # tree order; children replace their parent in place, so the ranges nest
    groups = [np.arange(count)]
    rounds = [groups]
    while any(len(g) > 1 for g in groups):
        nxt = []
        for g in groups:
            if len(g) == 1:
                nxt.append(g)
                continue
            first = _bisect(h[np.ix_(g, g)], max_swaps, seed)
            nxt += [g[first], g[~first]]
        groups = nxt
        rounds.append(groups)
    order = np.concatenate(groups)
    depth = len(rounds) - 1

    # level of every node pair in tree order: the number of rounds (leaves first, the
    # root's round excluded) at which the two sit in different groups
    level = np.zeros((count, count), dtype=np.int16)
    node_bounds = []
    for r in range(depth, 0, -1):
        b = np.concatenate([[0], np.cumsum([len(g) for g in rounds[r]])])
        node_bounds.append(b)
        gid = np.repeat(np.arange(len(b) - 1), np.diff(b))
        level += gid[:, None] != gid[None, :]
    node_bounds.append(np.array([0, count]))
    ht = h[np.ix_(order, order)]
    pairs = np.bincount(level.ravel(), minlength=depth + 1)[1:]
    sums = np.bincount(level.ravel(), weights=ht.ravel(), minlength=depth + 1)[1:]
    del level, ht

    inner = trees[0].distances
    net = base + per_hop * np.divide(sums, pairs, out=np.zeros(depth), where=pairs > 0)
    net[pairs == 0] = -np.inf  # "take the inner level's distance" after the running max
    distances = np.maximum.accumulate(np.concatenate([inner, net]))

    # PE bounds: each node level from the nodes' own bounds, each network level from
    # its node ranges
    ordered = [trees[i] for i in order]
    sizes = np.array([t.n for t in ordered], dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum(sizes)])
    bounds = []
    for lv in range(trees[0].levels):
        bounds.append(np.concatenate([t.bounds[lv][:-1] + s
                                      for t, s in zip(ordered, starts[:-1], strict=True)]
                                     + [starts[-1:]]).astype(np.int64))
    # node_bounds[0] is round `depth` (singletons = the node level itself, already in)
    bounds += [starts[b] for b in node_bounds[1:]]
    names = tuple(trees[0].level_names) + tuple(
        f"net{j}" for j in range(1, depth)) + (("network",) if depth else ())
    return Hierarchy(tuple(bounds), distances, names), order
