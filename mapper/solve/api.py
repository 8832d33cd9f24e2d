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
from dataclasses import replace
from functools import cache, partial

import numpy as np

from .. import construction
from ..model.dense import uniform_pattern
from ..model.graph import CommGraph
from ..model.machine import Hierarchy, Machine, MachineError
from ..objectives.congestion import (
    LinkCapacities,
    LinkWeights,
    check_link_weights,
    raised_uplink,
    uplink_loads,
)
from ..objectives.link_load import RoutedNetwork
from ..objectives.phase_time import (
    phase_node_hop_bytes,
)
from ..objectives.phase_waits import waiting_time
from ..objectives.qap import check_mapping, evaluate
from ..search import routed as routed_search
from . import aimed, budget, never_worse, presets, runner
from . import candidates as extra
from .algorithm_names import is_preset
from .link_model import LinkModel
from .result import TIMINGS, MappingResult


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
    congestion_levels, link_weights, routed = (links.congestion_levels or None,
                                               links.link_weights, links.routed)
    link_capacities, capacity_scenarios = links.link_capacities, links.capacity_scenarios
    if objective not in OBJECTIVES:
        raise runner.AlgorithmError(f"objective must be one of {', '.join(OBJECTIVES)}, "
                                    f"got {objective!r}")
    if objective == "congestion" and (
            baseline is None or not has_links_to_cap(machine, congestion_levels, routed)):
        raise runner.AlgorithmError("objective 'congestion' needs a baseline, and congestion "
                                    "levels on a hierarchical machine or a routed network")
    if routed is not None:
        if congestion_levels:
            raise MachineError("give congestion levels (a switch tree) or a routed "
                               "network, not both")
        if routed.n != machine.n:
            raise MachineError(f"the routed network has {routed.n} PEs but the machine "
                               f"{machine.n}")
    if attempts < 1:
        raise runner.AlgorithmError(f"attempts must be at least 1, got {attempts}")
    start = time.perf_counter()
    recipe = presets.preset(algorithm) if is_preset(algorithm) else None
    base = algorithm
    runs = [(i, 1, True) for i in range(attempts)]
    if recipe is not None:
        base = recipe.algorithm_for(isinstance(machine, Hierarchy))
        runs = recipe.runs()
    runner.check_inputs(graph, machine, runner.AlgorithmSpec.parse(base))
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
        return runner.uniform_result(graph, machine, algorithm, seed, baseline, start)
    # keep time for the final evaluations of J (O(m) each; seconds on a dense graph)
    evals = 1 if baseline is None else 3
    reserve = (0.0 if time_limit is None else
               min(0.5 * time_limit, evals * graph.m * budget.EVAL_SECONDS_PER_EDGE))
    best: MappingResult | None = None
    timings = dict.fromkeys(TIMINGS, 0.0)
    for i, tries, refine in runs:
        left = (None if time_limit is None
                else time_limit - reserve - (time.perf_counter() - start))
        if best is not None and left is not None and left <= 0:
            break
        if baseline is not None and left is not None:
            left *= budget.ALGORITHM_SHARE  # keep time for polishing the baseline
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
        share = 1.0 if baseline is None else budget.ALGORITHM_SHARE
        searched = time.perf_counter()
        if recipe.cycles and not best.hit_time_limit:
            best = runner.cycles_pass(graph, machine, best, seed, time_limit, reserve, start,
                                      share, progress, notes, recipe.cycle_work)
        if recipe.rounds and not best.hit_time_limit:
            best = runner.iterated_pass(graph, machine, best, recipe, seed, time_limit,
                                        reserve, start, share, progress)
        timings["search"] += time.perf_counter() - searched
    best = MappingResult(best.mapping, best.objective, best.traffic, best.seconds,
                         algorithm, best.seed, best.hit_time_limit, notes=tuple(notes))
    origin, candidates = "algorithm", {algorithm: best.objective}
    refused_result = best
    boxed: tuple[MappingResult, ...] = ()
    if isinstance(machine, Hierarchy):
        cut = time.perf_counter()
        boxed = extra.grid_boxes(graph, machine, seed,
                                 None if time_limit is None else start + time_limit - reserve)
        timings["construction"] += time.perf_counter() - cut
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
        timings["baseline"] += time.perf_counter() - compared
        notes += [note for note in best.notes if note not in notes]
        if objective == "congestion" and algorithm in rejected:
            assert congestion_levels or routed is not None
            aimed_at = time.perf_counter()
            left = None if time_limit is None else time_limit - reserve - (aimed_at - start)
            if left is not None and left <= 0:
                notes.append(f"{aimed.AIMED}: no time left to repair the refused result")
            else:
                best, origin = aimed.aimed_candidate(graph, machine, refused_result, baseline,
                                                     sorted(congestion_levels or ()), seed, left,
                                                     best, origin, candidates, notes,
                                                     link_weights, routed, link_capacities,
                                                     capacity_scenarios)
            timings["search"] += time.perf_counter() - aimed_at
    else:
        rejected = {}
    seconds = time.perf_counter() - start
    return MappingResult(best.mapping, best.objective, best.traffic, seconds, algorithm,
                         best.seed, best.hit_time_limit, origin, candidates, rejected,
                         tuple(notes), runner.with_other(timings, seconds))


def has_links_to_cap(machine: Machine, congestion_levels: Sequence[int] | None,
                     routed: RoutedNetwork | None) -> bool:
    """Whether objective ``"congestion"`` has links to keep at the baseline's: congestion
    levels on a hierarchy (a switch tree's node links and uplinks), or a routed network.
    Elsewhere it is objective J (the rule has nothing to cap)."""
    return bool(congestion_levels) and isinstance(machine, Hierarchy) or routed is not None


#: The objectives map_processes accepts (see its docstring).
OBJECTIVES = ("J", "congestion")


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

    With a time limit the polish gets at most :data:`~mapper.solve.budget.POLISH_SHARE` of the time
    used so far (at least :data:`~mapper.solve.budget.POLISH_MIN_SECONDS`) and keeps the best
    mapping it reached: from Slurm's block placement of a 3D stencil on 2^20 ranks it ran 52 s
    (CPU) to lower the baseline's J by 0.3 %, after a 20 s algorithm 64 % below it.
    It also stops early when it cannot reach the algorithm's J
    (:func:`~mapper.solve.candidates.polished`). Without a time limit it runs to its local optimum,
    as before.

    With ``routed`` (a routed network instead of tree levels) a candidate that raises
    a level's busiest routed link (:func:`mapper.search.routed.raised_level`) is
    refused.  ``boxed`` (the grid's boxes, :func:`~mapper.solve.candidates.grid_boxes`) are more
    candidates. With phases and ``link_capacities`` the admissible candidate (the baseline among
    them) of least phase time is applied, J deciding within
    :data:`~mapper.solve.never_worse.LINK_TOLERANCE` of it
    (:func:`~mapper.solve.never_worse.phase_timer`).  Among the admissible candidates whose J is
    within :data:`~mapper.solve.never_worse.NEAR_J` of the least, those whose busiest node carries
    the least far traffic (:func:`mapper.objectives.phase_time.phase_node_hop_bytes`, within
    :data:`~mapper.solve.never_worse.LINK_TOLERANCE`) are kept before J decides."""
    levels = sorted(congestion_levels or [])
    if levels and not isinstance(machine, Hierarchy):
        raise MachineError("congestion levels need a hierarchical machine")
    spec = runner.AlgorithmSpec.parse(base)  # a preset's own algorithm
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
            return never_worse.routed_refusal(graph, routed, cand, routed_caps, base_eval.objective)
        if not levels:
            return None
        loads = uplink_loads(graph, machine, cand.mapping, levels, link_weights)
        raised = raised_uplink(loads, base_loads, never_worse.LINK_TOLERANCE)
        saved = f"J {100 * (1 - cand.objective / base_eval.objective):.1f}% lower, but its"
        if raised is not None:
            ref = base_loads[levels.index(raised.level)].load
            ratio = f"{raised.load / ref:.2f}x" if ref > 0 else "more than"
            what = (f"has {ratio} the load/capacity of" if link_weights is not None
                    else f"carries {ratio}")
            return f"{saved} busiest {raised.name} link {what} the baseline's busiest"
        return never_worse.phase_refusal(graph, machine, cand.mapping, baseline, levels, saved,
                                         link_capacities, capacity_scenarios, baseline_waits)

    @cache
    def baseline_waits() -> float:
        """The baseline's waiting time, once for every candidate checked."""
        assert link_capacities is not None
        return waiting_time(graph, machine, baseline, levels,
                            never_worse.level_capacities(link_capacities, levels))

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
                                  link_weights, extra.RANK_ORDER_WEIGHT)
            # offered only where it keeps the collectives' steps closer: where it
            # does not, it is another arrangement of equal volume cost, and on the
            # interleaved wiring one such ran NPB-CG at 256 ranks 0.7 % slower
            if in_order is not None and (extra.rank_order_links(machine, in_order.mapping, levels)
                                         < extra.rank_order_links(machine, regrouped.mapping,
                                                                  levels)):
                candidates[extra.REGROUPED_IN_ORDER] = in_order.objective
                refused[extra.REGROUPED_IN_ORDER] = (refusal(in_order) if lower(in_order)
                                                     else None)
            else:
                in_order = None
    for box in boxed:
        candidates[box.algorithm] = box.objective
        refused[box.algorithm] = refusal(box) if lower(box) else None
    # the J a polished baseline must beat to matter: the best of those that may win
    admissible = [c.objective for c, key in ((best, algorithm),
                                             (in_order, extra.REGROUPED_IN_ORDER),
                                             (regrouped, "baseline regrouped"),
                                             *((b, b.algorithm) for b in boxed))
                  if lower(c) and refused[key] is None]
    bar = min(admissible) if admissible else None
    used = time.perf_counter() - start
    left = None
    if time_limit is not None:
        left = min(time_limit - used, max(budget.POLISH_MIN_SECONDS, budget.POLISH_SHARE * used))
    polished = None
    if left is None or left > 0:
        polished = extra.polished(graph, machine, polish, seed, baseline, base_eval.objective,
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
                            (in_order, extra.REGROUPED_IN_ORDER, extra.REGROUPED_IN_ORDER),
                            (regrouped, "baseline regrouped", "baseline regrouped"),
                            *((b, b.algorithm, b.algorithm) for b in boxed)):
        if not lower(cand):
            continue
        if refused[key] is not None:
            rejected[key] = refused[key]
            continue
        admitted.append((cand, name))
    timer = never_worse.phase_timer(graph, machine, levels, link_capacities)
    if timer is not None:  # the least phase time first, then J
        admitted = never_worse.near_least(admitted, timer)
    by_j = never_worse.least_j(admitted, tol)
    # phases of per-rank groups are left to the phase time across levels where it runs
    far_traffic = partial(phase_node_hop_bytes, graph, machine, levels=levels,
                          own_groups=timer is None)
    winner, origin = never_worse.near_j_least_far(admitted, far_traffic, tol) if levels else by_j
    if winner is not by_j[0]:
        ratio = far_traffic(winner.mapping) / max(far_traffic(by_j[0].mapping), 1e-300)
        winner = replace(winner, notes=(*winner.notes, (
            f"{origin} applied over {by_j[1]} ({never_worse.j_gap(by_j[0], winner, tol)}):"
            f" its busiest node's far traffic (volume x links crossed) is {ratio:.2f}x "
            f"(mapper.objectives.phase_time.phase_node_hop_bytes)")))
    return winner, origin, candidates, rejected


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
