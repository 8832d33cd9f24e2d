"""The never-worse rule: which candidates are admitted against the baseline, and how
the admitted ones are ranked.

A candidate is refused when it loads a congestion level's busiest link more than the
baseline (beyond :data:`LINK_TOLERANCE`), raises a routed level's busiest link
(:func:`routed_refusal`), or, for a graph with phases, raises the phase time, the waits
passed on, a latency pace or the exchange rounds' latency (:func:`phase_refusal`).
Among the admitted, J decides, with the far traffic per node breaking near ties
(:func:`near_j_least_far`) and the phase time where the link capacities are known
(:func:`phase_timer`).  Of placements that tie exactly (J within the tie tolerance,
every link's load the same), one that keeps each host's ranks one block wins
(:func:`host_contiguous_tie`): MPICH's and Intel MPI's mpiexec can launch no other.
References: Hoefler & Snir, ICS 2011 (congestion along routed paths); the phase models
of :mod:`mapper.objectives.phase_time` and :mod:`mapper.objectives.phase_waits`.
Complexity: O(n + m·L) per check.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from functools import cache, partial
from typing import NamedTuple

import numpy as np

from ..model.graph import CommGraph
from ..model.machine import Hierarchy, Machine, MachineError, host_contiguous
from ..model.phased_graph import PhasedGraph
from ..objectives.congestion import (
    LinkCapacities,
    check_link_weights,
    group_cuts,
    raised_uplink,
    uplink_loads,
)
from ..objectives.link_load import RoutedNetwork
from ..objectives.phase_time import (
    phase_node_hop_bytes,
    phase_time,
    raised_latency_pace,
    raised_phase_time,
    raised_ratio,
    raised_round_latency,
)
from ..objectives.phase_waits import waiting_time
from ..objectives.qap import evaluate
from ..search import routed as routed_search
from . import budget
from .link_model import LinkModel
from .result import MappingResult

#: A candidate may load a link this much more (relative) than the baseline: measured
#: profiles of the same application differ by about 0.5 % per pair between runs
#: (Open MPI monitoring, LAMMPS), and a rule that flips on that would be noise itself.
LINK_TOLERANCE = 0.02


class Candidate(NamedTuple):
    """A placement offered against the baseline: the result, the origin reported when
    it wins, and its name in ``candidates``/``rejected``."""

    result: MappingResult
    origin: str
    key: str


class Admission:
    """The never-worse rule against one ``baseline`` on ``links``: which candidates may
    replace it (:meth:`refusal`) and which of the admitted wins (:meth:`rank`).  Built
    once per comparison: the baseline's J, its busiest links and (lazily) its waits are
    computed here, not per candidate.  O(n + m·L) to build."""

    def __init__(self, graph: CommGraph, machine: Machine, baseline: np.ndarray,
                 links: LinkModel) -> None:
        self.graph, self.machine, self.baseline, self.links = graph, machine, baseline, links
        self.levels = sorted(links.congestion_levels)
        if self.levels and not isinstance(machine, Hierarchy):
            raise MachineError("congestion levels need a hierarchical machine")
        self.base = evaluate(graph, machine, baseline)
        # strict improvement only: on a tie the caller's own placement stays
        self.tol = 1e-12 * max(abs(self.base.objective), 1.0)
        self._base_loads = (uplink_loads(graph, machine, baseline, self.levels,
                                         links.link_weights) if self.levels else ())
        self._routed_caps = (routed_search.caps_of(graph, links.routed, baseline)
                             if links.routed is not None else None)
        self._baseline_waits = cache(self._waits)
        self.host_level = host_level(machine, self.levels)

    def baseline_result(self, seed: int) -> MappingResult:
        return MappingResult(self.baseline.copy(), self.base.objective, self.base.traffic,
                             0.0, "baseline", seed)

    def lower(self, cand: MappingResult | None) -> bool:
        """Whether ``cand`` has a J strictly below the baseline's."""
        return cand is not None and cand.objective < self.base.objective - self.tol

    def refusal(self, cand: MappingResult) -> str | None:
        """Why ``cand`` may not replace the baseline although its J is lower (None: it
        may): a busiest link loaded more, a routed level raised, or its phases slower
        (:func:`phase_refusal`)."""
        links, levels = self.links, self.levels
        if links.routed is not None:
            return routed_refusal(self.graph, links.routed, cand, self._routed_caps,
                                  self.base.objective)
        if not levels:
            return None
        loads = uplink_loads(self.graph, self.machine, cand.mapping, levels, links.link_weights)
        raised = raised_uplink(loads, self._base_loads, LINK_TOLERANCE)
        saved = f"J {100 * (1 - cand.objective / self.base.objective):.1f}% lower, but its"
        if raised is not None:
            ref = self._base_loads[levels.index(raised.level)].load
            ratio = f"{raised.load / ref:.2f}x" if ref > 0 else "more than"
            what = (f"has {ratio} the load/capacity of" if links.link_weights is not None
                    else f"carries {ratio}")
            return f"{saved} busiest {raised.name} link {what} the baseline's busiest"
        return phase_refusal(self.graph, self.machine, cand.mapping, self.baseline, levels,
                             saved, links.link_capacities, links.capacity_scenarios,
                             self._baseline_waits)

    def _waits(self) -> float:
        assert self.links.link_capacities is not None
        return waiting_time(self.graph, self.machine, self.baseline, self.levels,
                            level_capacities(self.links.link_capacities, self.levels))

    def rank(self, admitted: list[tuple[MappingResult, str]],
             tie_only: Sequence[tuple[MappingResult, str]] = ()) -> tuple[MappingResult, str]:
        """The winner of ``admitted`` (candidate, origin; the baseline first): the least
        phase time first where the link capacities are known (:func:`phase_timer`),
        then on a tree the least far traffic per node among those near the least J
        (:func:`near_j_pool`, with a note when that overrides J), else the least J.
        Of the others that tie that winner exactly (J within :attr:`tol`,
        :meth:`ties_exactly`), and of ``tie_only`` (admitted candidates that may only
        break such a tie: :func:`~mapper.solve.candidates.whole_host_variants`), one
        whose hosts' ranks are each one block comes first (:func:`host_contiguous_tie`).
        O(k) evaluations of the measures for k candidates."""
        graph, machine, levels, tol = self.graph, self.machine, self.levels, self.tol
        timer = phase_timer(graph, machine, levels, self.links.link_capacities)
        if timer is not None:  # the least phase time first, then J
            admitted = near_least(admitted, timer)
        # phases of per-rank groups are left to the phase time across levels where it runs
        far_traffic = (partial(phase_node_hop_bytes, graph, machine, levels=levels,
                               own_groups=timer is None) if levels else None)
        measures = tuple(m for m in (timer, far_traffic) if m is not None)
        same = partial(self.ties_exactly, measures=measures)

        def tie(winner: tuple[MappingResult, str], tied: list[tuple[MappingResult, str]]
                ) -> tuple[MappingResult, str]:
            also = [a for a in tie_only if abs(a[0].objective - winner[0].objective) <= tol]
            return host_contiguous_tie(machine, self.host_level, winner, [*tied, *also], same)

        if far_traffic is None:
            return least_j(admitted, tol, tie)
        by_j, pool = least_j(admitted, tol), near_j_pool(admitted, far_traffic)
        winner, origin = least_j(pool, tol, tie)
        # the note says where the far traffic, not J, chose (the tie-break adds its own)
        if least_j(pool, tol)[0] is not by_j[0]:
            ratio = far_traffic(winner.mapping) / max(far_traffic(by_j[0].mapping), 1e-300)
            winner = replace(winner, notes=(*winner.notes, (
                f"{origin} applied over {by_j[1]} ({j_gap(by_j[0], winner, tol)}):"
                f" its busiest node's far traffic (volume x links crossed) is {ratio:.2f}x "
                f"(mapper.objectives.phase_time.phase_node_hop_bytes)")))
        return winner, origin

    def ties_exactly(self, winner: MappingResult, other: MappingResult,
                     measures: Sequence[Callable[[np.ndarray], float]] = ()) -> bool:
        """Whether ``other`` (whose J ties ``winner``'s) loads every link exactly as
        ``winner`` does, as a multiset per level (:meth:`link_profile`: the same busiest
        link, and the second busiest, ...), and no ranking ``measures`` (phase time, far
        traffic) is higher: then nothing this rule measures tells them apart.  Loads
        summed in another order differ in the last bits; :data:`EXACT` absorbs that
        and nothing more.  O(n + m·L) per call."""
        mine, theirs = self.link_profile(winner.mapping), self.link_profile(other.mapping)
        if not all(np.allclose(a, b, rtol=EXACT, atol=EXACT * max(a.max(initial=0.0), 1.0))
                   for a, b in zip(mine, theirs, strict=True)):
            return False
        return all(m(other.mapping) <= m(winner.mapping) * (1.0 + EXACT) for m in measures)

    def link_profile(self, mapping: np.ndarray) -> list[np.ndarray]:
        """Per congestion level, every group's uplink load (cut × link weight), sorted.
        O(n + m·L)."""
        assert not self.levels or isinstance(self.machine, Hierarchy)
        weights = (None if self.links.link_weights is None
                   else check_link_weights(self.machine, self.links.link_weights))
        out = []
        for level in self.levels:
            cut = group_cuts(self.graph, self.machine, mapping, level)
            w = None if weights is None else weights[level]
            out.append(np.sort(cut if w is None else cut * w))
        return out


#: Relative gap within which link loads and ranking measures count as equal for the
#: host-contiguity tie-break: rounding of sums taken in another order (1e-16 a term),
#: the same scale as :attr:`Admission.tol` for J.
EXACT = 1e-12


def host_level(machine: Machine, levels: Sequence[int]) -> int | None:
    """The level whose groups are hosts, for the host-contiguity tie-break on a tree
    with congestion ``levels``: the one named ``node`` (what a Slurm layout names them),
    else the innermost congestion level (a node's host link).  None without levels (no
    links to compare, so no tie can be shown exact) and off a tree.  O(L)."""
    if not levels or not isinstance(machine, Hierarchy):
        return None
    if "node" in machine.level_names:
        return machine.level_names.index("node")
    return min(levels)


def host_contiguous_tie(machine: Machine, level: int | None, winner: tuple[MappingResult, str],
                        tied: Sequence[tuple[MappingResult, str]],
                        same: Callable[[MappingResult, MappingResult], bool]
                         ) -> tuple[MappingResult, str]:
    """``winner``, or where it interleaves hosts the first of ``tied`` (candidate,
    name; their J within the tie tolerance of ``winner``'s) that keeps every host's
    ranks one block (:func:`mapper.model.machine.host_contiguous` at ``level``) and that
    ``same`` finds identical on everything else the rule measures, with a note.

    Why: MPICH's and Intel MPI's mpiexec (Hydra) take hosts from a host file with one
    ``host:count`` line per host in rank order, so a placement that interleaves hosts
    leaves them with their own placement; where the model cannot tell two placements
    apart, the one every launcher can launch is the better one.  Only exact ties move:
    a placement with a lower J, or a busier link anywhere, is never traded for
    contiguity.  O(n + g) per candidate for the test, plus ``same``'s cost for those
    that pass it."""
    if level is None or not tied or host_contiguous(machine, winner[0].mapping, level):
        return winner
    for cand, name in tied:
        if host_contiguous(machine, cand.mapping, level) and same(winner[0], cand):
            # a whole-host variant keeps the winner's origin; its own name tells them apart
            label = cand.algorithm if name == winner[1] else name
            note = (f"of placements with the same J and link loads, {label} applied over "
                    f"{winner[1]}: it keeps every host's ranks in one block, which MPICH's "
                    f"and Intel MPI's mpiexec need (the other interleaves hosts)")
            return replace(cand, notes=(*cand.notes, note)), name
    return winner


TieBreak = Callable[[tuple[MappingResult, str], list[tuple[MappingResult, str]]],
                    tuple[MappingResult, str]]


def near_j_least_far(admitted: list[tuple[MappingResult, str]],
                     far_traffic: Callable[[np.ndarray], float], tol: float
                      ) -> tuple[MappingResult, str]:
    """Of ``admitted`` (candidate, name), those whose J is within :data:`NEAR_J` of
    the least, then of those the ones whose ``far_traffic`` is within
    :data:`LINK_TOLERANCE` of the least (:func:`near_j_pool`), then the least J (the
    first on a tie within ``tol``).  O(k) calls of ``far_traffic`` for k candidates."""
    return least_j(near_j_pool(admitted, far_traffic), tol)


def near_j_pool(admitted: list[tuple[MappingResult, str]],
                far_traffic: Callable[[np.ndarray], float]) -> list[tuple[MappingResult, str]]:
    """Those of ``admitted`` whose J is within :data:`NEAR_J` of the least and, of
    those, whose ``far_traffic`` is within :data:`LINK_TOLERANCE` of the least, in
    their order.  O(k) calls of ``far_traffic``."""
    least = min(cand.objective for cand, _ in admitted)
    near = [a for a in admitted if a[0].objective <= least + NEAR_J * abs(least)]
    return near_least(near, far_traffic) if len(near) > 1 else near


def least_j(admitted: list[tuple[MappingResult, str]], tol: float,
            tie: TieBreak | None = None) -> tuple[MappingResult, str]:
    """The first of ``admitted`` whose J no later one beats by more than ``tol``; with
    ``tie``, its choice between that one and the others whose J is within ``tol`` of
    it (:func:`host_contiguous_tie`).  O(k), plus ``tie``'s cost."""
    winner = admitted[0]
    for cand in admitted[1:]:
        if cand[0].objective < winner[0].objective - tol:
            winner = cand
    if tie is None:
        return winner
    return tie(winner, [a for a in admitted if a is not winner
                        and abs(a[0].objective - winner[0].objective) <= tol])


def j_gap(lower: MappingResult, than: MappingResult, tol: float) -> str:
    if lower.objective >= than.objective - tol:
        return "the same J"
    return f"J {100 * (1 - lower.objective / than.objective):.2f}% lower"


#: Relative J gap within which admitted candidates are told apart by the far traffic
#: of their busiest node (:func:`mapper.objectives.phase_time.phase_node_hop_bytes`) before J: a tie
#: break where J and the links do not separate placements (bench/README.md, "Far
#: traffic per node"); beyond it J decides (a candidate a few percent above the least J
#: ran slower on LULESH's trace).
NEAR_J = 0.02


def near_least(admitted: list[tuple[MappingResult, str]],
               measure: Callable[[np.ndarray], float]) -> list[tuple[MappingResult, str]]:
    """Those of ``admitted`` whose ``measure`` of their mapping is within
    :data:`LINK_TOLERANCE` of the least, in their order."""
    values = [measure(cand.mapping) for cand, _ in admitted]
    bar = min(values) * (1.0 + LINK_TOLERANCE)
    return [a for a, v in zip(admitted, values, strict=True) if v <= bar]


def phase_timer(graph: CommGraph, machine: Machine, levels: Sequence[int],
                link_capacities: LinkCapacities | None
                 ) -> Callable[[np.ndarray], float] | None:
    """The phase time over all ``levels`` (:func:`mapper.objectives.phase_time.phase_time` with the
    levels' capacities) of a mapping, for a graph with phases on a tree with
    ``link_capacities``; None otherwise, and for a graph whose volume is mostly in
    exchange rounds (pace ``"rounds"``, more than :data:`~mapper.solve.budget.ROUNDS_SHARE`): the
    phase time leaves them out (latency-bound), so it would choose by the rest (a traced code's
    collectives) alone; J chooses then, as without phases.  O(L · Σ_p (n + m_p)) per
    call."""
    if not (isinstance(graph, PhasedGraph) and graph.phases and levels
            and link_capacities is not None and isinstance(machine, Hierarchy)):
        return None
    rounds = sum(p.repeat * p.graph.total_volume for p in graph.phases
                 if p.pace == "rounds")
    if rounds > budget.ROUNDS_SHARE * graph.total_volume:
        return None
    caps = level_capacities(link_capacities, levels)
    return lambda mapping: phase_time(graph, machine, mapping, levels, caps)


def level_capacities(link_capacities: LinkCapacities, levels: Sequence[int]
                      ) -> list[np.ndarray | float]:
    """``link_capacities`` of ``levels``; a level without them is refused."""
    out = []
    for lv in levels:
        cap = link_capacities[lv] if lv < len(link_capacities) else None
        if cap is None:
            raise MachineError(f"link capacities: none given for congestion level {lv}")
        out.append(cap)
    return out


def routed_refusal(graph: CommGraph, network: RoutedNetwork, cand: MappingResult,
                   base_caps: np.ndarray, base_objective: float) -> str | None:
    """Why ``cand`` may not replace the baseline on a routed network: the first level
    whose busiest ``load / capacity`` exceeds the baseline's (``base_caps``,
    :func:`mapper.search.routed.caps_of`) by more than
    :data:`~mapper.search.routed.ROUTED_TOLERANCE`, with the ratio and the routing;
    None when none does.  O(n + m·h + links)."""
    raised = routed_search.raised_level(graph, network, cand.mapping, base_caps)
    if raised is None:
        return None
    level, ratio = raised
    what = f"{ratio:.2f}x" if np.isfinite(ratio) else "more than"
    return (f"J {100 * (1 - cand.objective / base_objective):.1f}% lower, but its busiest "
            f"{network.level_names[level]} link carries {what} the baseline's busiest "
            f"({network.routing})")


def phase_refusal(graph: CommGraph, machine: Machine, mapping: np.ndarray,
                  baseline: np.ndarray, levels: Sequence[int], saved: str,
                  link_capacities: LinkCapacities | None = None,
                  capacity_scenarios: Mapping[str, LinkCapacities] | None = None,
                  baseline_waits: Callable[[], float] | None = None) -> str | None:
    """For a profile with phases (:class:`~mapper.model.phased_graph.PhasedGraph`) on a tree: why
    ``mapping`` may not replace ``baseline`` — its phase time at some level (with
    ``link_capacities``: over all levels together) rises above the baseline's by more
    than :data:`LINK_TOLERANCE` (:func:`mapper.objectives.phase_time.raised_phase_time`), or (with
    ``link_capacities``) its phase time with every rank's waits passed on to its
    partners (:func:`mapper.objectives.phase_waits.waiting_time`) does, or its
    latency-bound phases' pace does (:func:`mapper.objectives.phase_time.raised_latency_pace`), or
    its exchange rounds' latency (:func:`mapper.objectives.phase_time.raised_round_latency`), or,
    without ``link_capacities``, its phase time over all levels rises under one of
    ``capacity_scenarios`` — or None (also without phases).  ``saved`` starts the
    reason; ``baseline_waits`` gives the baseline's waiting time where a caller checks
    several candidates against one baseline.  O((L + S) · L · Σ_p (n + m_p)) for S scenarios."""
    if not (isinstance(graph, PhasedGraph) and graph.phases and levels
            and isinstance(machine, Hierarchy)):
        return None
    caps = None if link_capacities is None else level_capacities(link_capacities, levels)
    raised = raised_phase_time(graph, machine, mapping, baseline, levels, LINK_TOLERANCE,
                               capacities=caps)
    if raised is not None:
        what = ("phase time over every link level (load over capacity)"
                if raised.level is None else f"{raised.name} links' phase time")
        return (f"{saved} {what} ({len(graph.phases)} phases, each synchronising group "
                f"waiting for its busiest link) is {raised.ratio:.2f}x the baseline's")
    if caps is not None:
        reference = (baseline_waits() if baseline_waits is not None
                     else waiting_time(graph, machine, baseline, levels, caps))
        waits = raised_ratio(waiting_time(graph, machine, mapping, levels, caps),
                             reference, LINK_TOLERANCE)
        if waits is not None:
            ratio = f"{waits:.2f}x" if np.isfinite(waits) else "more than"
            return (f"{saved} phase time with the waits its ranks pass on to their "
                    f"partners is {ratio} the baseline's (a rank late in one phase delays "
                    f"its partners in the next: mapper.objectives.phase_waits.waiting_time)")
    if caps is None and capacity_scenarios:
        for label, scenario in capacity_scenarios.items():
            raised = raised_phase_time(graph, machine, mapping, baseline, levels,
                                       LINK_TOLERANCE,
                                       capacities=level_capacities(scenario, levels))
            if raised is not None:
                return (f"{saved} phase time over every link level with uplinks "
                        f"oversubscribed {label} is {raised.ratio:.2f}x the baseline's "
                        f"(no ratio stated: checked at "
                        f"{', '.join(capacity_scenarios)})")
    paced = raised_latency_pace(graph, machine, mapping, baseline, levels, LINK_TOLERANCE)
    if paced is not None:
        ratio = f"{paced:.2f}x" if np.isfinite(paced) else "more than"
        return (f"{saved} pipelined phases' slowest rank sends across {ratio} the links "
                f"of the baseline's (small messages one after the other: the rank whose "
                f"messages cross the most links sets the pace)")
    rounds = raised_round_latency(graph, machine, mapping, baseline, levels,
                                  LINK_TOLERANCE)
    if rounds is None:
        return None
    ratio = f"{rounds:.2f}x" if np.isfinite(rounds) else "more than"
    return (f"{saved} exchange rounds' farthest messages cross {ratio} the links of the "
            f"baseline's (small messages in rounds: each round waits for its farthest "
            f"message, mapper.objectives.phase_time.round_latency)")
