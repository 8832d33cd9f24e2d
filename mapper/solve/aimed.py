"""Objective ``"congestion"``: a result the never-worse rule refused for a link brought
under the baseline's busiest links (and its phases' caps), by a congestion repair or a
constrained polish of the baseline (:mod:`mapper.search.congested`,
:mod:`mapper.search.routed`, :mod:`mapper.search.phase_caps`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from ..model.graph import CommGraph
from ..model.machine import Hierarchy, Machine
from ..model.phased_graph import PhasedGraph
from ..objectives.congestion import (
    LinkCapacities,
    LinkWeights,
)
from ..objectives.link_load import RoutedNetwork
from ..objectives.qap import evaluate
from ..search import congested
from ..search import routed as routed_search
from ..search.phase_caps import PhaseCaps, phase_caps
from . import never_worse
from .result import MappingResult


def aimed_candidate(graph: CommGraph, machine: Hierarchy, refused: MappingResult,
                    baseline: np.ndarray, levels: list[int], seed: int,
                    time_limit: float | None, winner: MappingResult, origin: str,
                    candidates: dict[str, float], notes: list[str],
                    link_weights: LinkWeights | None = None,
                    routed: RoutedNetwork | None = None,
                    link_capacities: LinkCapacities | None = None,
                    capacity_scenarios: Mapping[str, LinkCapacities] | None = None
                     ) -> tuple[MappingResult, str]:
    """Objective ``congestion`` after the comparison with the baseline refused the
    algorithm's result: that result brought under the baseline's link caps
    (:func:`aim_at_congestion_and_phases`, and its phases' caps where the rule would
    refuse it for them; :func:`aim_at_routed_congestion` on a ``routed`` network)
    replaces ``winner`` when its J is lower.  Updates ``candidates`` and
    ``notes``; returns the winner and its origin."""
    if routed is not None:
        aimed = aim_at_routed_congestion(graph, machine, routed, refused, baseline, seed,
                                         time_limit)
        why = never_worse.phase_refusal(graph, machine, aimed.mapping, baseline, levels,
                                        "under the caps, but its", link_capacities,
                                        capacity_scenarios)
    else:
        aimed, why = aim_at_congestion_and_phases(graph, machine, refused, baseline, levels,
                                                  seed, time_limit, link_weights,
                                                  link_capacities, capacity_scenarios)
    notes.append(aimed.notes[-1])
    key = "under the caps"
    candidates[key] = aimed.objective
    tol = 1e-12 * max(abs(winner.objective), 1.0)
    if why is not None:
        notes.append(why)
        return winner, origin
    better = aimed.objective < winner.objective - tol
    timer = never_worse.phase_timer(graph, machine, levels, link_capacities)
    if timer is not None:  # as in the comparison: phase time first, J within its band
        t_aimed, t_winner = timer(aimed.mapping), timer(winner.mapping)
        better = (t_aimed * (1.0 + never_worse.LINK_TOLERANCE) < t_winner
                  or (better and t_aimed <= t_winner * (1.0 + never_worse.LINK_TOLERANCE)))
    if better:
        return MappingResult(aimed.mapping, aimed.objective, aimed.traffic, winner.seconds,
                             winner.algorithm, winner.seed,
                             winner.hit_time_limit or aimed.hit_time_limit,
                             notes=winner.notes), key
    return winner, origin


def aim_at_congestion(graph: CommGraph, machine: Hierarchy, best: MappingResult,
                      baseline: np.ndarray, levels: Sequence[int], seed: int,
                      time_limit: float | None,
                      link_weights: LinkWeights | None = None,
                      phases: PhaseCaps | None = None) -> MappingResult:
    """``best`` brought under the baseline's busiest links: J minimised subject to
    every level's busiest uplink (by load with ``link_weights``) ≤ the baseline's
    (:mod:`mapper.search.congested`); with ``phases`` (:func:`mapper.search.phase_caps.phase_caps`
    of the same baseline) also every phase's busiest link per level and every
    latency-bound phase's slowest rank.

    ``best`` within every cap comes back as it is (it already minimised J, and the
    caps hold).  Otherwise a *congestion repair* (the constrained search from
    ``best``, half of ``time_limit``) and, when the repair cannot reach every cap, a
    *constrained polish* of ``baseline`` (which meets them by definition) with the
    rest: so the result always meets the caps, and is the baseline itself only when no
    swap from it lowers J under them.  ``time_limit`` None: no limit.

    Cost: O(n + m·L) to find the caps and check ``best`` (O(Σ_p (n + m_p·L)) more with
    ``phases``); each search O(n + m·L) to start, then its sweeps (module docstring of
    :mod:`mapper.search.congested`)."""
    caps = congested.caps_of(graph, machine, baseline, levels, link_weights=link_weights)
    within = congested.violation(graph, machine, best.mapping, levels, caps,
                                 link_weights=link_weights, phase_caps=phases) <= 0.0

    def search(pe: np.ndarray, limit: float | None) -> congested.ConstrainedStats:
        return congested.constrained_search(graph, machine, pe, levels, caps, seed, limit,
                                            link_weights=link_weights, phase_caps=phases)
    return _repaired_or_polished(graph, machine, best, baseline, time_limit, within, search,
                                 AIMED if phases is None else AIMED_PHASES)


def aim_at_congestion_and_phases(graph: CommGraph, machine: Hierarchy, best: MappingResult,
                                 baseline: np.ndarray, levels: Sequence[int], seed: int,
                                 time_limit: float | None,
                                 link_weights: LinkWeights | None = None,
                                 link_capacities: LinkCapacities | None = None,
                                 capacity_scenarios: Mapping[str, LinkCapacities] | None
                                 = None) -> tuple[MappingResult, str | None]:
    """What objective ``congestion`` makes of a refused result on a tree:
    :func:`aim_at_congestion` under the total graph's link caps, and, for a profile with
    phases whose result the rule would still refuse for them
    (:func:`~mapper.solve.never_worse.phase_refusal`), the same search under its phases' caps too
    (:mod:`mapper.search.phase_caps`: every phase's busiest link per level and every latency-bound
    phase's slowest rank kept at the baseline's), each with half of ``time_limit``.  Returns the
    result and the rule's reason to refuse it for its phases (None: it passes them): the second
    result when it passes, else the first.

    Why two steps: the phases' caps are sufficient, not necessary -- the first result
    may trade one phase against another and still pass -- so they are added only where
    the first fails: under the total graph's caps alone the J-optimal placements of
    NPB LU, BT and SP kept their raised pace, and MG's its raised per-level phase time
    (bench/README.md, "NPB by phase")."""
    phased = (isinstance(graph, PhasedGraph) and bool(graph.phases) and bool(levels))
    start = time.perf_counter()
    first = (time_limit / 2 if phased and time_limit is not None else time_limit)
    aimed = aim_at_congestion(graph, machine, best, baseline, levels, seed, first,
                              link_weights)
    why = never_worse.phase_refusal(graph, machine, aimed.mapping, baseline, levels,
                                    "under the caps, but its", link_capacities, capacity_scenarios)
    if why is None or not phased:
        return aimed, why
    assert isinstance(graph, PhasedGraph)
    caps = phase_caps(graph, machine, baseline, levels, link_weights)
    left = (None if time_limit is None
            else max(time_limit - (time.perf_counter() - start), 0.05))
    again = aim_at_congestion(graph, machine, best, baseline, levels, seed, left,
                              link_weights, caps)
    why_again = never_worse.phase_refusal(graph, machine, again.mapping, baseline, levels,
                                          "under its phases' caps, but its", link_capacities,
                                          capacity_scenarios)
    if why_again is None:
        return again, None
    return aimed, why


def aim_at_routed_congestion(graph: CommGraph, machine: Machine, network: RoutedNetwork,
                             best: MappingResult, baseline: np.ndarray, seed: int,
                             time_limit: float | None) -> MappingResult:
    """:func:`aim_at_congestion` on a routed network (a torus, mesh, dragonfly or
    Tianhe-3 layout, :mod:`mapper.objectives.link_load`): ``best`` brought under the baseline's
    busiest link of each of ``network``'s levels (``load / capacity``), J from ``machine``
    (:mod:`mapper.search.routed`).  Same repair (with up to
    :data:`~mapper.search.routed.AIM_KICKS` kicks while the caps are not met), else
    constrained polish of the baseline; the result always meets the caps.  Cost:
    O(n + m·h + links) for the caps and the check, then the searches' sweeps."""
    caps = routed_search.caps_of(graph, network, baseline)
    within = routed_search.violation(graph, network, best.mapping, caps) <= 0.0

    def search(pe: np.ndarray, limit: float | None) -> congested.ConstrainedStats:
        return routed_search.constrained_search(graph, machine, network, pe, caps, seed,
                                                limit, kicks=routed_search.AIM_KICKS)
    return _repaired_or_polished(graph, machine, best, baseline, time_limit, within, search)


def _repaired_or_polished(graph: CommGraph, machine: Machine, best: MappingResult,
                          baseline: np.ndarray, time_limit: float | None, within: bool,
                          search: Callable[[np.ndarray, float | None],
                                           congested.ConstrainedStats],
                          aimed: str = "") -> MappingResult:
    """The repair-else-polish of :func:`aim_at_congestion`: ``best`` unchanged when
    ``within`` its caps, else ``search`` (a constrained search under the caps, in place,
    with a time limit) from ``best`` for half of ``time_limit`` and, when that cannot
    reach every cap, from ``baseline`` with the rest.  ``aimed`` starts the note (what
    the caps are; :data:`AIMED` by default)."""
    aimed = aimed or AIMED
    if within:
        return MappingResult(best.mapping, best.objective, best.traffic, best.seconds,
                             best.algorithm, best.seed, best.hit_time_limit,
                             notes=(*best.notes, f"{aimed}: the algorithm's result "
                                    f"is within them"))
    start = time.perf_counter()
    half = None if time_limit is None else max(time_limit, 0.05) / 2
    repaired = np.ascontiguousarray(best.mapping, dtype=np.int64).copy()
    rs = search(repaired, half)
    if rs.feasible:
        pe, note, timed_out = repaired, (f"{aimed}: the algorithm's result repaired in "
                                         f"{rs.moves} swaps"), rs.hit_time_limit
    else:
        pe = np.ascontiguousarray(baseline, dtype=np.int64).copy()
        left = (None if time_limit is None
                else max(time_limit - (time.perf_counter() - start), 0.05))
        ps = search(pe, left)
        note = (f"{aimed}: the algorithm's result could not be repaired (violation "
                f"{rs.violation_before:.3g} -> {rs.violation:.3g}); the baseline polished "
                f"under them in {ps.moves} swaps")
        timed_out = rs.hit_time_limit or ps.hit_time_limit
    ev = evaluate(graph, machine, pe)
    return MappingResult(pe, ev.objective, ev.traffic, best.seconds, best.algorithm,
                         best.seed, best.hit_time_limit or timed_out,
                         notes=(*best.notes, note))


AIMED = "aimed at the baseline's busiest links (objective 'congestion')"


AIMED_PHASES = ("aimed at the baseline's busiest links and its phases' (objective "
                "'congestion')")
