"""Iterated local search over N_C^d: perturb a patch, search again, keep improvements.

Lourenço, Martin & Stützle, "Iterated Local Search", in Handbook of Metaheuristics
(2003), doi:10.1007/0-306-48056-5_11.  A local optimum of the swap search is kicked by
permuting the PEs of a random connected patch of the communication graph (a
breadth-first ball around a random rank, cut at ``patch`` ranks: ranks that talk to
each other, so the kick changes costs where they are, like the paper's N_C
neighbourhoods), then N_C^d runs from the kicked mapping; the result is kept when its
J is lower than the best, else the best is restored ("better" acceptance).  Stops
after ``rounds`` rounds, ``patience`` rounds without improvement, or the time limit.

Complexity per round: O(patch) for the kick plus one N_C^d search (see
:mod:`mapper.search.communication`; the first pass visits every rank) and one O(m)
evaluation of J.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass

import numpy as np

from ..graph import CommGraph
from ..machine import Machine
from ..objective import objective
from .communication import communication_neighborhood


@dataclass(frozen=True)
class IteratedStats:
    """What an iterated local search run did."""

    gain: float
    rounds: int
    improvements: int
    hit_time_limit: bool


def connected_patch(graph: CommGraph, start: int, size: int) -> np.ndarray:
    """Up to ``size`` ranks reached breadth-first from ``start`` (``start`` first)."""
    seen = {start}
    order = [start]
    queue = deque([start])
    while queue and len(order) < size:
        u = queue.popleft()
        for v in graph.indices[graph.indptr[u]:graph.indptr[u + 1]]:
            v = int(v)
            if v not in seen:
                seen.add(v)
                order.append(v)
                queue.append(v)
                if len(order) == size:
                    break
    return np.asarray(order, dtype=np.int64)


def iterated_local_search(graph: CommGraph, machine: Machine, pe: np.ndarray, *,
                          rounds: int, patience: int, patch: int, depth: int = 10,
                          seed: int = 0, time_limit: float | None = None) -> IteratedStats:
    """Improve ``pe`` (rank → PE, int64, modified in place; see module docstring)."""
    start = time.perf_counter()
    rng = np.random.default_rng(seed)
    best = objective(graph, machine, pe)
    first = best
    done = improved = idle = 0
    timed_out = False
    trial = pe.copy()
    while done < rounds and idle < patience:
        left = None if time_limit is None else time_limit - (time.perf_counter() - start)
        if left is not None and left <= 0:
            timed_out = True
            break
        np.copyto(trial, pe)
        ranks = connected_patch(graph, int(rng.integers(graph.n)), patch)
        trial[ranks] = trial[rng.permutation(ranks)]
        stats = communication_neighborhood(graph, machine, trial, depth,
                                           int(rng.integers(1 << 62)), left)
        done += 1
        value = objective(graph, machine, trial)
        if value < best * (1 - 1e-12):
            best = value
            np.copyto(pe, trial)
            improved += 1
            idle = 0
        else:
            idle += 1
        if stats.hit_time_limit:
            timed_out = True
            break
    return IteratedStats(first - best, done, improved, timed_out)
