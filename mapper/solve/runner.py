"""One algorithm run: parse the name, check the inputs, construct, search, and the
preset's extra passes (3-cycles, iterated local search).

Complexity: that of the construction and neighbourhood named (their modules); the input
checks are O(n + m).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import numpy as np

from .. import construction, search
from ..construction.ohtma import ohtma_greedy
from ..errors import RankmapError
from ..model.dense import PARTITION_DEGREE, search_depth
from ..model.graph import CommGraph, GraphError
from ..model.machine import Hierarchy, Machine, MachineError
from ..objectives.qap import evaluate
from ..partitioners.metis import balanced_partition
from ..search.cycles import cycle_search
from . import budget, presets
from .algorithm_names import TREE_CONSTRUCTIONS, parse_algorithm
from .result import TIMINGS, MappingResult


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


def with_other(timings: dict[str, float], seconds: float) -> dict[str, float]:
    """``timings`` with ``other``: what of ``seconds`` no timed part accounts for."""
    named = sum(v for k, v in timings.items() if k != "other")
    return {**timings, "other": max(0.0, seconds - named)}


def cycles_pass(graph: CommGraph, machine: Machine, best: MappingResult, seed: int,
                clock: budget.Budget, share: float,
                progress: Callable[[str], None] | None, notes: list[str],
                work_per_element: float) -> MappingResult:
    """A preset's moves beyond 2-swaps (mapper.search.cycles) from its best start,
    within ``share`` of ``clock``'s usable time and bounded by ``work_per_element`` ×
    (n + m) work units."""
    if is_dense(graph):
        notes.append("3-cycles and ejection chains skipped: dense profile")
        return best
    left = clock.left(share)
    if left is not None and left <= 0:
        return best
    if progress:
        progress("3-cycles and ejection chains")
    pe = best.mapping.copy()
    stats = cycle_search(graph, machine, pe, seed=seed, time_limit=left,
                         work_per_element=work_per_element)
    return best if stats.gain <= 0 else improved(graph, machine, best, pe, clock.start,
                                                 stats.hit_time_limit)


def iterated_pass(graph: CommGraph, machine: Machine, best: MappingResult,
                  recipe: presets.Preset, seed: int, clock: budget.Budget, share: float,
                  progress: Callable[[str], None] | None) -> MappingResult:
    """A preset's iterated local search from its best start (mapper.solve.presets), within
    ``share`` of ``clock``'s usable time."""
    left = presets.ILS_TIME_SHARE * clock.elapsed()
    if clock.limit is not None:
        left = min(left, clock.left(), clock.left(share))
    if left <= 0:
        return best
    depth = 10
    if clock.limit is not None:
        if is_dense(graph) and search_stretch(graph, machine, "nc") > budget.STRETCH_SHARE * left:
            return best  # one search pass could not stop in time (see map_once)
        depth = search_depth(graph, depth,
                             max(1000, int(budget.BALL_ARCS_PER_SECOND * clock.limit)), seed=seed)
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
    return improved(graph, machine, best, pe, clock.start, clock.spent())


def improved(graph: CommGraph, machine: Machine, best: MappingResult, pe: np.ndarray,
             start: float, hit_time_limit: bool) -> MappingResult:
    """``best`` with the mapping ``pe`` a later stage of a preset improved it to."""
    ev = evaluate(graph, machine, pe)
    return MappingResult(pe, ev.objective, ev.traffic, time.perf_counter() - start,
                         best.algorithm, best.seed, hit_time_limit, notes=best.notes)


#: The note of a profile on which every placement has the same J.
UNIFORM_NOTE = "every placement has the same J (uniform all-to-all): nothing to gain"


def uniform_result(graph: CommGraph, machine: Machine, algorithm: str, seed: int,
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
                         with_other(dict.fromkeys(TIMINGS, 0.0), seconds))


def check_inputs(graph: CommGraph, machine: Machine, spec: AlgorithmSpec) -> None:
    if graph.n != machine.n:
        raise GraphError(f"{graph.source}: graph has {graph.n} ranks but the machine has "
                         f"{machine.n} PEs; they must be equal")
    if spec.construction in TREE_CONSTRUCTIONS and not isinstance(machine, Hierarchy):
        raise MachineError(f"{spec.construction} needs a hierarchical machine, not "
                           f"{machine.describe()}")


def partitioned_size(graph: CommGraph) -> int:
    """Vertices + arcs of the graph the constructions partition (a dense graph's
    sparsified view: :func:`mapper.construction.topdown.partition_view`)."""
    return graph.n + min(len(graph.indices), PARTITION_DEGREE * graph.n)


def is_dense(graph: CommGraph) -> bool:
    return len(graph.indices) > PARTITION_DEGREE * graph.n


def search_stretch(graph: CommGraph, machine: Machine, neighborhood: str) -> float:
    """Seconds the compiled search may run between two clock checks (an upper bound
    on a dense graph).  N_p and N^2: 4096 gains of O(d) each.  N_C^d: 1024 gains,
    and after every improving swap the per-group bound of the next partners is
    recomputed, O(groups · d)."""
    d_max = int(graph.degrees().max(initial=0))
    if neighborhood != "nc":
        return 4096 * 2 * d_max * budget.SECONDS_PER_STEP
    groups = len(machine.group_sizes(0)) if isinstance(machine, Hierarchy) else graph.n
    return 1024 * d_max * (min(groups, graph.n) + 2) * budget.SECONDS_PER_STEP


def map_once(graph: CommGraph, machine: Machine, algorithm: str, seed: int,
             time_limit: float | None,
             progress: Callable[[str], None] | None = None,
             start_from: np.ndarray | None = None,
             partition_tries: int = 1, refine_splits: bool = True) -> MappingResult:
    spec = AlgorithmSpec.parse(algorithm)
    report = progress or (lambda phase: None)
    check_inputs(graph, machine, spec)
    start = time.perf_counter()
    timed_out = False
    notes: list[str] = []
    dense = time_limit is not None and is_dense(graph)

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
        if dense and (graph.n * len(graph.indices) * budget.SECONDS_PER_STEP
                      > budget.STRETCH_SHARE * remaining()):
            pe, timed_out = ohtma_greedy(graph, machine, remaining())
            notes.append("OHTMA's exchange pass skipped: on this dense profile it cannot "
                         "stop within the time limit (greedy part only)")
        else:
            pe, timed_out = construction.ohtma(graph, machine, time_limit=remaining())
    elif spec.construction == "matching":
        pe = construction.matching(graph, machine)
    else:
        partitioner = partial(balanced_partition, tries=partition_tries,
                              refine=refine_splits, whole=partitioned_size(graph))
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
            and search_stretch(graph, machine, spec.neighborhood)
            > budget.STRETCH_SHARE * remaining()):
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
                                     max(1000, int(budget.BALL_ARCS_PER_SECOND * time_limit)),
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
    timings = {"construction": constructed - start, "search": searched - constructed,
              "evaluation": time.perf_counter() - searched}
    return MappingResult(pe, ev.objective, ev.traffic, searched - start, algorithm, seed,
                         timed_out, notes=tuple(notes), timings=timings)
