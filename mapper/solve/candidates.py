"""The candidates beside the algorithm's result: the grid's boxes (a Cartesian grid in
rank order cut by coordinate bisection), the baseline polished by local search, the
names of the regroupings, and the winner's placements with every host's ranks in one
block (:func:`whole_host_variants`, for the host-contiguity tie-break).

References and complexities: :func:`mapper.construction.coordinate_bisection`,
:mod:`mapper.model.cartesian`, :mod:`mapper.search.swap`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import replace

import numpy as np

from .. import construction
from ..construction.regroup import doubling_steps
from ..model.cartesian import cartesian_grid
from ..model.graph import CommGraph
from ..model.machine import Hierarchy, Machine, host_contiguous
from ..objectives.phase_time import (
    links_crossed,
)
from ..objectives.qap import evaluate
from . import budget, runner
from .result import MappingResult

#: Name (origin and candidate) of the grid cut into the tree's groups by coordinate
#: bisection, for graphs that are Cartesian grids in rank order.
BOXES = "grid boxes"


#: The grid's boxes cut, between equal planes, across a dimension the piece spans, so
#: that every piece keeps a share of its parent's outer faces
#: (:func:`mapper.construction.boxes.coordinate_bisection`, ``share_faces``).
BOXES_SHARED = "grid boxes, outer faces shared"


#: Name of Slurm's nodes regrouped with the rank-order term
#: (:mod:`mapper.construction.regroup`, ``rank_order``): offered beside the plain
#: regrouping where it differs, and ahead of it, so that it wins where they tie
REGROUPED_IN_ORDER = "baseline regrouped in rank order"


#: The rank-order term's weight, a share of the node quotient's mean edge weight
#: (0.001-0.1 gave the same regroupings for NPB MG at 512 ranks and CG at 256)
RANK_ORDER_WEIGHT = 0.01


def rank_order_links(machine: Hierarchy, mapping: np.ndarray, levels: Sequence[int]) -> float:
    """Σ over the steps of a recursive-doubling collective in rank order (ranks r and
    r xor 2^k, r below the largest power of two p ≤ n) of the step's farthest pair's
    tree links (:func:`mapper.objectives.phase_time.links_crossed`): the latency an allreduce of a
    few bytes pays under ``mapping``.  O(n log n · L)."""
    pi = np.asarray(mapping, dtype=np.int64)
    p = 1 << (len(pi).bit_length() - 1) if len(pi) else 0
    return float(sum(links_crossed(machine, pi, u, v, levels).max()
                     for u, v in doubling_steps(p)))


def grid_boxes(graph: CommGraph, machine: Hierarchy, seed: int,
               deadline: float | None) -> tuple[MappingResult, ...]:
    """The graph's Cartesian grid (:func:`mapper.model.cartesian.cartesian_grid`) cut into
    the machine's groups (:func:`mapper.construction.boxes.coordinate_bisection`):
    :data:`BOXES`, and where it differs :data:`BOXES_SHARED` (equal planes cut across a
    dimension the piece spans, ``share_faces``); none when the graph is no grid in rank
    order or the deadline passes.  O(F · m + n log n)."""
    if deadline is not None and time.perf_counter() >= deadline:
        return ()
    grid = cartesian_grid(graph)
    if grid is None:
        return ()
    out: list[MappingResult] = []
    for name, share in ((BOXES, False), (BOXES_SHARED, True)):
        pe = construction.coordinate_bisection(grid, machine, deadline, share_faces=share)
        if pe is None:
            break
        if out and np.array_equal(pe, out[0].mapping):
            continue
        ev = evaluate(graph, machine, pe)
        out.append(MappingResult(pe, ev.objective, ev.traffic, 0.0, name, seed,
                                 notes=(f"the profile is a {grid.describe()} grid in rank "
                                        f"order",)))
    return tuple(out)


def polished(graph: CommGraph, machine: Machine, polish: str, seed: int,
             baseline: np.ndarray, base_objective: float, bar: float | None,
             left: float | None, progress: Callable[[str], None] | None) -> MappingResult:
    """The baseline improved by the local search ``polish`` within ``left`` seconds.

    With a budget and a ``bar`` (the J it must beat to win: the algorithm's), the
    search first runs for :data:`~mapper.solve.budget.POLISH_PROBE` of the smallest budget
    (:data:`~mapper.solve.budget.POLISH_MIN_SECONDS`: 0.25 s, whatever the budget); if it has not
    converged and, gaining at that slice's rate for the rest of the budget, would
    still end at or above the bar, it stops there.  A local search gains most in its
    first passes, so its first rate bounds the later ones: the stop drops only
    polishes that could not have won.  At 2^20
    ranks (3D stencil, fast preset) the polish of Slurm's block placement lowered J by
    0.02 % in 3.1 s after an algorithm 64 % below it; it now stops after 0.25 s (a
    quarter of its budget until 2026-11-26: 0.5 s there, 2.5 s at 2^22; small jobs,
    whose budget is the smallest, keep their 0.25 s).  Cost: the kernel's start
    (renumbering, O(m)) twice when it goes on."""
    algorithm = f"identity+{polish}"
    if left is None or bar is None:
        return runner.map_once(graph, machine, algorithm, seed, left, progress,
                               start_from=baseline)
    probe = budget.POLISH_PROBE * min(left, budget.POLISH_MIN_SECONDS)
    first = runner.map_once(graph, machine, algorithm, seed, probe, progress, start_from=baseline)
    rest = left - first.seconds
    if not first.hit_time_limit or rest <= 0:
        return first
    rate = (base_objective - first.objective) / max(first.seconds, 1e-9)
    if first.objective - rate * rest >= bar:
        return first
    more = runner.map_once(graph, machine, algorithm, seed, rest, progress,
                           start_from=first.mapping)
    return MappingResult(more.mapping, more.objective, more.traffic,
                         first.seconds + more.seconds, algorithm, seed, more.hit_time_limit,
                         notes=tuple(dict.fromkeys(first.notes + more.notes)),
                         timings={k: first.timings.get(k, 0.0) + more.timings.get(k, 0.0)
                                 for k in set(first.timings) | set(more.timings)})


#: Name of the winner's placement with its ranks rotated so that every host's ranks are
#: one block (:func:`whole_host_variants`).
HOSTS_ROTATED = "hosts in one block each (ranks rotated)"

#: Name of the block placement, rank r on PE r: node after node, every host's ranks one
#: block (:func:`whole_host_variants`).
HOSTS_BLOCK = "hosts in one block each (block placement)"


def whole_host_variants(graph: CommGraph, machine: Hierarchy, winner: MappingResult,
                        level: int) -> tuple[MappingResult, ...]:
    """Placements with every level-``level`` group's ranks in one block
    (:func:`mapper.model.machine.host_contiguous`) that may tie ``winner`` exactly, for
    the host-contiguity tie-break (:func:`mapper.solve.never_worse.host_contiguous_tie`);
    none when ``winner`` already keeps its hosts whole.

    :data:`HOSTS_ROTATED`: where the winner's hosts are blocks of a cyclic rank order
    (one host holding the last ranks and the first), rank r takes the PE of rank
    r + s (mod n), s the first rank of a host's block: the same J and link loads for
    every pattern invariant under that shift (a ring, a periodic grid whose host blocks
    are slabs).  :data:`HOSTS_BLOCK`: rank r on PE r, which ties where the winner's
    groups and rank-order slabs cost the same (a periodic grid's rows against its
    boxes).  Each is only offered: the caller evaluates it like any candidate.
    O(n + g) each and O(m) for its J."""
    pi = np.asarray(winner.mapping, dtype=np.int64)
    if host_contiguous(machine, pi, level):
        return ()
    node = machine.group_ids[pi, level]
    starts = np.flatnonzero(node != np.roll(node, 1))
    out = []
    # one run per host around the cycle: a rotation to a run's start makes each a block
    if len(starts) == np.count_nonzero(np.bincount(node)):
        shift = int(starts[0])
        pe = np.roll(pi, -shift)
        ev = evaluate(graph, machine, pe)
        # the winner's own placement relabelled: its notes and its search's end hold
        out.append(replace(winner, mapping=pe, objective=ev.objective, traffic=ev.traffic,
                           algorithm=HOSTS_ROTATED, notes=(*winner.notes, (
                               f"{HOSTS_ROTATED}: the placement found with its ranks "
                               f"shifted by {shift}, rank r on the PE of rank r + {shift} "
                               f"(mod {len(pi)})"))))
    block = np.arange(len(pi), dtype=np.int64)
    ev = evaluate(graph, machine, block)
    out.append(MappingResult(block, ev.objective, ev.traffic, 0.0, HOSTS_BLOCK, winner.seed,
                             notes=(f"{HOSTS_BLOCK}: rank r on PE r, node after node",)))
    return tuple(out)
