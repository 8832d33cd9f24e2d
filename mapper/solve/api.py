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
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TypeVar

import numpy as np

from .. import construction
from ..model.dense import uniform_pattern
from ..model.graph import CommGraph
from ..model.machine import Hierarchy, Machine, MachineError
from ..objectives.congestion import LinkWeights, check_link_weights
from ..objectives.link_load import RoutedNetwork
from ..objectives.qap import check_mapping, evaluate
from . import aimed, budget, never_worse, presets, runner
from . import candidates as extra
from .algorithm_names import is_preset
from .link_model import LinkModel
from .result import TIMINGS, MappingResult

_T = TypeVar("_T")


def map_processes(graph: CommGraph, machine: Machine, algorithm: str = "topdown+n10",
                  seed: int = 0, time_limit: float | None = None,
                  attempts: int = 1,
                  progress: Callable[[str], None] | None = None,
                  baseline: np.ndarray | None = None,
                  objective: str = "J",
                  links: LinkModel | None = None) -> MappingResult:
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

    ``links`` (a :class:`~mapper.solve.link_model.LinkModel`; None: no links, J alone) are
    the shared links the comparison checks; its fields are described here.
    ``congestion_levels`` (hierarchy level indices whose groups reach the next level
    through a shared link: nodes' host links, switches' uplinks) makes the comparison
    with the baseline refuse a candidate that loads the heaviest link of any of those
    levels more than the baseline does (beyond ``LINK_TOLERANCE``), whatever its J
    (:mod:`mapper.objectives.congestion`: J does not see that a bulk-synchronous step waits for
    its busiest link).  Refused candidates are listed in ``result.rejected`` with the
    reason.  Among the admitted ones whose J is within :data:`~mapper.solve.never_worse.NEAR_J` of
    the least, the least far traffic on one node
    (:func:`mapper.objectives.phase_time.phase_node_hop_bytes`) comes before J.  ``link_weights``
    (:data:`mapper.objectives.congestion.LinkWeights`: per hierarchy level, each group's link cost,
    1 / relative capacity, e.g. from the switches' LinkSpeed; 0 for a group without a link) make
    that comparison one of load over capacity, cut × weight (Hoefler & Snir's congestion); without
    them the links of a level are alike and the rule compares volumes, as before weights existed.
    With congestion levels, of placements that tie exactly (J within the rule's tolerance,
    every link loaded the same), one that keeps every host's ranks in one block wins, so that
    MPICH's and Intel MPI's mpiexec can launch it
    (:func:`~mapper.solve.never_worse.host_contiguous_tie`); where the winner interleaves hosts,
    its rotation onto whole hosts and the block placement are offered for that tie only
    (:func:`~mapper.solve.candidates.whole_host_variants`).

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
    under the caps (:func:`~mapper.solve.aimed.aim_at_congestion`: a congestion repair, else a
    constrained polish of the baseline) and becomes candidate ``"under the caps"``, applied when
    its J is the lowest (``result.origin``); for a graph with phases that result, when
    the rule would still refuse it for its phases, is searched again under the phases'
    caps too (:func:`~mapper.solve.aimed.aim_at_congestion_and_phases`).  Where nothing is refused
    it costs nothing and the result is objective J's; the repair uses only the time the comparison
    left (none left: a note says so).

    On a hierarchy, a graph that is a Cartesian grid in rank order
    (:func:`mapper.model.cartesian.cartesian_grid`: most halo exchanges, numbered as
    ``MPI_Cart_create`` does) also gets the grid cut into the tree's groups by
    coordinate bisection (:func:`mapper.construction.coordinate_bisection`: boxes of
    least surface, where partitioners only approach it), candidate
    :data:`~mapper.solve.candidates.BOXES`, and where it differs
    :data:`~mapper.solve.candidates.BOXES_SHARED` (equal planes cut so that every piece keeps a
    share of its parent's outer faces): without a baseline the lowest J of them and the algorithm's
    result is returned (the first on a tie), with one they are compared like the others.

    ``routed`` (a :class:`~mapper.objectives.link_load.RoutedNetwork` over the machine's PEs: a
    torus, mesh, dragonfly or Tianhe-3 layout with its routing,
    :mod:`mapper.objectives.link_load`) is the link model of a machine that is not a switch tree (a
    :class:`~mapper.model.networks.NodeHopMachine`), in place of ``congestion_levels``: the
    comparison with the baseline refuses a candidate that raises some level's busiest
    routed link (``load / capacity``; node links, router links, a dragonfly's local and
    global links) above the baseline's by more than
    :data:`~mapper.search.routed.ROUTED_TOLERANCE`, and objective ``"congestion"``
    then repairs the refused result under those caps
    (:func:`~mapper.solve.aimed.aim_at_routed_congestion`, :mod:`mapper.search.routed`) as on a
    tree.

    A graph with phases (:class:`~mapper.model.phased_graph.PhasedGraph`) on a tree: a candidate
    whose phase time (:func:`mapper.objectives.phase_time.phase_time`) exceeds the baseline's is
    refused, one congestion level at a time.  ``link_capacities`` (per hierarchy level,
    each group's uplink capacity, comparable across levels, e.g. a switch's host links
    below it over its oversubscription; None for a level without them) replace that
    by one phase time over all congestion levels, and then the candidate with the
    least phase time is applied (J decides among those within
    :data:`~mapper.solve.never_worse.LINK_TOLERANCE` of it): on a halo exchanged one
    dimension after the other only that model orders placements of equal J and equal
    busiest links as they run (bench/README.md, "A halo exchanged by dimension").  Where they are
    not known, ``capacity_scenarios`` (label → capacities, e.g. the uplinks at 1:1, 2:1, 4:1 and
    8:1) make the rule refuse a candidate whose phase time over all levels exceeds the baseline's
    under any of them (J still chooses among the others): NPB MG's J-optimal placement passes
    every per-level check and runs slower than block on 4:1 trees, as this model says
    under 4:1 (bench/README.md, "NPB by phase").
    """
    links = links or LinkModel()
    _check_request(machine, objective, attempts, baseline, links)
    recipe = presets.preset(algorithm) if is_preset(algorithm) else None
    base = algorithm if recipe is None else recipe.algorithm_for(isinstance(machine, Hierarchy))
    runner.check_inputs(graph, machine, runner.AlgorithmSpec.parse(base))
    links = _checked_links(machine, links)
    if baseline is not None:
        baseline = check_mapping(baseline, machine.n, graph.n)
    clock = budget.Budget.starting(time_limit, graph.m, 1 if baseline is None else 3)
    if uniform_pattern(graph):
        return runner.uniform_result(graph, machine, algorithm, seed, baseline, clock.start)
    timings = dict.fromkeys(TIMINGS, 0.0)
    best = _algorithm_result(graph, machine, algorithm, base, recipe, seed, attempts, clock,
                             progress, baseline is not None, timings)
    notes = list(best.notes)
    boxed = _timed(timings, "construction", _grid_boxes, graph, machine, seed, clock)
    rejected: dict[str, str] = {}
    if baseline is None:
        best, origin, candidates = _least_j(best, algorithm, boxed, notes)
    else:
        refused_result = best
        # the comparison's own evaluations of J come out of the reserve
        best, origin, candidates, rejected = _timed(
            timings, "baseline", _against_baseline, graph, machine, algorithm, base, seed,
            best, baseline, clock.keeping(clock.reserve * 2 / 3), progress, links, boxed)
        notes += [note for note in best.notes if note not in notes]
        if objective == "congestion" and algorithm in rejected:
            best, origin = _timed(timings, "search", _aimed, graph, machine, refused_result,
                                  baseline, seed, clock, best, origin, candidates, notes, links)
    seconds = clock.elapsed()
    return MappingResult(best.mapping, best.objective, best.traffic, seconds, algorithm,
                         best.seed, best.hit_time_limit, origin, candidates, rejected,
                         tuple(notes), runner.with_other(timings, seconds))


def _check_request(machine: Machine, objective: str, attempts: int,
                   baseline: np.ndarray | None, links: LinkModel) -> None:
    """The arguments' own consistency, before any algorithm is parsed."""
    if objective not in OBJECTIVES:
        raise runner.AlgorithmError(f"objective must be one of {', '.join(OBJECTIVES)}, "
                                    f"got {objective!r}")
    if objective == "congestion" and (baseline is None or not has_links_to_cap(
            machine, links.congestion_levels, links.routed)):
        raise runner.AlgorithmError("objective 'congestion' needs a baseline, and congestion "
                                    "levels on a hierarchical machine or a routed network")
    if links.routed is not None:
        if links.congestion_levels:
            raise MachineError("give congestion levels (a switch tree) or a routed "
                               "network, not both")
        if links.routed.n != machine.n:
            raise MachineError(f"the routed network has {links.routed.n} PEs but the machine "
                               f"{machine.n}")
    if attempts < 1:
        raise runner.AlgorithmError(f"attempts must be at least 1, got {attempts}")


def _checked_links(machine: Machine, links: LinkModel) -> LinkModel:
    """``links`` with its link weights checked against ``machine``'s levels."""
    if links.congestion_levels and not isinstance(machine, Hierarchy):
        raise MachineError("congestion levels need a hierarchical machine")
    if links.link_weights is None:
        return links
    if not isinstance(machine, Hierarchy):
        raise MachineError("link weights need a hierarchical machine")
    try:
        return replace(links, link_weights=check_link_weights(machine, links.link_weights))
    except ValueError as exc:
        raise MachineError(str(exc)) from None


def _timed(timings: dict[str, float], part: str, run: Callable[..., _T], *args: object) -> _T:
    """``run(*args)``, its wall time added to ``timings[part]``."""
    began = time.perf_counter()
    try:
        return run(*args)
    finally:
        timings[part] += time.perf_counter() - began


def _algorithm_result(graph: CommGraph, machine: Machine, algorithm: str, base: str,
                      recipe: presets.Preset | None, seed: int, attempts: int,
                      clock: budget.Budget, progress: Callable[[str], None] | None,
                      polish_follows: bool, timings: dict[str, float]) -> MappingResult:
    """The algorithm's best mapping: ``attempts`` seeds of ``base`` (a preset: its own
    starts, then its 3-cycles and iterated passes), within ``clock``; with
    ``polish_follows`` the algorithm leaves :data:`~mapper.solve.budget.ALGORITHM_SHARE`
    of the time for polishing the baseline."""
    share = budget.ALGORITHM_SHARE if polish_follows else 1.0
    runs = recipe.runs() if recipe is not None else [(i, 1, True) for i in range(attempts)]
    best: MappingResult | None = None
    for i, tries, refine in runs:
        left = clock.left()
        if best is not None and left is not None and left <= 0:
            break
        if polish_follows and left is not None:
            left *= share
        r = runner.map_once(graph, machine, base, seed + i, left, progress, partition_tries=tries,
                            refine_splits=refine)
        for name, seconds in r.timings.items():
            timings[name] += seconds
        if best is None or r.objective < best.objective:
            best = r
    assert best is not None
    notes = list(best.notes)
    if recipe is not None:
        notes.insert(0, recipe.describe(isinstance(machine, Hierarchy)))
        searched = time.perf_counter()
        if recipe.cycles and not best.hit_time_limit:
            best = runner.cycles_pass(graph, machine, best, seed, clock, share, progress, notes,
                                      recipe.cycle_work)
        if recipe.rounds and not best.hit_time_limit:
            best = runner.iterated_pass(graph, machine, best, recipe, seed, clock, share,
                                        progress)
        timings["search"] += time.perf_counter() - searched
    return MappingResult(best.mapping, best.objective, best.traffic, best.seconds,
                         algorithm, best.seed, best.hit_time_limit, notes=tuple(notes))


def _grid_boxes(graph: CommGraph, machine: Machine, seed: int,
                clock: budget.Budget) -> tuple[MappingResult, ...]:
    """The grid's boxes (:func:`~mapper.solve.candidates.grid_boxes`) on a hierarchy."""
    if not isinstance(machine, Hierarchy):
        return ()
    return extra.grid_boxes(graph, machine, seed, clock.deadline())


def _least_j(best: MappingResult, algorithm: str, boxed: Sequence[MappingResult],
             notes: list[str]) -> tuple[MappingResult, str, dict[str, float]]:
    """Without a baseline: the least J of the algorithm's result and the boxes (the
    first on a tie); the winner's notes join ``notes``.  No link model to tell ties
    apart, so no host-contiguity tie-break either (it needs the rule's links)."""
    origin, candidates = "algorithm", {algorithm: best.objective}
    for box in boxed:
        candidates[box.algorithm] = box.objective
        if box.objective < best.objective:
            best, origin = box, box.algorithm
            notes += [note for note in box.notes if note not in notes]
    return best, origin, candidates


def _aimed(graph: CommGraph, machine: Machine, refused: MappingResult, baseline: np.ndarray,
           seed: int, clock: budget.Budget, best: MappingResult, origin: str,
           candidates: dict[str, float], notes: list[str],
           links: LinkModel) -> tuple[MappingResult, str]:
    """Objective ``congestion``: the refused result brought under the baseline's caps
    (:func:`~mapper.solve.aimed.aimed_candidate`) in the time left."""
    assert links.congestion_levels or links.routed is not None
    left = clock.left()
    if left is not None and left <= 0:
        notes.append(f"{aimed.AIMED}: no time left to repair the refused result")
        return best, origin
    return aimed.aimed_candidate(graph, machine, refused, baseline,
                                 sorted(links.congestion_levels), seed, left, best, origin,
                                 candidates, notes, links.link_weights, links.routed,
                                 links.link_capacities, links.capacity_scenarios)


def has_links_to_cap(machine: Machine, congestion_levels: Sequence[int] | None,
                     routed: RoutedNetwork | None) -> bool:
    """Whether objective ``"congestion"`` has links to keep at the baseline's: congestion
    levels on a hierarchy (a switch tree's node links and uplinks), or a routed network.
    Elsewhere it is objective J (the rule has nothing to cap)."""
    return bool(congestion_levels) and isinstance(machine, Hierarchy) or routed is not None


#: The objectives map_processes accepts (see its docstring).
OBJECTIVES = ("J", "congestion")


def _against_baseline(graph: CommGraph, machine: Machine, algorithm: str, base: str,
                      seed: int, best: MappingResult, baseline: np.ndarray,
                      clock: budget.Budget, progress: Callable[[str], None] | None,
                      links: LinkModel, boxed: Sequence[MappingResult] = ()
                      ) -> tuple[MappingResult, str, dict[str, float], dict[str, str]]:
    """The best of the algorithm's result, the baseline and the candidates built from
    the baseline, among those the never-worse rule admits
    (:class:`~mapper.solve.never_worse.Admission`: no shared link loaded more than the
    baseline's, :func:`mapper.objectives.congestion.uplink_loads`; no routed level
    raised; no phase slower), ranked by its one policy
    (:meth:`~mapper.solve.never_worse.Admission.rank`).

    The candidates, in the order that breaks ties: the algorithm's result, the polished
    baseline (:func:`~mapper.solve.candidates.polished`, within
    :data:`~mapper.solve.budget.POLISH_SHARE` of the time used so far and at least
    :data:`~mapper.solve.budget.POLISH_MIN_SECONDS`, stopping early when it cannot beat
    the best admissible J; without a time limit it runs to its local optimum), the
    baseline regrouped (in rank order, then by J: :func:`_regrouped`) on a tree, and
    ``boxed`` (:func:`~mapper.solve.candidates.grid_boxes`).  Where the winner interleaves
    hosts, the placements with whole hosts that tie its J
    (:func:`~mapper.solve.candidates.whole_host_variants`) go through the same admission and
    may only break that tie (``tie_only`` of :meth:`~mapper.solve.never_worse.Admission.rank`).
    Returns the winner, its origin, every candidate's J and the refused ones' reasons."""
    rule = never_worse.Admission(graph, machine, baseline, links)
    spec = runner.AlgorithmSpec.parse(base)  # a preset's own algorithm
    polish = base.split("+", 1)[1] if spec.neighborhood else "n10"
    candidates = {algorithm: best.objective, "baseline": rule.base.objective}
    # why a candidate with a lower J may not replace the baseline (None: it may)
    refused: dict[str, str | None] = {}

    def offer(cand: MappingResult, origin: str, key: str) -> never_worse.Candidate:
        candidates[key] = cand.objective
        refused[key] = rule.refusal(cand) if rule.lower(cand) else None
        return never_worse.Candidate(cand, origin, key)

    own = offer(best, "algorithm", algorithm)
    # the regrouping first: cheap (the node quotient), and it is what wins when the
    # algorithm's own result is refused or was cut short by the time limit
    regrouped, in_order = (_regroupings(graph, machine, algorithm, seed, baseline, rule.levels,
                                        clock, links.link_weights)
                           if rule.levels else (None, None))
    regroupings = [offer(c, key, key) for c, key in ((regrouped, "baseline regrouped"),
                                                     (in_order, extra.REGROUPED_IN_ORDER))
                   if c is not None]
    boxes = [offer(b, b.algorithm, b.algorithm) for b in boxed]
    # the J a polished baseline must beat to matter: the best of those that may win
    admissible = [c.result.objective for c in (own, *regroupings, *boxes)
                  if rule.lower(c.result) and refused[c.key] is None]
    bar = min(admissible) if admissible else None
    used = clock.elapsed()
    left = None if clock.limit is None else min(
        clock.limit - clock.reserve - used,
        max(budget.POLISH_MIN_SECONDS, budget.POLISH_SHARE * used))
    polishes = []
    if left is None or left > 0:
        polishes.append(offer(extra.polished(graph, machine, polish, seed, baseline,
                                             rule.base.objective, bar, left, progress),
                              f"baseline+{polish}", f"baseline+{polish}"))
    rejected: dict[str, str] = {}

    def admit(offered: Sequence[never_worse.Candidate]) -> list[tuple[MappingResult, str]]:
        out = []
        for cand in offered:
            if not rule.lower(cand.result):
                continue
            why = refused[cand.key]
            if why is not None:
                rejected[cand.key] = why
            else:
                out.append((cand.result, cand.origin))
        return out

    admitted = [(rule.baseline_result(seed), "baseline"),
                *admit((own, *polishes, *reversed(regroupings), *boxes))]
    winner, origin = rule.rank(admitted)
    # a placement with every host's ranks in one block, where one ties the winner's J: it
    # may only break that tie (Admission.rank), so MPICH and Intel MPI can launch it
    tie_only = admit([offer(c, _variant_origin(c, origin), c.algorithm)
                      for c in _whole_host_ties(graph, machine, winner, rule.host_level,
                                                rule.tol)
                      if not np.array_equal(c.mapping, baseline)])
    if tie_only:
        winner, origin = rule.rank(admitted, tie_only)
    return winner, origin, candidates, rejected


def _whole_host_ties(graph: CommGraph, machine: Machine, winner: MappingResult,
                     level: int | None, tol: float) -> list[MappingResult]:
    """The placements with every host's ranks in one block
    (:func:`~mapper.solve.candidates.whole_host_variants`) whose J is within ``tol`` of
    ``winner``'s: the only ones that can tie it.  O(n + m) each."""
    if level is None:
        return []
    assert isinstance(machine, Hierarchy)
    return [c for c in extra.whole_host_variants(graph, machine, winner, level)
            if abs(c.objective - winner.objective) <= tol]


def _variant_origin(variant: MappingResult, origin: str) -> str:
    """The origin a host-contiguous variant wins with: the winner's for its rotation (the
    same placement with the ranks relabelled along the pattern's symmetry), its own for
    the block placement."""
    return origin if variant.algorithm == extra.HOSTS_ROTATED else variant.algorithm


def _regroupings(graph: CommGraph, machine: Machine, algorithm: str, seed: int,
                 baseline: np.ndarray, levels: list[int], clock: budget.Budget,
                 link_weights: LinkWeights | None
                 ) -> tuple[MappingResult | None, MappingResult | None]:
    """The baseline regrouped (:func:`_regrouped`) by J, and in rank order where that
    keeps the collectives' steps closer (None where either does not apply)."""
    assert isinstance(machine, Hierarchy)
    regrouped = _regrouped(graph, machine, algorithm, seed, baseline, levels, clock.left(),
                           link_weights)
    if regrouped is None:
        return None, None
    in_order = _regrouped(graph, machine, algorithm, seed, baseline, levels, clock.left(),
                          link_weights, extra.RANK_ORDER_WEIGHT)
    # offered only where it keeps the collectives' steps closer: where it does not,
    # it is another arrangement of equal volume cost, and on the interleaved wiring
    # one such ran NPB-CG at 256 ranks 0.7 % slower
    if in_order is not None and (extra.rank_order_links(machine, in_order.mapping, levels)
                                 < extra.rank_order_links(machine, regrouped.mapping, levels)):
        return regrouped, in_order
    return regrouped, None


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
                             baseline=start_from, links=LinkModel(congestion_levels=above,
                                                                  link_weights=coarse_weights)).mapping

    pe = construction.regroup(graph, machine, baseline, inner, map_coarse, rank_order)
    if pe is None:
        return None
    ev = evaluate(graph, machine, pe)
    return MappingResult(pe, ev.objective, ev.traffic, 0.0, algorithm, seed)
