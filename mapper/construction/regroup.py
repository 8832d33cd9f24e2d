"""Regroup: keep the baseline's groups at one level, move whole groups.

The scheduler's placement decides which ranks share a node; that grouping fixes the
load on every node's link.  Regroup keeps it exactly and only chooses *where* each
group goes: it maps the quotient graph (one vertex per level-``level`` group of the
baseline, edge weights = volume between groups) onto the hierarchy above that level,
then moves every rank with its group, keeping its offset inside the group.  J inside
the groups and each group's own cut (its link load) are unchanged; the volume between
groups is placed by the given algorithm, so leaf and spine uplinks get what the
algorithm makes of it.

This is the two-level view of hierarchical mapping (coarsen, map the coarse graph,
project back) used by the sparse-QAP paper's model creation (Schulz, Träff & von
Kirchbach, §4) and by Sudhakar et al.'s node-level assignment; here the coarsening
is the baseline's own grouping, so a node's traffic never grows.

Applies when every level-``level`` group has the same number of PEs (whole groups can
then trade places); returns None otherwise.

**Rank order** (``rank_order``, :func:`rank_order_prior`).  Every MPI job also runs
collectives on MPI_COMM_WORLD in rank order (recursive doubling, binomial trees:
partners 2^k apart), which most profiles do not hold.  Block keeps ranks close in
order under one switch; a regrouping chosen on the profile's volumes alone need not.
For NPB MG at 512 ranks (4:1 3-level tree, the plain ``npb-mg`` profile) it put nodes
2 apart under different leaves, and the run (SMPI) took 1.0026x block's time, though
with every latency at 0 it ran 0.75x: MG's 88 allreduces, 40 of which took 1.84 ms
instead of block's 1.76.  With ``rank_order`` > 0 the quotient graph carries that
share of its mean edge weight on the pairs of groups 2^k apart in rank order, which
steers the coarse mapping among arrangements of equal volume cost towards those that
keep rank-order neighbours together (the same case then ran 0.979).

Complexity: O(n + m) to build the quotient graph, plus the algorithm's cost on
n / group-size vertices.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import scipy.sparse as sp

from ..model.graph import CommGraph
from ..model.machine import Hierarchy


def coarse_machine(machine: Hierarchy, level: int) -> Hierarchy:
    """The hierarchy whose PEs are ``machine``'s level-``level`` groups."""
    starts = machine.bounds[level]
    bounds = tuple(np.searchsorted(starts, b).astype(np.int64)
                   for b in machine.bounds[level + 1:])
    return Hierarchy(bounds, machine.distances[level + 1:], machine.level_names[level + 1:])


def quotient_graph(graph: CommGraph, group_of_rank: np.ndarray, groups: int) -> CommGraph:
    """Volume between groups (each undirected edge of ``graph`` once), no self loops."""
    from ..objectives import _volumes  # compiled: the numpy version took 0.09 s at 2^20 ranks

    gu, gv, w = _volumes.between_groups(graph.indptr, graph.indices, graph.weights,
                                        np.ascontiguousarray(group_of_rank, dtype=np.int64))
    a = sp.coo_matrix((w, (gu, gv)), shape=(groups, groups)).tocsr()
    return CommGraph.from_matrix(a, directed=True, source=f"{graph.source}[groups]")


def doubling_steps(count: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per step 2^k of a recursive-doubling collective over positions 0..count-1, the
    pairs (i, i xor 2^k) with i < i xor 2^k < count.  O(count log count)."""
    i = np.arange(count, dtype=np.int64)
    steps = []
    step = 1
    while step < count:
        j = i ^ step
        keep = (j < count) & (i < j)
        steps.append((i[keep], j[keep]))
        step <<= 1
    return steps


def rank_order_prior(first_rank: np.ndarray, weight: float) -> sp.csr_matrix:
    """Symmetric (G, G) matrix with ``weight`` between groups ``2^k`` apart in rank
    order (groups ordered by ``first_rank``, the lowest rank each holds): the steps of
    a recursive-doubling collective between groups.  O(G log G)."""
    groups = len(first_rank)
    by_rank = np.argsort(first_rank, kind="stable")
    steps = doubling_steps(groups)
    if not steps:
        return sp.csr_matrix((groups, groups))
    u = by_rank[np.concatenate([i for i, _ in steps])]
    v = by_rank[np.concatenate([j for _, j in steps])]
    w = np.full(2 * len(u), float(weight))
    return sp.coo_matrix((w, (np.concatenate([u, v]), np.concatenate([v, u]))),
                         shape=(groups, groups)).tocsr()


def regroup(graph: CommGraph, machine: Hierarchy, baseline: np.ndarray, level: int,
            map_coarse: Callable[[CommGraph, Hierarchy, np.ndarray], np.ndarray],
            rank_order: float = 0.0) -> np.ndarray | None:
    """Rank → PE keeping ``baseline``'s level-``level`` groups whole.

    ``map_coarse(quotient, coarse_machine, identity)`` returns group → group-slot (a
    permutation); it is given the baseline's own order as its starting point.
    ``rank_order``: the share of the quotient's mean edge weight put on the pairs of
    groups 2^k apart in rank order (module docstring); 0 maps the quotient alone.
    """
    sizes = machine.group_sizes(level)
    if level >= machine.levels - 1 or len(np.unique(sizes)) != 1:
        return None
    size = int(sizes[0])
    groups = len(sizes)
    pe = np.asarray(baseline, dtype=np.int64)
    group_of_rank = machine.group_ids[pe, level].astype(np.int64)
    offset = pe - machine.bounds[level][group_of_rank]
    quotient = quotient_graph(graph, group_of_rank, groups)
    if rank_order > 0 and quotient.m:
        first_rank = np.full(groups, len(pe), dtype=np.int64)
        np.minimum.at(first_rank, group_of_rank, np.arange(len(pe), dtype=np.int64))
        prior = rank_order_prior(first_rank, rank_order * float(quotient.weights.mean()))
        quotient = CommGraph.from_matrix(quotient.to_csr() + prior, directed=False,
                                         source=quotient.source)
    slot = np.asarray(map_coarse(quotient,
                                 coarse_machine(machine, level), np.arange(groups)),
                      dtype=np.int64)
    return slot[group_of_rank] * size + offset
