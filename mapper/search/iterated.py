"""Iterated local search over N_C^d with localized repairs: perturb a patch, search
again around it, keep improvements.

Lourenço, Martin & Stützle, "Iterated Local Search", in Handbook of Metaheuristics
(2003), doi:10.1007/0-306-48056-5_11.  A local optimum of the swap search is kicked by
permuting the PEs of a random connected patch of the communication graph (a
breadth-first ball around a random rank, cut at ``patch`` ranks: ranks that talk to
each other, so the kick changes costs where they are, like the paper's N_C
neighbourhoods), then N_C^d (Schulz, Träff & von Kirchbach §3.3) repairs the kicked
mapping; the result is kept when J fell ("better" acceptance), otherwise the ranks the
round moved get their PEs back.  Stops after ``rounds`` rounds, ``patience`` rounds in
a row without improvement, or the time limit.

The repair is localized: the kick only changed the terms of edges at the patch, so
only the patch and its neighbours start on the work list; a rank that swaps puts
itself, its partner and their neighbours on the next pass's list (what the full
search does after its first pass).  A round therefore costs what the patch touches,
not a pass over every rank: O(|patch| · d) for the kick and its change of J (edges at
the patch, O(d) each by the O(d) gains of §3.2), plus, per visited rank u, one
breadth-first ball of radius d and its pairs (as in the full search: u is skipped in
O(d_u² k²) when it already sits in its best group, and pair (u, v) is fully evaluated
only when u's side can gain, bounded once per innermost group).  The round's change of
J is the kick's plus the swaps' gains, so no O(m) evaluation of J is needed either;
rejecting restores the O(touched) ranks.  The previous version ran a full N_C^d search
and an O(m) evaluation per round: about 3 ms per round on the 1024-rank rgg quotient of
bench_presets, now about 1 ms (the full search was already cheap there, since its
first pass skips every rank that sits in its best group).  Like the full search after
its first pass, the repair does not revisit ranks away from the moves, whose pairs a
move may also have changed: a kept round is a true improvement of J, not necessarily a
swap optimum far from the patch.

Work bound, on every graph.  The search counts work units (an adjacency entry scanned,
a candidate pair looked at, an O(d) gain or Γ sum counted as d, the Γ bound of a rank
as d_u² k) and is given W = ``work_per_element`` × (n + m) of them.  No round starts
once W is spent, and a round's repair stops once W · (1 + :data:`ROUND_OVERRUN`) is
spent (checked before every rank it visits and every candidate pair); a round cut
there is kept or undone by its exact change of J like any other.  So the work is at
most

    W · (1 + ROUND_OVERRUN) + max(patch + 2m, n + 2m + d_max (1 + k · d_max))

units — O(W + m + k d_max²) for a hierarchy of k levels, whatever the degrees (the
second term is the largest step between two checks: the kick and its change of J, or
one rank's Γ, its bound and its ball).  What is not counted is at most about twice
what is: after an improving swap of u and v (whose O(d_u + d_v) gain was counted) the
two ranks' neighbours go on the work list and Γ_u is recomputed, O(d_u + d_v) again.
Before the cap (issue 29) only the first check existed, and one round is not local on
a graph with hubs: a swap at a hub puts its hundreds of neighbours on the work list, a
ball of radius 10 (or 2) is the whole graph, and the round becomes a whole N_C^10
search, O(passes · n · m), while W grows as n + m.  From ``eco``'s result, one round
cost 1.84 W on bench_presets' 512-rank Barabási–Albert graph with 100 edges per new
rank (mean degree 161), and 2.14 W on a 2048-rank Chung–Lu graph of mean degree 18.5
with a hub of degree 1482; cut at 1.25 W, the first round is still kept, the second
undone.  Where rounds are local (a round on the 1024-rank rgg quotient costs under 1 %
of W) the cap never binds and the result is the same as before: the 21 other
instances of bench_presets have the same J.

The loops run compiled in ``mapper.search._cycles.iterated_search``; above
``_RENUMBER_ABOVE`` ranks the graph is renumbered in PE order first (cache locality,
as the swap search does).  O(n) extra memory.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from ..model.graph import CommGraph
from ..model.machine import Machine
from ..model.oracle import KernelOracle
from . import _cycles
from .cycles import STEP_OVERRUN, pe_ordered
from .swap import _REL_EPS, _max_distance

#: Default work bound per element (rank or edge) of the graph: a work unit is about
#: 2-3 ns here (300-550 million per second on the bench_presets instances) and ``eco``
#: takes about 45 µs per element, so this is about ``eco``'s own time.  After ``eco``'s
#: starts on the 21 bench_presets instances, 6000 / 10000 / 16000 gave a geomean J
#: 0.34 / 0.46 / 0.51 % below ``eco``'s (no patience limit); 12000 with ``strong``'s
#: patience of 150 rounds 0.46 %.
WORK_PER_ELEMENT = 12000.0

#: A round that starts before the work bound W is spent may run on to
#: W · (1 + ROUND_OVERRUN), and stops there (module docstring, "Work bound").
ROUND_OVERRUN = STEP_OVERRUN


@dataclass(frozen=True)
class IteratedStats:
    """What an iterated local search run did (``gain`` = J before − J after, ≥ 0)."""

    gain: float
    rounds: int
    improvements: int
    hit_time_limit: bool
    evaluations: int = 0   # swap gains computed by the repairs
    work: int = 0          # work units spent (see ``work_per_element``)
    cut: bool = False      # the last round's repair was stopped by the work cap


def iterated_local_search(graph: CommGraph, machine: Machine, pe: np.ndarray, *,
                          rounds: int, patience: int, patch: int, depth: int = 10,
                          seed: int = 0, time_limit: float | None = None,
                          work_per_element: float | None = WORK_PER_ELEMENT
                          ) -> IteratedStats:
    """Improve ``pe`` (rank → PE, C-contiguous int64, modified in place; see the module
    docstring).  No round starts once W = ``work_per_element`` × (n + m) work units
    are spent (adjacency entries scanned, candidate pairs looked at, an O(d) gain
    counted as d; None: no bound), and none goes on past W · (1 + ROUND_OVERRUN):
    ``stats.work`` ≤ :func:`work_bound` (O(W + m + k d_max²)).  Deterministic for a
    seed unless ``time_limit`` (seconds) stops it first."""
    if not (isinstance(pe, np.ndarray) and pe.dtype == np.int64 and pe.flags.c_contiguous):
        raise TypeError("pe must be a C-contiguous int64 array (it is modified in place)")
    if depth < 1 or patch < 0 or rounds < 0 or patience < 0:
        raise ValueError(f"need depth >= 1 and non-negative rounds, patience and patch, "
                         f"got {depth}, {rounds}, {patience}, {patch}")
    if time_limit is not None and time_limit <= 0:
        return IteratedStats(0.0, 0, 0, True)
    start = time.perf_counter()
    eps = _REL_EPS * max(graph.total_volume, 1.0) * max(_max_distance(machine), 1.0)
    max_work = (0 if work_per_element is None  # the kernel reads 0 as "none"
                else max(1, int(work_per_element * (graph.n + graph.m))))
    cap = max_work + int(ROUND_OVERRUN * max_work)
    work_graph, work, rank_at = pe_ordered(graph, pe)
    left = 0.0 if time_limit is None else max(time_limit - (time.perf_counter() - start),
                                              1e-9)  # the kernel reads 0 as "none"
    gain, done, improved, timed_out, evals, spent, cut = _cycles.iterated_search(
        work_graph.indptr, work_graph.indices, work_graph.weights, work,
        *KernelOracle.of(machine).args(), int(rounds), int(patience), int(patch),
        int(depth), max_work, int(seed) & 0xFFFFFFFFFFFFFFFF, left, eps, cap)
    if rank_at is not None:
        pe[rank_at] = work
    return IteratedStats(float(gain), int(done), int(improved), bool(timed_out), int(evals),
                         int(spent), bool(cut))


def work_bound(graph: CommGraph, machine: Machine, patch: int,
               work_per_element: float = WORK_PER_ELEMENT) -> int:
    """The most work units :func:`iterated_local_search` may spend with these
    arguments (module docstring, "Work bound"): W · (1 + ROUND_OVERRUN) plus the
    largest step between two checks.  O(n) for the degrees."""
    n, m = graph.n, graph.m
    w = max(1, int(work_per_element * (n + m)))
    d = int(graph.degrees().max(initial=0))
    gid = KernelOracle.of(machine).gid
    k = 0 if gid is None else gid.shape[1]  # the kernel's levels (none: a matrix)
    return w + int(ROUND_OVERRUN * w) + max(min(patch, n) + 2 * m,
                                            n + 2 * m + d * (1 + k * d))
