"""One entry point: construct an initial mapping, improve it by local search, report it.

Algorithm names are ``construction[+neighbourhood]``:

constructions
    ``identity``, ``random``, ``greedy`` (Müller-Merbach), ``greedyallc`` (GreedyAllC),
    ``topdown``, ``bottomup`` (the last two need a hierarchical machine), ``ohtma``
    (Li et al.'s greedy + locked pair-exchange pass, :mod:`mapper.construction.ohtma`;
    ``ohtma+n10`` polishes its result with N_C^10), ``matching`` (Sudhakar et al.'s
    bottom-up Hungarian pairing per tree level, :mod:`mapper.construction.matching`; needs
    a hierarchical machine).
neighbourhoods
    ``n<d>`` — N_C^d, ranks within d hops of the communication graph (``n10`` is the
    paper's default); ``nc<d>`` says the same explicitly (``nc2`` = N_C^2, because
    ``n2`` names N^2); ``np`` or ``np<block>`` — Brandfass' pruned N_p; ``n2`` — all
    pairs, N^2.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cache, partial

import numpy as np

from .. import construction, search
from ..construction.ohtma import ohtma_greedy
from ..construction.regroup import doubling_steps
from ..errors import RankmapError
from ..model.cartesian import cartesian_grid
from ..model.dense import PARTITION_DEGREE, search_depth, uniform_pattern
from ..model.graph import CommGraph, GraphError
from ..model.machine import Hierarchy, Machine, MachineError
from ..model.phased_graph import PhasedGraph
from ..objectives.congestion import (
    LinkCapacities,
    LinkWeights,
    check_link_weights,
    raised_uplink,
    uplink_loads,
)
from ..objectives.link_load import RoutedNetwork
from ..objectives.phase_time import (
    links_crossed,
    phase_node_hop_bytes,
    phase_time,
    raised_latency_pace,
    raised_phase_time,
    raised_ratio,
    raised_round_latency,
)
from ..objectives.phase_waits import waiting_time
from ..objectives.qap import check_mapping, evaluate
from ..partitioners.metis import balanced_partition
from ..search import congested
from ..search import routed as routed_search
from ..search.cycles import cycle_search
from ..search.phase_caps import PhaseCaps, phase_caps
from . import presets
from .algorithm_names import TREE_CONSTRUCTIONS, is_preset, parse_algorithm
from .result import PHASES, MappingResult


class AlgorithmError(RankmapError, ValueError):
    """An algorithm name that is not ``construction[+neighbourhood]``."""


@dataclass(frozen=True)
class AlgorithmSpec:
    """Parsed algorithm name."""

    construction: str
    neighborhood: str | None  # "nc", "np", "n2" or None
    param: int = 0

    @classmethod
    def parse(cls, name: str) -> AlgorithmSpec:
        try:
            construction_, neighborhood, param = parse_algorithm(name)
        except ValueError as exc:
            raise AlgorithmError(str(exc)) from None
        if neighborhood == "np" and param is None:
            param = search.pruned.DEFAULT_BLOCK
        return cls(construction_, neighborhood, param or 0)


def map_processes(graph: CommGraph, machine: Machine, algorithm: str = "topdown+n10",
                  seed: int = 0, time_limit: float | None = None,
                  attempts: int = 1,
                  progress: Callable[[str], None] | None = None,
                  baseline: np.ndarray | None = None,
                  congestion_levels: Sequence[int] | None = None,
                  objective: str = "J",
                  link_weights: LinkWeights | None = None,
                  routed: RoutedNetwork | None = None,
                  link_capacities: LinkCapacities | None = None,
                  capacity_scenarios: Mapping[str, LinkCapacities] | None = None
                  ) -> MappingResult:
    """Map the ``graph.n`` ranks onto the ``machine.n`` PEs, minimizing J.

    ``time_limit`` (seconds) bounds the greedy constructions and the local search, which
    then return the best mapping found so far; the partitioning inside Top-Down and
    Bottom-Up is not interruptible (callers that need a hard bound, like the prolog,
    enforce it from outside).  ``attempts`` > 1 repeats the algorithm with seeds
    ``seed, seed+1, …`` inside the same time limit and keeps the best mapping (a preset,
    ``fast``/``eco``/``strong`` (:mod:`mapper.solve.presets`), fixes its own starts)
    (restarts matter for small or rugged instances, where one 2-swap local optimum is
    often not the global one).  ``progress`` is called with a short phase description
    as each phase starts (the CLI shows them on a terminal).

    ``baseline`` (rank → PE) is the placement the caller gets without this library,
    e.g. the scheduler's default.  The result is then never worse than it: the
    baseline itself and the baseline improved by local search (the algorithm's
    neighbourhood, N_C^10 when it has none; cheap, it starts from a good order) are
    candidates beside the algorithm's result, and the best J wins — the baseline on a
    tie.  ``result.origin`` says which won, ``result.candidates`` their J.

    ``congestion_levels`` (hierarchy level indices whose groups reach the next level
    through a shared link: nodes' host links, switches' uplinks) makes the comparison
    with the baseline refuse a candidate that loads the heaviest link of any of those
    levels more than the baseline does (beyond ``LINK_TOLERANCE``), whatever its J
    (:mod:`mapper.objectives.congestion`: J does not see that a bulk-synchronous step waits for
    its busiest link).  Refused candidates are listed in ``result.rejected`` with the
    reason.  Among the admitted ones whose J is within :data:`NEAR_J` of the least, the
    least far traffic on one node (:func:`mapper.objectives.phase_time.phase_node_hop_bytes`) comes
    before J.  ``link_weights`` (:data:`mapper.objectives.congestion.LinkWeights`: per hierarchy
    level, each group's link cost, 1 / relative capacity, e.g. from the switches'
    LinkSpeed; 0 for a group without a link) make that comparison one of load over
    capacity, cut × weight (Hoefler & Snir's congestion); without them the links of a
    level are alike and the rule compares volumes, as before weights existed.

    Budgets: with ``time_limit`` the result comes back within it plus the final
    evaluations of J (O(m) each), on dense graphs too: the constructions partition a
    sparsified view of a dense graph (:func:`mapper.model.dense.sparsify`) and start no
    partition after the limit, and the N_C^d depth is lowered where one breadth-first
    ball would scan more arcs than the budget allows (:func:`mapper.model.dense.search_depth`;
    on a complete graph N_C^1 is the same neighbourhood).  When every bijection has
    the same J (no edge, or a uniform all-to-all: :func:`mapper.model.dense.uniform_pattern`)
    nothing runs: the baseline (the identity without one) comes back at once with
    ``result.notes`` saying so.

    ``objective`` is ``"J"`` (the default: everything above) or ``"congestion"``
    (needs ``baseline`` and ``congestion_levels`` on a hierarchy; what the Slurm plugin
    uses on switch trees): J minimised subject to every congestion level's busiest link
    (by load, cut × link weight, with ``link_weights``) staying at or below the
    baseline's.  The candidates are those of objective J; when
    the comparison refuses the algorithm's result for a link, that result is brought
    under the caps (:func:`aim_at_congestion`: a congestion repair, else a constrained
    polish of the baseline) and becomes candidate ``"under the caps"``, applied when
    its J is the lowest (``result.origin``); for a graph with phases that result, when
    the rule would still refuse it for its phases, is searched again under the phases'
    caps too (:func:`aim_at_congestion_and_phases`).  Where nothing is refused it costs nothing
    and the result is objective J's; the repair uses only the time the comparison left
    (none left: a note says so).

    On a hierarchy, a graph that is a Cartesian grid in rank order
    (:func:`mapper.model.cartesian.cartesian_grid`: most halo exchanges, numbered as
    ``MPI_Cart_create`` does) also gets the grid cut into the tree's groups by
    coordinate bisection (:func:`mapper.construction.coordinate_bisection`: boxes of
    least surface, where partitioners only approach it), candidate :data:`BOXES`, and
    where it differs :data:`BOXES_SHARED` (equal planes cut so that every piece keeps a
    share of its parent's outer faces): without a baseline the lowest J of them and the
    algorithm's result is returned (the first on a tie), with one they are compared
    like the others.

    ``routed`` (a :class:`~mapper.objectives.link_load.RoutedNetwork` over the machine's PEs: a
    torus, mesh, dragonfly or Tianhe-3 layout with its routing,
    :mod:`mapper.objectives.link_load`) is the link model of a machine that is not a switch tree (a
    :class:`~mapper.model.networks.NodeHopMachine`), in place of ``congestion_levels``: the
    comparison with the baseline refuses a candidate that raises some level's busiest
    routed link (``load / capacity``; node links, router links, a dragonfly's local and
    global links) above the baseline's by more than
    :data:`~mapper.search.routed.ROUTED_TOLERANCE`, and objective ``"congestion"``
    then repairs the refused result under those caps
    (:func:`aim_at_routed_congestion`, :mod:`mapper.search.routed`) as on a tree.

    A graph with phases (:class:`~mapper.model.phased_graph.PhasedGraph`) on a tree: a candidate
    whose phase time (:func:`mapper.objectives.phase_time.phase_time`) exceeds the baseline's is
    refused, one congestion level at a time.  ``link_capacities`` (per hierarchy level,
    each group's uplink capacity, comparable across levels, e.g. a switch's host links
    below it over its oversubscription; None for a level without them) replace that
    by one phase time over all congestion levels, and then the candidate with the
    least phase time is applied (J decides among those within
    :data:`LINK_TOLERANCE` of it): measured on a halo exchanged one dimension after
    the other, two placements of equal J and equal busiest links differ by 10-16 % in
    simulated time, and only that model orders them right (bench/README.md, "A halo
    exchanged by dimension").  Where they are not known, ``capacity_scenarios``
    (label → capacities, e.g. the uplinks at 1:1, 2:1, 4:1 and 8:1) make the rule
    refuse a candidate whose phase time over all levels exceeds the baseline's under
    any of them (J still chooses among the others): NPB MG's J-optimal placement at
    512 ranks passed every per-level check and ran 1.08-1.16x block's time on 4:1
    trees; it is slower than block under 4:1 in this model (bench/README.md, "NPB by
    phase").
    """
    if objective not in OBJECTIVES:
        raise AlgorithmError(f"objective must be one of {', '.join(OBJECTIVES)}, "
                             f"got {objective!r}")
    if objective == "congestion" and (baseline is None or not (
            (congestion_levels and isinstance(machine, Hierarchy)) or routed is not None)):
        raise AlgorithmError("objective 'congestion' needs a baseline, and congestion "
                             "levels on a hierarchical machine or a routed network")
    if routed is not None:
        if congestion_levels:
            raise MachineError("give congestion levels (a switch tree) or a routed "
                               "network, not both")
        if routed.n != machine.n:
            raise MachineError(f"the routed network has {routed.n} PEs but the machine "
                               f"{machine.n}")
    if attempts < 1:
        raise AlgorithmError(f"attempts must be at least 1, got {attempts}")
    start = time.perf_counter()
    recipe = presets.preset(algorithm) if is_preset(algorithm) else None
    base = algorithm
    runs = [(i, 1, True) for i in range(attempts)]
    if recipe is not None:
        base = recipe.algorithm_for(isinstance(machine, Hierarchy))
        runs = recipe.runs()
    _check_inputs(graph, machine, AlgorithmSpec.parse(base))
    if congestion_levels and not isinstance(machine, Hierarchy):
        raise MachineError("congestion levels need a hierarchical machine")
    if link_weights is not None:
        if not isinstance(machine, Hierarchy):
            raise MachineError("link weights need a hierarchical machine")
        try:
            link_weights = check_link_weights(machine, link_weights)
        except ValueError as exc:
            raise MachineError(str(exc)) from None
    if baseline is not None:
        baseline = check_mapping(baseline, machine.n, graph.n)
    if uniform_pattern(graph):
        return _uniform_result(graph, machine, algorithm, seed, baseline, start)
    # keep time for the final evaluations of J (O(m) each; seconds on a dense graph)
    evals = 1 if baseline is None else 3
    reserve = (0.0 if time_limit is None else
               min(0.5 * time_limit, evals * graph.m * _EVAL_SECONDS_PER_EDGE))
    best: MappingResult | None = None
    phases = dict.fromkeys(PHASES, 0.0)
    for i, tries, refine in runs:
        left = (None if time_limit is None
                else time_limit - reserve - (time.perf_counter() - start))
        if best is not None and left is not None and left <= 0:
            break
        if baseline is not None and left is not None:
            left *= _ALGORITHM_SHARE  # keep time for polishing the baseline
        r = _map_once(graph, machine, base, seed + i, left, progress, partition_tries=tries,
                      refine_splits=refine)
        for name, seconds in r.phases.items():
            phases[name] += seconds
        if best is None or r.objective < best.objective:
            best = r
    assert best is not None
    notes = list(best.notes)
    if recipe is not None:
        notes.insert(0, recipe.describe(isinstance(machine, Hierarchy)))
        share = 1.0 if baseline is None else _ALGORITHM_SHARE
        searched = time.perf_counter()
        if recipe.cycles and not best.hit_time_limit:
            best = _cycles(graph, machine, best, seed, time_limit, reserve, start, share,
                           progress, notes, recipe.cycle_work)
        if recipe.rounds and not best.hit_time_limit:
            best = _iterate(graph, machine, best, recipe, seed, time_limit, reserve, start,
                            share, progress)
        phases["search"] += time.perf_counter() - searched
    best = MappingResult(best.mapping, best.objective, best.traffic, best.seconds,
                         algorithm, best.seed, best.hit_time_limit, notes=tuple(notes))
    origin, candidates = "algorithm", {algorithm: best.objective}
    refused_result = best
    boxed: tuple[MappingResult, ...] = ()
    if isinstance(machine, Hierarchy):
        cut = time.perf_counter()
        boxed = _boxed(graph, machine, seed,
                       None if time_limit is None else start + time_limit - reserve)
        phases["construction"] += time.perf_counter() - cut
    for box in boxed if baseline is None else ():
        candidates[box.algorithm] = box.objective
        if box.objective < best.objective:
            best, origin = box, box.algorithm
            notes += [note for note in box.notes if note not in notes]
    if baseline is not None:
        compared = time.perf_counter()
        best, origin, candidates, rejected = _against_baseline(
            graph, machine, algorithm, base, seed, best, baseline,
            None if time_limit is None else time_limit - reserve * 2 / 3, start, progress,
            congestion_levels, link_weights, routed, boxed, link_capacities,
            capacity_scenarios)
        phases["baseline"] += time.perf_counter() - compared
        notes += [note for note in best.notes if note not in notes]
        if objective == "congestion" and algorithm in rejected:
            assert congestion_levels or routed is not None
            aimed_at = time.perf_counter()
            left = None if time_limit is None else time_limit - reserve - (aimed_at - start)
            if left is not None and left <= 0:
                notes.append(f"{_AIMED}: no time left to repair the refused result")
            else:
                best, origin = _aimed_candidate(graph, machine, refused_result, baseline,
                                                sorted(congestion_levels or ()), seed, left,
                                                best, origin, candidates, notes,
                                                link_weights, routed, link_capacities,
                                                capacity_scenarios)
            phases["search"] += time.perf_counter() - aimed_at
    else:
        rejected = {}
    seconds = time.perf_counter() - start
    return MappingResult(best.mapping, best.objective, best.traffic, seconds, algorithm,
                         best.seed, best.hit_time_limit, origin, candidates, rejected,
                         tuple(notes), _with_other(phases, seconds))


#: The objectives map_processes accepts (see its docstring).
OBJECTIVES = ("J", "congestion")


def _aimed_candidate(graph: CommGraph, machine: Hierarchy, refused: MappingResult,
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
        why = phase_refusal(graph, machine, aimed.mapping, baseline, levels,
                            "under the caps, but its", link_capacities, capacity_scenarios)
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
    timer = _phase_timer(graph, machine, levels, link_capacities)
    if timer is not None:  # as in the comparison: phase time first, J within its band
        t_aimed, t_winner = timer(aimed.mapping), timer(winner.mapping)
        better = (t_aimed * (1.0 + LINK_TOLERANCE) < t_winner
                  or (better and t_aimed <= t_winner * (1.0 + LINK_TOLERANCE)))
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
                                 _AIMED if phases is None else _AIMED_PHASES)


def aim_at_congestion_and_phases(graph: CommGraph, machine: Hierarchy, best: MappingResult,
                                 baseline: np.ndarray, levels: Sequence[int], seed: int,
                                 time_limit: float | None,
                                 link_weights: LinkWeights | None = None,
                                 link_capacities: LinkCapacities | None = None,
                                 capacity_scenarios: Mapping[str, LinkCapacities] | None
                                 = None) -> tuple[MappingResult, str | None]:
    """What objective ``congestion`` makes of a refused result on a tree:
    :func:`aim_at_congestion` under the total graph's link caps, and, for a profile with
    phases whose result the rule would still refuse for them (:func:`phase_refusal`),
    the same search under its phases' caps too (:mod:`mapper.search.phase_caps`:
    every phase's busiest link per level and every latency-bound phase's slowest rank
    kept at the baseline's), each with half of ``time_limit``.  Returns the result and
    the rule's reason to refuse it for its phases (None: it passes them): the second
    result when it passes, else the first.

    Why two steps: the phases' caps are sufficient, not necessary -- the first result
    may trade one phase against another and still pass -- so they are added only where
    the first fails.  Measured (bench/README.md, "NPB by phase"): under the total
    graph's caps alone NPB LU's, BT's and SP's J-optimal placements kept their raised
    pace (1.07-1.34x block's simulated time on 4:1 trees) and MG's its raised per-level
    phase time (1.04-1.16x at 512-1024 ranks)."""
    phased = (isinstance(graph, PhasedGraph) and bool(graph.phases) and bool(levels))
    start = time.perf_counter()
    first = (time_limit / 2 if phased and time_limit is not None else time_limit)
    aimed = aim_at_congestion(graph, machine, best, baseline, levels, seed, first,
                              link_weights)
    why = phase_refusal(graph, machine, aimed.mapping, baseline, levels,
                        "under the caps, but its", link_capacities, capacity_scenarios)
    if why is None or not phased:
        return aimed, why
    assert isinstance(graph, PhasedGraph)
    caps = phase_caps(graph, machine, baseline, levels, link_weights)
    left = (None if time_limit is None
            else max(time_limit - (time.perf_counter() - start), 0.05))
    again = aim_at_congestion(graph, machine, best, baseline, levels, seed, left,
                              link_weights, caps)
    why_again = phase_refusal(graph, machine, again.mapping, baseline, levels,
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
    the caps are; :data:`_AIMED` by default)."""
    aimed = aimed or _AIMED
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


_AIMED = "aimed at the baseline's busiest links (objective 'congestion')"
_AIMED_PHASES = ("aimed at the baseline's busiest links and its phases' (objective "
                 "'congestion')")


def _with_other(phases: dict[str, float], seconds: float) -> dict[str, float]:
    """``phases`` with ``other``: what of ``seconds`` no phase accounts for."""
    named = sum(v for k, v in phases.items() if k != "other")
    return {**phases, "other": max(0.0, seconds - named)}


def _cycles(graph: CommGraph, machine: Machine, best: MappingResult, seed: int,
            time_limit: float | None, reserve: float, start: float, share: float,
            progress: Callable[[str], None] | None, notes: list[str],
            work_per_element: float) -> MappingResult:
    """A preset's moves beyond 2-swaps (mapper.search.cycles) from its best start,
    bounded by ``work_per_element`` × (n + m) work units."""
    if _dense(graph):
        notes.append("3-cycles and ejection chains skipped: dense profile")
        return best
    left = None
    if time_limit is not None:
        left = share * (time_limit - reserve) - (time.perf_counter() - start)
        if left <= 0:
            return best
    if progress:
        progress("3-cycles and ejection chains")
    pe = best.mapping.copy()
    stats = cycle_search(graph, machine, pe, seed=seed, time_limit=left,
                         work_per_element=work_per_element)
    return best if stats.gain <= 0 else _improved(graph, machine, best, pe, start,
                                                  stats.hit_time_limit)


def _iterate(graph: CommGraph, machine: Machine, best: MappingResult,
             recipe: presets.Preset, seed: int, time_limit: float | None, reserve: float,
             start: float, share: float, progress: Callable[[str], None] | None
             ) -> MappingResult:
    """A preset's iterated local search from its best start (mapper.solve.presets), within
    ``share`` of the time left."""
    used = time.perf_counter() - start
    left = presets.ILS_TIME_SHARE * used
    if time_limit is not None:
        left = min(left, time_limit - reserve - used, share * (time_limit - reserve) - used)
    if left <= 0:
        return best
    depth = 10
    if time_limit is not None:
        if _dense(graph) and _search_stretch(graph, machine, "nc") > _STRETCH_SHARE * left:
            return best  # one search pass could not stop in time (see _map_once)
        depth = search_depth(graph, depth, max(1000, int(_BALL_ARCS_PER_SECOND * time_limit)),
                             seed=seed)
    if progress:
        progress(f"iterated local search (up to {recipe.rounds} rounds, stopped earlier by "
                 f"its work bound or {presets.STRONG_PATIENCE} idle rounds)")
    pe = best.mapping.copy()
    patch = int(min(presets.PATCH_MAX, max(presets.PATCH_MIN, presets.PATCH_SHARE * graph.n)))
    stats = search.iterated_local_search(
        graph, machine, pe, rounds=recipe.rounds, patience=presets.STRONG_PATIENCE,
        patch=min(patch, graph.n), depth=depth, seed=seed, time_limit=left)
    if stats.improvements == 0:
        return best
    # the search stopping at its own share of the time is by design, not the limit
    return _improved(graph, machine, best, pe, start, time_limit is not None
                     and time.perf_counter() - start >= time_limit - reserve)


def _improved(graph: CommGraph, machine: Machine, best: MappingResult, pe: np.ndarray,
              start: float, hit_time_limit: bool) -> MappingResult:
    """``best`` with the mapping ``pe`` a later stage of a preset improved it to."""
    ev = evaluate(graph, machine, pe)
    return MappingResult(pe, ev.objective, ev.traffic, time.perf_counter() - start,
                         best.algorithm, best.seed, hit_time_limit, notes=best.notes)


#: The note of a profile on which every placement has the same J.
UNIFORM_NOTE = "every placement has the same J (uniform all-to-all): nothing to gain"


def _uniform_result(graph: CommGraph, machine: Machine, algorithm: str, seed: int,
                    baseline: np.ndarray | None, start: float) -> MappingResult:
    """The baseline (or the identity) unchanged, with :data:`UNIFORM_NOTE`."""
    kept = "the baseline" if baseline is not None else "the identity (rank r on PE r)"
    pe = (baseline.copy() if baseline is not None
          else construction.identity(graph.n))
    ev = evaluate(graph, machine, pe)
    name = "baseline" if baseline is not None else algorithm
    seconds = time.perf_counter() - start
    return MappingResult(pe, ev.objective, ev.traffic, seconds,
                         algorithm, seed, False,
                         "baseline" if baseline is not None else "algorithm",
                         {name: ev.objective}, {}, (f"{UNIFORM_NOTE}; {kept} is kept",),
                         _with_other(dict.fromkeys(PHASES, 0.0), seconds))


#: A candidate may load a link this much more (relative) than the baseline: measured
#: profiles of the same application differ by about 0.5 % per pair between runs
#: (Open MPI monitoring, LAMMPS), and a rule that flips on that would be noise itself.
LINK_TOLERANCE = 0.02

#: Share of the time limit the algorithm gets when a baseline is polished after it.
_ALGORITHM_SHARE = 0.8

#: Within a time limit, the polish of the baseline may take this share of the time the
#: algorithm used (the same 80/20 split as the budget), but never less than
#: _POLISH_MIN_SECONDS, so that where it needs less (from Slurm's block placement of
#: a 3D stencil: 0.3 s CPU at 2^15 ranks, 0.75 s at 2^16, 2.4 s at 2^17 here) it still
#: runs to its local optimum.
_POLISH_SHARE = (1 - _ALGORITHM_SHARE) / _ALGORITHM_SHARE
_POLISH_MIN_SECONDS = 1.0


def _against_baseline(graph: CommGraph, machine: Machine, algorithm: str, base: str,
                      seed: int,
                      best: MappingResult, baseline: np.ndarray, time_limit: float | None,
                      start: float, progress: Callable[[str], None] | None,
                      congestion_levels: Sequence[int] | None,
                      link_weights: LinkWeights | None = None,
                      routed: RoutedNetwork | None = None,
                      boxed: Sequence[MappingResult] = (),
                      link_capacities: LinkCapacities | None = None,
                      capacity_scenarios: Mapping[str, LinkCapacities] | None = None
                      ) -> tuple[MappingResult, str, dict[str, float], dict[str, str]]:
    """The best of the algorithm's result, the baseline and the polished baseline,
    among those that do not load a shared link more than the baseline (its volume, or
    with ``link_weights`` its load over capacity:
    :func:`mapper.objectives.congestion.uplink_loads`).

    With a time limit the polish gets at most :data:`_POLISH_SHARE` of the time used
    so far (at least :data:`_POLISH_MIN_SECONDS`) and keeps the best mapping it
    reached: from Slurm's block placement of a 3D stencil on 2^20 ranks it ran 52 s
    (CPU) to lower the baseline's J by 0.3 %, after a 20 s algorithm 64 % below it.
    It also stops early when it cannot reach the algorithm's J (:func:`_polished`).
    Without a time limit it runs to its local optimum, as before.

    With ``routed`` (a routed network instead of tree levels) a candidate that raises
    a level's busiest routed link (:func:`mapper.search.routed.raised_level`) is
    refused.  ``boxed`` (the grid's boxes, :func:`_boxed`) are more candidates.
    With phases and ``link_capacities`` the admissible candidate (the baseline among
    them) of least phase time is applied, J deciding within :data:`LINK_TOLERANCE` of
    it (:func:`_phase_timer`).  Among the admissible candidates whose J is within
    :data:`NEAR_J` of the least, those whose busiest node carries the least far traffic
    (:func:`mapper.objectives.phase_time.phase_node_hop_bytes`, within :data:`LINK_TOLERANCE`) are
    kept before J decides."""
    levels = sorted(congestion_levels or [])
    if levels and not isinstance(machine, Hierarchy):
        raise MachineError("congestion levels need a hierarchical machine")
    spec = AlgorithmSpec.parse(base)  # a preset's own algorithm
    polish = base.split("+", 1)[1] if spec.neighborhood else "n10"
    base_eval = evaluate(graph, machine, baseline)
    candidates = {algorithm: best.objective, "baseline": base_eval.objective}
    # strict improvement only: on a tie the caller's own placement stays
    tol = 1e-12 * max(abs(base_eval.objective), 1.0)
    base_loads = (uplink_loads(graph, machine, baseline, levels, link_weights) if levels
                  else ())
    routed_caps = (routed_search.caps_of(graph, routed, baseline) if routed is not None
                   else None)

    def refusal(cand: MappingResult) -> str | None:
        """Why ``cand`` may not replace the baseline although its J is lower."""
        if routed is not None:
            return _routed_refusal(graph, routed, cand, routed_caps, base_eval.objective)
        if not levels:
            return None
        loads = uplink_loads(graph, machine, cand.mapping, levels, link_weights)
        raised = raised_uplink(loads, base_loads, LINK_TOLERANCE)
        saved = f"J {100 * (1 - cand.objective / base_eval.objective):.1f}% lower, but its"
        if raised is not None:
            ref = base_loads[levels.index(raised.level)].load
            ratio = f"{raised.load / ref:.2f}x" if ref > 0 else "more than"
            what = (f"has {ratio} the load/capacity of" if link_weights is not None
                    else f"carries {ratio}")
            return f"{saved} busiest {raised.name} link {what} the baseline's busiest"
        return phase_refusal(graph, machine, cand.mapping, baseline, levels, saved,
                             link_capacities, capacity_scenarios, baseline_waits)

    @cache
    def baseline_waits() -> float:
        """The baseline's waiting time, once for every candidate checked."""
        assert link_capacities is not None
        return waiting_time(graph, machine, baseline, levels,
                            _level_capacities(link_capacities, levels))

    def lower(cand: MappingResult | None) -> bool:
        return cand is not None and cand.objective < base_eval.objective - tol

    # why a candidate with a lower J may not replace the baseline (None: it may)
    refused = {algorithm: refusal(best) if lower(best) else None}
    # the regrouping first: cheap (the node quotient), and it is what wins when the
    # algorithm's own result is refused or was cut short by the time limit
    regrouped = in_order = None
    if levels:
        regrouped = _regrouped(graph, machine, algorithm, seed, baseline, levels,
                               None if time_limit is None
                               else time_limit - (time.perf_counter() - start),
                               link_weights)
        if regrouped is not None:
            candidates["baseline regrouped"] = regrouped.objective
            refused["baseline regrouped"] = refusal(regrouped) if lower(regrouped) else None
            in_order = _regrouped(graph, machine, algorithm, seed, baseline, levels,
                                  None if time_limit is None
                                  else time_limit - (time.perf_counter() - start),
                                  link_weights, RANK_ORDER_WEIGHT)
            # offered only where it keeps the collectives' steps closer: where it
            # does not, it is another arrangement of equal volume cost, and on the
            # interleaved wiring one such ran NPB-CG at 256 ranks 0.7 % slower
            if in_order is not None and (rank_order_links(machine, in_order.mapping, levels)
                                         < rank_order_links(machine, regrouped.mapping,
                                                            levels)):
                candidates[REGROUPED_IN_ORDER] = in_order.objective
                refused[REGROUPED_IN_ORDER] = (refusal(in_order) if lower(in_order)
                                               else None)
            else:
                in_order = None
    for box in boxed:
        candidates[box.algorithm] = box.objective
        refused[box.algorithm] = refusal(box) if lower(box) else None
    # the J a polished baseline must beat to matter: the best of those that may win
    admissible = [c.objective for c, key in ((best, algorithm),
                                             (in_order, REGROUPED_IN_ORDER),
                                             (regrouped, "baseline regrouped"),
                                             *((b, b.algorithm) for b in boxed))
                  if lower(c) and refused[key] is None]
    bar = min(admissible) if admissible else None
    used = time.perf_counter() - start
    left = None
    if time_limit is not None:
        left = min(time_limit - used, max(_POLISH_MIN_SECONDS, _POLISH_SHARE * used))
    polished = None
    if left is None or left > 0:
        polished = _polished(graph, machine, polish, seed, baseline, base_eval.objective,
                             bar, left, progress)
        candidates[f"baseline+{polish}"] = polished.objective
        refused[f"baseline+{polish}"] = refusal(polished) if lower(polished) else None
    winner, origin = MappingResult(baseline.copy(), base_eval.objective, base_eval.traffic,
                                   0.0, "baseline", seed), "baseline"
    rejected: dict[str, str] = {}
    admitted = [(winner, origin)]
    # (candidate, its origin, its name in candidates/rejected)
    for cand, name, key in ((best, "algorithm", algorithm),
                            (polished, f"baseline+{polish}", f"baseline+{polish}"),
                            (in_order, REGROUPED_IN_ORDER, REGROUPED_IN_ORDER),
                            (regrouped, "baseline regrouped", "baseline regrouped"),
                            *((b, b.algorithm, b.algorithm) for b in boxed)):
        if not lower(cand):
            continue
        if refused[key] is not None:
            rejected[key] = refused[key]
            continue
        admitted.append((cand, name))
    timer = _phase_timer(graph, machine, levels, link_capacities)
    if timer is not None:  # the least phase time first, then J
        admitted = _least(admitted, timer)
    by_j = _least_j(admitted, tol)
    # phases of per-rank groups are left to the phase time across levels where it runs
    far_traffic = partial(phase_node_hop_bytes, graph, machine, levels=levels,
                          own_groups=timer is None)
    winner, origin = _near_j_least_far(admitted, far_traffic, tol) if levels else by_j
    if winner is not by_j[0]:
        ratio = far_traffic(winner.mapping) / max(far_traffic(by_j[0].mapping), 1e-300)
        winner = replace(winner, notes=(*winner.notes, (
            f"{origin} applied over {by_j[1]} ({_j_gap(by_j[0], winner, tol)}):"
            f" its busiest node's far traffic (volume x links crossed) is {ratio:.2f}x "
            f"(mapper.objectives.phase_time.phase_node_hop_bytes)")))
    return winner, origin, candidates, rejected


def _near_j_least_far(admitted: list[tuple[MappingResult, str]],
                      far_traffic: Callable[[np.ndarray], float], tol: float
                      ) -> tuple[MappingResult, str]:
    """Of ``admitted`` (candidate, name), those whose J is within :data:`NEAR_J` of
    the least, then of those the ones whose ``far_traffic`` is within
    :data:`LINK_TOLERANCE` of the least, then the least J (the first on a tie within
    ``tol``).  O(k) calls of ``far_traffic`` for k candidates."""
    least = min(cand.objective for cand, _ in admitted)
    near = [a for a in admitted if a[0].objective <= least + NEAR_J * abs(least)]
    return _least_j(_least(near, far_traffic) if len(near) > 1 else near, tol)


def _least_j(admitted: list[tuple[MappingResult, str]], tol: float
             ) -> tuple[MappingResult, str]:
    """The first of ``admitted`` whose J no later one beats by more than ``tol``."""
    winner, origin = admitted[0]
    for cand, name in admitted[1:]:
        if cand.objective < winner.objective - tol:
            winner, origin = cand, name
    return winner, origin


def _j_gap(lower: MappingResult, than: MappingResult, tol: float) -> str:
    if lower.objective >= than.objective - tol:
        return "the same J"
    return f"J {100 * (1 - lower.objective / than.objective):.2f}% lower"


#: Relative J gap within which admitted candidates are told apart by the far traffic
#: of their busiest node (:func:`mapper.objectives.phase_time.phase_node_hop_bytes`) before J: a tie
#: break, measured where J and the links do not separate placements (bench/README.md,
#: "Far traffic per node"); beyond it J decides.  On LULESH's trace at 512 ranks a
#: candidate 5.6 % above the least J ran 0.893 of block's time against its 0.781.
NEAR_J = 0.02


def _least(admitted: list[tuple[MappingResult, str]],
           measure: Callable[[np.ndarray], float]) -> list[tuple[MappingResult, str]]:
    """Those of ``admitted`` whose ``measure`` of their mapping is within
    :data:`LINK_TOLERANCE` of the least, in their order."""
    values = [measure(cand.mapping) for cand, _ in admitted]
    bar = min(values) * (1.0 + LINK_TOLERANCE)
    return [a for a, v in zip(admitted, values, strict=True) if v <= bar]


#: Share of a profile's volume in exchange rounds above which candidates are not
#: chosen by phase time (:func:`_phase_timer`).
ROUNDS_SHARE = 0.5


def _phase_timer(graph: CommGraph, machine: Machine, levels: Sequence[int],
                 link_capacities: LinkCapacities | None
                 ) -> Callable[[np.ndarray], float] | None:
    """The phase time over all ``levels`` (:func:`mapper.objectives.phase_time.phase_time` with the
    levels' capacities) of a mapping, for a graph with phases on a tree with
    ``link_capacities``; None otherwise, and for a graph whose volume is mostly in
    exchange rounds (pace ``"rounds"``, more than :data:`ROUNDS_SHARE`): the phase time leaves
    them out (latency-bound), so it would choose by the rest (a traced code's
    collectives) alone; J chooses then, as without phases.  O(L · Σ_p (n + m_p)) per
    call."""
    if not (isinstance(graph, PhasedGraph) and graph.phases and levels
            and link_capacities is not None and isinstance(machine, Hierarchy)):
        return None
    rounds = sum(p.repeat * p.graph.total_volume for p in graph.phases
                 if p.pace == "rounds")
    if rounds > ROUNDS_SHARE * graph.total_volume:
        return None
    caps = _level_capacities(link_capacities, levels)
    return lambda mapping: phase_time(graph, machine, mapping, levels, caps)


def _level_capacities(link_capacities: LinkCapacities, levels: Sequence[int]
                      ) -> list[np.ndarray | float]:
    """``link_capacities`` of ``levels``; a level without them is refused."""
    out = []
    for lv in levels:
        cap = link_capacities[lv] if lv < len(link_capacities) else None
        if cap is None:
            raise MachineError(f"link capacities: none given for congestion level {lv}")
        out.append(cap)
    return out


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


def _boxed(graph: CommGraph, machine: Hierarchy, seed: int,
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


def _routed_refusal(graph: CommGraph, network: RoutedNetwork, cand: MappingResult,
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
    caps = None if link_capacities is None else _level_capacities(link_capacities, levels)
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
                                       capacities=_level_capacities(scenario, levels))
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


#: The polish's first slice, as a share of the smallest polish budget
#: (_POLISH_MIN_SECONDS), after which it goes on only if, at the rate of that slice, it
#: could still beat the algorithm.
_POLISH_PROBE = 0.25


def _polished(graph: CommGraph, machine: Machine, polish: str, seed: int,
              baseline: np.ndarray, base_objective: float, bar: float | None,
              left: float | None, progress: Callable[[str], None] | None) -> MappingResult:
    """The baseline improved by the local search ``polish`` within ``left`` seconds.

    With a budget and a ``bar`` (the J it must beat to win: the algorithm's), the
    search first runs for :data:`_POLISH_PROBE` of the smallest budget
    (:data:`_POLISH_MIN_SECONDS`: 0.25 s, whatever the budget); if it has not
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
        return _map_once(graph, machine, algorithm, seed, left, progress,
                         start_from=baseline)
    probe = _POLISH_PROBE * min(left, _POLISH_MIN_SECONDS)
    first = _map_once(graph, machine, algorithm, seed, probe, progress, start_from=baseline)
    rest = left - first.seconds
    if not first.hit_time_limit or rest <= 0:
        return first
    rate = (base_objective - first.objective) / max(first.seconds, 1e-9)
    if first.objective - rate * rest >= bar:
        return first
    more = _map_once(graph, machine, algorithm, seed, rest, progress,
                     start_from=first.mapping)
    return MappingResult(more.mapping, more.objective, more.traffic,
                         first.seconds + more.seconds, algorithm, seed, more.hit_time_limit,
                         notes=tuple(dict.fromkeys(first.notes + more.notes)),
                         phases={k: first.phases.get(k, 0.0) + more.phases.get(k, 0.0)
                                 for k in set(first.phases) | set(more.phases)})


def _regrouped(graph: CommGraph, machine: Hierarchy, algorithm: str, seed: int,
               baseline: np.ndarray, levels: list[int], time_limit: float | None,
               link_weights: LinkWeights | None = None,
               rank_order: float = 0.0) -> MappingResult | None:
    """The baseline's groups at the innermost congestion level (nodes) kept whole and
    placed by ``algorithm`` on the levels above (:func:`construction.regroup`), under
    the same never-worse rule one level up (the coarse machine's levels are ``machine``'s
    above the innermost, and so are its link weights); None when it does not apply.
    With link weights at the innermost level, moving a group to another slot can
    change its load: the caller's rule checks every level again.  ``rank_order``: the
    rank-order term's weight (:func:`construction.regroup`)."""
    if time_limit is not None and time_limit <= 0:
        return None
    inner = levels[0]
    if inner + 2 >= machine.levels:  # only the root above: every slot is alike
        return None
    above = [lv - inner - 1 for lv in levels[1:]]
    coarse_weights = None if link_weights is None else list(link_weights[inner + 1:])

    def map_coarse(quotient: CommGraph, coarse: Hierarchy, start_from: np.ndarray):
        return map_processes(quotient, coarse, algorithm, seed, time_limit,
                             baseline=start_from, congestion_levels=above,
                             link_weights=coarse_weights).mapping

    pe = construction.regroup(graph, machine, baseline, inner, map_coarse, rank_order)
    if pe is None:
        return None
    ev = evaluate(graph, machine, pe)
    return MappingResult(pe, ev.objective, ev.traffic, 0.0, algorithm, seed)


def _check_inputs(graph: CommGraph, machine: Machine, spec: AlgorithmSpec) -> None:
    if graph.n != machine.n:
        raise GraphError(f"{graph.source}: graph has {graph.n} ranks but the machine has "
                         f"{machine.n} PEs; they must be equal")
    if spec.construction in TREE_CONSTRUCTIONS and not isinstance(machine, Hierarchy):
        raise MachineError(f"{spec.construction} needs a hierarchical machine, not "
                           f"{machine.describe()}")


#: Arcs one N_C^d breadth-first ball may scan per second of budget.  The compiled
#: search reads the clock every 256 ranks; 256 balls of this size take about 5 % of
#: the budget at the ~2-4 ns per arc measured here.
_BALL_ARCS_PER_SECOND = 50_000

#: Seconds per elementary step of the compiled kernels (an arc read with its distance
#: look-up on a 3-level tree), about 5-15 ns measured on this machine's cores; used
#: only to decide whether a stretch the kernels cannot interrupt fits the budget.
_SECONDS_PER_STEP = 15e-9

#: Share of the remaining budget one uninterruptible kernel stretch may take.
_STRETCH_SHARE = 0.25

#: Seconds per edge of one evaluation of J (mapper.objectives.qap.evaluate), measured
#: unloaded (~35 ns at 2 M edges); map_processes keeps this much per evaluation.
_EVAL_SECONDS_PER_EDGE = 60e-9


def _partitioned_size(graph: CommGraph) -> int:
    """Vertices + arcs of the graph the constructions partition (a dense graph's
    sparsified view: :func:`mapper.construction.topdown.partition_view`)."""
    return graph.n + min(len(graph.indices), PARTITION_DEGREE * graph.n)


def _dense(graph: CommGraph) -> bool:
    return len(graph.indices) > PARTITION_DEGREE * graph.n


def _search_stretch(graph: CommGraph, machine: Machine, neighborhood: str) -> float:
    """Seconds the compiled search may run between two clock checks (an upper bound
    on a dense graph).  N_p and N^2: 4096 gains of O(d) each.  N_C^d: 1024 gains,
    and after every improving swap the per-group bound of the next partners is
    recomputed, O(groups · d)."""
    d_max = int(graph.degrees().max(initial=0))
    if neighborhood != "nc":
        return 4096 * 2 * d_max * _SECONDS_PER_STEP
    groups = len(machine.group_sizes(0)) if isinstance(machine, Hierarchy) else graph.n
    return 1024 * d_max * (min(groups, graph.n) + 2) * _SECONDS_PER_STEP


def _map_once(graph: CommGraph, machine: Machine, algorithm: str, seed: int,
              time_limit: float | None,
              progress: Callable[[str], None] | None = None,
              start_from: np.ndarray | None = None,
              partition_tries: int = 1, refine_splits: bool = True) -> MappingResult:
    spec = AlgorithmSpec.parse(algorithm)
    report = progress or (lambda phase: None)
    _check_inputs(graph, machine, spec)
    start = time.perf_counter()
    timed_out = False
    notes: list[str] = []
    dense = time_limit is not None and _dense(graph)

    def remaining() -> float | None:
        if time_limit is None:
            return None
        return max(time_limit - (time.perf_counter() - start), 1e-6)

    report(f"construction {spec.construction} (seed {seed})")
    if start_from is not None:
        pe = np.array(start_from, dtype=np.int64)
    elif spec.construction == "identity":
        pe = construction.identity(graph.n)
    elif spec.construction == "random":
        pe = construction.random_mapping(graph.n, seed)
    elif spec.construction == "greedy":
        pe, timed_out = construction.muller_merbach(graph, machine, remaining())
    elif spec.construction == "greedyallc":
        pe, timed_out = construction.greedy_allc(graph, machine, remaining())
    elif spec.construction == "ohtma":
        # the exchange pass starts with every rank's best partner, O(n (d n + m)) on a
        # dense graph before its first clock check: only the greedy when that cannot fit
        if dense and (graph.n * len(graph.indices) * _SECONDS_PER_STEP
                      > _STRETCH_SHARE * remaining()):
            pe, timed_out = ohtma_greedy(graph, machine, remaining())
            notes.append("OHTMA's exchange pass skipped: on this dense profile it cannot "
                         "stop within the time limit (greedy part only)")
        else:
            pe, timed_out = construction.ohtma(graph, machine, time_limit=remaining())
    elif spec.construction == "matching":
        pe = construction.matching(graph, machine)
    else:
        partitioner = partial(balanced_partition, tries=partition_tries,
                              refine=refine_splits, whole=_partitioned_size(graph))
        if spec.construction == "topdown":
            pe = construction.top_down(graph, machine, seed, remaining(),
                                       partitioner=partitioner, halve_nodes=True)
        else:
            pe = construction.bottom_up(graph, machine, seed, remaining(),
                                        partitioner=partitioner)
    pe = np.ascontiguousarray(pe, dtype=np.int64)
    constructed = time.perf_counter()
    if time_limit is not None and constructed - start >= time_limit:
        timed_out = True  # the construction used the budget (and stopped early)

    if (spec.neighborhood and not timed_out and dense
            and _search_stretch(graph, machine, spec.neighborhood)
            > _STRETCH_SHARE * remaining()):
        notes.append(f"local search {algorithm.split('+', 1)[1]} skipped: on this dense "
                     f"profile it cannot stop within the time limit")
        timed_out = True
    elif spec.neighborhood and not timed_out:
        report(f"local search {algorithm.split('+', 1)[1]}")
        if spec.neighborhood == "nc":
            depth = spec.param
            if time_limit is not None:
                # a dense graph's balls would scan O(m) arcs per rank between clock
                # checks; same neighbourhood on a complete graph (mapper.model.dense)
                depth = search_depth(graph, depth,
                                     max(1000, int(_BALL_ARCS_PER_SECOND * time_limit)),
                                     seed=seed)
            stats = search.communication_neighborhood(graph, machine, pe, depth,
                                                      seed, remaining())
        elif spec.neighborhood == "np":
            stats = search.pruned_neighborhood(graph, machine, pe, spec.param, seed,
                                               remaining())
        else:
            stats = search.quadratic_neighborhood(graph, machine, pe, seed,
                                                  remaining())
        timed_out = stats.hit_time_limit
    searched = time.perf_counter()
    ev = evaluate(graph, machine, pe)
    phases = {"construction": constructed - start, "search": searched - constructed,
              "evaluation": time.perf_counter() - searched}
    return MappingResult(pe, ev.objective, ev.traffic, searched - start, algorithm, seed,
                         timed_out, notes=tuple(notes), phases=phases)
