"""Hierarchical matching (Sudhakar, Adhikari & Ramesh, Job Assignment Algorithm).

Bottom-up along the machine tree: at each level the current entities (processes
first, then the groups built at the level below) are grouped into the level's
groups, the communication matrix is aggregated over the new groups (the seed's
Fig. 5: the cost between two groups is the sum of the costs between their members,
zero on the diagonal), and the next level starts from the aggregated matrix.  The
root's group lists the processes in PE order; rank r runs on the PE at r's position.

Grouping, as in the seed (Fig. 4)
    A level whose groups all have two children pairs the entities by a maximum-weight
    assignment (Hungarian method; ``scipy.optimize.linear_sum_assignment``, a
    shortest-augmenting-path solver) on the symmetric cost matrix with the diagonal
    forbidden.  Where the optimal permutation is an involution — the seed's worked
    example — its 2-cycles are the pairs.  A power-of-two arity is paired repeatedly
    (the seed's ``j*2`` loop), aggregating after each round.

Generalisations (not in the seed, whose tree is binary)
    * Longer cycles of the assignment: an even cycle keeps the better of its two
      alternating halves; an odd cycle of length L keeps the best of its L
      near-perfect alternating matchings, and the one vertex each leaves out is paired
      by the same procedure among those left-over vertices.  The assignment's value A
      bounds the best perfect matching M* by A >= 2 M*, and the pairs kept hold at
      least A/3 (a 2-cycle gives half of its weight 2w, an even cycle at least half,
      an odd cycle at least (L-1)/(2L) >= 1/3), so the weight kept inside pairs is at
      least 2/3 of the optimum M*.
    * Any arity a = 2^k * r, r odd: k pairing rounds, then groups of r (paired)
      entities by *growth*: one seed per group, chosen greedily as the entity least
      tied to the seeds already chosen (ties: heaviest communicator), then r - 1
      rounds, each a rectangular maximum-weight assignment of one free entity to every
      group, the profit being the entity's cost to the group's current members.
    * Heterogeneous trees (:meth:`mapper.model.machine.Hierarchy.from_tree`: groups of one
      level with different sizes or children): every group gets an ordered *shape*
      code (equal codes: identical subtrees, children in the same order); an entity
      built for a group carries that group's shape and may only fill a child slot of
      the same shape (forbidden pairs are -inf in the assignment), so the PE layout
      inside every entity stays valid.  Such a level is grouped by growth with these
      constraints; every round has a feasible assignment, since each shape has at
      least as many free entities as open slots.

Quality: pairing levels keep >= 2/3 of the best intra-pair weight (above); on 2 x k
machines against brute force it was exact on every random case tried.  Growth has no
guarantee: on 20 random 6-8 rank graphs per machine, J / J* was at worst 1.72 (3 x 2,
a hub taken as first seed; mean 1.04), 1.25 (4 x 2), 1.20 and 1.29 (uneven 3+2+3 and
2+4+2) — ``matching+n10`` polishes such cases (tests/mapper/construction/test_matching.py).

Complexity: the dense n x n cost matrix (O(n^2) memory, like the seed; meant for a few
thousand ranks).  Pairing N entities is one N x N assignment, O(N^3); growth into K
groups of r is r assignments of at most K x N, O(r K^2 N) = O(N^3 / r); aggregation
O(N^2).  The first level dominates: O(n^3) time in all.

References
----------
* C. Sudhakar, P. Adhikari, T. Ramesh: Process Assignment in Multi-core Clusters
  Using Job Assignment Algorithm.  2015 Fifth International Conference on Advances
  in Computing and Communications (ICACC), pp. 5-8; Fig. 4 (mapping), Fig. 5
  (aggregation), Tables I-III (the worked example reproduced in the tests).
  (The seed text gives no DOI.)
* H. W. Kuhn: The Hungarian Method for the assignment problem.  Naval Research
  Logistics Quarterly 2:83-97 (1955), doi:10.1002/nav.3800020109.
* D. F. Crouse: On implementing 2D rectangular assignment algorithms.  IEEE Trans.
  Aerospace and Electronic Systems 52(4):1679-1696 (2016),
  doi:10.1109/TAES.2016.140952 (the solver behind linear_sum_assignment).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..model.graph import CommGraph
from ..model.machine import Hierarchy, MachineError


@dataclass(frozen=True)
class MatchingStep:
    """One machine level of the matching.

    ``groups[g]`` lists the previous step's entities (the processes, for level 0) that
    form entity g of this step, in the order of the group's children; ``members[g]``
    the processes of entity g in PE order; ``matrix`` the aggregated cost matrix
    between this step's entities (the seed's Tables II and III).
    """

    level: int
    groups: list[np.ndarray]
    members: list[np.ndarray]
    matrix: np.ndarray


def matching(graph: CommGraph, machine: Hierarchy) -> np.ndarray:
    """Rank → PE mapping by hierarchical matching (see the module docstring)."""
    order, _ = matching_trace(graph, machine)
    pe = np.empty(graph.n, dtype=np.int64)
    pe[order] = np.arange(graph.n, dtype=np.int64)
    return pe


def matching_trace(graph: CommGraph, machine: Hierarchy
                   ) -> tuple[np.ndarray, list[MatchingStep]]:
    """(processes in PE order, one :class:`MatchingStep` per machine level)."""
    if not isinstance(machine, Hierarchy):
        raise MachineError(f"matching needs a hierarchical machine, not {machine.describe()}")
    if graph.n != machine.n:
        raise MachineError(f"graph has {graph.n} ranks but the machine has {machine.n} PEs")
    n = graph.n
    w = graph.to_csr().toarray()
    members_flat = np.arange(n, dtype=np.int64)
    members_bounds = np.arange(n + 1, dtype=np.int64)
    shape = np.zeros(n, dtype=np.int64)  # every PE has the same shape
    table: dict[tuple[int, ...], int] = {}
    steps: list[MatchingStep] = []
    for level in range(machine.levels):
        bounds = machine.bounds[level]
        child_bounds = (bounds if level == 0
                        else np.searchsorted(machine.bounds[level - 1], bounds))
        # the child slots are the groups the entities were built for: same shapes
        slot_entity = _group(w, shape, shape, child_bounds)
        members_flat, members_bounds = _concat(members_flat, members_bounds, slot_entity,
                                               child_bounds)
        w = _aggregate(w, slot_entity, child_bounds)
        shape = np.array(
            [table.setdefault(tuple(shape[a:b].tolist()), len(table))
             for a, b in zip(child_bounds[:-1], child_bounds[1:], strict=True)],
            dtype=np.int64)
        steps.append(MatchingStep(
            level, np.split(slot_entity, child_bounds[1:-1]),
            np.split(members_flat, members_bounds[1:-1]), w))
    return members_flat, steps


def pair_by_assignment(weights: np.ndarray) -> np.ndarray:
    """Pairs (k x 2, smaller index first, sorted) of a maximum-weight assignment.

    ``weights`` is a symmetric N x N matrix, N even.  The diagonal is forbidden; the
    cycles of the optimal permutation are split as the module docstring says (the
    weight inside the pairs is at least 2/3 of a maximum-weight perfect matching).
    Time O(N^3).
    """
    w = np.asarray(weights, dtype=np.float64)
    n = len(w)
    if n % 2:
        raise ValueError(f"cannot pair an odd number ({n}) of entities")
    if n == 0:
        return np.zeros((0, 2), dtype=np.int64)
    from scipy.optimize import linear_sum_assignment  # 0.2 s to import: not on every job

    profit = w.copy()
    np.fill_diagonal(profit, -np.inf)
    _, sigma = linear_sum_assignment(profit, maximize=True)
    idx = np.arange(n)
    involution = sigma[sigma] == idx
    first = involution & (idx < sigma)
    pairs = [np.column_stack([idx[first], sigma[first]])]
    left_over: list[int] = []
    seen = involution.copy()
    # cycles longer than 2 are rare (ties, odd structures); a loop over them is cheap
    for start in np.flatnonzero(~involution):
        if seen[start]:
            continue
        cycle = [int(start)]
        seen[start] = True
        nxt = int(sigma[start])
        while nxt != start:
            cycle.append(nxt)
            seen[nxt] = True
            nxt = int(sigma[nxt])
        kept, out = _split_cycle(w, np.array(cycle))
        pairs.append(kept)
        left_over.extend(out)
    if left_over:
        rest = np.array(left_over, dtype=np.int64)
        pairs.append(rest[pair_by_assignment(w[np.ix_(rest, rest)])])
    out = np.sort(np.concatenate(pairs), axis=1)
    return out[np.argsort(out[:, 0], kind="stable")].astype(np.int64)


def aggregate(weights: np.ndarray, groups: Sequence[Sequence[int]]) -> np.ndarray:
    """The seed's Fig. 5: ``new[i, j]`` = sum of ``weights[k, p]`` over k in group i and
    p in group j, 0 on the diagonal.  O(N^2)."""
    flat = np.concatenate([np.asarray(g, dtype=np.int64) for g in groups])
    bounds = np.concatenate([[0], np.cumsum([len(g) for g in groups])]).astype(np.int64)
    return _aggregate(np.asarray(weights, dtype=np.float64), flat, bounds)


def matching_tree(graph: CommGraph, machine: Hierarchy
                  ) -> tuple[np.ndarray, np.ndarray]:
    """The seed's topology graph (its Fig. 7) as undirected edges ``(u, v)``.

    Every group the matching forms joins its children: for two children, one edge
    between the two processes with the largest cost between them (the first in the
    children's PE order on a tie, which gives the seed's edge 0-7); for more children,
    a maximum spanning tree over the children with those edges (Prim).  The result is
    a spanning tree of the processes.  O(n^2) per level.
    """
    _, steps = matching_trace(graph, machine)
    w = graph.to_csr().toarray()
    src: list[int] = []
    dst: list[int] = []
    previous = [np.array([p]) for p in range(graph.n)]
    for step in steps:
        for children in step.groups:
            parts = [previous[c] for c in children]
            # Prim over the children: best edge from the tree built so far to each part
            in_tree = [0]
            while len(in_tree) < len(parts):
                best = None
                for t in in_tree:
                    for c in range(len(parts)):
                        if c in in_tree:
                            continue
                        sub = w[np.ix_(parts[t], parts[c])]
                        k = int(np.argmax(sub))
                        value = sub.flat[k]
                        if best is None or value > best[0]:
                            i, j = divmod(k, sub.shape[1])
                            best = (value, c, int(parts[t][i]), int(parts[c][j]))
                assert best is not None
                in_tree.append(best[1])
                src.append(best[2])
                dst.append(best[3])
        previous = step.members
    return np.array(src, dtype=np.int64), np.array(dst, dtype=np.int64)


# -- grouping ---------------------------------------------------------------------------


def _group(w: np.ndarray, shape: np.ndarray, slot_shape: np.ndarray,
           bounds: np.ndarray) -> np.ndarray:
    """Entity placed in every child slot; slots of group g are ``bounds[g]:bounds[g+1]``."""
    counts = np.diff(bounds)
    if len(counts) == 1 or np.all(counts == 1):
        # one group (siblings are equidistant) or nothing to group: any shape-true order
        return _by_shape(shape, slot_shape)
    a = int(counts[0])
    if np.all(counts == a) and np.all(shape == shape[0]):
        return _uniform(w, a)
    return _grow(w, shape, slot_shape, bounds)


def _by_shape(shape: np.ndarray, slot_shape: np.ndarray) -> np.ndarray:
    """Entities to slots of equal shape, both in their own order (stable)."""
    slot_entity = np.empty(len(slot_shape), dtype=np.int64)
    slot_entity[np.argsort(slot_shape, kind="stable")] = np.argsort(shape, kind="stable")
    return slot_entity


def _uniform(w: np.ndarray, a: int) -> np.ndarray:
    """Groups of ``a`` alike entities: pairing while a is even, then growth."""
    n = len(w)
    flat = np.arange(n, dtype=np.int64)
    bounds = np.arange(n + 1, dtype=np.int64)
    cur = w
    while a % 2 == 0:
        pairs = pair_by_assignment(cur)
        pair_bounds = np.arange(0, 2 * len(pairs) + 1, 2, dtype=np.int64)
        flat, bounds = _concat(flat, bounds, pairs.ravel(), pair_bounds)
        cur = _aggregate(cur, pairs.ravel(), pair_bounds)
        a //= 2
    if a > 1:
        k = len(cur) // a
        grow_bounds = np.arange(0, k * a + 1, a, dtype=np.int64)
        alike = np.zeros(len(cur), dtype=np.int64)
        chosen = _grow(cur, alike, np.zeros(k * a, dtype=np.int64), grow_bounds)
        flat, bounds = _concat(flat, bounds, chosen, grow_bounds)
    return flat


def _grow(w: np.ndarray, shape: np.ndarray, slot_shape: np.ndarray,
          bounds: np.ndarray) -> np.ndarray:
    """Seeded growth by rounds of rectangular maximum-weight assignment."""
    n = len(w)
    counts = np.diff(bounds)
    k = len(counts)
    slot_entity = np.full(len(slot_shape), -1, dtype=np.int64)
    free = np.ones(n, dtype=bool)
    degree = w.sum(axis=1)
    tie = np.zeros(n)
    seeds = np.empty(k, dtype=np.int64)
    # the largest groups take the first (heaviest) seeds: they hold the most members
    for g in np.argsort(-counts, kind="stable"):
        cand = np.flatnonzero(free & (shape == slot_shape[bounds[g]]))
        # least tied to the other seeds (they start different groups), then heaviest
        pick = int(cand[np.lexsort((-degree[cand], tie[cand]))[0]])
        seeds[g] = pick
        free[pick] = False
        tie += w[:, pick]
    from scipy.optimize import linear_sum_assignment  # 0.2 s to import: not on every job

    slot_entity[bounds[:-1]] = seeds
    link = w[:, seeds].copy()  # link[e, g]: cost of entity e to group g's members
    for t in range(1, int(counts.max())):
        rows = np.flatnonzero(counts > t)
        slots = bounds[rows] + t
        cols = np.flatnonzero(free)
        profit = link[np.ix_(cols, rows)].T
        profit[slot_shape[slots][:, None] != shape[cols][None, :]] = -np.inf
        r, c = linear_sum_assignment(profit, maximize=True)
        chosen = cols[c]
        slot_entity[slots[r]] = chosen
        free[chosen] = False
        link[:, rows[r]] += w[:, chosen]
    return slot_entity


# -- ragged helpers ---------------------------------------------------------------------


def _concat(flat: np.ndarray, bounds: np.ndarray, pick: np.ndarray,
            pick_bounds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Chunks ``flat[bounds[e]:bounds[e+1]]`` for e in ``pick``, concatenated, and the
    bounds of the new chunks (one per ``pick_bounds`` range)."""
    sizes = np.diff(bounds)[pick]
    starts = bounds[:-1][pick]
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    idx = np.repeat(starts - offsets[:-1], sizes) + np.arange(offsets[-1])
    return flat[idx], offsets[pick_bounds]


def _aggregate(w: np.ndarray, flat: np.ndarray, bounds: np.ndarray) -> np.ndarray:
    m = w[np.ix_(flat, flat)]
    m = np.add.reduceat(np.add.reduceat(m, bounds[:-1], axis=0), bounds[:-1], axis=1)
    np.fill_diagonal(m, 0.0)
    return m


def _split_cycle(w: np.ndarray, cycle: np.ndarray) -> tuple[np.ndarray, list[int]]:
    """Pairs kept from one cycle of the assignment, and the vertex left out (odd)."""
    length = len(cycle)
    if length % 2 == 0:
        a = cycle.reshape(-1, 2)
        b = np.roll(cycle, -1).reshape(-1, 2)
        wa, wb = w[a[:, 0], a[:, 1]].sum(), w[b[:, 0], b[:, 1]].sum()
        return (a if wa >= wb else b), []
    best = None
    for s in range(length):
        rest = np.roll(cycle, -s - 1)[:-1].reshape(-1, 2)  # leaves cycle[s] out
        value = w[rest[:, 0], rest[:, 1]].sum()
        if best is None or value > best[0]:
            best = (value, rest, int(cycle[s]))
    assert best is not None
    return best[1], [best[2]]
